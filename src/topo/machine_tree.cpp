// hwloc behind MachineTree.
#include "topo/machine_tree.hpp"

#include <fmt/format.h>
#include <hwloc.h>

#include "core/error.hpp"

namespace strata {

namespace {

struct Bitmap {
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  Bitmap() { STRATA_REQUIRE(set != nullptr, "hwloc: out of memory for a cpuset"); }
  ~Bitmap() { hwloc_bitmap_free(set); }
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
};

}  // namespace

struct MachineTree::Impl {
  hwloc_topology_t topology = nullptr;
  ~Impl() {
    if (topology != nullptr) hwloc_topology_destroy(topology);
  }

  // The logical index of the one object of this type whose cores include all of `set`; -1 when
  // none does (the set spans several) or the machine has no such object.
  int holder(hwloc_obj_type_t type, hwloc_const_cpuset_t set) const {
    const int n = hwloc_get_nbobjs_by_type(topology, type);
    for (int i = 0; i < n; ++i) {
      const hwloc_obj_t obj = hwloc_get_obj_by_type(topology, type, static_cast<unsigned>(i));
      if (obj != nullptr && obj->cpuset != nullptr && hwloc_bitmap_isincluded(set, obj->cpuset)) return i;
    }
    return -1;
  }

  HostPlace place(hwloc_const_cpuset_t set) const {
    if (hwloc_bitmap_iszero(set)) return {};
    return {holder(HWLOC_OBJ_PACKAGE, set), holder(HWLOC_OBJ_NUMANODE, set), holder(HWLOC_OBJ_L3CACHE, set)};
  }

  static std::unique_ptr<Impl> load(const std::string* synthetic) {
    auto impl = std::make_unique<Impl>();
    STRATA_REQUIRE(hwloc_topology_init(&impl->topology) == 0, "hwloc: cannot start a topology");
    // Every rank on a host must number packages, NUMA nodes and caches alike, also ranks confined
    // to different cpusets (cgroups): the tree of the whole host, not of what this process may use.
    STRATA_REQUIRE(hwloc_topology_set_flags(impl->topology, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) == 0,
                   "hwloc: cannot ask for the whole host's tree");
    if (synthetic != nullptr) {
      STRATA_REQUIRE(hwloc_topology_set_synthetic(impl->topology, synthetic->c_str()) == 0,
                     "hwloc: '{}' is not a synthetic topology description", *synthetic);
    }
    STRATA_REQUIRE(hwloc_topology_load(impl->topology) == 0, "hwloc: cannot read {}",
                   synthetic != nullptr ? "the synthetic topology" : "this host's topology");
    return impl;
  }
};

MachineTree::MachineTree(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MachineTree::~MachineTree() = default;
MachineTree::MachineTree(MachineTree&&) noexcept = default;
MachineTree& MachineTree::operator=(MachineTree&&) noexcept = default;

MachineTree MachineTree::this_host() { return MachineTree(Impl::load(nullptr)); }

MachineTree MachineTree::synthetic(const std::string& description) { return MachineTree(Impl::load(&description)); }

int MachineTree::core_count() const { return hwloc_get_nbobjs_by_type(impl_->topology, HWLOC_OBJ_CORE); }

HostPlace MachineTree::place_of_cores(int first, int count) const {
  STRATA_REQUIRE(first >= 0 && count >= 1 && first + count <= core_count(),
                 "cores {} .. {} are not on this machine of {} cores", first, first + count - 1, core_count());
  Bitmap set;
  for (int i = first; i < first + count; ++i) {
    const hwloc_obj_t core = hwloc_get_obj_by_type(impl_->topology, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    hwloc_bitmap_or(set.set, set.set, core->cpuset);
  }
  return impl_->place(set.set);
}

HostPlace MachineTree::place_of_this_process() const {
  Bitmap set;
  // Without a binding to read (a system without the call), the whole host: nothing finer is known.
  if (hwloc_get_cpubind(impl_->topology, set.set, HWLOC_CPUBIND_PROCESS) != 0) {
    hwloc_bitmap_copy(set.set, hwloc_topology_get_topology_cpuset(impl_->topology));
  }
  return impl_->place(set.set);
}

std::string MachineTree::summary() const {
  const auto count = [&](hwloc_obj_type_t t, const char* one, const char* many) {
    const int n = hwloc_get_nbobjs_by_type(impl_->topology, t);
    return fmt::format("{} {}", n, n == 1 ? one : many);
  };
  return fmt::format("{}, {}, {}, {}, {}", count(HWLOC_OBJ_PACKAGE, "package", "packages"),
                     count(HWLOC_OBJ_NUMANODE, "NUMA node", "NUMA nodes"), count(HWLOC_OBJ_L3CACHE, "L3 cache", "L3 caches"),
                     count(HWLOC_OBJ_CORE, "core", "cores"), count(HWLOC_OBJ_PU, "hardware thread", "hardware threads"));
}

}  // namespace strata
