// An opt-in wall-clock profile by operation kind, for the benchmark's per-operation rows: time, the
// bytes each call moves through memory (its operands read and results written once) and its FLOPs,
// so a row can be set against the copy bandwidth or the kernel rate. Scopes are opened only from
// serial code (never inside an OpenMP region); when profiling is off a scope costs one branch.
#pragma once

#include <array>
#include <chrono>
#include <string_view>

namespace strata {

enum class Op {
  kMatmulForward, kMatmulBackward, kAttentionForward, kAttentionBackward, kLayerNorm, kGelu, kCrossEntropy,
  kEmbedding, kResidual, kOptimizer, kGradNorm, kWorkingCopy, kCount
};

constexpr std::array<std::string_view, static_cast<std::size_t>(Op::kCount)> kOpNames = {
    "matmul_fwd", "matmul_bwd", "attn_fwd", "attn_bwd", "layernorm", "gelu", "cross_entropy",
    "embedding", "residual", "adamw", "grad_norm", "bf16_copy"};

class OpProfile {
 public:
  static OpProfile& global();
  void enable(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  void reset() {
    seconds_.fill(0.0);
    bytes_.fill(0.0);
    flops_.fill(0.0);
  }
  void add(Op op, double seconds, double bytes, double flops) {
    const auto i = static_cast<std::size_t>(op);
    seconds_[i] += seconds;
    bytes_[i] += bytes;
    flops_[i] += flops;
  }
  double seconds(Op op) const { return seconds_[static_cast<std::size_t>(op)]; }
  double bytes(Op op) const { return bytes_[static_cast<std::size_t>(op)]; }
  double flops(Op op) const { return flops_[static_cast<std::size_t>(op)]; }

 private:
  using PerOp = std::array<double, static_cast<std::size_t>(Op::kCount)>;
  bool enabled_ = false;
  PerOp seconds_{}, bytes_{}, flops_{};
};

class OpScope {
 public:
  // bytes: what the call must move through memory at the least; flops: its arithmetic (products).
  explicit OpScope(Op op, double bytes = 0.0, double flops = 0.0)
      : op_(op), active_(OpProfile::global().enabled()), bytes_(bytes), flops_(flops) {
    if (active_) start_ = std::chrono::steady_clock::now();
  }
  ~OpScope() {
    if (active_) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      OpProfile::global().add(op_, seconds, bytes_, flops_);
    }
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  Op op_;
  bool active_;
  double bytes_, flops_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace strata
