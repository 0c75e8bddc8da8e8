// The training loop: data, learning-rate schedule, gradient accumulation, clipping, AdamW,
// validation, step lines on the console, JSON-lines metrics, checkpoints, and the engine's report.
// It is handed the engine (train/engine_setup.hpp builds it). Under MPI every rank runs it; rank 0
// alone prints and writes metrics.
#pragma once

#include <memory>
#include <ostream>
#include <vector>

#include <string>

#include "engine/checkpoint_format.hpp"
#include "train/checkpoint.hpp"
#include "engine/training_engine.hpp"
#include "train/batch_loader.hpp"
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
  // Local work only (settings, data loading, reading --resume), so that a failure here can be
  // agreed on by all ranks before any collective call.
  explicit Trainer(const TrainConfig& config);
  ~Trainer();
  // Collective under MPI: applies --resume to the engine, then trains (or, with --report, prints
  // the engine's report and stops). `notes` are printed after the engine line.
  TrainSummary run(TrainingEngine& engine, std::ostream& out, const std::vector<std::string>& notes = {});

  int rank() const { return rank_; }

 private:
  double validation_loss(TrainingEngine& engine);
  void save(TrainingEngine& engine, int completed_steps, std::ostream& out);
  bool agree(bool flag);

  TrainConfig config_;
  GptConfig model_;
  int seq_len_;
  int rank_ = 0;
  int world_ = 1;
  TokenData train_data_;
  TokenData val_data_;
  std::unique_ptr<BatchLoader> train_loader_;
  std::unique_ptr<BatchLoader> val_loader_;
  ResumeChoice resume_;  // chosen during set-up, loaded by run()
  int start_step_ = 0;
  CheckpointHistory history_;
};

}  // namespace strata
