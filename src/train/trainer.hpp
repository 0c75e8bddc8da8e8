// The training loop: data, schedule, gradient accumulation, clipping, AdamW, validation,
// step lines on the console, JSON-lines metrics, checkpoints, and the plan report of a sharded
// run. Under MPI every rank runs it; rank 0 alone prints and writes metrics.
#pragma once

#include <memory>
#include <ostream>
#include <vector>

#include "comm/communicator.hpp"
#include "train/batch_loader.hpp"
#include "train/checkpoint.hpp"
#include "train/token_file.hpp"
#include "train/train_config.hpp"
#include "train/training_engine.hpp"
#include "zero/shard_plan.hpp"

namespace strata {

class ShardedEngine;

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
  // Local work only (settings, topology and plan checks, data loading), so that a failure here
  // can be agreed on by all ranks before any collective call.
  explicit Trainer(const TrainConfig& config);
  ~Trainer();
  // Collective under MPI: communicators, the engine, and --resume.
  void connect();
  TrainSummary run(std::ostream& out);

  TrainingEngine& engine() { return *engine_; }
  ShardedEngine* sharded_engine() { return sharded_; }
  int rank() const { return rank_; }

 private:
  double validation_loss();
  void save(int completed_steps, std::ostream& out);
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
  std::unique_ptr<Topology> topology_;  // set when the run is sharded
  ShardPlan plan_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<TrainingEngine> engine_;
  ShardedEngine* sharded_ = nullptr;
  std::unique_ptr<Checkpoint> resume_;  // read during set-up, applied by connect()
  int start_step_ = 0;
};

}  // namespace strata
