// Checkpoint test helpers.
#include "support/checkpoint_fixtures.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/exit_codes.hpp"
#include "engine/checkpoint_manifest.hpp"
#include "train/engine_setup.hpp"

namespace strata::testing_support {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / "strata_checkpoint_tests" / name;
  fs::remove_all(dir);
  fs::create_directories(dir.parent_path());
  return dir;
}

TrainConfig tiny(int steps) {
  TrainConfig c;
  c.model = "tiny";
  c.steps = steps;
  c.batch_size = 4;
  c.seq_len = 32;
  c.val_every = 0;
  c.metrics = "";
  c.threads = 1;
  return c;
}

TrainSummary run(const TrainConfig& config) {
  std::ostringstream out;
  Trainer trainer(config);
  EngineSetup setup = plan_engine(config, 1);
  connect_engine(setup, config);
  return trainer.run(*setup.engine, *setup.comm, out);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const AgreedExit& e) {  // a refusal all ranks agreed on (here the one rank)
    return e.reason;
  }
  return "(no error)";
}

void flip_byte(const fs::path& file, std::uintmax_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_all(p)); }

int first_step_resuming_auto(const fs::path& root, int steps) {
  TrainConfig c = tiny(steps);
  c.save = root.string();
  c.resume = "auto";
  const TrainSummary s = run(c);
  return s.steps.empty() ? 0 : s.steps.front().step;
}

fs::path two_checkpoints(const std::string& name) {
  const fs::path root = scratch(name);
  TrainConfig c = tiny(4);
  c.save = root.string();
  c.checkpoint_every = 2;
  run(c);
  EXPECT_TRUE(fs::exists(root / "step-00000002" / "COMPLETE"));
  EXPECT_TRUE(fs::exists(root / "step-00000004" / "COMPLETE"));
  return root;
}

void resign(const fs::path& step, const nlohmann::json& manifest) {
  const std::string text = manifest.dump(1);
  std::ofstream(step / "manifest.json", std::ios::trunc) << text;
  nlohmann::json marker = read_json(step / "COMPLETE");
  marker["manifest_xxh3"] = checkpoint_digest(text.data(), text.size());
  std::ofstream(step / "COMPLETE", std::ios::trunc) << marker.dump();
}

}  // namespace strata::testing_support
