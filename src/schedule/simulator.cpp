// The simulating executor: two clocks (compute stream, communication stream) advanced op by op.
#include "schedule/simulator.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "model/gpt.hpp"

namespace strata {

namespace {

class SimulatingExecutor final : public OpExecutor {
 public:
  SimulatingExecutor(const StepSchedule& schedule, const SimulationInputs& in, const CostModel& cost)
      : schedule_(schedule), in_(in), cost_(cost), topology_(cost.topology()),
        inline_comm_(!in.overlap || !cost.device().overlaps_communication),
        gather_done_(static_cast<std::size_t>(schedule.unit_count), 0.0),
        reduce_done_(static_cast<std::size_t>(schedule.unit_count), 0.0) {}

  void execute(const ScheduleOp& op) override {
    switch (op.kind) {
      case OpKind::kGatherStart: {
        double seconds = cost_.collective_seconds(op.comm);
        // bf16 working weights are widened into the fp32 compute copy (inside the gather task).
        if (in_.dtype == DType::kBF16 && !op.comm.quant.enabled()) seconds += cost_.memory_seconds(6.0 * padded(op.unit));
        gather_done_[unit(op)] = op.comm.empty() ? compute(op, seconds) : post(op, seconds);
        break;
      }
      case OpKind::kGatherWait: wait(gather_done_[unit(op)]); break;
      case OpKind::kKeepSecondary: {
        std::uint64_t bytes = 0;
        for (const BufferEffect& b : op.alloc) bytes += b.kind == BufferKind::kSecondary ? b.bytes : 0;
        compute(op, cost_.memory_seconds(static_cast<double>(bytes) * (1.0 + 4.0 / dtype_size(in_.dtype))));
        break;
      }
      case OpKind::kRelease:
      case OpKind::kBumpEpoch: break;
      case OpKind::kForward:
      case OpKind::kBackward: compute(op, compute_seconds(op)); break;
      case OpKind::kLossReduce:
      case OpKind::kReduceScatterReplicas:
      case OpKind::kAllReduceReplicas: blocking(op, cost_.collective_seconds(op.comm)); break;
      case OpKind::kGatherUpdated:
        // The updated fp32 slice is narrowed into the working weights, then gathered if need be.
        compute(op, cost_.memory_seconds((4.0 + dtype_size(in_.dtype)) * optimizer_slice(op.unit)));
        blocking(op, cost_.collective_seconds(op.comm));
        break;
      case OpKind::kReduceScatterStart: reduce_done_[unit(op)] = post(op, cost_.collective_seconds(op.comm)); break;
      case OpKind::kReduceScatterWait:
        wait(reduce_done_[unit(op)]);
        // The reduced piece is added into the fp32 gradient shard: read two, write one.
        compute(op, cost_.memory_seconds(12.0 * padded(op.unit) / topology_.span(in_.plan.grads)));
        break;
      case OpKind::kGradNorm: {
        double slices = 0.0;
        for (int u = 0; u < schedule_.unit_count; ++u) slices += optimizer_slice(u);
        compute(op, cost_.memory_seconds(4.0 * slices));
        blocking(op, cost_.collective_seconds(op.comm));
        break;
      }
      case OpKind::kOptimizerStep:
        // AdamW reads gradient, master, m and v and writes master, m and v (fp32).
        compute(op, cost_.memory_seconds(28.0 * optimizer_slice(op.unit)));
        break;
    }
  }

  double now() const { return std::max(compute_clock_, comm_clock_); }
  double compute_busy() const { return compute_busy_; }
  double comm_busy() const { return comm_busy_; }
  double exposed() const { return exposed_; }
  std::vector<TraceSpan> take_spans() { return std::move(spans_); }

 private:
  std::size_t unit(const ScheduleOp& op) const {
    STRATA_CHECK(op.unit >= 0 && op.unit < schedule_.unit_count, "op {} has no unit", op_kind_name(op.kind));
    return static_cast<std::size_t>(op.unit);
  }
  double padded(int u) const { return static_cast<double>(schedule_.padded_numel.at(static_cast<std::size_t>(u))); }
  double optimizer_slice(int u) const { return padded(u) / topology_.span(in_.plan.optimizer); }

  double compute_seconds(const ScheduleOp& op) const {
    const GptConfig& m = in_.model;
    const double tokens = static_cast<double>(in_.micro_batch) * in_.seq_len;
    // The lookup and its scatter-add move rows of the two tables; they have no matrix FLOPs.
    if (op.stage == ComputeStage::kEmbedding) return cost_.memory_seconds(12.0 * tokens * m.n_embd);
    double seconds = cost_.compute_seconds(op);
    if (in_.activation_checkpointing && op.kind == OpKind::kBackward && op.stage == ComputeStage::kBlock) {
      ScheduleOp forward = op;
      forward.kind = OpKind::kForward;
      forward.flops = op.flops / 2.0;  // backward is priced at twice the forward's FLOPs
      seconds += cost_.compute_seconds(forward);
    }
    return seconds;
  }

