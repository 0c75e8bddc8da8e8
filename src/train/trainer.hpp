// The training loop: data, learning-rate schedule, gradient accumulation, clipping, AdamW,
// validation, step lines on the console, JSON-lines metrics, checkpoints, and the engine's report.
// It is handed the engine and a communicator (train/engine_setup.hpp builds both) and never
// calls MPI itself. Every rank runs it; rank 0 alone prints and writes metrics.
#pragma once

#include <memory>
#include <ostream>
#include <vector>

#include <string>

#include "comm/communicator.hpp"
#include "engine/checkpoint_format.hpp"
#include "train/checkpoint.hpp"
#include "train/pretrained_weights.hpp"
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

class MetricsLog;
struct StepOutcome;

class Trainer {
 public:
  // Local work only (settings, data loading, reading --resume), so that a failure here can be
  // agreed on by all ranks before any collective call. rank of world: this process's place.
  Trainer(const TrainConfig& config, int rank = 0, int world = 1);
  ~Trainer();
  // Collective: applies --resume to the engine, then trains (or, with --report, prints the
  // engine's report and stops). `notes` are printed after the engine line. The engine and the
  // communicator must be this rank's of this job.
  TrainSummary run(TrainingEngine& engine, Communicator& comm, std::ostream& out,
                   const std::vector<std::string>& notes = {});

  int rank() const { return rank_; }

 private:
  void resume(TrainingEngine& engine, Communicator& comm, std::ostream& out);
  void print_header(TrainingEngine& engine, std::ostream& out, const std::vector<std::string>& notes) const;
  void print_start(std::ostream& out) const;
  TrainSummary train_steps(TrainingEngine& engine, Communicator& comm, std::ostream& out, MetricsLog& metrics);
  void print_step(const StepRecord& record, std::ostream& out);
  void log_step(const StepRecord& record, MetricsLog& metrics, std::ostream& out);  // metrics line and console
  ValRecord validate(TrainingEngine& engine, int step, MetricsLog& metrics, std::ostream& out);
  // Prints a sample of the model (all ranks gather the weights; rank 0 generates and prints).
  void print_sample(TrainingEngine& engine, int step, std::ostream& out);
  [[noreturn]] void stop_on_nonfinite(const StepOutcome& outcome, int step) const;
  double validation_loss(TrainingEngine& engine);
  void save(TrainingEngine& engine, Communicator& comm, int completed_steps, std::ostream& out);
  void finish(TrainingEngine& engine, Communicator& comm, std::ostream& out, MetricsLog& metrics);
  // Collective: the memory model's peak beside the largest measured peak over the ranks.
  void report_memory(TrainingEngine& engine, Communicator& comm, std::ostream& out, MetricsLog& metrics) const;
  std::size_t tokens_per_step() const;

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
  std::unique_ptr<PretrainedWeights> init_;  // --init-from, opened and checked during set-up
  int start_step_ = 0;
  CheckpointHistory history_;
  std::vector<double> step_ms_;  // each step's milliseconds, this invocation
};

}  // namespace strata
