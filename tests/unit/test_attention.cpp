// The fused causal attention (model/cpu/flash_attention) against the plain attention it replaces
// (model/cpu/attention, which stores the T x T probabilities) and against PyTorch's
// autograd in float64 (cases written by tests/reference/gpt_reference.py), for
// every matmul implementation. Shapes: T = 1, T not a multiple of the 256-query tile and past it
// (T = 300: a second tile whose diagonal chunks skip the rows before their first key), T past the
// 64-key chunk (so the online softmax rescales), heads of size 16 to 128, batch 1 and 3.
// Metric: max|a-b| / max|ref| per tensor. fp32: 1e-5 against the plain kernel (the same sums in
// another order; a sum of k <= 300 terms moves by about sqrt(k) 2^-24 of its scale, ~1e-6) and
// against float64. bf16: the fused kernel's error against fp32 must be no worse than the plain
// kernel's own bf16 error (both round the same inputs; only where P is rounded differs) plus a
// margin, and below 2% (bf16 keeps 8 bits: 2^-8 = 0.4% per rounding).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/rng.hpp"
#include "core/tensor_archive.hpp"
#include "model/cpu/attention.hpp"
#include "model/cpu/flash_attention.hpp"
#include "support/matmul_scope.hpp"
#include "support/reference_case.hpp"

namespace strata {
namespace {

using cpu::ComputeDType;
using cpu::MatmulImpl;
using testing::max_relative_error;
using testing::MatmulScope;

struct Shape {
  int batch, seq_len, channels, heads;
};

struct Result {
  std::vector<float> out, dqkv;
};

std::size_t tokens(const Shape& s) { return static_cast<std::size_t>(s.batch) * s.seq_len; }

Result run_fused(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout) {
  Result r{std::vector<float>(tokens(s) * s.channels), std::vector<float>(tokens(s) * 3 * s.channels)};
  std::vector<float> lse(tokens(s) * s.heads);
  cpu::flash_attention_forward(r.out.data(), lse.data(), qkv.data(), s.batch, s.seq_len, s.channels, s.heads);
  cpu::flash_attention_backward(r.dqkv.data(), dout.data(), r.out.data(), qkv.data(), lse.data(), s.batch, s.seq_len,
                                s.channels, s.heads);
  return r;
}

Result run_plain(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& dout) {
  Result r{std::vector<float>(tokens(s) * s.channels), std::vector<float>(tokens(s) * 3 * s.channels)};
  std::vector<float> att(static_cast<std::size_t>(s.batch) * s.heads * s.seq_len * s.seq_len);
  cpu::attention_forward(r.out.data(), att.data(), qkv.data(), s.batch, s.seq_len, s.channels, s.heads);
  cpu::attention_backward(r.dqkv.data(), dout.data(), qkv.data(), att.data(), s.batch, s.seq_len, s.channels,
                          s.heads);
  return r;
}

std::vector<float> normal_values(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

class FusedAttention : public ::testing::TestWithParam<std::tuple<Shape, MatmulImpl>> {
 protected:
  Shape shape() const { return std::get<0>(GetParam()); }
  MatmulImpl impl() const { return std::get<1>(GetParam()); }
};

TEST_P(FusedAttention, MatchesThePlainAttentionInFp32AndBf16) {
  const Shape s = shape();
  const auto qkv = normal_values(tokens(s) * 3 * s.channels, 7 + s.seq_len);
  const auto dout = normal_values(tokens(s) * s.channels, 11 + s.seq_len);
  Result plain32;
  {
    const MatmulScope scope(impl(), ComputeDType::kF32);
    plain32 = run_plain(s, qkv, dout);
    const Result fused32 = run_fused(s, qkv, dout);
    EXPECT_LT(max_relative_error(fused32.out, plain32.out), 1e-5);
    EXPECT_LT(max_relative_error(fused32.dqkv, plain32.dqkv), 1e-5);
  }
  if (impl() == MatmulImpl::kOneDnn && !cpu::onednn_bf16_available()) return;
  const MatmulScope scope(impl(), ComputeDType::kBF16);
  const Result plain16 = run_plain(s, qkv, dout);
  const Result fused16 = run_fused(s, qkv, dout);
  const double out_plain = max_relative_error(plain16.out, plain32.out);
  const double out_fused = max_relative_error(fused16.out, plain32.out);
  const double grad_plain = max_relative_error(plain16.dqkv, plain32.dqkv);
  const double grad_fused = max_relative_error(fused16.dqkv, plain32.dqkv);
  EXPECT_LE(out_fused, 1.5 * out_plain + 2e-3) << "plain bf16 " << out_plain;
  EXPECT_LE(grad_fused, 1.5 * grad_plain + 2e-3) << "plain bf16 " << grad_plain;
  EXPECT_LT(out_fused, 2e-2);
  EXPECT_LT(grad_fused, 2e-2);
}

TEST_P(FusedAttention, MatchesPyTorchAutogradInFloat64) {
  const Shape s = shape();
  const std::string name = fmt::format("attention-{}x{}x{}x{}", s.batch, s.seq_len, s.channels, s.heads);
  const TensorArchive archive = TensorArchive::load(std::string(STRATA_REFERENCE_DIR) + "/" + name + ".stt");
  const MatmulScope scope(impl(), ComputeDType::kF32);
  const Result fused = run_fused(s, archive.floats("qkv"), archive.floats("dout"));
  EXPECT_LT(max_relative_error(fused.out, archive.floats("out")), 1e-5);
  EXPECT_LT(max_relative_error(fused.dqkv, archive.floats("dqkv")), 1e-5);
}

// The same shapes as ATTENTION_CASES in tests/reference/gpt_reference.py.
INSTANTIATE_TEST_SUITE_P(Shapes, FusedAttention,
                         ::testing::Combine(::testing::Values(Shape{1, 1, 64, 4}, Shape{2, 77, 128, 2},
                                                              Shape{1, 300, 256, 2}, Shape{3, 130, 96, 3}),
                                            ::testing::ValuesIn(testing::every_matmul_impl())),
                         [](const auto& info) {
                           const Shape s = std::get<0>(info.param);
                           return fmt::format("b{}_t{}_hs{}_{}", s.batch, s.seq_len, s.channels / s.heads,
                                              cpu::matmul_impl_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace strata
