// The training engine seam's defaults that need the whole JSON type (its header declares it only).
#include "engine/training_engine.hpp"

#include <nlohmann/json.hpp>

namespace strata {

nlohmann::json TrainingEngine::traffic_totals() { return nullptr; }

}  // namespace strata
