// Training checkpoints: model shape, step, weights and AdamW moments in a tensor archive, so a
// run can stop and continue with the same data order and schedule.
#pragma once

#include <string>

#include "core/tensor_archive.hpp"
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

// A checkpoint read into memory and checked against a model shape, not yet applied: a run reads
// it during set-up (where every rank can still agree to refuse it) and applies it later.
struct Checkpoint {
  std::string path;
  TensorArchive archive;
  int completed_steps = 0;
};

// Refuses a file that is not a checkpoint or was written for another model shape.
Checkpoint read_checkpoint(const std::string& path, const ModelLayout& layout);
void restore_checkpoint(const Checkpoint& checkpoint, const ModelLayout& layout, const TrainingStateRef& state);

}  // namespace strata
