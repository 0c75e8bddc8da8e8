// Cluster models: the preset texts, the strict TOML loader, and the topology a cluster gives.
#include "hw/cluster_model.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "core/error.hpp"

namespace strata {

namespace {

// Public figures; docs/architecture.md names the source of each. Frontier (OLCF user guide): a
// node has 4 MI250X, each 2 GCDs joined by 4 Infinity Fabric links (200 GB/s one way), GPUs joined
// by 50 GB/s links, and 4 Slingshot-11 NICs of 25 GB/s, one per GPU, so the 2 GCDs of a GPU share
// one. A GCD (AMD MI250X data sheet): 191.5 TFLOP/s bf16 matrix, 1.6 TB/s HBM2e, 64 GB. DGX A100:
// 8 A100-80GB (312 TFLOP/s bf16, 2.04 TB/s), NVLink 3 through NVSwitch (300 GB/s one way per GPU),
// 8 HDR 200 Gb/s NICs (one per GPU). DGX H100: 8 H100 SXM (989 TFLOP/s bf16 dense, 3.35 TB/s, 80
// GB), NVLink 4 (450 GB/s one way), 8 NDR 400 Gb/s NICs. Efficiencies are published per-device
// throughputs of large GPT training on each machine: Frontier 38.38% (Dash et al., arXiv
// 2312.12705, 22B GPT), A100 52% (Narayanan et al., SC21, 163 of 312 TFLOP/s), H100 about 40%
// (Megatron-LM's published 390-400 TFLOP/s). Interference 0.189: the mean slowdown of compute
// overlapped with collectives measured on A100, H100, MI250 and MI210 (arXiv 2507.03114).
// Latencies are per-message estimates (a link's hop plus a GPU collective's launch), not
// measurements. `strata calibrate` measures this machine instead.
constexpr struct {
  const char* name;
  const char* toml;
} kPresets[] = {
    {"frontier", R"toml(name = "frontier"
description = "OLCF Frontier: 4 AMD MI250X per node (2 GCDs each), 4 Slingshot-11 NICs per node"
dtype = "bf16"
levels = ["gcd", "gpu", "node"]
[device]
name = "MI250X GCD"
peak_flops = 191.5e12
efficiency = 0.3838
memory_bandwidth = 1.6e12
memory_bytes = 64e9
overlaps_communication = true
interference = 0.189
[level.gcd]
fanout = 2
link_bandwidth = 200e9
ranks_per_link = 1
latency = 1e-6
[level.gpu]
fanout = 4
link_bandwidth = 50e9
ranks_per_link = 1
latency = 2e-6
[level.node]
fanout = "*"
link_bandwidth = 25e9
ranks_per_link = 2
latency = 5e-6
)toml"},
    {"dgx-a100", R"toml(name = "dgx-a100"
description = "NVIDIA DGX A100: 8 A100-80GB per node over NVSwitch, 8 HDR 200 Gb/s NICs per node"
dtype = "bf16"
levels = ["gpu", "node"]
[device]
name = "A100-SXM4-80GB"
peak_flops = 312e12
efficiency = 0.52
memory_bandwidth = 2.04e12
memory_bytes = 80e9
overlaps_communication = true
interference = 0.189
[level.gpu]
fanout = 8
link_bandwidth = 300e9
ranks_per_link = 1
latency = 2e-6
[level.node]
fanout = "*"
link_bandwidth = 25e9
ranks_per_link = 1
latency = 5e-6
)toml"},
    {"dgx-h100", R"toml(name = "dgx-h100"
description = "NVIDIA DGX H100: 8 H100 SXM per node over NVSwitch, 8 NDR 400 Gb/s NICs per node"
dtype = "bf16"
levels = ["gpu", "node"]
[device]
name = "H100-SXM5-80GB"
peak_flops = 989e12
efficiency = 0.40
memory_bandwidth = 3.35e12
memory_bytes = 80e9
overlaps_communication = true
interference = 0.189
[level.gpu]
fanout = 8
link_bandwidth = 450e9
ranks_per_link = 1
latency = 2e-6
[level.node]
fanout = "*"
link_bandwidth = 50e9
ranks_per_link = 1
latency = 5e-6
)toml"},
    // A rough stand-in for one CPU host; `strata calibrate` writes a measured one.
    {"cpu", R"toml(name = "cpu"
description = "one CPU host, ranks as processes over shared memory (uncalibrated guesses; run strata calibrate)"
dtype = "f32"
levels = ["core", "node"]
[device]
name = "CPU core"
peak_flops = 50e9
efficiency = 0.5
memory_bandwidth = 10e9
memory_bytes = 0
# strata calibrate measured 54-58 MB per rank on a Debian 12 host with Open MPI 4.1 (4 and 8 ranks)
process_bytes = 50e6
overlaps_communication = false
[level.core]
fanout = 2
link_bandwidth = 5e9
ranks_per_link = 1
latency = 2e-6
[level.node]
fanout = "*"
link_bandwidth = 1.25e9
ranks_per_link = 1
latency = 20e-6
)toml"},
};

const std::set<std::string> kStageKeys = {"embedding_forward", "embedding_backward", "block_forward",
                                          "block_backward", "head_forward", "head_backward"};

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail_key(const std::string& key, const std::string& why) const {
    fail("cluster {}: '{}' {}", source_, key, why);
  }

