// Runs a test's products through one matmul implementation and compute dtype, restoring the
// process's settings after; the parameter lists every implementation a gradient test covers.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/cpu/gemm.hpp"
#include "model/cpu/gemm_onednn.hpp"

namespace strata::testing {

class MatmulScope {
 public:
  MatmulScope(cpu::MatmulImpl impl, cpu::ComputeDType dtype) : saved_(cpu::matmul_settings()) {
    cpu::set_matmul({impl, dtype});
  }
  ~MatmulScope() { cpu::set_matmul(saved_); }
  MatmulScope(const MatmulScope&) = delete;
  MatmulScope& operator=(const MatmulScope&) = delete;

 private:
  cpu::MatmulSettings saved_;
};

inline std::vector<cpu::MatmulImpl> every_matmul_impl() {
  return {cpu::MatmulImpl::kReference, cpu::MatmulImpl::kOpenBlas, cpu::MatmulImpl::kOneDnn};
}

// oneDNN is optional at build time: its cases skip, saying so, where the build has none.
#define STRATA_SKIP_WITHOUT(impl)                                                             \
  if ((impl) == ::strata::cpu::MatmulImpl::kOneDnn && !::strata::cpu::onednn_available()) {   \
    GTEST_SKIP() << "this build has no oneDNN (libdnnl-dev was not found at configure time)"; \
  }
// oneDNN's bf16 matmul needs AVX-512: on an AVX2 CPU (or under ONEDNN_MAX_CPU_ISA=AVX2) its bf16
// cases skip, saying so; OpenBLAS's emulation of bf16 inputs still runs them.
#define STRATA_SKIP_WITHOUT_BF16(impl)                                                                      \
  STRATA_SKIP_WITHOUT(impl)                                                                                 \
  if ((impl) == ::strata::cpu::MatmulImpl::kOneDnn && !::strata::cpu::onednn_bf16_available()) {            \
    GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU (" << ::strata::cpu::onednn_description() << ")"; \
  }

}  // namespace strata::testing
