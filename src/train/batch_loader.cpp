// Batch loader and train/validation split.
#include "train/batch_loader.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace strata {

BatchLoader::BatchLoader(std::span<const std::int32_t> tokens, std::string source, int batch, int seq_len)
    : tokens_(tokens), batch_(batch), seq_len_(seq_len) {
  const std::size_t per_batch = static_cast<std::size_t>(batch) * seq_len;
  STRATA_REQUIRE(tokens.size() >= per_batch + 1,
                 "{}: {} tokens are too few for one batch of {} x {} (needs at least {})", source, tokens.size(),
                 batch, seq_len, per_batch + 1);
  batches_per_epoch_ = (tokens.size() - 1) / per_batch;
}

void BatchLoader::fill(std::uint64_t index, int row_begin, int row_count, std::span<std::int32_t> inputs,
                       std::span<std::int32_t> targets) const {
  const std::size_t t = static_cast<std::size_t>(seq_len_);
  STRATA_REQUIRE(row_begin >= 0 && row_count >= 0 && row_begin + row_count <= batch_,
                 "rows [{}, {}) are outside a batch of {}", row_begin, row_begin + row_count, batch_);
  STRATA_REQUIRE(inputs.size() == row_count * t && targets.size() == row_count * t,
                 "batch buffers hold {} and {} tokens, expected {}", inputs.size(), targets.size(), row_count * t);
  const std::size_t start = (index % batches_per_epoch_) * static_cast<std::size_t>(batch_) * t;
  for (int r = 0; r < row_count; ++r) {
    const std::size_t from = start + static_cast<std::size_t>(row_begin + r) * t;
    std::copy_n(tokens_.begin() + static_cast<std::ptrdiff_t>(from), t, inputs.begin() + static_cast<std::ptrdiff_t>(r * t));
    std::copy_n(tokens_.begin() + static_cast<std::ptrdiff_t>(from + 1), t,
                targets.begin() + static_cast<std::ptrdiff_t>(r * t));
  }
}

TrainValSplit split_train_val(std::size_t n, double val_fraction) {
  const auto val = static_cast<std::size_t>(std::floor(static_cast<double>(n) * std::clamp(val_fraction, 0.0, 1.0)));
  return {Range{0, n - val}, Range{n - val, n}};
}

}  // namespace strata
