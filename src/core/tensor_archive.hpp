// A file of named, typed, shaped tensors (magic "STRATNSR", version 1): the exchange format with
// the PyTorch reference and the container under checkpoints. Layout in docs/formats.md.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace strata {

struct NamedTensor {
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> bytes;

  std::int64_t numel() const;
};

class TensorArchive {
 public:
  static constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'N', 'S', 'R'};
  static constexpr std::uint32_t kVersion = 1;

  template <class T>
  void put(const std::string& name, std::vector<std::int64_t> shape, std::span<const T> values) {
    put_bytes(name, dtype_of<T>(), std::move(shape), values.data(), values.size_bytes());
  }
  void put_scalar(const std::string& name, double value);

  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const NamedTensor& get(const std::string& name) const;
  std::vector<float> floats(const std::string& name) const;
  std::vector<std::int32_t> ints(const std::string& name) const;
  double scalar(const std::string& name) const;
  const std::map<std::string, NamedTensor>& tensors() const { return tensors_; }

  void save(const std::string& path) const;
  static TensorArchive load(const std::string& path);

 private:
  void put_bytes(const std::string& name, DType dtype, std::vector<std::int64_t> shape,
                 const void* data, std::size_t size);

  std::string origin_ = "<in memory>";
  std::map<std::string, NamedTensor> tensors_;
};

}  // namespace strata
