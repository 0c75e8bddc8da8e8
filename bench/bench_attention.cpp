// Times one attention call at a shape: fused (model/cpu/flash_attention) and plain (model/cpu/attention).
#include "bench/bench_attention.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "core/median.hpp"
#include "core/rng.hpp"
#include "core/stopwatch.hpp"
#include "model/cpu/attention.hpp"
#include "model/cpu/flash_attention.hpp"
#include "model/cpu/gemm.hpp"

namespace strata {

namespace {

template <class Forward, class Backward>
nlohmann::json time_kernel(const char* name, const AttentionBenchSettings& s, Forward forward, Backward backward) {
  std::vector<double> fwd, bwd;
  for (int r = 0; r <= s.repeats; ++r) {  // the first call (primitive creation, first touch) unmeasured
    Stopwatch watch;
    forward();
    const double f = watch.milliseconds();
    watch.restart();
    backward();
    if (r > 0) {
      fwd.push_back(f);
      bwd.push_back(watch.milliseconds());
    }
  }
  const int hs = s.channels / s.heads;
  // Two products of B*NH*hs*T(T+1)/2 multiply-adds forward; five backward.
  const double product = 2.0 * s.batch * s.heads * hs * (static_cast<double>(s.seq_len) * (s.seq_len + 1) / 2);
  const double fwd_ms = median(fwd), bwd_ms = median(bwd);
  return {{"bench", "attention"},       {"kernel", name},
          {"batch", s.batch},           {"seq_len", s.seq_len},
          {"channels", s.channels},     {"heads", s.heads},
          {"compute_dtype", cpu::compute_dtype_name(cpu::matmul_settings().dtype)},
          {"forward_ms", fwd_ms},       {"backward_ms", bwd_ms},
          {"forward_gflops", 2 * product / fwd_ms * 1e-6}, {"backward_gflops", 5 * product / bwd_ms * 1e-6}};
}

}  // namespace

void bench_attention(const AttentionBenchSettings& s) {
  const std::size_t bt = static_cast<std::size_t>(s.batch) * s.seq_len;
  Rng rng(1);
  std::vector<float> qkv(bt * 3 * s.channels), dout(bt * s.channels), out(bt * s.channels), dqkv(qkv.size());
  for (float& x : qkv) x = static_cast<float>(rng.normal());
  for (float& x : dout) x = static_cast<float>(rng.normal());
  std::vector<float> lse(bt * s.heads);
  fmt::print("{}\n", time_kernel(
                         "fused", s,
                         [&] {
                           cpu::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.batch, s.seq_len,
                                                        s.channels, s.heads);
                         },
                         [&] {
                           cpu::flash_attention_backward(dqkv.data(), dout.data(), out.data(), qkv.data(), lse.data(),
                                                         s.batch, s.seq_len, s.channels, s.heads);
                         })
                         .dump());
  if (!s.plain) return;
  std::vector<float> att(static_cast<std::size_t>(s.batch) * s.heads * s.seq_len * s.seq_len);
  fmt::print("{}\n", time_kernel(
                         "plain", s,
                         [&] {
                           cpu::attention_forward(out.data(), att.data(), qkv.data(), s.batch, s.seq_len, s.channels,
                                                  s.heads);
                         },
                         [&] {
                           cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), att.data(), s.batch,
                                                   s.seq_len, s.channels, s.heads);
                         })
                         .dump());
}

}  // namespace strata
