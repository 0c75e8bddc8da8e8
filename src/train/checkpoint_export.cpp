// inspect and export.
#include "train/checkpoint_export.hpp"

#include <fmt/format.h>
#include <xxhash.h>


#include "core/error.hpp"
#include "train/output_policy.hpp"
#include "train/checkpoint.hpp"

namespace strata {

namespace {

std::vector<float> whole_unit(const CheckpointReader& reader, const ModelLayout& layout, const char* state, std::size_t u) {
  std::vector<float> values(layout.unit(u).numel);
  reader.read(state, static_cast<int>(u), 0, values.size(), values.data());
  return values;
}

// Strata "h3.attn.c_attn.weight" -> "transformer.h.3.attn.c_attn.weight"; "wte" -> "transformer.wte.weight".
std::string exported_name(const std::string& name) {
  if (name == "wte" || name == "wpe") return "transformer." + name + ".weight";
  if (name.size() > 1 && name[0] == 'h' && std::isdigit(static_cast<unsigned char>(name[1]))) {
    const std::size_t dot = name.find('.');
    return "transformer.h." + name.substr(1, dot - 1) + name.substr(dot);
  }
  return "transformer." + name;
}

}  // namespace

std::string resolve_checkpoint_path(const std::string& path) {
  const ResumeChoice choice = choose_resume(path, "", "checkpoint");
  for (const std::string& dir : choice.candidates) {
    if (incomplete_reason(dir).empty()) return dir;
  }
  STRATA_REQUIRE(!choice.candidates.empty(), "'{}' holds no checkpoint", path);
  fail("checkpoint '{}' is not complete: {}", choice.candidates.front(), incomplete_reason(choice.candidates.front()));
}

std::vector<ExportTensor> exported_tensors(const CheckpointReader& reader) {
  const ModelLayout layout(reader.model());
  std::vector<ExportTensor> out;
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    const std::vector<float> unit = whole_unit(reader, layout, "master", u);
    for (const TensorSpec& t : layout.unit(u).tensors) {
      ExportTensor n;
      n.name = exported_name(t.name);
      n.shape = t.shape;
      std::size_t count = t.range.size();
      if (t.name == "wte") {  // the padded rows are Strata's, not the model's
        n.shape[0] = reader.model().vocab_size;
        count = static_cast<std::size_t>(reader.model().vocab_size) * static_cast<std::size_t>(reader.model().n_embd);
      }
      n.values.assign(unit.begin() + static_cast<std::ptrdiff_t>(t.range.begin),
                      unit.begin() + static_cast<std::ptrdiff_t>(t.range.begin + count));
      out.push_back(std::move(n));
    }
  }
  return out;
}

void export_safetensors(const CheckpointReader& reader, const std::string& out, bool force) {
  require_output(out, "--out", safetensors_output(), {reader.dir()}, force);
  const GptConfig& m = reader.model();
  write_safetensors(out, exported_tensors(reader),
                    {{"format", "pt"},
                     {"source", "strata " + reader.dir()},
                     {"completed_steps", std::to_string(reader.run().completed_steps)},
                     {"n_layer", std::to_string(m.n_layer)},
                     {"n_embd", std::to_string(m.n_embd)},
                     {"n_head", std::to_string(m.n_head)},
                     {"vocab_size", std::to_string(m.vocab_size)},
                     {"context_length", std::to_string(m.context_length)},
                     {"lm_head", "tied to transformer.wte.weight"}});
}

std::string inspect_checkpoint(const CheckpointReader& reader, bool verify) {
  const CheckpointRun& run = reader.run();
  const GptConfig& m = reader.model();
  std::string s = fmt::format("checkpoint {}\n", reader.dir());
  s += fmt::format("  after step {} | model {} ({}, {} parameters)\n", run.completed_steps, m.name, m.shape_text(),
                   m.parameter_count());
  s += fmt::format("  written by {} ranks ({} engine){}{} | {} weights | micro-batch {} x {} per rank, {} per step\n",
                   run.world, run.engine, run.plan.empty() ? "" : ", plan " + run.plan,
                   run.topology.empty() ? "" : ", topology " + run.topology, run.weight_dtype, run.batch_size,
                   run.seq_len, run.grad_accum);
  std::uint64_t total = 0;
  std::vector<std::string> status;
  if (verify) status = reader.verify_all();
  std::size_t i = 0;
  s += "files:\n";
  for (const ManifestFile& f : reader.files()) {
    total += f.bytes;
    s += verify ? fmt::format("  {}\n", status.at(i))
                : fmt::format("  {}: {} chunks, {} bytes (not verified)\n", f.name, f.chunks.size(), f.bytes);
    ++i;
  }
  s += fmt::format("  {} files, {:.3f} MB\n", reader.files().size(), static_cast<double>(total) / 1e6);
  // Whatever wrote it, equal states give equal digests: the states assembled unit by unit.
  const ModelLayout layout(m);
  s += "digests of the assembled states (xxh3 of each state's units, in order):\n";
  for (const char* state : kCheckpointStates) {
    XXH3_state_t* h = XXH3_createState();
    XXH3_64bits_reset(h);
    for (std::size_t u = 0; u < layout.unit_count(); ++u) {
      const std::vector<float> values = whole_unit(reader, layout, state, u);
      XXH3_64bits_update(h, values.data(), values.size() * sizeof(float));
    }
    s += fmt::format("  {:<7} {:016x}\n", state, XXH3_64bits_digest(h));
    XXH3_freeState(h);
  }
  return s;
}

}  // namespace strata
