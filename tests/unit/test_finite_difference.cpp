// The backward pass against central finite differences of an independent double-precision
// forward (tests/support/naive_gpt_double.cpp), on the tiny config.
//
// For every tensor, along random unit directions d restricted to it, compare g.d (g: Strata's
// fp32 gradient) with (L(w + h d) - L(w - h d)) / 2h in double, h = 1e-4. The difference
// quotient is accurate to about h^2 |L'''| + eps_double |L| / h ~ 1e-8, so what is measured is the
// fp32 gradient's own error, about 1e-6 of |g| (see test_gpt_vs_torch). The bound,
// |g.d - fd| <= 1e-4 |g| |d|, leaves two orders of margin yet fails on any real mistake (a
// missing term is O(|g|)). Run with each matmul implementation.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.hpp"
#include "support/matmul_scope.hpp"
#include "support/naive_gpt_double.hpp"
#include "engine/local_engine.hpp"

namespace strata {
namespace {

using testing::naive_gpt_loss;

class FiniteDifference : public ::testing::TestWithParam<cpu::MatmulImpl> {};

TEST_P(FiniteDifference, TinyConfigEveryTensorAlongRandomDirections) {
  STRATA_SKIP_WITHOUT(GetParam());
  const testing::MatmulScope matmul(GetParam(), cpu::ComputeDType::kF32);
  const GptConfig config = GptConfig::preset("tiny");
  const int batch = 2, seq_len = 12;
  LocalEngine engine(config, batch, seq_len, 7);
  const ModelLayout& layout = engine.layout();

  // Perturb norms and biases away from 1 and 0 so no gradient is structurally special.
  Rng rng(99);
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const auto& t : layout.unit(u).tensors) {
      if (t.shape.size() != 1) continue;
      for (std::size_t i = t.range.begin; i < t.range.end; ++i) {
        engine.params().unit(u)[i] += static_cast<float>(0.1 * rng.normal());
      }
    }
  }
  std::vector<std::int32_t> tokens(batch * seq_len), targets(batch * seq_len);
  for (auto& x : tokens) x = static_cast<std::int32_t>(rng.below(config.vocab_size));
  for (auto& x : targets) x = static_cast<std::int32_t>(rng.below(config.vocab_size));

  engine.zero_grad();
  const float loss32 = engine.forward_backward(tokens, targets, 1.0f);

  std::vector<std::vector<double>> w(layout.unit_count());
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    w[u].assign(engine.params().unit(u), engine.params().unit(u) + layout.unit(u).numel);
  }
  const double loss64 = naive_gpt_loss(layout, w, tokens, targets, batch, seq_len);
  EXPECT_NEAR(loss32, loss64, 1e-5 * loss64) << "fp32 forward against the double reference";

  const double h = 1e-4;
  double worst = 0.0;
  for (std::size_t u = 0; u < layout.unit_count(); ++u) {
    for (const auto& t : layout.unit(u).tensors) {
      for (int trial = 0; trial < 3; ++trial) {
        std::vector<double> d(t.range.size());
        double norm = 0;
        for (auto& x : d) {
          x = rng.normal();
          norm += x * x;
        }
        norm = std::sqrt(norm);
        double g_dot_d = 0, g_norm = 0;
        for (std::size_t i = 0; i < d.size(); ++i) {
          d[i] /= norm;
          const double g = engine.grads().unit(u)[t.range.begin + i];
          g_dot_d += g * d[i];
          g_norm += g * g;
        }
        g_norm = std::sqrt(g_norm);
        auto shifted = [&](double step) {
          auto p = w;
          for (std::size_t i = 0; i < d.size(); ++i) p[u][t.range.begin + i] += step * d[i];
          return naive_gpt_loss(layout, p, tokens, targets, batch, seq_len);
        };
        const double fd = (shifted(h) - shifted(-h)) / (2 * h);
        const bool padded_rows_only = g_norm == 0.0;
        if (padded_rows_only) continue;
        const double err = std::abs(g_dot_d - fd) / g_norm;
        worst = std::max(worst, err);
        EXPECT_LE(err, 1e-4) << t.name << " trial " << trial << ": g.d " << g_dot_d << " fd " << fd;
      }
    }
  }
  std::printf("%s: worst |g.d - fd| / |g| = %.2e\n", cpu::matmul_impl_name(GetParam()).c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Matmul, FiniteDifference, ::testing::ValuesIn(testing::every_matmul_impl()),
                         [](const auto& info) { return cpu::matmul_impl_name(info.param); });

}  // namespace
}  // namespace strata
