// safetensors writer and reader.
#include "engine/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/atomic_file.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace strata {

namespace {

// The header of a real file is kilobytes; a length past this is a file of another kind.
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

std::size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

// IEEE binary16 to fp32, exactly (every half is a float).
float from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const int exponent = (h >> 10) & 0x1F;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(exponent - 15 + 127) << 23) | (mantissa << 13));
}

void read_exactly(int fd, void* out, std::size_t bytes, std::uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    STRATA_REQUIRE(got > 0, "'{}': read of {} bytes at offset {} failed: {}", path, bytes, offset,
                   got == 0 ? "the file ends first" : std::strerror(errno));
    p += got;
    bytes -= static_cast<std::size_t>(got);
    offset += static_cast<std::uint64_t>(got);
  }
}

}  // namespace

std::size_t SafetensorsTensor::numel() const {
  std::size_t n = 1;
  for (const std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::string SafetensorsTensor::shape_text() const { return fmt::format("({})", fmt::join(shape, ", ")); }

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; so is this reader");
  SafetensorsFile file;
  file.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  STRATA_REQUIRE(fd >= 0, "cannot open '{}': {}", path, std::strerror(errno));
  file.fd_ = std::shared_ptr<const int>(new int(fd), [](const int* f) {
    ::close(*f);
    delete f;
  });
  struct stat st {};
  STRATA_REQUIRE(::fstat(fd, &st) == 0, "cannot stat '{}': {}", path, std::strerror(errno));
  STRATA_REQUIRE(S_ISREG(st.st_mode), "'{}' is not a regular file (a safetensors file was expected)", path);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  STRATA_REQUIRE(size >= 10, "'{}' is not a safetensors file: {} bytes is too short for a header", path, size);
  std::uint64_t length = 0;
  read_exactly(fd, &length, sizeof length, 0, path);
  STRATA_REQUIRE(length <= size - 8 && length <= kMaxHeaderBytes,
                 "'{}' is not a safetensors file: its first 8 bytes give a header of {} bytes, past the file's {} "
                 "bytes or the format's {} MiB",
                 path, length, size, kMaxHeaderBytes >> 20);
  std::string text(length, '\0');
  read_exactly(fd, text.data(), length, 8, path);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("'{}' is not a safetensors file: its header is not JSON ({})", path, e.what());
  }
  STRATA_REQUIRE(header.is_object(), "'{}' is not a safetensors file: its header is not a JSON object", path);
  const std::uint64_t data_begin = 8 + length, data_bytes = size - data_begin;
  file.size_ = size;
  file.data_begin_ = data_begin;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      STRATA_REQUIRE(entry.is_object(), "'{}': __metadata__ is not a JSON object", path);
      for (const auto& [key, value] : entry.items()) {
        STRATA_REQUIRE(value.is_string(), "'{}': __metadata__ entry '{}' is not a string", path, key);
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const auto bad = [&](const char* what) { fail("'{}': tensor '{}' {}", path, name, what); };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      bad("needs dtype, shape and data_offsets");
    }
    const nlohmann::json &dtype = entry["dtype"], &shape = entry["shape"], &offsets = entry["data_offsets"];
    if (!dtype.is_string() || dtype_bytes(dtype.get<std::string>()) == 0) bad("has an unknown dtype");
    if (!shape.is_array()) bad("has a shape that is not a list");
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      bad("has data_offsets that are not two byte offsets");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = dtype.get<std::string>();
    for (const nlohmann::json& d : shape) {
      if (!d.is_number_integer() || d.get<std::int64_t>() < 0 || d.get<std::int64_t>() > (std::int64_t{1} << 40)) {
        bad("has a dimension that is not a size");
      }
      t.shape.push_back(d.get<std::int64_t>());
    }
    // numel() below multiplies the dimensions: a forged shape must not wrap around to the bytes
    // it claims. A tensor cannot hold more elements than the file has bytes of data.
    std::uint64_t elements = 1;
    for (const std::int64_t d : t.shape) {
      if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(d), &elements) || elements > data_bytes) {
        fail("'{}': tensor '{}' has shape {}, more elements than the file's {} bytes of data", path, name,
             t.shape_text(), data_bytes);
      }
    }
    const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
    if (begin > end || end > data_bytes) {
      fail("'{}': tensor '{}' has bytes [{}, {}), outside the file's {} bytes of data (a truncated file?)", path, name,
           begin, end, data_bytes);
    }
    if (end - begin != t.numel() * dtype_bytes(t.dtype)) {
      fail("'{}': tensor '{}' has {} bytes, but its shape {} of {} takes {}", path, name, end - begin, t.shape_text(),
           t.dtype, t.numel() * dtype_bytes(t.dtype));
    }
    t.offset = data_begin + begin;
    spans.emplace_back(begin, end);
    file.tensors_.emplace(name, std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    STRATA_REQUIRE(spans[i].first >= spans[i - 1].second, "'{}': two tensors share the bytes from {}", path,
                   spans[i].first);
  }
  return file;
}

