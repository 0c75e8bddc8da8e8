// The option table: TOML keys set options, flags given on the command line win, unknown keys and
// wrong types are refused with the file and key named, and the printed TOML reads back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/option_table.hpp"
#include "cli/train_options.hpp"
#include "core/error.hpp"

namespace strata {
namespace {

std::string write(const std::string& name, const std::string& text) {
  const auto p = (std::filesystem::path(::testing::TempDir()) / name).string();
  std::ofstream(p) << text;
  return p;
}

struct Parsed {
  TrainConfig config;
};

TrainConfig parse(std::vector<std::string> args, const std::string& toml_path) {
  TrainConfig config;
  const auto specs = train_option_specs(config);
  CLI::App app;
  register_options(app, specs);
  std::vector<const char*> argv = {"train"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  if (!toml_path.empty()) apply_config_file(toml_path, specs, app);
  return config;
}

TEST(ConfigFile, KeysApplyAndFlagsWin) {
  const auto p = write("run.toml", "steps = 77\nlr = 2e-4\n[model]\nn_layer = 3\nmodel = \"small\"\n[batch]\nbatch-size = 5\n");
  const TrainConfig c = parse({"--steps", "9"}, p);
  EXPECT_EQ(c.steps, 9);  // the flag wins
  EXPECT_DOUBLE_EQ(c.lr, 2e-4);
  EXPECT_EQ(c.shape.n_layer, 3);
  EXPECT_EQ(c.model, "small");
  EXPECT_EQ(c.batch_size, 5);
}

TEST(ConfigFile, UnknownKeysAndWrongTypesAreRefused) {
  const auto unknown = write("unknown.toml", "stepz = 3\n");
  try {
    parse({}, unknown);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(unknown + ": unknown key 'stepz'"), std::string::npos) << e.what();
  }
  const auto typed = write("typed.toml", "steps = \"many\"\n");
  try {
    parse({}, typed);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'steps' must be an integer"), std::string::npos) << e.what();
  }
  const auto broken = write("broken.toml", "steps = = 3\n");
  EXPECT_THROW(parse({}, broken), Error);
}

TEST(ConfigFile, PrintedConfigurationReadsBackToTheSameSettings) {
  TrainConfig original = parse({"--steps", "123", "--lr", "0.0005", "--data", "x.bin", "--eps", "1e-9"}, "");
  const auto specs = train_option_specs(original);
  const auto p = write("roundtrip.toml", options_as_toml(specs));
  const TrainConfig back = parse({}, p);
  EXPECT_EQ(back.steps, 123);
  EXPECT_DOUBLE_EQ(back.lr, 0.0005);
  EXPECT_DOUBLE_EQ(back.eps, 1e-9);
  EXPECT_EQ(back.data, "x.bin");
  EXPECT_DOUBLE_EQ(back.beta2, original.beta2);
}

}  // namespace
}  // namespace strata