  double number(const toml::node& node, const std::string& key, double min, bool min_exclusive) const {
    std::optional<double> v = node.value<double>();
    if (!v) fail_key(key, "must be a number");
    if (!std::isfinite(*v)) fail_key(key, fmt::format("must be finite (got {})", *v));
    if (min_exclusive ? *v <= min : *v < min) {
      fail_key(key, fmt::format("must be {} {:g} (got {:g})", min_exclusive ? "above" : "at least", min, *v));
    }
    return *v;
  }

  // An efficiency: a share of the peak, in (0, 1].
  double fraction(const toml::node& node, const std::string& key) const {
    const double v = number(node, key, 0.0, true);
    if (v > 1.0) fail_key(key, fmt::format("is a fraction of the peak and must be at most 1 (got {:g})", v));
    return v;
  }

  int integer(const toml::node& node, const std::string& key, int min) const {
    std::optional<std::int64_t> v = node.value_exact<std::int64_t>();
    if (!v) fail_key(key, "must be an integer");
    if (*v < min || *v > std::numeric_limits<int>::max()) fail_key(key, fmt::format("must be at least {} (got {})", min, *v));
    return static_cast<int>(*v);
  }

  std::string text(const toml::node& node, const std::string& key) const {
    std::optional<std::string> v = node.value_exact<std::string>();
    if (!v) fail_key(key, "must be a string");
    return *v;
  }

  bool boolean(const toml::node& node, const std::string& key) const {
    std::optional<bool> v = node.value_exact<bool>();
    if (!v) fail_key(key, "must be true or false");
    return *v;
  }

  const toml::table& table(const toml::node& node, const std::string& key) const {
    if (!node.is_table()) fail_key(key, "must be a table");
    return *node.as_table();
  }

  void device(const toml::table& t, DeviceModel& d) const {
    for (const auto& [k, node] : t) {
      const std::string key(k.str());
      const std::string path = "device." + key;
      if (key == "name") d.name = text(node, path);
      else if (key == "peak_flops") d.peak_flops = number(node, path, 0.0, true);
      else if (key == "efficiency") d.efficiency = fraction(node, path);
      else if (key == "memory_bandwidth") d.memory_bandwidth = number(node, path, 0.0, true);
      else if (key == "memory_bytes") d.memory_bytes = number(node, path, 0.0, false);
      else if (key == "process_bytes") d.process_bytes = number(node, path, 0.0, false);
      else if (key == "overlaps_communication") d.overlaps_communication = boolean(node, path);
      else if (key == "handoff_seconds") d.handoff_seconds = number(node, path, 0.0, false);
      else if (key == "collective_efficiency") d.collective_efficiency = fraction(node, path);
      else if (key == "rate_by_tokens") d.rate_by_tokens = rates(node, path);
      else if (key == "interference") {
        d.interference = number(node, path, 0.0, false);
        if (d.interference > 10.0) fail_key(path, fmt::format("is a slowdown (0.2: 20% slower) and must be at most 10 (got {:g})", d.interference));
      }
      else if (key == "stage_efficiency") {
        for (const auto& [sk, snode] : table(node, path)) {
          const std::string stage(sk.str());
          if (!kStageKeys.contains(stage)) {
            fail_key(path + "." + stage, fmt::format("is not a compute stage; known: {}", fmt::join(kStageKeys, ", ")));
          }
          d.stage_efficiency[stage] = fraction(snode, path + "." + stage);
        }
      } else {
        fail_key(path, "is not a device key (name, peak_flops, efficiency, stage_efficiency, memory_bandwidth, "
                       "memory_bytes, process_bytes, overlaps_communication, interference, handoff_seconds, collective_efficiency, rate_by_tokens)");
      }
    }
  }

