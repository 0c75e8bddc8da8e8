// Strata's forward, backward and 5 AdamW steps against PyTorch autograd on the same weights and
// batches (cases written by tests/reference/gpt_reference.py), with each matmul implementation.
// Metric: max|a-b| / max|ref| per tensor; bounds 1e-4 for logits and gradients, 1e-5 relative for
// losses; final weights within 1% of Adam's largest possible displacement (see below). The fp32
// bounds follow from fp32's arithmetic, whatever the kernels' summation order: a sum of k terms
// summed in two orders differs by about sqrt(k) 2^-24 of its scale (Higham and Mary's probabilistic
// bound); the longest sums here (k <= 384 per product, a few thousand per gradient over the batch,
// chained through 2 layers) give under 1e-5 for a gradient relative to its largest element and
// ~1e-6 for the loss's mean, so 1e-4 and 1e-5 leave an order of margin on any CPU. The bf16
// compute mode is checked against PyTorch's bf16 autocast run of the same micro-batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "support/matmul_scope.hpp"
#include "support/reference_case.hpp"
#include "engine/local_engine.hpp"

namespace strata {
namespace {

using testing::load_reference_case;
using testing::load_units;
using testing::max_relative_error;
using testing::tensor_values;

using testing::MatmulScope;
using cpu::ComputeDType;
using cpu::MatmulImpl;

// (case name, matmul implementation)
class TorchReference : public ::testing::TestWithParam<std::tuple<const char*, MatmulImpl>> {
 protected:
  const char* case_name() const { return std::get<0>(GetParam()); }
  MatmulImpl impl() const { return std::get<1>(GetParam()); }
};

std::vector<std::int32_t> micro_batch(const TensorArchive& archive, const char* name, int index, std::size_t n) {
  const std::vector<std::int32_t> all = archive.ints(name);
  return {all.begin() + static_cast<std::ptrdiff_t>(index * n), all.begin() + static_cast<std::ptrdiff_t>((index + 1) * n)};
}

// The case's weights, loaded into a reference engine, and its first micro-batch's forward and
// backward (the gradients are the engine's).
struct FirstMicroBatch {
  explicit FirstMicroBatch(const testing::ReferenceCase& ref) : engine(ref.config, ref.batch, ref.seq_len, 1) {
    load_units(ref.archive, "init.", engine.layout(), engine.params());
    const std::size_t n = static_cast<std::size_t>(ref.batch) * ref.seq_len;
    inputs = micro_batch(ref.archive, "inputs", 0, n);
    targets = micro_batch(ref.archive, "targets", 0, n);
    engine.zero_grad();
    loss = engine.forward_backward(inputs, targets, 1.0f);
  }
  LocalEngine engine;
  std::vector<std::int32_t> inputs, targets;
  float loss = 0.0f;
};

TEST_P(TorchReference, OneMicroBatchLossLogitsAndEveryGradient) {
  STRATA_SKIP_WITHOUT(impl());
  const MatmulScope matmul(impl(), ComputeDType::kF32);
  const auto ref = load_reference_case(case_name());
  FirstMicroBatch run(ref);
  LocalEngine& engine = run.engine;
  const auto& inputs = run.inputs;
  const auto& targets = run.targets;
  const std::size_t n = inputs.size();
  const float loss = run.loss;
  const double expected_loss = ref.archive.scalar("loss");
  EXPECT_LE(std::abs(loss - expected_loss) / expected_loss, 1e-5) << loss << " vs " << expected_loss;

  // Logits were consumed by backward; run the forward again to read them.
  engine.evaluate(inputs, targets);
  const int v = ref.config.vocab_size, vp = ref.config.padded_vocab_size();
  std::vector<float> logits(n * static_cast<std::size_t>(v));
  for (std::size_t r = 0; r < n; ++r) {
    for (int j = 0; j < v; ++j) logits[r * v + j] = engine.gpt().logits()[r * vp + j];
  }
  EXPECT_LE(max_relative_error(logits, ref.archive.floats("logits")), 1e-4);

  int tensors = 0;
  double worst = 0.0;
  std::string worst_name;
  for (const auto& unit : engine.layout().units()) {
    for (const auto& t : unit.tensors) {
      const double err = max_relative_error(tensor_values(engine.layout(), engine.grads(), t.name),
                                            ref.archive.floats("grad." + t.name));
      EXPECT_LE(err, 1e-4) << "gradient of " << t.name;
      if (err > worst) worst = err, worst_name = t.name;
      ++tensors;
    }
  }
  std::printf("%s, %s: loss error %.2e, worst gradient error %.2e (%s)\n", case_name(),
              cpu::matmul_impl_name(impl()).c_str(),
              std::abs(loss - expected_loss) / expected_loss, worst, worst_name.c_str());
  EXPECT_EQ(tensors, 2 + 12 * ref.config.n_layer + 2);

  // The padded token rows take no part: their gradient is exactly zero.
  const auto& wte = engine.layout().unit(0).tensor("wte");
  for (std::size_t i = static_cast<std::size_t>(v) * ref.config.n_embd; i < wte.range.size(); ++i) {
    ASSERT_EQ(engine.grads().unit(0)[wte.range.begin + i], 0.0f);
  }
}

// A backward that writes its gradients whole (the engines' first write into a buffer nobody
// zeroed) gives bit for bit what adding into zeros gives, whatever the buffer held before: NaN
// would survive any element it failed to write.
TEST_P(TorchReference, GradientsWrittenWholeNeedNoZeroedBuffer) {
  STRATA_SKIP_WITHOUT(impl());
  for (const ComputeDType dtype : {ComputeDType::kF32, ComputeDType::kBF16}) {
    // oneDNN's bf16 products need AVX-512 (the AVX2 stage runs the fp32 half only).
    if (dtype == ComputeDType::kBF16 && impl() == MatmulImpl::kOneDnn && !cpu::onednn_bf16_available()) continue;
    const MatmulScope matmul(impl(), dtype);
    const auto ref = load_reference_case(case_name());
    Gpt gpt(ref.config, ref.batch, ref.seq_len);
    UnitBuffers params(gpt.layout());
    load_units(ref.archive, "init.", gpt.layout(), params);
    const std::size_t n = static_cast<std::size_t>(ref.batch) * ref.seq_len;
    const auto inputs = micro_batch(ref.archive, "inputs", 0, n);
    const auto targets = micro_batch(ref.archive, "targets", 0, n);

    UnitBuffers added(gpt.layout()), written(gpt.layout());
    added.fill_zero();
    gpt.forward(params, inputs, targets);
    gpt.backward(params, added, 0.5f);
    for (std::size_t u = 0; u < gpt.layout().unit_count(); ++u) {
      std::fill(written.unit(u), written.unit(u) + gpt.layout().unit(u).numel, std::nanf(""));
    }
    gpt.forward(params, inputs, targets);
    gpt.backward(params, written, 0.5f, {}, GradWrite::kOverwrite);
    for (std::size_t u = 0; u < gpt.layout().unit_count(); ++u) {
      const std::size_t numel = gpt.layout().unit(u).numel;
      ASSERT_EQ(std::memcmp(added.unit(u), written.unit(u), numel * sizeof(float)), 0)
          << "unit " << gpt.layout().unit(u).name << " under " << (dtype == ComputeDType::kBF16 ? "bf16" : "fp32");
    }
  }
}

TEST_P(TorchReference, FiveAdamWStepsWithAccumulationAndClipping) {
  STRATA_SKIP_WITHOUT(impl());
  const MatmulScope matmul(impl(), ComputeDType::kF32);
  const auto ref = load_reference_case(case_name());
  LocalEngine engine(ref.config, ref.batch, ref.seq_len, 1);
  load_units(ref.archive, "init.", engine.layout(), engine.params());
  const std::size_t n = static_cast<std::size_t>(ref.batch) * ref.seq_len;
  std::vector<std::int32_t> inputs(n), targets(n);
  const std::vector<double> losses = [&] {
    const auto& t = ref.archive.get("step_losses");
    std::vector<double> out(static_cast<std::size_t>(t.numel()));
    std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
    return out;
  }();
  const auto& norms_tensor = ref.archive.get("step_grad_norms");
  std::vector<double> norms(static_cast<std::size_t>(norms_tensor.numel()));
  std::memcpy(norms.data(), norms_tensor.bytes.data(), norms_tensor.bytes.size());
  ASSERT_EQ(static_cast<int>(losses.size()), ref.steps);

  for (int step = 0; step < ref.steps; ++step) {
    const StepOutcome outcome = train_step(
        engine, ref.recipe, step,
        [&](int micro, std::span<std::int32_t> in, std::span<std::int32_t> tgt) {
          const int k = step * ref.grad_accum + micro;
          const auto a = micro_batch(ref.archive, "inputs", k, n);
          const auto b = micro_batch(ref.archive, "targets", k, n);
          std::copy(a.begin(), a.end(), in.begin());
          std::copy(b.begin(), b.end(), tgt.begin());
        },
        inputs, targets);
    const double i = static_cast<double>(step);
    std::printf("step %d: loss %.7f (torch %.7f), grad norm %.6f (torch %.6f)\n", step, outcome.loss, losses[step],
                outcome.grad_norm, norms[step]);
    EXPECT_LE(std::abs(outcome.loss - losses[step]) / losses[step], 1e-5) << "loss of step " << i;
    EXPECT_LE(std::abs(outcome.grad_norm - norms[step]) / norms[step], 1e-4) << "grad norm of step " << i;
    EXPECT_GT(outcome.grad_norm, ref.recipe.grad_clip) << "the case is meant to exercise clipping";
  }
  // Final weights: Adam turns a gradient's rounding noise into a step of about lr wherever the
  // gradient nearly cancels, so weights are compared in units of the largest displacement Adam
  // allows (the sum of the learning rates): no element may differ by 1% of it. The key third of
  // c_attn.bias is skipped: its exact gradient is zero (softmax ignores a per-row shift), so both
  // implementations move it by amplified noise.
  double lr_sum = 0.0, worst = 0.0;
  for (int step = 0; step < ref.steps; ++step) lr_sum += ref.recipe.schedule.at(step);
  const std::size_t c = static_cast<std::size_t>(ref.config.n_embd);
  for (const auto& unit : engine.layout().units()) {
    for (const auto& t : unit.tensors) {
      const auto actual = tensor_values(engine.layout(), engine.params(), t.name);
      const auto expected = ref.archive.floats("final." + t.name);
      ASSERT_EQ(actual.size(), expected.size());
      const bool key_bias = t.name.ends_with("attn.c_attn.bias");
      double max_diff = 0.0;
      for (std::size_t i = 0; i < actual.size(); ++i) {
        if (key_bias && i >= c && i < 2 * c) continue;
        max_diff = std::max(max_diff, std::abs(static_cast<double>(actual[i]) - expected[i]));
      }
      EXPECT_LE(max_diff, 0.01 * lr_sum) << "final weights of " << t.name;
      worst = std::max(worst, max_diff / lr_sum);
    }
  }
  std::printf("%s, %s: worst final-weight difference %.2e of the lr sum\n", case_name(),
              cpu::matmul_impl_name(impl()).c_str(), worst);
}

// bf16 compute against PyTorch with autocast's bf16 rounding written out (tests/reference: autocast
// itself rounds partial sums too on CPUs without AVX-512, 4-8e-2 away on an AMD EPYC). Both round
// each product's inputs to bf16 (relative error 2^-9); the reference also rounds each product's
// output (and its gradient) to bf16, Strata keeps them in fp32, so the two differ by a few bf16 roundings carried through the layers.
// How far apart they land follows from that: on the way to a gradient, both cases (2 layers) pass
// about N = 28 products or activations whose output PyTorch rounds (7 per layer, forward and
// backward), each off by at most 2^-9 relative with an independent sign, so the gradients differ by
// about sqrt(N) 2^-9 = 1.0e-2 of their scale (measured 1.1-1.3e-2 on both cases, every
// implementation and CPU kernels, against autocast on AVX-512; 0.9e-2 against the written-out
// rounding on AVX2), and by N 2^-9 = 5.5e-2 if every rounding went the same way.
// Bounds: 3e-2 of max|ref| for every gradient (three times the independent-sign size), 1e-3
// relative for the loss (one rounded sum of per-token losses; measured 1e-4). These are bf16's
// roundings, not summation order: the 2^-24 reassociation of one CPU's kernels against another's
// shifts them by under 1e-4 of themselves. A wrong stride or transpose in the
// bf16 path is an O(1) error; and the gradients must differ from the fp32 ones by more than 1e-3
// (measured 7e-3 to 1.2e-2), so a mode that silently computed in fp32 fails too.
TEST_P(TorchReference, Bf16ComputeAgainstPyTorchAutocast) {
  STRATA_SKIP_WITHOUT_BF16(impl());
  const MatmulScope matmul(impl(), ComputeDType::kBF16);
  const auto ref = load_reference_case(case_name());
  FirstMicroBatch run(ref);
  LocalEngine& engine = run.engine;
  const float loss = run.loss;
  const double autocast_loss = ref.archive.scalar("bf16.loss");
  EXPECT_LE(std::abs(loss - autocast_loss) / autocast_loss, 1e-3) << loss << " vs autocast " << autocast_loss;

  double worst = 0.0, worst_fp32 = 0.0;
  std::string worst_name;
  for (const auto& unit : engine.layout().units()) {
    for (const auto& t : unit.tensors) {
      const auto actual = tensor_values(engine.layout(), engine.grads(), t.name);
      const double err = max_relative_error(actual, ref.archive.floats("bf16.grad." + t.name));
      EXPECT_LE(err, 3e-2) << "bf16 gradient of " << t.name;
      if (err > worst) worst = err, worst_name = t.name;
      // Against the fp32 gradients: bf16 rounding must show (the mode is not a no-op).
      worst_fp32 = std::max(worst_fp32, max_relative_error(actual, ref.archive.floats("grad." + t.name)));
    }
  }
  EXPECT_GT(worst_fp32, 1e-3) << "bf16 compute gave fp32's gradients: the inputs were not rounded";
  std::printf("%s, %s bf16: loss %.6f (autocast %.6f), worst gradient error %.2e against autocast (%s), %.2e "
              "against fp32\n",
              case_name(), cpu::matmul_impl_name(impl()).c_str(), loss, autocast_loss, worst, worst_name.c_str(),
              worst_fp32);
}

INSTANTIATE_TEST_SUITE_P(Cases, TorchReference,
                         ::testing::Combine(::testing::Values("small-aligned", "odd-shapes"),
                                            ::testing::ValuesIn(testing::every_matmul_impl())),
                         [](const auto& info) {
                           std::string name = std::string(std::get<0>(info.param)) + "_" +
                                              cpu::matmul_impl_name(std::get<1>(info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace strata
