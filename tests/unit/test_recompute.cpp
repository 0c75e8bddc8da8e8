// Activation recomputation in the model (model/gpt with an ActivationCheckpointing): a micro-batch's
// loss and every gradient, over two accumulated micro-batches, are bit for bit those of the model
// that keeps every activation, for each matmul implementation in fp32 and bf16 compute and for
// every setting (blocks, every:2, every:3 of 5 blocks); the memory the model allocates is what
// ActivationBytes says, and less than without recomputation. The reference is the same model
// without recomputation: recomputing runs the same kernels on the same inputs, so any difference
// at all is a defect.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "model/gpt.hpp"
#include "model/init.hpp"
#include "support/matmul_scope.hpp"

namespace strata {
namespace {

GptConfig shape() {
  GptConfig c;
  c.name = "recompute-test";
  c.n_layer = 5;
  c.n_embd = 64;
  c.n_head = 4;
  c.vocab_size = 97;
  c.context_length = 32;
  c.vocab_pad_multiple = 32;
  return c;
}

struct Outcome {
  std::vector<float> losses;
  std::vector<std::vector<float>> grads;
};

Outcome run(const GptConfig& config, ActivationCheckpointing checkpointing) {
  constexpr int kBatch = 2, kSeq = 19;
  const ModelLayout layout(config);
  UnitBuffers params(layout), grads(layout);
  for (std::size_t u = 0; u < layout.unit_count(); ++u) init_unit(layout, u, 7, params.unit(u));
  Gpt gpt(config, kBatch, kSeq, checkpointing);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> token(0, config.vocab_size - 1);
  Outcome out;
  for (int micro = 0; micro < 2; ++micro) {
    std::vector<std::int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq);
    for (auto& t : tokens) t = token(rng);
    for (auto& t : targets) t = token(rng);
    out.losses.push_back(gpt.forward(params, tokens, targets));
    // The first micro-batch writes every gradient whole, the second adds to it.
    gpt.backward(params, grads, 0.5f, {}, micro == 0 ? GradWrite::kOverwrite : GradWrite::kAccumulate);
  }
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    out.grads.emplace_back(grads.unit(u), grads.unit(u) + layout.unit(u).numel);
  }
  return out;
}

class Recompute : public ::testing::TestWithParam<std::tuple<cpu::MatmulImpl, cpu::ComputeDType>> {};

TEST_P(Recompute, GivesTheLossesAndGradientsOfTheFullModelBitForBit) {
  const auto [impl, dtype] = GetParam();
  if (dtype == cpu::ComputeDType::kBF16) {
    STRATA_SKIP_WITHOUT_BF16(impl);
  } else {
    STRATA_SKIP_WITHOUT(impl);
  }
  const testing::MatmulScope scope(impl, dtype);
  const GptConfig config = shape();
  const Outcome kept = run(config, {});
  for (const int every : {1, 2, 3}) {
    const Outcome recomputed = run(config, ActivationCheckpointing{every});
    ASSERT_EQ(recomputed.losses.size(), kept.losses.size());
    for (std::size_t m = 0; m < kept.losses.size(); ++m) {
      EXPECT_EQ(std::memcmp(&recomputed.losses[m], &kept.losses[m], sizeof(float)), 0)
          << "every:" << every << " micro-batch " << m << " loss " << recomputed.losses[m] << " vs " << kept.losses[m];
    }
    for (std::size_t u = 0; u < kept.grads.size(); ++u) {
      ASSERT_EQ(recomputed.grads[u].size(), kept.grads[u].size());
      EXPECT_EQ(std::memcmp(recomputed.grads[u].data(), kept.grads[u].data(), kept.grads[u].size() * sizeof(float)), 0)
          << "every:" << every << ": the gradient of unit " << u << " differs";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Implementations, Recompute,
                         ::testing::Combine(::testing::ValuesIn(testing::every_matmul_impl()),
                                            ::testing::Values(cpu::ComputeDType::kF32, cpu::ComputeDType::kBF16)));

TEST(RecomputeMemory, TheModelAllocatesWhatTheClosedFormSaysAndLessThanWithout) {
  const GptConfig config = shape();
  const ActivationBytes bytes = Gpt::activation_bytes(config, 2, 19);
  std::uint64_t previous = 0;
  for (const int every : {0, 3, 2, 1}) {
    const ActivationCheckpointing c{every};
    const Gpt gpt(config, 2, 19, c);
    EXPECT_EQ(gpt.allocated_activation_bytes(), bytes.total(config.n_layer, c)) << "every " << every;
    if (every == 0) {
      EXPECT_EQ(gpt.allocated_activation_bytes(), bytes.total(config.n_layer));
    } else {
      // Fewer blocks keep their activations at each setting: every:3 keeps 3 of 5, every:2 2, blocks none.
      EXPECT_LT(gpt.allocated_activation_bytes(), previous) << "every " << every;
    }
    previous = gpt.allocated_activation_bytes();
  }
  // Every block recomputed: the block outputs, one block's working set and the rest.
  EXPECT_EQ(bytes.total(config.n_layer, ActivationCheckpointing{1}),
            bytes.layer_input * config.n_layer + (bytes.per_layer - bytes.layer_input) + bytes.rest);
}

TEST(RecomputeSetting, ParsesItsFormsAndRefusesOthersWithASentence) {
  EXPECT_EQ(parse_activation_checkpointing("none").every, 0);
  EXPECT_EQ(parse_activation_checkpointing("blocks").every, 1);
  EXPECT_EQ(parse_activation_checkpointing("every:4").every, 4);
  EXPECT_EQ(activation_checkpointing_name(ActivationCheckpointing{4}), "every:4");
  EXPECT_TRUE(ActivationCheckpointing{2}.recomputes(4));
  EXPECT_FALSE(ActivationCheckpointing{2}.recomputes(3));
  EXPECT_EQ(ActivationCheckpointing{2}.recomputed_blocks(5), 3);
  for (const char* bad : {"", "all", "every:", "every:0", "every:-1", "every:2x", "Blocks"}) {
    try {
      parse_activation_checkpointing(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("none, blocks or every:K"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace strata