  void level(const toml::table& t, LinkLevel& l, const std::string& prefix) const {
    for (const auto& [k, node] : t) {
      const std::string key(k.str());
      const std::string path = prefix + "." + key;
      if (key == "fanout") {
        if (node.is_string()) {
          if (text(node, path) != "*") fail_key(path, "must be an integer or \"*\"");
          l.fanout = 0;
        } else {
          l.fanout = integer(node, path, 1);
        }
      } else if (key == "link_bandwidth") {
        l.link_bandwidth = number(node, path, 0.0, true);
      } else if (key == "ranks_per_link") {
        l.ranks_per_link = integer(node, path, 1);
      } else if (key == "latency") {
        l.latency = number(node, path, 0.0, false);
      } else if (key == "curve") {
        l.curve = curve(node, path);
      } else {
        fail_key(path, "is not a level key (fanout, link_bandwidth, ranks_per_link, latency, curve)");
      }
    }
  }

  // [[x, y], ...] with x ascending and positive y; `rising`: y must not fall either (a link's
  // curve: a call never gets faster for moving more).
  std::vector<std::array<double, 2>> pairs(const toml::node& node, const std::string& key, const char* x, const char* y,
                                           bool rising) const {
    const toml::array* a = node.as_array();
    if (!a || a->empty()) fail_key(key, fmt::format("must be a non-empty list of [{}, {}] pairs", x, y));
    std::vector<std::array<double, 2>> out;
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::array* pair = (*a)[i].as_array();
      const std::string at = fmt::format("{}[{}]", key, i);
      if (!pair || pair->size() != 2) fail_key(at, fmt::format("must be a [{}, {}] pair", x, y));
      const std::array<double, 2> p{number((*pair)[0], fmt::format("{} {}", at, x), 0.0, true),
                                    number((*pair)[1], fmt::format("{} {}", at, y), 0.0, true)};
      if (!out.empty() && p[0] <= out.back()[0]) fail_key(at, fmt::format("must have more {} than the point before it", x));
      if (rising && !out.empty() && p[1] < out.back()[1]) fail_key(at, "must not take less time than the point before it");
      out.push_back(p);
    }
    return out;
  }

  TransferCurve curve(const toml::node& node, const std::string& key) const {
    TransferCurve out;
    for (const auto& [b, t] : pairs(node, key, "bytes", "seconds", true)) out.push_back({b, t});
    return out;
  }

