// The naive double-precision GPT-2 forward pass.
#include "support/naive_gpt_double.hpp"

#include <cmath>
#include <limits>

namespace strata::testing {

namespace {

using Matrix = std::vector<double>;  // row-major, rows x cols

const double* tensor(const ModelLayout& layout, const std::vector<std::vector<double>>& params, std::size_t unit,
                     std::size_t index) {
  return params[unit].data() + layout.unit(unit).tensors[index].range.begin;
}

Matrix layernorm(const Matrix& x, int rows, int c, const double* w, const double* b) {
  Matrix out(x.size());
  for (int r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < c; ++i) mean += x[r * c + i];
    mean /= c;
    for (int i = 0; i < c; ++i) var += (x[r * c + i] - mean) * (x[r * c + i] - mean);
    var /= c;
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (int i = 0; i < c; ++i) out[r * c + i] = (x[r * c + i] - mean) * rstd * w[i] + b[i];
  }
  return out;
}

// out = x W^T + b, W (oc x c)
Matrix linear(const Matrix& x, int rows, int c, int oc, const double* w, const double* b) {
  Matrix out(static_cast<std::size_t>(rows) * oc);
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < oc; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int i = 0; i < c; ++i) acc += x[r * c + i] * w[o * c + i];
      out[r * oc + o] = acc;
    }
  }
  return out;
}

}  // namespace

double naive_gpt_loss(const ModelLayout& layout, const std::vector<std::vector<double>>& params,
                      std::span<const std::int32_t> tokens, std::span<const std::int32_t> targets, int batch,
                      int seq_len) {
  const GptConfig& cfg = layout.config();
  const int c = cfg.n_embd, nh = cfg.n_head, hs = c / nh, t_len = seq_len, rows = batch * seq_len;
  const double* wte = tensor(layout, params, 0, 0);
  const double* wpe = tensor(layout, params, 0, 1);

  Matrix x(static_cast<std::size_t>(rows) * c);
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < c; ++i) x[r * c + i] = wte[tokens[r] * c + i] + wpe[(r % t_len) * c + i];
  }
  for (int l = 0; l < cfg.n_layer; ++l) {
    const std::size_t u = layout.block_unit(l);
    auto p = [&](std::size_t i) { return tensor(layout, params, u, i); };
    const Matrix ln1 = layernorm(x, rows, c, p(0), p(1));
    const Matrix qkv = linear(ln1, rows, c, 3 * c, p(2), p(3));
    Matrix y(static_cast<std::size_t>(rows) * c, 0.0);
    for (int b = 0; b < batch; ++b) {
      for (int h = 0; h < nh; ++h) {
        for (int i = 0; i < t_len; ++i) {
          const double* q = &qkv[(b * t_len + i) * 3 * c + h * hs];
          std::vector<double> score(i + 1);
          double max = -std::numeric_limits<double>::infinity();
          for (int j = 0; j <= i; ++j) {
            const double* k = &qkv[(b * t_len + j) * 3 * c + c + h * hs];
            double dot = 0;
            for (int d = 0; d < hs; ++d) dot += q[d] * k[d];
            score[j] = dot / std::sqrt(static_cast<double>(hs));
            max = std::max(max, score[j]);
          }
          double sum = 0;
          for (int j = 0; j <= i; ++j) sum += (score[j] = std::exp(score[j] - max));
          for (int j = 0; j <= i; ++j) {
            const double* v = &qkv[(b * t_len + j) * 3 * c + 2 * c + h * hs];
            for (int d = 0; d < hs; ++d) y[(b * t_len + i) * c + h * hs + d] += score[j] / sum * v[d];
          }
        }
      }
    }
    const Matrix attn = linear(y, rows, c, c, p(4), p(5));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += attn[i];
    const Matrix ln2 = layernorm(x, rows, c, p(6), p(7));
    Matrix fc = linear(ln2, rows, c, 4 * c, p(8), p(9));
    for (double& z : fc) z = 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)));
    const Matrix mlp = linear(fc, rows, 4 * c, c, p(10), p(11));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += mlp[i];
  }
  const std::size_t f = layout.final_norm_unit();
  const Matrix lnf = layernorm(x, rows, c, tensor(layout, params, f, 0), tensor(layout, params, f, 1));
  const Matrix logits = linear(lnf, rows, c, cfg.vocab_size, wte, nullptr);
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    const double* z = &logits[static_cast<std::size_t>(r) * cfg.vocab_size];
    double max = -std::numeric_limits<double>::infinity();
    for (int v = 0; v < cfg.vocab_size; ++v) max = std::max(max, z[v]);
    double sum = 0;
    for (int v = 0; v < cfg.vocab_size; ++v) sum += std::exp(z[v] - max);
    total += max + std::log(sum) - z[targets[r]];
  }
  return total / rows;
}

}  // namespace strata::testing
