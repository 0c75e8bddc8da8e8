// --init-from: a run starts from GPT-2 weights in a safetensors file, in Hugging Face's layout
// (Conv1D weights stored (in, out), names with or without "transformer.", the attention mask
// buffers beside them) or nanoGPT's (Linear weights (out, in), as `strata export` writes). The
// model's shape is read from the file; each rank reads only the ranges its plan gives it.
#pragma once

#include <string>
#include <vector>

#include "engine/safetensors.hpp"
#include "engine/state_source.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_layout.hpp"
#include "model/unit_buffers.hpp"

namespace strata {

struct PretrainedShape {
  GptConfig model;         // a preset's name where the shape is one, else "custom"
  std::string layout;      // "Hugging Face layout (Conv1D ...)" or "nanoGPT layout (Linear weights)"
  std::string heads_from;  // where n_head came from
};

// The shape of the model in `file`: layers from the h.N blocks, width and vocabulary from the
// token table (the metadata's vocab_size where it says fewer rows are real), context from the
// position table. n_head from the metadata, else a config.json beside the file, else
// `n_head_given` (non-zero), else GPT-2's own sizes (768: 12, 1024: 16, 1280: 20, 1600: 25).
// Refuses, naming the tensor, a file that is not a GPT-2 model.
PretrainedShape pretrained_shape(const SafetensorsFile& file, int n_head_given = 0);

class PretrainedWeights : public StateSource {
 public:
  // Opens `path` for `model`: every tensor the model needs must be in the file with the shape its
  // layout gives it, and every tensor of the file must be one of them (or an attention mask
  // buffer, or an lm_head equal to the token table, checked as it is read). Refuses with a
  // sentence naming the file and the tensor.
  PretrainedWeights(const std::string& path, const GptConfig& model);

  // "master": the weights (padded vocabulary rows zero); "adam_m", "adam_v": zeros.
  void read(const std::string& state, int unit, std::size_t begin, std::size_t end, float* out) const override;
  int completed_steps() const override { return 0; }

  const std::string& path() const { return file_.path(); }
  const PretrainedShape& shape() const { return shape_; }
  std::uint64_t fingerprint() const { return file_.fingerprint(); }  // the same file on every rank?

 private:
  struct Source {
    const SafetensorsTensor* tensor = nullptr;
    bool transposed = false;                  // stored (in, out): element (r, c) of ours is (c, r) there
    const SafetensorsTensor* tied = nullptr;  // lm_head, which must equal the token table where present
    std::size_t real = 0;                     // elements of ours that come from the file (the rest are padding)
  };
  void read_tensor(const Source& source, const TensorSpec& spec, std::size_t first, std::size_t count,
                   float* out) const;

  SafetensorsFile file_;
  PretrainedShape shape_;
  ModelLayout layout_;
  std::vector<std::vector<Source>> sources_;  // [unit][tensor of the unit]
};

// The whole model's weights from a state source (a checkpoint or a pretrained file).
UnitBuffers read_whole_weights(const StateSource& source, const GptConfig& model);

}  // namespace strata
