// The safetensors format (Hugging Face): 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw little-endian tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata {

struct ExportTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;  // fp32, row-major
};

// Written atomically (temporary name, fsync, rename); metadata goes into "__metadata__".
void write_safetensors(const std::string& path, const std::vector<ExportTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace strata
