// Reading and writing tensor archives; the loader names the file and the defect it finds.
#include "core/tensor_archive.hpp"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace strata {

std::int64_t NamedTensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void TensorArchive::put_bytes(const std::string& name, DType dtype, std::vector<std::int64_t> shape,
                              const void* data, std::size_t size) {
  NamedTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  STRATA_REQUIRE(static_cast<std::size_t>(t.numel()) * dtype_size(dtype) == size,
                 "tensor '{}': shape holds {} elements but {} bytes were given", name, t.numel(), size);
  t.bytes.resize(size);
  if (size != 0) std::memcpy(t.bytes.data(), data, size);
  tensors_[name] = std::move(t);
}

void TensorArchive::put_scalar(const std::string& name, double value) {
  put<double>(name, {}, std::span<const double>(&value, 1));
}

const NamedTensor& TensorArchive::get(const std::string& name) const {
  auto it = tensors_.find(name);
  STRATA_REQUIRE(it != tensors_.end(), "{}: has no tensor named '{}'", origin_, name);
  return it->second;
}

std::vector<float> TensorArchive::floats(const std::string& name) const {
  const NamedTensor& t = get(name);
  STRATA_REQUIRE(t.dtype == DType::kF32, "{}: tensor '{}' is {}, expected f32", origin_, name,
                 dtype_name(t.dtype));
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

std::vector<std::int32_t> TensorArchive::ints(const std::string& name) const {
  const NamedTensor& t = get(name);
  STRATA_REQUIRE(t.dtype == DType::kI32, "{}: tensor '{}' is {}, expected i32", origin_, name,
                 dtype_name(t.dtype));
  std::vector<std::int32_t> out(static_cast<std::size_t>(t.numel()));
  std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

double TensorArchive::scalar(const std::string& name) const {
  const NamedTensor& t = get(name);
  STRATA_REQUIRE(t.numel() == 1, "{}: tensor '{}' is not a scalar", origin_, name);
  switch (t.dtype) {
    case DType::kF64: { double v; std::memcpy(&v, t.bytes.data(), 8); return v; }
    case DType::kF32: { float v; std::memcpy(&v, t.bytes.data(), 4); return v; }
    case DType::kI32: { std::int32_t v; std::memcpy(&v, t.bytes.data(), 4); return v; }
    case DType::kBF16:
    case DType::kU8: break;
  }
  fail("{}: scalar '{}' is stored as {}, which is not a scalar type (f64, f32 or i32)", origin_, name,
       dtype_name(t.dtype));
}

namespace {

template <class T>
void write_pod(AtomicFile& out, const T& value) {
  out.write(&value, sizeof(T));
}

class Reader {
 public:
  Reader(const std::string& path, std::vector<unsigned char> bytes) : path_(path), bytes_(std::move(bytes)) {}

  template <class T>
  T pod(const std::string& what) {
    T value;
    std::memcpy(&value, take(sizeof(T), what), sizeof(T));
    return value;
  }
  const unsigned char* take(std::size_t n, const std::string& what) {
    STRATA_REQUIRE(n <= bytes_.size() - pos_, "{}: truncated: {} needs {} bytes but only {} remain",
                   path_, what, n, bytes_.size() - pos_);
    const unsigned char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  bool at_end() const { return pos_ == bytes_.size(); }
  std::size_t remaining() const { return bytes_.size() - pos_; }

 private:
  std::string path_;
  std::vector<unsigned char> bytes_;
  std::size_t pos_ = 0;
};

}  // namespace

void TensorArchive::save(const std::string& path) const {
  // The one atomic writer: an interrupted save never leaves half a file under the real name.
  AtomicFile out(path);
  out.write(kMagic, sizeof(kMagic));
  write_pod(out, kVersion);
  write_pod(out, static_cast<std::uint32_t>(tensors_.size()));
  for (const auto& [name, t] : tensors_) {
    write_pod(out, static_cast<std::uint32_t>(name.size()));
    out.write(name.data(), name.size());
    write_pod(out, static_cast<std::uint32_t>(t.dtype));
    write_pod(out, static_cast<std::uint32_t>(t.shape.size()));
    for (auto d : t.shape) write_pod(out, static_cast<std::uint64_t>(d));
    out.write(t.bytes.data(), t.bytes.size());
  }
  out.commit();
}

TensorArchive TensorArchive::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  STRATA_REQUIRE(in.good(), "{}: cannot open for reading", path);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Reader reader(path, std::move(bytes));

  const unsigned char* magic = reader.take(sizeof(kMagic), "the magic number");
  STRATA_REQUIRE(std::memcmp(magic, kMagic, sizeof(kMagic)) == 0,
                 "{}: not a Strata tensor archive (the file does not start with \"STRATNSR\")", path);
  const auto version = reader.pod<std::uint32_t>("the version");
  STRATA_REQUIRE(version == kVersion, "{}: tensor archive version {} is not supported (this build reads {})",
                 path, version, kVersion);
  const auto count = reader.pod<std::uint32_t>("the tensor count");

  TensorArchive archive;
  archive.origin_ = path;
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto name_size = reader.pod<std::uint32_t>("a tensor name length");
    const unsigned char* name_bytes = reader.take(name_size, "a tensor name");
    std::string name(reinterpret_cast<const char*>(name_bytes), name_size);
    const auto code = reader.pod<std::uint32_t>("the dtype of '" + name + "'");
    STRATA_REQUIRE(dtype_is_known(code), "{}: tensor '{}' has unknown dtype code {}", path, name, code);
    const auto ndim = reader.pod<std::uint32_t>("the rank of '" + name + "'");
    STRATA_REQUIRE(ndim <= 8, "{}: tensor '{}' claims {} dimensions (at most 8)", path, name, ndim);
    NamedTensor t;
    t.dtype = static_cast<DType>(code);
    std::uint64_t numel = 1;
    for (std::uint32_t d = 0; d < ndim; ++d) {
      const auto dim = reader.pod<std::uint64_t>("the shape of '" + name + "'");
      STRATA_REQUIRE(dim < (1ULL << 40), "{}: tensor '{}' has an implausible dimension {}", path, name, dim);
      t.shape.push_back(static_cast<std::int64_t>(dim));
      numel *= dim;
    }
    const std::uint64_t size = numel * dtype_size(t.dtype);
    STRATA_REQUIRE(size <= reader.remaining(), "{}: truncated: tensor '{}' needs {} bytes but only {} remain",
                   path, name, size, reader.remaining());
    const unsigned char* data = reader.take(size, "tensor '" + name + "'");
    t.bytes.assign(data, data + size);
    STRATA_REQUIRE(archive.tensors_.count(name) == 0, "{}: tensor '{}' appears twice", path, name);
    archive.tensors_[name] = std::move(t);
  }
  STRATA_REQUIRE(reader.at_end(), "{}: {} unexpected bytes after the last tensor", path, reader.remaining());
  return archive;
}

}  // namespace strata
