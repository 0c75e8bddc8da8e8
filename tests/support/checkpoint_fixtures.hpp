// Helpers of the one-process checkpoint tests: tiny training runs that save, damage to files, and a
// manifest re-signed as a faulty writer would sign it (so only content checks can refuse it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "train/trainer.hpp"

namespace strata::testing_support {

namespace fs = std::filesystem;

// A fresh, empty path under the test temporary directory.
fs::path scratch(const std::string& name);
// The tiny model, 4 x 32 tokens, one thread, no validation or metrics.
TrainConfig tiny(int steps);
// One process, the reference engine.
TrainSummary run(const TrainConfig& config);
// The strata::Error a call throws, or "(no error)".
std::string error_of(const std::function<void()>& f);
void flip_byte(const fs::path& file, std::uintmax_t offset);
std::string read_all(const fs::path& p);
// The first step a `--resume auto --save root` run to `steps` trains (0 when it trained none).
int first_step_resuming_auto(const fs::path& root, int steps);
// A root with complete checkpoints after steps 2 and 4.
fs::path two_checkpoints(const std::string& name);
// Writes a changed manifest and signs it in the marker again.
void resign(const fs::path& step, const nlohmann::json& manifest);
nlohmann::json read_json(const fs::path& p);

}  // namespace strata::testing_support
