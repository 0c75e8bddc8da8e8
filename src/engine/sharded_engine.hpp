// The sharding engine: each rank holds its shards of every model state as the plan says, and
// executes the step schedule (schedule/step_schedule.hpp) op by op, issuing exactly the
// collective each op carries. It is one executor of the schedule; the counting executor is
// another, and the report shows the two side by side.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/comm_thread.hpp"
#include "comm/communicator.hpp"
#include "engine/scratch_pool.hpp"
#include "engine/training_engine.hpp"
#include "engine/unit_shards.hpp"
#include "model/gpt.hpp"
#include "plan/shard_plan.hpp"
#include "schedule/counting_executor.hpp"
#include "schedule/op_executor.hpp"
#include "schedule/step_schedule.hpp"

namespace strata {

#ifdef NDEBUG
inline constexpr bool kValidateSchedulesByDefault = false;
#else
inline constexpr bool kValidateSchedulesByDefault = true;
#endif

struct ShardedEngineOptions {
  ShardPlan plan;
  DType weight_dtype = DType::kF32;  // working weights (and their collectives)
  DType grad_dtype = DType::kF32;    // communicated gradients; accumulation is always fp32
  int prefetch = 1;                  // stages gathered ahead of the one computing (0: none)
  std::uint64_t max_live_bytes = 0;  // bound on gathered-but-not-released bytes (0: none)
  // Collectives run on a communication thread while compute goes on (needs an MPI library with
  // MPI_THREAD_SERIALIZED); off: each runs on the calling thread when its op is reached.
  bool overlap = true;
  int inject_delay_us = 0;  // > 0: a random sleep of up to this before each collective (test mode)
  // Rank fail_rank throws in the backward of the last block at optimizer step fail_step (0-based,
  // of this engine): a testing aid for the job-wide abort (STRATA_INJECT_FAILURE). -1: off.
  int fail_rank = -1, fail_step = -1;
  bool record_timeline = false;  // keep every op's and every collective's span (timeline())
  int grad_accum = 1;                // micro-batches per step: the schedule holds every one
  bool validate = kValidateSchedulesByDefault;  // check the schedules when the engine is made
  // 0: run each segment in list order. Otherwise a seeded random order that respects the
  // dependencies (the same on every rank): a test that the dependencies are complete.
  std::uint64_t shuffle_seed = 0;
};

// Communication against compute, since the engine was made: seconds the collectives ran, and
// seconds compute waited for them (all of it when overlap is off).
struct OverlapStats {
  double communication_s = 0.0;
  double exposed_s = 0.0;
  std::uint64_t collectives = 0;
  double hidden_fraction() const { return communication_s > 0 ? 1.0 - exposed_s / communication_s : 0.0; }
};

struct MeasuredMemory {
  std::uint64_t weights = 0;
  std::uint64_t grads = 0;
  std::uint64_t optimizer = 0;
  // Buffers the schedule allocates (gathered units, secondary copies, unit gradients): the peak
  // of all together and of each kind, from the sizes of the buffers actually held.
  std::uint64_t scheduled_peak = 0;
  std::array<std::uint64_t, ScheduleCounts::kBuffers> scheduled_peak_by_kind{};
  std::uint64_t scratch_peak = 0;  // collective staging (narrowed copies, received pieces)
};

class ShardedEngine final : public TrainingEngine, public OpExecutor {
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
  std::vector<CheckpointPiece> checkpoint_pieces() override;
  void load_checkpoint(const CheckpointReader& reader) override;
  CheckpointRun checkpoint_run() const override;
  std::string description() const override;
  std::string report() override;
  bool records_timeline() const override { return options_.record_timeline; }
  std::string timeline_json() const override { return timeline().dump(); }
  nlohmann::json traffic_totals() override;

  // One op of the schedule, exactly as written (the OpExecutor interface). Public so that tests
  // can drive the engine through hand-made sequences.
  void execute(const ScheduleOp& op) override;