  std::vector<DeviceModel::RatePoint> rates(const toml::node& node, const std::string& key) const {
    std::vector<DeviceModel::RatePoint> out;
    for (const auto& [n, f] : pairs(node, key, "tokens", "factor", false)) out.push_back({n, f});
    return out;
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

void apply_toml(ClusterModel& c, const toml::table& root, const Reader& r) {
  std::map<std::string, LinkLevel> by_name;
  std::vector<std::string> order;
  for (const LinkLevel& l : c.levels) {
    by_name[l.name] = l;
    order.push_back(l.name);
  }
  for (const auto& [k, node] : root) {
    const std::string key(k.str());
    if (key == "base") continue;
    if (key == "name") c.name = r.text(node, key);
    else if (key == "description") c.description = r.text(node, key);
    else if (key == "dtype") {
      c.dtype = r.text(node, key);
      if (c.dtype != "f32" && c.dtype != "bf16") r.fail_key(key, fmt::format("must be f32 or bf16 (got '{}')", c.dtype));
    } else if (key == "levels") {
      const toml::array* a = node.as_array();
      if (!a || a->empty()) r.fail_key(key, "must be a non-empty list of level names, innermost first");
      order.clear();
      for (const auto& e : *a) order.push_back(r.text(e, key));
    } else if (key == "device") {
      r.device(r.table(node, key), c.device);
    } else if (key == "level") {
      for (const auto& [lk, lnode] : r.table(node, key)) {
        const std::string name(lk.str());
        LinkLevel& l = by_name[name];
        l.name = name;
        r.level(r.table(lnode, "level." + name), l, "level." + name);
      }
    } else {
      r.fail_key(key, "is not a cluster key (base, name, description, dtype, levels, device, level)");
    }
  }
  c.levels.clear();
  std::set<std::string> seen;
  for (const std::string& name : order) {
    if (!seen.insert(name).second) r.fail_key("levels", fmt::format("names '{}' twice", name));
    auto it = by_name.find(name);
    if (it == by_name.end()) r.fail_key("levels", fmt::format("names '{}', which has no [level.{}] table", name, name));
    c.levels.push_back(it->second);
  }
  for (const auto& [name, l] : by_name) {
    if (!seen.contains(name)) r.fail_key("level." + name, "is not in the 'levels' list");
  }
  for (std::size_t i = 0; i < c.levels.size(); ++i) {
    const LinkLevel& l = c.levels[i];
    if (l.link_bandwidth <= 0.0) r.fail_key("level." + l.name + ".link_bandwidth", "is missing");
    const bool outer = i + 1 == c.levels.size();
    if (l.fanout == 0 && !outer) r.fail_key("level." + l.name + ".fanout", "may be \"*\" only on the outermost level");
    if (outer && l.fanout != 0) r.fail_key("level." + l.name + ".fanout", "must be \"*\" (the outermost level counts the nodes)");
  }
  if (c.device.peak_flops <= 0.0) r.fail_key("device.peak_flops", "is missing");
  if (c.device.memory_bandwidth <= 0.0) r.fail_key("device.memory_bandwidth", "is missing");
}

std::string preset_text(std::string_view name) {
  for (const auto& p : kPresets) {
    if (name == p.name) return p.toml;
  }
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  fail("unknown cluster '{}': not a preset ({}) and not a file", name, fmt::join(names, ", "));
}

toml::table parse_text(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    fail("cluster {}: {} (line {})", source, e.description(), e.source().begin.line);
  }
}

}  // namespace

double DeviceModel::stage_rate(std::string_view stage, double tokens) const {
  const auto it = stage_efficiency.find(std::string(stage));
  double by_tokens = 1.0;
  if (tokens > 0.0 && !rate_by_tokens.empty()) {
    const std::vector<RatePoint>& c = rate_by_tokens;
    if (tokens <= c.front().tokens) {
      by_tokens = c.front().factor;
    } else if (tokens >= c.back().tokens) {
      by_tokens = c.back().factor;
    } else {
      for (std::size_t i = 1; i < c.size(); ++i) {
        if (tokens <= c[i].tokens) {
          by_tokens = c[i - 1].factor + (c[i].factor - c[i - 1].factor) * (tokens - c[i - 1].tokens) /
                                            (c[i].tokens - c[i - 1].tokens);
          break;
        }
      }
    }
  }
  return peak_flops * efficiency * (it != stage_efficiency.end() ? it->second : 1.0) * by_tokens;
}

int ClusterModel::ranks_per_node() const {
  int n = 1;
  for (std::size_t i = 0; i + 1 < levels.size(); ++i) n *= levels[i].fanout;
  return n;
}

std::string ClusterModel::topology_spec() const {
  std::string spec;
  for (std::size_t i = 0; i < levels.size(); ++i) {
    const LinkLevel& l = levels[i];
    if (!spec.empty()) spec += ',';
    // Exact decimal text: the topology parser reads bandwidth in B/s and latency in ns.
    const bool outer = i + 1 == levels.size();
    spec += fmt::format("{}:{}@{:.17g}MB/s", l.name, outer || l.fanout == 0 ? std::string("*") : std::to_string(l.fanout),
                        l.rank_bandwidth() / 1e6);
    if (l.latency > 0.0) spec += fmt::format("~{:.17g}ns", l.latency * 1e9);
  }
  return spec;
}

std::string expand_topology_preset(std::string_view spec) {
  const std::string name = spec == "dgx" ? "dgx-a100" : std::string(spec);
  for (const std::string& preset : ClusterModel::preset_names()) {
    if (name == preset) return ClusterModel::preset(preset).topology_spec();
  }
  return std::string(spec);
}

std::vector<TransferCurve> ClusterModel::curves() const {
  std::vector<TransferCurve> out;
  for (const LinkLevel& l : levels) out.push_back(l.curve);
  return out;
}