std::uint64_t SafetensorsFile::fingerprint() const {
  // Read when asked (once per run, by the ranks' agreement), not on every open: the file's size,
  // its length field and header, and the first and last MiB of its data.
  const std::uint64_t sample = std::min<std::uint64_t>(size_ - data_begin_, 1 << 20);
  std::string header(data_begin_, '\0'), head(sample, '\0'), tail(sample, '\0');
  read_exactly(*fd_, header.data(), header.size(), 0, path_);
  read_exactly(*fd_, head.data(), sample, data_begin_, path_);
  read_exactly(*fd_, tail.data(), sample, size_ - sample, path_);
  XXH3_state_t* state = XXH3_createState();
  STRATA_REQUIRE(state != nullptr, "out of memory hashing '{}'", path_);
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, &size_, sizeof size_);
  for (const std::string* part : {&header, &head, &tail}) XXH3_64bits_update(state, part->data(), part->size());
  const std::uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsFile::read(const SafetensorsTensor& t, std::size_t first, std::size_t count, float* out) const {
  STRATA_CHECK(first + count <= t.numel(), "read past the end of tensor {}", t.name);
  const std::size_t width = dtype_bytes(t.dtype);
  const std::uint64_t at = t.offset + first * width;
  if (t.dtype == "F32") {
    read_exactly(*fd_, out, count * width, at, path_);
  } else if (t.dtype == "BF16" || t.dtype == "F16") {
    std::vector<std::uint16_t> raw(count);
    read_exactly(*fd_, raw.data(), count * width, at, path_);
    const bool brain = t.dtype == "BF16";
    for (std::size_t i = 0; i < count; ++i) out[i] = brain ? from_bf16(raw[i]) : from_f16(raw[i]);
  } else {
    fail("'{}': tensor '{}' is {}; weights are read from F32, F16 or BF16", path_, t.name, t.dtype);
  }
  for (std::size_t i = 0; i < count; ++i) {
    STRATA_REQUIRE(std::isfinite(out[i]), "'{}': tensor '{}' holds a non-finite value at element {}", path_, t.name,
                   first + i);
  }
}

void write_safetensors(const std::string& path, const std::vector<ExportTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian; so is this writer");
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const ExportTensor& t : tensors) {
    std::int64_t count = 1;
    for (std::int64_t d : t.shape) count *= d;
    STRATA_CHECK(static_cast<std::size_t>(count) == t.values.size(), "tensor {} has {} values for its shape", t.name,
                 t.values.size());
    const std::uint64_t bytes = t.values.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  header["__metadata__"] = metadata;
  std::string text = header.dump();
  // The data starts 8-aligned, as the format recommends: the header is padded with spaces.
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');
  const std::uint64_t length = text.size();
  AtomicFile file(path);
  file.write(&length, sizeof length);
  file.write(text.data(), text.size());
  for (const ExportTensor& t : tensors) file.write(t.values.data(), t.values.size() * sizeof(float));
  file.commit();
}

}  // namespace strata