  std::string name(const ScheduleOp& op) const {
    std::string n = op_kind_name(op.kind);
    if (op.unit >= 0) n += " " + schedule_.unit_names.at(static_cast<std::size_t>(op.unit));
    return n;
  }

  void span(const ScheduleOp& op, int lane, double begin, double end) {
    if (in_.record_timeline && end > begin) spans_.push_back({name(op), lane, begin * 1e6, end * 1e6});
  }

  double compute(const ScheduleOp& op, double seconds) {
    span(op, 0, compute_clock_, compute_clock_ + seconds);
    compute_clock_ += seconds;
    compute_busy_ += seconds;
    return compute_clock_;
  }

  // Queued behind the stream's earlier collectives; returns when it completes.
  double post(const ScheduleOp& op, double seconds) {
    const double begin = std::max(compute_clock_, comm_clock_);
    comm_clock_ = begin + seconds;
    comm_busy_ += seconds;
    span(op, 1, begin, comm_clock_);
    if (inline_comm_) wait(comm_clock_);
    return comm_clock_;
  }

  void blocking(const ScheduleOp& op, double seconds) { wait(post(op, seconds)); }

  void wait(double done) {
    if (done > compute_clock_) {
      exposed_ += done - compute_clock_;
      compute_clock_ = done;
    }
  }

  const StepSchedule& schedule_;
  const SimulationInputs& in_;
  const CostModel& cost_;
  const Topology& topology_;
  const bool inline_comm_;
  std::vector<double> gather_done_, reduce_done_;
  double compute_clock_ = 0.0, comm_clock_ = 0.0;
  double compute_busy_ = 0.0, comm_busy_ = 0.0, exposed_ = 0.0;
  std::vector<TraceSpan> spans_;
};

}  // namespace

ScheduleInputs schedule_inputs(const SimulationInputs& in, const ModelLayout& layout, const Topology& topology) {
  ScheduleInputs s;
  s.layout = &layout;
  s.topology = &topology;
  s.plan = in.plan;
  s.grad_accum = in.grad_accum;
  s.tokens_per_micro = static_cast<std::size_t>(in.micro_batch) * static_cast<std::size_t>(in.seq_len);
  s.seq_len = in.seq_len;
  s.weight_dtype = s.grad_dtype = in.dtype;
  s.prefetch = in.prefetch;
  s.max_live_bytes = in.max_live_bytes;
  return s;
}

SimulationResult replay_schedule(const StepSchedule& schedule, const SimulationInputs& in, const CostModel& cost) {
  STRATA_REQUIRE(in.micro_batch >= 1 && in.seq_len >= 1 && in.grad_accum >= 1,
                 "a simulation needs a micro-batch, a sequence length and a gradient accumulation of at least 1");
  SimulationResult r;
  SimulatingExecutor sim(schedule, in, cost);
  CountingExecutor counter(cost.topology());
  for (const ScheduleOp& op : schedule.ops) {
    sim.execute(op);
    counter.execute(op);
  }
  r.ops = schedule.ops.size();
  r.step_seconds = sim.now();
  r.compute_seconds = sim.compute_busy();
  r.communication_seconds = sim.comm_busy();
  r.exposed_seconds = sim.exposed();
  r.counts = counter.counts();
  r.model_flops = r.counts.forward_flops + r.counts.backward_flops;
  r.spans = sim.take_spans();
  for (const ResidentState& s : schedule.resident) {
    if (s.state == "weights") r.memory.weights = s.bytes;
    if (s.state == "grads") r.memory.grads = s.bytes;
    if (s.state == "optimizer") r.memory.optimizer = s.bytes;
  }
  r.memory.gathered = r.counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kGathered)];
  r.memory.secondary = r.counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kSecondary)];
  r.memory.unit_grads = r.counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kUnitGrad)];
  r.memory.scheduled_peak = r.counts.peak_live_bytes;
  const ActivationBytes a = Gpt::activation_bytes(in.model, in.micro_batch, in.seq_len);
  r.memory.activations = in.activation_checkpointing
                             ? a.layer_input * static_cast<std::uint64_t>(in.model.n_layer) + a.per_layer + a.rest
                             : a.total(in.model.n_layer);
  return r;
}

SimulationResult simulate(const SimulationInputs& given, const Topology& topology, const DeviceModel& device) {
  SimulationInputs in = given;
  if (in.seq_len == 0) in.seq_len = in.model.context_length;
  in.model.validate();
  STRATA_REQUIRE(in.seq_len >= 1 && in.seq_len <= in.model.context_length,
                 "sequence length {} must be between 1 and the model's context length {}", in.seq_len,
                 in.model.context_length);
  in.plan.validate(topology);
  const ModelLayout layout(in.model);
  const StepSchedule schedule = build_step_schedule(schedule_inputs(in, layout, topology));
  const CostModel cost(topology, device);
  return replay_schedule(schedule, in, cost);
}

nlohmann::json simulated_timeline(const SimulationResult& result, const std::string& label) {
  return chrome_trace(chrome_trace_events(0, label, {"compute (simulated)", "communication (simulated)"}, result.spans));
}

}  // namespace strata
