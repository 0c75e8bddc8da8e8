// How an engine issues a plan's collectives, so the simulator can price one plan as Strata runs it
// and as DeepSpeed runs it, side by side: `strata` (level by level, one call per unit, the step
// boundary overlapped) or `deepspeed` (flat calls over every rank in DeepSpeed ZeRO's default
// buckets, the boundary not overlapped). The figures' sources are in docs/architecture.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/simulator.hpp"

namespace strata {

// DeepSpeed ZeRO's documented defaults (deepspeed/runtime/zero/config.py), in elements.
inline constexpr double kDeepSpeedPrefetchBucketElements = 5e7;   // stage3_prefetch_bucket_size
inline constexpr double kDeepSpeedAllgatherBucketElements = 5e8;  // allgather_bucket_size (stages 1, 2)
inline constexpr double kDeepSpeedReduceBucketElements = 5e8;     // reduce_bucket_size

std::vector<std::string> engine_profile_names();  // strata, deepspeed

// One sentence on what the profile does to a plan.
std::string describe_engine_profile(std::string_view name);

// The inputs as the engine would run them: its collectives algorithm and buckets in the plan, its
// prefetch depth, boundary overlap and overlap of communication with compute. `strata` leaves
// them as given; an unknown name is refused naming the profiles.
SimulationInputs with_engine_profile(std::string_view name, SimulationInputs in);

}  // namespace strata
