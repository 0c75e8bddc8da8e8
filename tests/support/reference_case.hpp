// Test support: loads a PyTorch reference case (tests/reference/gpt_reference.py) into Strata's
// layout, and the error metric every comparison uses.
#pragma once

#include <span>
#include <string>

#include "core/tensor_archive.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_layout.hpp"
#include "model/unit_buffers.hpp"
#include "train/train_step.hpp"

namespace strata::testing {

struct ReferenceCase {
  TensorArchive archive;
  GptConfig config;
  int batch = 0;
  int seq_len = 0;
  int grad_accum = 0;
  int steps = 0;
  StepRecipe recipe;
};

// Reads <reference dir>/<name>.stt.
ReferenceCase load_reference_case(const std::string& name);

// Copies the tensors "<prefix><tensor name>" into the units; the token table's padded rows stay 0.
void load_units(const TensorArchive& archive, const std::string& prefix, const ModelLayout& layout,
                UnitBuffers& units);

// The metric: max |a - b| / max |b| over the tensor (the error relative to the reference's scale;
// element-wise relative error is meaningless where the reference crosses zero).
double max_relative_error(std::span<const float> actual, std::span<const float> expected);

// View of one tensor of a unit buffer, unpadded: the token table's first vocab_size rows.
std::span<const float> tensor_values(const ModelLayout& layout, const UnitBuffers& units, const std::string& name);

}  // namespace strata::testing
