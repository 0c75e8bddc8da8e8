// Checkpoint save and load on top of the tensor archive.
#include "engine/checkpoint_file.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/tensor_archive.hpp"

namespace strata {

namespace {

struct ShapeField {
  const char* name;
  int GptConfig::*field;
};
constexpr ShapeField kShapeFields[] = {
    {"model.n_layer", &GptConfig::n_layer},       {"model.n_embd", &GptConfig::n_embd},
    {"model.n_head", &GptConfig::n_head},         {"model.vocab_size", &GptConfig::vocab_size},
    {"model.context_length", &GptConfig::context_length}, {"model.vocab_pad_multiple", &GptConfig::vocab_pad_multiple},
};

}  // namespace

void save_checkpoint(const std::string& path, const ModelLayout& layout, int completed_steps,
                     const TrainingStateRef& state) {
  TensorArchive archive;
  archive.put_scalar("checkpoint.step", completed_steps);
  for (const auto& f : kShapeFields) archive.put_scalar(f.name, layout.config().*f.field);
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    const UnitLayout& unit = layout.unit(u);
    const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(unit.numel)};
    archive.put<float>("param." + unit.name, shape, state.params.buffer(u).span());
    archive.put<float>("adam_m." + unit.name, shape, state.adam_m.buffer(u).span());
    archive.put<float>("adam_v." + unit.name, shape, state.adam_v.buffer(u).span());
  }
  archive.save(path);
}

Checkpoint read_checkpoint(const std::string& path, const ModelLayout& layout) {
  Checkpoint c{path, TensorArchive::load(path), 0};
  const TensorArchive& archive = c.archive;
  STRATA_REQUIRE(archive.contains("checkpoint.step"), "{}: not a Strata checkpoint (it has no checkpoint.step)",
                 path);
  for (const auto& f : kShapeFields) {
    const double stored = archive.scalar(f.name);
    STRATA_REQUIRE(stored == layout.config().*f.field,
                   "{}: the checkpoint has {} = {} but this run's model has {}; pass the same model settings", path,
                   f.name, stored, layout.config().*f.field);
  }
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const char* state : {"param.", "adam_m.", "adam_v."}) {
      const std::string name = state + layout.unit(u).name;
      const NamedTensor& t = archive.get(name);
      STRATA_REQUIRE(t.dtype == DType::kF32 && static_cast<std::size_t>(t.numel()) == layout.unit(u).numel,
                     "{}: tensor '{}' holds {} {} values, expected {} f32", path, name, t.numel(),
                     dtype_name(t.dtype), layout.unit(u).numel);
    }
  }
  c.completed_steps = static_cast<int>(archive.scalar("checkpoint.step"));
  return c;
}

void restore_checkpoint(const Checkpoint& checkpoint, const ModelLayout& layout, const TrainingStateRef& state) {
  const TensorArchive& archive = checkpoint.archive;
  const std::string& path = checkpoint.path;
  auto restore = [&](const std::string& name, AlignedBuffer<float>& into) {
    const std::vector<float> values = archive.floats(name);
    STRATA_REQUIRE(values.size() == into.size(), "{}: tensor '{}' holds {} values, expected {}", path, name,
                   values.size(), into.size());
    std::memcpy(into.data(), values.data(), values.size() * sizeof(float));
  };
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    const std::string& name = layout.unit(u).name;
    restore("param." + name, state.params.buffer(u));
    restore("adam_m." + name, state.adam_m.buffer(u));
    restore("adam_v." + name, state.adam_v.buffer(u));
  }
}

}  // namespace strata
