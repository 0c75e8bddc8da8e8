// Every flag of `strata train`, `simulate`, `plan` and `calibrate` is documented in README.md.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/calibrate_command.hpp"
#include "cli/plan_command.hpp"
#include "cli/simulate_command.hpp"
#include "cli/train_options.hpp"

namespace strata {
namespace {

std::string readme() {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/README.md");
  EXPECT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Docs, ReadmeDocumentsEveryTrainFlag) {
  std::stringstream text;
  text << readme();
  TrainConfig config;
  for (const auto& spec : train_option_specs(config)) {
    EXPECT_NE(text.str().find("`--" + spec.name), std::string::npos) << "README.md does not document --" << spec.name;
  }
}

TEST(Docs, ReadmeDocumentsEveryFlagOfSimulatePlanAndCalibrate) {
  const std::string text = readme();
  CLI::App app;
  add_simulate_command(app);
  add_plan_command(app);
  add_calibrate_command(app);
  for (const char* command : {"simulate", "plan", "calibrate"}) {
    const CLI::App* sub = app.get_subcommand(command);
    int flags = 0;
    for (const CLI::Option* option : sub->get_options()) {
      for (const std::string& name : option->get_lnames()) {
        if (name == "help") continue;
        ++flags;
        EXPECT_NE(text.find("`--" + name), std::string::npos) << "README.md does not document " << command << " --" << name;
      }
    }
    EXPECT_GT(flags, 3) << command;
  }
}

}  // namespace
}  // namespace strata
