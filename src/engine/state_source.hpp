// Where a run's starting state comes from: a checkpoint (master weights and Adam moments, after
// some steps) or a file of pretrained weights (moments zero, step 0). Engines read their own
// ranges through this seam, so every plan loads either the same way and no rank reads more than
// it holds.
#pragma once

#include <cstddef>
#include <string>

namespace strata {

class StateSource {
 public:
  virtual ~StateSource() = default;
  // Values of `state` ("master", "adam_m" or "adam_v") of unit `unit` on [begin, end) into out
  // (end - begin floats; zeros past the unit's numel). Throws strata::Error naming the file and
  // what is wrong.
  virtual void read(const std::string& state, int unit, std::size_t begin, std::size_t end, float* out) const = 0;
  // Optimizer steps already taken by the state (the learning-rate schedule and Adam's bias
  // correction go on from there).
  virtual int completed_steps() const = 0;
};

}  // namespace strata