Topology ClusterModel::topology(int nodes) const {
  STRATA_REQUIRE(nodes >= 1, "a cluster needs at least one node (got {})", nodes);
  const std::string spec = topology_spec();
  const long long world = static_cast<long long>(ranks_per_node()) * nodes;
  STRATA_REQUIRE(world <= (1 << 24), "cluster '{}': {} nodes of {} ranks is more ranks than the simulator handles", name,
                 nodes, ranks_per_node());
  return Topology::parse(spec, static_cast<int>(world));
}

ClusterModel ClusterModel::from_toml(std::string_view text, const std::string& source) {
  const toml::table root = parse_text(text, source);
  ClusterModel c;
  if (const toml::node* base = root.get("base")) {
    const std::optional<std::string> name = base->value_exact<std::string>();
    STRATA_REQUIRE(name.has_value(), "cluster {}: 'base' must name a preset", source);
    c = preset(*name);
  }
  apply_toml(c, root, Reader(source));
  return c;
}

ClusterModel ClusterModel::preset(std::string_view name) {
  return from_toml(preset_text(name), fmt::format("preset '{}'", name));
}

std::vector<std::string> ClusterModel::preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.emplace_back(p.name);
  return names;
}

std::string ClusterModel::preset_list() { return fmt::format("{}", fmt::join(preset_names(), ", ")); }

ClusterModel ClusterModel::load(std::string_view name_or_path) {
  for (const auto& p : kPresets) {
    if (name_or_path == p.name) return preset(name_or_path);
  }
  const std::filesystem::path path{std::string(name_or_path)};
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) preset_text(name_or_path);  // names the presets
  STRATA_REQUIRE(std::filesystem::is_regular_file(status), "cluster file '{}' is not a regular file", path.string());
  std::ifstream in(path);
  STRATA_REQUIRE(in.good(), "cannot read cluster file '{}'", path.string());
  std::stringstream text;
  text << in.rdbuf();
  return from_toml(text.str(), "file '" + path.string() + "'");
}

std::string ClusterModel::to_toml() const {
  std::string out = fmt::format("name = \"{}\"\ndescription = \"{}\"\ndtype = \"{}\"\nlevels = [", name, description, dtype);
  for (std::size_t i = 0; i < levels.size(); ++i) out += fmt::format("{}\"{}\"", i ? ", " : "", levels[i].name);
  out += "]\n\n[device]\n";
  out += fmt::format("name = \"{}\"\npeak_flops = {:.6g}\nefficiency = {:.6g}\nmemory_bandwidth = {:.6g}\n"
                     "memory_bytes = {:.6g}\nprocess_bytes = {:.6g}\noverlaps_communication = {}\ninterference = {:.6g}\n"
                     "handoff_seconds = {:.6g}\ncollective_efficiency = {:.6g}\n",
                     device.name, device.peak_flops, device.efficiency, device.memory_bandwidth, device.memory_bytes,
                     device.process_bytes,
                     device.overlaps_communication, device.interference, device.handoff_seconds, device.collective_efficiency);
  if (!device.rate_by_tokens.empty()) {
    out += "rate_by_tokens = [";
    for (std::size_t i = 0; i < device.rate_by_tokens.size(); ++i) {
      out += fmt::format("{}[{:.9g}, {:.9g}]", i ? ", " : "", device.rate_by_tokens[i].tokens, device.rate_by_tokens[i].factor);
    }
    out += "]\n";
  }
  if (!device.stage_efficiency.empty()) {
    out += "\n[device.stage_efficiency]\n";
    for (const auto& [stage, e] : device.stage_efficiency) out += fmt::format("{} = {:.6g}\n", stage, e);
  }
  for (const LinkLevel& l : levels) {
    out += fmt::format("\n[level.{}]\nfanout = {}\nlink_bandwidth = {:.6g}\nranks_per_link = {}\nlatency = {:.6g}\n",
                       l.name, l.fanout == 0 ? std::string("\"*\"") : std::to_string(l.fanout), l.link_bandwidth,
                       l.ranks_per_link, l.latency);
    if (!l.curve.empty()) {
      out += "curve = [";
      for (std::size_t i = 0; i < l.curve.size(); ++i) {
        out += fmt::format("{}[{:.9g}, {:.9g}]", i ? ", " : "", l.curve[i].bytes, l.curve[i].seconds);
      }
      out += "]\n";
    }
  }
  return out;
}

}  // namespace strata
