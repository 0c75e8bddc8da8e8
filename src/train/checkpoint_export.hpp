// What a checkpoint holds, for people and other tools: `strata inspect` (manifest, files, sizes,
// checksum status, and digests of the assembled states, equal for equal training states whatever
// the world size or plan that wrote them) and `strata export` (the full model as safetensors with
// nanoGPT's GPT-2 tensor names).
#pragma once

#include <string>
#include <vector>

#include "engine/checkpoint_format.hpp"
#include "engine/safetensors.hpp"

namespace strata {

// A step directory, or a checkpoint directory (its newest complete step). Refuses with a sentence.
std::string resolve_checkpoint_path(const std::string& path);

// The full weights, "transformer.wte.weight" (the vocabulary's rows, no padding), ...,
// "transformer.h.3.attn.c_attn.weight" (Linear layout: out x in), "transformer.ln_f.bias".
std::vector<ExportTensor> exported_tensors(const CheckpointReader& reader);
void export_safetensors(const CheckpointReader& reader, const std::string& out, bool force = false);

// The inspect report; verify: read every chunk and check it.
std::string inspect_checkpoint(const CheckpointReader& reader, bool verify);

}  // namespace strata
