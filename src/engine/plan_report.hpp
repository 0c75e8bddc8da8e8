// The report a sharded run prints at its end (and --report prints instead of training): per
// resident state its level, span and bytes per rank; the peak of the buffers the schedule
// allocates; per level the bytes one step sends, per micro-batch and at the boundary. Every
// figure comes from the counting executor's replay of the schedule, beside what this rank
// measured (allocated buffers, the traffic meter) when steps have run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/sharded_engine.hpp"

namespace strata {

// Per optimizer step of the engine's schedule (its grad_accum micro-batches). Measured traffic is
// the meter's total divided by the completed steps.
nlohmann::json plan_report(ShardedEngine& engine);
std::string format_plan_report(const nlohmann::json& report);

// Collective: the meters of every rank summed since the engine started: per level the bytes
// sent and received and the calls, and for the outermost level the bytes each node's ranks sent
// and received (node n: the ranks whose outermost coordinate is n), which is what crosses that
// node's network link; plus the control reductions' bytes. Integers, exact below 2^53.
nlohmann::json job_traffic_totals(ShardedEngine& engine);

}  // namespace strata
