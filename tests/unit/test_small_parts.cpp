// The small pieces each checked against a closed form: fast exp/tanh against libm, the
// learning-rate schedule, the clipping coefficient, AdamW's first step, tensor archive checks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.hpp"
#include "core/tensor_archive.hpp"
#include "core/vector_math.hpp"
#include "model/gpt_config.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_norm.hpp"
#include "optim/lr_schedule.hpp"

namespace strata {
namespace {

TEST(VectorMath, FastExpWithinTwoUlpOfLibm) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(fast_exp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2.5e-7);
  EXPECT_EQ(fast_exp(-1000.0f), 0.0f);
  EXPECT_EQ(fast_exp(-INFINITY), 0.0f);
}

TEST(VectorMath, FastTanhAbsoluteErrorBelow1e6) {
  for (float x = -12.0f; x < 12.0f; x += 0.001f) ASSERT_NEAR(fast_tanh(x), std::tanh(x), 1e-6) << x;
  EXPECT_EQ(fast_tanh(100.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-100.0f), -1.0f);
}

TEST(LrScheduleTest, WarmupThenCosineToTheFloor) {
  const LrSchedule s{1e-3, 10, 110, 0.1};
  EXPECT_DOUBLE_EQ(s.at(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(10), 1e-3);
  EXPECT_NEAR(s.at(60), 1e-4 + 0.5 * 9e-4, 1e-15);  // half way: cos = 0
  EXPECT_NEAR(s.at(110), 1e-4, 1e-15);
  const LrSchedule no_warmup{2e-3, 0, 1, 0.0};
  EXPECT_DOUBLE_EQ(no_warmup.at(0), 2e-3);
}

TEST(GradNorm, ClipCoefficientAsTorch) {
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0f);
  EXPECT_FLOAT_EQ(clip_coefficient(4.0, 1.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(clip_coefficient(100.0, 0.0), 1.0f);
  const std::vector<float> v = {3, 4};
  EXPECT_DOUBLE_EQ(sum_of_squares(v.data(), 2), 25.0);
}

TEST(AdamW, FirstStepMovesByLrTimesSignAndDecaysOnlyMatrices) {
  // Step 1: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) ~ lr * sign(g).
  GptConfig cfg = GptConfig::preset("tiny");
  UnitLayout unit;
  unit.tensors = {{"w", Range{0, 2}, {1, 2}, true}, {"b", Range{2, 4}, {2}, false}};
  unit.numel = 4;
  std::vector<float> p = {1, 1, 1, 1}, g = {0.5f, -2, 0.5f, -2}, m(4), v(4);
  const AdamWHyper h{0.9f, 0.95f, 1e-8f, 0.1f};
  adamw_update_unit_slice(unit, Range{0, 4}, p.data(), g.data(), m.data(), v.data(), h, 0.01f, 1, 1.0f);
  EXPECT_NEAR(p[0], 1 * (1 - 0.01 * 0.1) - 0.01, 1e-6);
  EXPECT_NEAR(p[1], 1 * (1 - 0.01 * 0.1) + 0.01, 1e-6);
  EXPECT_NEAR(p[2], 1 - 0.01, 1e-6);
  EXPECT_NEAR(p[3], 1 + 0.01, 1e-6);
  // A slice that starts inside the first tensor updates only its own elements.
  std::vector<float> q = {1, 1}, gq = {1, 1}, mq(2), vq(2);
  adamw_update_unit_slice(unit, Range{1, 3}, q.data(), gq.data(), mq.data(), vq.data(), h, 0.01f, 1, 1.0f);
  EXPECT_NEAR(q[0], 1 * (1 - 0.001) - 0.01, 1e-6);  // element 1: decayed
  EXPECT_NEAR(q[1], 1 - 0.01, 1e-6);                // element 2: a bias, not decayed
}

TEST(GptConfigTest, Gpt2SmallHasTheKnownParameterCount) {
  const GptConfig c = GptConfig::preset("gpt2-124m");
  EXPECT_EQ(c.parameter_count(), 124439808);  // HF GPT-2 small with tied head
  EXPECT_EQ(c.padded_vocab_size(), 50304);
  GptConfig bad = c;
  bad.n_head = 7;
  EXPECT_THROW(bad.validate(), Error);
  EXPECT_THROW(GptConfig::preset("gpt5"), Error);
}

TEST(TensorArchiveTest, RoundTripAndRefusals) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  const std::string path = (dir / "archive.stt").string();
  TensorArchive a;
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  a.put<float>("x", {3}, values);
  a.put_scalar("s", 42.0);
  a.save(path);
  const TensorArchive b = TensorArchive::load(path);
  EXPECT_EQ(b.floats("x"), values);
  EXPECT_EQ(b.scalar("s"), 42.0);

  const std::string bad_magic = (dir / "bad_magic.stt").string();
  std::ofstream(bad_magic, std::ios::binary) << "NOTMAGIC and more bytes";
  try {
    TensorArchive::load(bad_magic);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad_magic + ": not a Strata tensor archive"), std::string::npos);
  }
  // Truncate the good file by one byte.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = (dir / "cut.stt").string();
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 1);
  try {
    TensorArchive::load(cut);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace strata
