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

#include <nlohmann/json_fwd.hpp>

#include "comm/comm_thread.hpp"
#include "engine/engine_timeline.hpp"
#include "engine/failure_injection.hpp"
#include "engine/overlap_tuner.hpp"
#include "comm/communicator.hpp"
#include "engine/scratch_pool.hpp"
#include "engine/training_engine.hpp"
#include "engine/unit_shards.hpp"
#include "model/gpt.hpp"
#include "plan/shard_plan.hpp"
#include "schedule/buffer_ledger.hpp"
#include "schedule/counting_executor.hpp"
#include "engine/plan_report.hpp"
#include "schedule/op_effects.hpp"
#include "schedule/op_executor.hpp"
#include "schedule/step_schedule.hpp"
#include "schedule/unit_lifecycle.hpp"

namespace strata {

#ifdef NDEBUG
inline constexpr bool kValidateSchedulesByDefault = false;
#else
inline constexpr bool kValidateSchedulesByDefault = true;
#endif

// The step's settings (plan, accumulation, dtypes, prefetch, live bound), then the executor's.
struct ShardedEngineOptions : StepOptions {
  // Collectives run on a communication thread while compute goes on (needs an MPI library with
  // MPI_THREAD_SERIALIZED); off: each runs on the calling thread when its op is reached.
  bool overlap = true;
  // With overlap: measure the first steps with the communication thread and inline, and keep the
  // faster (--overlap auto; see OverlapTuner). Off: the thread throughout.
  bool tune_overlap = false;
  // Set where --overlap auto chose inline before any step (no core free for the thread): why.
  std::string overlap_auto_reason;
  int inject_delay_us = 0;  // > 0: a random sleep of up to this before each collective (test mode)
  // Rank fail_rank throws in the backward of the last block at optimizer step fail_step (0-based,
  // as the training run counts them, steps before a resume included): a testing aid for the
  // job-wide abort (STRATA_INJECT_FAILURE). -1: off.
  int fail_rank = -1, fail_step = -1;
  bool record_timeline = false;  // keep every op's and every collective's span (timeline())
  // bf16 compute reads a bf16 gather's staging copy instead of converting the weights per product
  // (false: convert anyway; the tests compare the two for equal bits).
  bool bf16_working_copy = true;
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

// Everything a segment of the schedule is told by the call that runs it, as one value: the
// micro-batch's tokens and loss scale, the update's operands. And what it answers.
struct SegmentOperands {
  std::span<const std::int32_t> tokens, targets;
  float loss_scale = 1.0f;  // already divided by the world size (the reductions are sums)
  UpdateOperands update;
};
struct SegmentResults {
  float local_loss = 0.0f;  // this rank's loss of the micro-batch (head forward, for the reduction)
  double loss = 0.0;   // the micro-batch loss's mean over every rank (loss reduction)
  double norm = 0.0;   // the global gradient norm (boundary reduction)
  bool stop = false;   // whether any rank asked to stop (update)
};

// What the engine did with one op, for the test that every executor reads the same table: the
// sync path it took and the buffers it acquired and released.
struct ExecutedOp {
  OpKind kind;
  OpSync sync;
  std::vector<BufferEffect> acquired, released;
};

class ShardedEngine final : public TrainingEngine, public OpExecutor {
 public:
  // batch: this rank's rows of each micro-batch.
  ShardedEngine(const GptConfig& config, int batch, int seq_len, std::uint64_t seed, Communicator& comm,
                ShardedEngineOptions options);
  ~ShardedEngine() override;

  void zero_grad() override;
  void flush() override;
  float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                         float loss_scale) override;
  float evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) override;
  double grad_norm() override;
  bool optimizer_step(const UpdateOperands& update) override;
  int data_parallel_rank() const override { return comm_.rank(); }
  int data_parallel_size() const override { return comm_.world_size(); }
  std::vector<CheckpointPiece> checkpoint_pieces() override;
  void load_state(const StateSource& reader) override;
  CheckpointRun checkpoint_run() const override;
  std::string description() const override;
  std::string report() override;
  MemoryPrediction predicted_memory(std::uint64_t fixed) const override;
  std::uint64_t allocated_peak_bytes() const override;
  bool records_timeline() const override { return options_.record_timeline; }
  std::string timeline_json() const override;
  nlohmann::json traffic_totals() override;