  const ModelLayout& layout() const { return gpt_.layout(); }
  const ShardPlan& plan() const { return options_.plan; }
  const ShardedEngineOptions& options() const { return options_; }
  const StepSchedule& schedule() const { return schedule_; }
  const StepSchedule& eval_schedule() const { return eval_schedule_; }
  // What the counting executor says one step of the schedule sends, allocates and computes.
  const ScheduleCounts& schedule_counts() const { return counts_; }
  Communicator& communicator() { return comm_; }
  MeasuredMemory measured_memory() const;
  OverlapStats overlap_stats() const;
  // The recorded spans as a Chrome trace (chrome://tracing, Perfetto): this rank is the process,
  // compute ops one thread and collectives another. Needs record_timeline.
  nlohmann::json timeline() const;
  // Optimizer steps this engine has run (not counting those a loaded checkpoint had done): what
  // the traffic meter has seen.
  int steps_run() const { return steps_run_; }

  // Weights change at every optimizer step and checkpoint load; each bumps the epoch.
  std::uint64_t epoch() const { return epoch_; }
  // This rank's secondary copy of a unit; refused with strata::Error when it is not held (never
  // made, or dropped after the backward gather used it) or stale (made before the current epoch).
  std::span<const unsigned char> secondary_copy(int unit) const;

  // The full fp32 master weights of a unit (unpadded), gathered over the optimizer levels.
  // Collective.
  std::vector<float> gather_master(int unit);

 private:
  UnitShard& shard(int unit) { return *units_.at(static_cast<std::size_t>(unit)); }
  void run(int segment);
  void acquire_buffer(const BufferEffect& b);
  void release_buffer(const BufferEffect& b);
  void start_gather(const ScheduleOp& op);
  void wait_gather(const ScheduleOp& op);
  void keep_secondary(const ScheduleOp& op);
  const float* weights(int unit);
  float* grad_target(int unit);
  void compute(const ScheduleOp& op);
  void execute_op(const ScheduleOp& op);
  void run_collective(const ScheduleOp& op, const std::function<void()>& work);
  std::string task_name(const ScheduleOp& op) const;
  void gather_full(const AlignedBuffer<float>& slice, UnitShard& u, float* full);

  Communicator& comm_;
  ShardedEngineOptions options_;
  Gpt gpt_;
  StepSchedule schedule_;
  StepSchedule eval_schedule_;
  ScheduleCounts counts_;
  int reduce_segment_ = 0, update_segment_ = 0;
  // The pools outlive the units: a unit's collective still in flight when the engine goes (a
  // test that stops mid-step, an error) releases its staging into them as it completes.
  ScratchPool scheduled_;  // the buffers the schedule's ops allocate
  ScratchPool scratch_;    // collective staging
  std::unique_ptr<CommThread> comm_thread_;  // after the pools (its tasks use them), before the units
  std::vector<std::unique_ptr<UnitShard>> units_;
  std::vector<TaskSpan> compute_spans_;      // with record_timeline: every op this thread ran
  std::array<std::uint64_t, ScheduleCounts::kBuffers> live_by_kind_{}, peak_by_kind_{};
  std::uint64_t epoch_ = 1;
  int steps_run_ = 0;
  int micro_ = 0;          // micro-batches of this step run so far
  bool reduced_ = false;   // the boundary reduction of this step has run
  double norm_ = 0.0;

  // Set for the duration of a forward_backward / evaluate / optimizer_step call.
  std::span<const std::int32_t> tokens_, targets_;
  float loss_scale_ = 1.0f;
  float loss_ = 0.0f;        // this rank's loss of the current micro-batch
  double reduced_loss_ = 0;  // the mean over every rank, from the loss reduction
  AdamWHyper hyper_;
  float lr_ = 0.0f, clip_scale_ = 1.0f;
  int step_ = 0;
};

}  // namespace strata
