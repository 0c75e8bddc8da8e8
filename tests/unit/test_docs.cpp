// Every `strata train` flag is documented in README.md.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cli/train_options.hpp"

namespace strata {
namespace {

TEST(Docs, ReadmeDocumentsEveryTrainFlag) {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  TrainConfig config;
  for (const auto& spec : train_option_specs(config)) {
    EXPECT_NE(text.str().find("`--" + spec.name), std::string::npos) << "README.md does not document --" << spec.name;
  }
}

}  // namespace
}  // namespace strata
