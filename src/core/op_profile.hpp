// An opt-in wall-clock profile by operation kind, for the benchmark's per-operation line. Scopes
// are opened only from serial code (never inside an OpenMP region); when profiling is off a scope
// costs one branch.
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
  void reset() { seconds_.fill(0.0); }
  void add(Op op, double seconds) { seconds_[static_cast<std::size_t>(op)] += seconds; }
  double seconds(Op op) const { return seconds_[static_cast<std::size_t>(op)]; }

 private:
  bool enabled_ = false;
  std::array<double, static_cast<std::size_t>(Op::kCount)> seconds_{};
};

class OpScope {
 public:
  explicit OpScope(Op op) : op_(op), active_(OpProfile::global().enabled()) {
    if (active_) start_ = std::chrono::steady_clock::now();
  }
  ~OpScope() {
    if (active_) {
      OpProfile::global().add(op_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  Op op_;
  bool active_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace strata
