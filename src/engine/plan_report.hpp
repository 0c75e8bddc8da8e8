// The report a sharded run prints at its end (and with --report): per state, its level, span and
// bytes per rank (formula and measured); per level, bytes sent and received per optimizer step
// (formula and measured), split into the per-micro-batch part and the step boundary.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "zero/sharded_engine.hpp"

namespace strata {

// grad_accum: micro-batches per step of the run being reported. Measured traffic is the meter's
// total divided by the completed steps.
nlohmann::json plan_report(ShardedEngine& engine, int grad_accum);
std::string format_plan_report(const nlohmann::json& report);

}  // namespace strata