  // One op of the schedule, exactly as written. Public so that tests can drive the engine through
  // hand-made sequences; the OpExecutor form runs it with no tokens and default operands.
  void execute(const ScheduleOp& op, const SegmentOperands& operands, SegmentResults& results);
  using OpExecutor::execute;
  void execute(const ScheduleOp& op, OpContext& context) override;
  // With record: every op executed from here on, in order.
  void record_executed_ops(bool record) { record_executed_ = record; }
  const std::vector<ExecutedOp>& executed_ops() const { return executed_; }

  const ModelLayout& layout() const { return gpt_.layout(); }
  const ShardPlan& plan() const { return options_.plan; }
  const ShardedEngineOptions& options() const { return options_; }
  const StepSchedule& schedule() const { return schedule_; }
  // What the counting executor says one step of the schedule sends, allocates and computes.
  const ScheduleCounts& schedule_counts() const { return counts_; }
  Communicator& communicator() { return comm_; }
  MeasuredMemory measured_memory() const;
  // What the plan report (engine/plan_report) is made from.
  PlanReportInputs report_inputs() const;
  OverlapStats overlap_stats() const;
  // Where collectives run now ("communication thread" or "inline"), and with tune_overlap what
  // the trial decided on what figures.
  std::string overlap_mode() const;
  // The recorded spans as a Chrome trace (chrome://tracing, Perfetto): this rank is the process,
  // compute ops one thread and collectives another. Needs record_timeline.
  nlohmann::json timeline() const;
  // Optimizer steps this engine has run (not counting those a loaded checkpoint had done): what
  // the traffic meter has seen.
  int steps_run() const { return steps_run_; }

  // This rank's secondary copy of a unit; refused with strata::Error when it is not held (never
  // made, or dropped after the backward gather used it) or stale (made before the weights last
  // changed: an update or a checkpoint load).
  std::span<const unsigned char> secondary_copy(int unit) const;
  SecondaryResidency secondary_residency(int unit) const { return states_.at(static_cast<std::size_t>(unit)).secondary(); }

  // The full fp32 master weights of a unit (unpadded), gathered over the optimizer levels.
  // Collective.
  std::vector<float> gather_master(int unit);
  UnitBuffers whole_weights() override;

 private:
  UnitShard& shard(int unit) { return *units_.at(static_cast<std::size_t>(unit)); }
  SegmentResults run(const StepSchedule& schedule, int segment, const SegmentOperands& operands);
  void acquire_buffer(const BufferEffect& b);
  void release_buffer(const BufferEffect& b);
  // The four ways an op runs (schedule/op_effects: its sync), each with the kind's own work.
  void start(const ScheduleOp& op);
  void wait(const ScheduleOp& op);
  void blocking(const ScheduleOp& op, OpContext& context);
  void local(const ScheduleOp& op, OpContext& context);
  static OpContext context(const SegmentOperands& operands);
  const float* weights(int unit);
  const bf16* working_bf16(int unit);  // the unit's gathered bf16 copy, where bf16 compute may read it
  float* gradient_target(int unit);  // where backward writes the unit's gradient
  void compute(const ScheduleOp& op, const OpContext& context);
  void run_collective(const ScheduleOp& op, const std::function<void()>& work);
  std::string task_name(const ScheduleOp& op) const;
  void gather_full(const AlignedBuffer<float>& slice, UnitShard& u, float* full);
  void invalidate_secondaries();  // the weights changed: every held secondary copy becomes stale

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
  EngineTimeline timeline_;                  // with record_timeline: every op this thread ran
  std::vector<UnitLifecycle> states_;  // each unit's state: the one place it changes is apply_op
  BufferLedger ledger_;                // the bytes of the buffers the schedule's ops allocate
  int steps_run_ = 0;
  int steps_before_ = 0;  // optimizer steps of the run before the checkpoint this engine loaded
  OverlapTuner tuner_;              // with tune_overlap: deciding, then decided
  std::int64_t step_end_ns_ = 0;    // when the last optimizer step (or the engine) finished
  int micro_ = 0;          // micro-batches of this step run so far
  bool reduced_ = false;   // the boundary reduction of this step has run
  double norm_ = 0.0;      // the last boundary reduction's norm (asked for again by optimizer_step)
  UpdateOperands update_;  // the operands of the update segment now running (optimizer_step's)
  InjectedFailure failure_;
  bool record_executed_ = false;
  std::vector<ExecutedOp> executed_;
};

}  // namespace strata
