// The safetensors format (Hugging Face): 8-byte little-endian header length, a JSON header
// naming each tensor's dtype, shape and byte range, then the raw little-endian tensors. The
// writer is `strata export`'s; the reader serves --init-from, reading only the ranges asked for.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // F32, F16 or BF16 (others are refused when read)
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // of the first byte, from the start of the file
  std::size_t numel() const;
  std::string shape_text() const;  // "(768, 2304)"
};

class SafetensorsFile {
 public:
  // Refuses, with a sentence naming the file, anything that is not a well-formed safetensors
  // file: too short, a header length past the end, a header that is not a JSON object, a tensor
  // entry without dtype, shape or offsets, offsets that overlap or run past the data, or a byte
  // count that is not its shape's.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;

  // Elements [first, first + count) of `t` in row-major order, as fp32. Refuses a dtype other than
  // F32, F16 and BF16, and a non-finite value (naming the tensor).
  void read(const SafetensorsTensor& t, std::size_t first, std::size_t count, float* out) const;

  // A hash of the file's size, its header and the first and last MiB of its data: equal on ranks
  // that read the same file, and (with overwhelming probability) not for two different ones,
  // without reading a whole model on every rank. Reads those bytes at each call.
  std::uint64_t fingerprint() const;

 private:
  std::string path_;
  std::uint64_t size_ = 0;        // bytes of the whole file
  std::uint64_t data_begin_ = 0;  // 8 + the header's length
  std::shared_ptr<const int> fd_;  // closed with the last copy
  std::map<std::string, std::string> metadata_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

}  // namespace strata
