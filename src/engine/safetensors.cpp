// safetensors writer.
#include "engine/safetensors.hpp"

#include <nlohmann/json.hpp>

#include <bit>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace strata {

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
