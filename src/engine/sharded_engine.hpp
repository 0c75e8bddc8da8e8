// The sharding engine: each rank holds its shards of every model state as the plan says
// (primary and secondary working weights, fp32 gradient shard, fp32 master + Adam moments), and
// executes the step schedule (schedule/step_schedule.hpp) over a Communicator: gather a unit
// just before its compute, release it after, reduce-scatter its gradient, and at the step
// boundary finish the reduction, update the local slice and gather the new weights back.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "comm/communicator.hpp"
#include "model/gpt.hpp"
#include "schedule/step_schedule.hpp"
#include "train/training_engine.hpp"
#include "zero/scratch_pool.hpp"
#include "zero/shard_plan.hpp"

namespace strata {

struct ShardedEngineOptions {
  ShardPlan plan;
  DType weight_dtype = DType::kF32;  // working weights (and their collectives)
  DType grad_dtype = DType::kF32;    // communicated gradients; accumulation is always fp32
  bool prefetch = true;              // start gathering the next unit before computing this one
  int grad_accum = 1;                // micro-batches per step, for the reported schedule
};

struct MeasuredMemory {
  std::uint64_t weights = 0;
  std::uint64_t secondary = 0;
  std::uint64_t grads = 0;
  std::uint64_t optimizer = 0;
  std::uint64_t scratch_peak = 0;  // gathered units, staging and unit gradients at their peak
};

class ShardedEngine final : public TrainingEngine {
 public:
  // batch: this rank's rows of each micro-batch.
  ShardedEngine(const GptConfig& config, int batch, int seq_len, std::uint64_t seed, Communicator& comm,
                ShardedEngineOptions options);
  ~ShardedEngine() override;

  void zero_grad() override;
  float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                         float loss_scale) override;
  float evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) override;
  double grad_norm() override;
  void optimizer_step(const AdamWHyper& hyper, double lr, int step, float grad_scale) override;
  int data_parallel_rank() const override { return comm_.rank(); }
  int data_parallel_size() const override { return comm_.world_size(); }
  void save_checkpoint(const std::string& path, int completed_steps) override;
  int load_checkpoint(const Checkpoint& checkpoint) override;

  const ModelLayout& layout() const { return gpt_.layout(); }
  const ShardPlan& plan() const { return options_.plan; }
  const ShardedEngineOptions& options() const { return options_; }
  const StepSchedule& schedule() const { return schedule_; }
  Communicator& communicator() { return comm_; }
  MeasuredMemory measured_memory() const;
  // Optimizer steps this engine has run (not counting those a loaded checkpoint had done): what
  // the traffic meter has seen.
  int steps_run() const { return steps_run_; }

  // Weights change at every optimizer step and checkpoint load; each bumps the epoch.
  std::uint64_t epoch() const { return epoch_; }
  std::uint64_t secondary_epoch(int unit) const;
  // This rank's secondary copy of a unit; refused with strata::Error when it is stale (made
  // before the current epoch) or was never made.
  std::span<const unsigned char> secondary_copy(int unit) const;

  // The full fp32 master weights of a unit (unpadded), gathered over the optimizer levels.
  // Collective.
  std::vector<float> gather_master(int unit);

 private:
  struct UnitState;

  void execute(const ScheduleOp& op);
  void start_gather(UnitState& u, int unit, WeightSource source);
  void finish_gather(UnitState& u);
  void keep_secondary(UnitState& u);
  void release(UnitState& u);
  const float* weights(int unit);
  float* grad_target(int unit);
  void compute(const ScheduleOp& op);
  void reduce_scatter_grads(UnitState& u);
  void reduce_replicas(UnitState& u);
  void write_primary_from_master(UnitState& u);
  void gather_full(const AlignedBuffer<float>& slice, std::size_t offset, UnitState& u, float* full);
  void finish_boundary_reduction();

  Communicator& comm_;
  ShardedEngineOptions options_;
  Gpt gpt_;
  StepSchedule schedule_;
  std::vector<ScheduleOp> micro_ops_;
  std::vector<ScheduleOp> eval_ops_;
  std::vector<ScheduleOp> reduce_ops_;     // boundary ops up to the gradient norm
  std::vector<ScheduleOp> update_ops_;     // boundary ops after it
  std::vector<std::unique_ptr<UnitState>> units_;
  ScratchPool pool_;
  std::uint64_t epoch_ = 1;
  int steps_run_ = 0;
  // STRATA_INJECT_FAILURE=rank:step makes that rank throw in the backward of the last block at
  // that optimizer step (0-based): a testing aid for the job-wide abort. -1: off.
  int fail_rank_ = -1, fail_step_ = -1;
  bool reduced_ = false;
  double norm_ = 0.0;

  // Set for the duration of a forward_backward / evaluate / optimizer_step call.
  std::span<const std::int32_t> tokens_, targets_;
  float loss_scale_ = 1.0f;
  float loss_ = 0.0f;
  AdamWHyper hyper_;
  float lr_ = 0.0f, clip_scale_ = 1.0f;
  int step_ = 0;
};

}  // namespace strata
