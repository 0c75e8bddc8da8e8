// The training loop: data, schedule, gradient accumulation, clipping, AdamW, validation,
// step lines on the console, JSON-lines metrics and checkpoints.
#pragma once

#include <memory>
#include <ostream>
#include <vector>

#include "train/batch_loader.hpp"
#include "train/local_engine.hpp"
#include "train/token_file.hpp"
#include "train/train_config.hpp"

namespace strata {

struct StepRecord {
  int step = 0;  // 1-based
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  double ms = 0.0;
  double tokens_per_second = 0.0;
  double tflops = 0.0;
};

struct ValRecord {
  int step = 0;
  double loss = 0.0;
};

struct TrainSummary {
  std::vector<StepRecord> steps;
  std::vector<ValRecord> vals;
  bool interrupted = false;
};

class Trainer {
 public:
  explicit Trainer(const TrainConfig& config);
  TrainSummary run(std::ostream& out);

  LocalEngine& engine() { return *engine_; }

 private:
  double validation_loss();
  void save(int completed_steps, std::ostream& out);

  TrainConfig config_;
  GptConfig model_;
  int seq_len_;
  TokenData train_data_;
  TokenData val_data_;
  std::unique_ptr<BatchLoader> train_loader_;
  std::unique_ptr<BatchLoader> val_loader_;
  std::unique_ptr<LocalEngine> engine_;
  int start_step_ = 0;
};

}  // namespace strata
