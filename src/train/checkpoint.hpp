// Training checkpoints: model shape, step, weights and AdamW moments in a tensor archive, so a
// run can stop and continue with the same data order and schedule.
#pragma once

#include <string>

#include "model/parameter_layout.hpp"
#include "model/unit_buffers.hpp"

namespace strata {

struct TrainingStateRef {
  UnitBuffers& params;
  UnitBuffers& adam_m;
  UnitBuffers& adam_v;
};

// `completed_steps` optimizer steps have been applied to the state.
void save_checkpoint(const std::string& path, const ModelLayout& layout, int completed_steps,
                     const TrainingStateRef& state);

// Returns the completed step count; refuses a checkpoint of another model shape.
int load_checkpoint(const std::string& path, const ModelLayout& layout, const TrainingStateRef& state);

}  // namespace strata
