// Serves (inputs, targets) micro-batches from a token range: global batch k is the k-th run of
// batch * seq_len consecutive tokens (wrapping after an epoch); a data-parallel rank asks for
// its rows of the same global batch, so any rank count sees the same data as one process.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/range.hpp"

namespace strata {

class BatchLoader {
 public:
  // Throws when the range holds fewer than batch * seq_len + 1 tokens.
  BatchLoader(std::span<const std::int32_t> tokens, std::string source, int batch, int seq_len);

  std::uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  int batch() const { return batch_; }
  int seq_len() const { return seq_len_; }

  // Rows [row_begin, row_begin + row_count) of global batch `index`; each span holds
  // row_count * seq_len tokens.
  void fill(std::uint64_t index, int row_begin, int row_count, std::span<std::int32_t> inputs,
            std::span<std::int32_t> targets) const;

 private:
  std::span<const std::int32_t> tokens_;
  int batch_;
  int seq_len_;
  std::uint64_t batches_per_epoch_;
};

// Splits n tokens into a training range and a held-out validation tail of val_fraction * n.
struct TrainValSplit {
  Range train;
  Range val;
};
TrainValSplit split_train_val(std::size_t n, double val_fraction);

}  // namespace strata
