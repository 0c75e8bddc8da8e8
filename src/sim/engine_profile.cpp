// The engine profiles: Strata's own executor, and DeepSpeed ZeRO's way of issuing the same plan.
#include "sim/engine_profile.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace strata {

std::vector<std::string> engine_profile_names() { return {"strata", "deepspeed"}; }

std::string describe_engine_profile(std::string_view name) {
  if (name == "strata") return "strata: collectives level by level, one call per unit, the step boundary overlapped";
  if (name == "deepspeed") {
    return fmt::format(
        "deepspeed: flat collectives over every rank in DeepSpeed ZeRO's default buckets (gathers {:g} elements "
        "under ZeRO-3, {:g} otherwise; reductions {:g}), one unit prefetched, overlap_comm on under ZeRO-3 only, "
        "the step boundary not overlapped",
        kDeepSpeedPrefetchBucketElements, kDeepSpeedAllgatherBucketElements, kDeepSpeedReduceBucketElements);
  }
  fail("unknown engine profile '{}' (known: {})", name, fmt::join(engine_profile_names(), ", "));
}

SimulationInputs with_engine_profile(std::string_view name, SimulationInputs in) {
  (void)describe_engine_profile(name);  // refuses an unknown name
  if (name == "strata") return in;
  // DeepSpeed: ZeRO-3 (partitioned weights) fetches parameters in prefetch buckets and overlaps
  // communication by default; stages 1 and 2 gather the updated partitions in allgather buckets and
  // reduce in the backward hooks on the compute stream (overlap_comm defaults to false there).
  const bool stage3 = in.plan.weights != kReplicated;
  in.plan.collectives = CollectiveAlgorithm::kFlat;
  in.plan.gather_bucket_bytes = static_cast<std::uint64_t>(
      (stage3 ? kDeepSpeedPrefetchBucketElements : kDeepSpeedAllgatherBucketElements) * dtype_size(in.weight_dtype));
  in.plan.reduce_bucket_bytes = static_cast<std::uint64_t>(kDeepSpeedReduceBucketElements * dtype_size(in.grad_dtype));
  in.prefetch = 1;
  in.boundary_overlap = false;
  in.overlap = in.overlap && stage3;
  return in;
}

}  // namespace strata
