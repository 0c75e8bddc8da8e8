// LayerNorm kernels, parallel over rows; weight gradients go through per-thread partial sums so
// rows never race on them.
#include "model/cpu/layernorm.hpp"

#include "core/op_profile.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace strata::cpu {

namespace {
constexpr float kEps = 1e-5f;
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int rows, int channels) {
  const OpScope scope(Op::kLayerNorm, 8.0 * rows * channels);
  const int c = channels;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* x = inp + static_cast<std::size_t>(r) * c;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < c; ++i) sum += x[i];
    const float m = sum / static_cast<float>(c);
    float var = 0.0f;
#pragma omp simd reduction(+ : var)
    for (int i = 0; i < c; ++i) {
      const float d = x[i] - m;
      var += d * d;
    }
    const float rs = 1.0f / std::sqrt(var / static_cast<float>(c) + kEps);
    float* o = out + static_cast<std::size_t>(r) * c;
#pragma omp simd
    for (int i = 0; i < c; ++i) o[i] = (x[i] - m) * rs * weight[i] + bias[i];
    mean[r] = m;
    rstd[r] = rs;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int rows, int channels,
                        GradWrite write) {
  // dout and inp read, dinp read and written (the residual stream's gradient adds into it).
  const OpScope scope(Op::kLayerNorm, 16.0 * rows * channels);
  const int c = channels;
  const int max_threads = omp_get_max_threads();
  std::vector<float> partial(static_cast<std::size_t>(max_threads) * 2 * c, 0.0f);
  int used_threads = 1;
#pragma omp parallel
  {
#pragma omp single
    used_threads = omp_get_num_threads();
    float* pdw = partial.data() + static_cast<std::size_t>(omp_get_thread_num()) * 2 * c;
    float* pdb = pdw + c;
#pragma omp for schedule(static)
    for (int r = 0; r < rows; ++r) {
      const float* x = inp + static_cast<std::size_t>(r) * c;
      const float* dy = dout + static_cast<std::size_t>(r) * c;
      float* dx = dinp + static_cast<std::size_t>(r) * c;
      const float m = mean[r];
      const float rs = rstd[r];
      float sum_dn = 0.0f;
      float sum_dn_norm = 0.0f;
#pragma omp simd reduction(+ : sum_dn, sum_dn_norm)
      for (int i = 0; i < c; ++i) {
        const float norm = (x[i] - m) * rs;
        const float dn = dy[i] * weight[i];
        sum_dn += dn;
        sum_dn_norm += dn * norm;
        pdw[i] += dy[i] * norm;
        pdb[i] += dy[i];
      }
      const float mean_dn = sum_dn / static_cast<float>(c);
      const float mean_dn_norm = sum_dn_norm / static_cast<float>(c);
#pragma omp simd
      for (int i = 0; i < c; ++i) {
        const float norm = (x[i] - m) * rs;
        const float dn = dy[i] * weight[i];
        dx[i] += rs * (dn - mean_dn - norm * mean_dn_norm);
      }
    }
  }
  if (write == GradWrite::kOverwrite) {
    std::fill(dweight, dweight + c, 0.0f);
    std::fill(dbias, dbias + c, 0.0f);
  }
  for (int t = 0; t < used_threads; ++t) {
    const float* pdw = partial.data() + static_cast<std::size_t>(t) * 2 * c;
    const float* pdb = pdw + c;
    for (int i = 0; i < c; ++i) {
      dweight[i] += pdw[i];
      dbias[i] += pdb[i];
    }
  }
}

}  // namespace strata::cpu
