// The simulating executor: two clocks (compute stream, communication stream) advanced op by op.
#include "sim/simulator.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/error.hpp"
#include "plan/shard_layout.hpp"
#include "model/gpt.hpp"
#include "schedule/op_effects.hpp"

namespace strata {

namespace {

class SimulatingExecutor final : public OpExecutor {
 public:
  SimulatingExecutor(const StepSchedule& schedule, const SimulationInputs& in, const CostModel& cost)
      : schedule_(schedule), in_(in), cost_(cost), topology_(cost.topology()),
        shards_(ModelLayout(in.model), cost.topology(), in.plan, 0),
        inline_comm_(!in.overlap || !cost.device().overlaps_communication),
        handoff_(in.overlap && !cost.device().overlaps_communication ? cost.device().handoff_seconds : 0.0) {}

  // When the op runs is the table's (schedule/op_effects): local work on the compute clock; a
  // start posts its collective to the communication clock; a wait holds compute until the
  // collective its start posted is done; a blocking op does its local part, then posts and waits.
  // What each part costs is priced here.
  using OpExecutor::execute;
  void execute(const ScheduleOp& op, OpContext& /*context: priced, not run*/) override {
    const OpKindInfo& info = op_kind_info(op.kind);
    switch (info.sync) {
      case OpSync::kLocal: compute(op, local_seconds(op)); break;
      case OpSync::kStart:
        // A start without a collective (replicated weights) does its task's work inline.
        done_[{op.kind, op.unit, op.bucket}] = op.comm.empty() ? compute(op, task_seconds(op)) : post(op, task_seconds(op));
        break;
      case OpSync::kWait: {
        // A carried wait of the first run has no start before it: nothing was in flight.
        const auto started = done_.find({info.pair, op.unit, op.bucket});
        if (started != done_.end()) wait(started->second);
        compute(op, local_seconds(op));
        break;
      }
      case OpSync::kBlocking:
        compute(op, local_seconds(op));
        blocking(op, task_seconds(op));
        break;
    }
  }

  struct Clocks {
    double compute = 0.0, compute_busy = 0.0, comm_busy = 0.0, exposed = 0.0;
  };
  Clocks clocks() const { return {compute_clock_, compute_busy_, comm_busy_, exposed_}; }
  // Spans are kept from here on, their times from `origin` (seconds of the simulated clocks).
  void record_from(double origin) {
    recording_ = in_.record_timeline;
    origin_ = origin;
  }
  std::vector<TraceSpan> take_spans() { return std::move(spans_); }

 private:
  double padded(int u) const { return static_cast<double>(schedule_.padded_numel.at(static_cast<std::size_t>(u))); }
  double optimizer_slice(int u) const { return static_cast<double>(shards_.unit(u).optimizer.len); }
  double grad_shard(int u) const { return static_cast<double>(shards_.unit(u).grads.len); }

  // The op's collective as the communication stream runs it: the collective itself, plus what
  // its task does around it.
  double task_seconds(const ScheduleOp& op) const {
    double seconds = cost_.collective_seconds(op.comm);
    // bf16 working weights are widened into the fp32 compute copy (inside the gather task).
    if (op.kind == OpKind::kGatherStart && in_.weight_dtype == DType::kBF16 && !op.comm.quant.enabled()) {
      seconds += cost_.memory_seconds(6.0 * padded(op.unit));
    }
    // The updated fp32 slice is narrowed into the working weights, then gathered if need be.
    if (op.kind == OpKind::kGatherUpdatedStart) {
      seconds += cost_.memory_seconds((4.0 + dtype_size(in_.weight_dtype)) * optimizer_slice(op.unit) * bucket_share(op));
    }
    return seconds;
  }

  // The part of the unit's collective a bucket of it moves (1 unbucketed).
  double bucket_share(const ScheduleOp& op) const {
    const CollectiveSpec& c = op.comm;
    if (!c.bucketed()) return 1.0;
    const double part = c.kind == CollectiveKind::kAllReduce
                            ? static_cast<double>(c.elements)
                            : static_cast<double>(c.elements) / topology_.span(c.first_level, c.last_level);
    return part / static_cast<double>(c.bucket_piece);
  }

  // The op's own work on the compute stream.
  double local_seconds(const ScheduleOp& op) const {
    switch (op.kind) {
      case OpKind::kKeepSecondary: {
        std::uint64_t bytes = 0;
        for (const BufferEffect& b : op.alloc) bytes += b.kind == BufferKind::kSecondary ? b.bytes : 0;
        return cost_.memory_seconds(static_cast<double>(bytes) * (1.0 + 4.0 / dtype_size(in_.weight_dtype)));
      }
      case OpKind::kForward:
      case OpKind::kBackward:
      case OpKind::kRecompute: return compute_seconds(op);
      // The reduced piece is added into the fp32 gradient shard: read two, write one.
      case OpKind::kReduceScatterWait:
        return cost_.memory_seconds(12.0 * grad_shard(op.unit) * bucket_share(op));
      case OpKind::kGradNorm: {
        double slices = 0.0;
        for (int u = 0; u < schedule_.unit_count; ++u) slices += optimizer_slice(u);
        return cost_.memory_seconds(4.0 * slices);
      }
      // AdamW reads gradient, master, m and v and writes master, m and v (fp32).
      case OpKind::kOptimizerStep: return cost_.memory_seconds(28.0 * optimizer_slice(op.unit));
      default: return 0.0;
    }
  }

  double compute_seconds(const ScheduleOp& op) const {
    const GptConfig& m = in_.model;
    const double tokens = static_cast<double>(in_.micro_batch) * in_.seq_len;
    // The lookup and its scatter-add move rows of the two tables; they have no matrix FLOPs.
    if (op.stage == ComputeStage::kEmbedding) return cost_.memory_seconds(12.0 * tokens * m.n_embd);
    return cost_.compute_seconds(op, tokens);
  }

  std::string name(const ScheduleOp& op) const {
    std::string n = op_kind_name(op.kind);
    if (op.unit >= 0) n += " " + schedule_.unit_names.at(static_cast<std::size_t>(op.unit));
    return n;
  }

  void span(const ScheduleOp& op, int lane, double begin, double end) {
    if (recording_ && end > begin) spans_.push_back({name(op), lane, (begin - origin_) * 1e6, (end - origin_) * 1e6});
  }

  // Work on the compute stream, slowed by the device's interference while collectives run
  // beside it. Everything posted so far runs back to back until comm_clock_ (nothing is posted
  // during a compute op), so the part of the op before comm_clock_ is the part slowed.
  double compute(const ScheduleOp& op, double seconds) {
    const double slow = 1.0 + cost_.device().interference;
    const double window = inline_comm_ ? 0.0 : std::max(0.0, comm_clock_ - compute_clock_);
    const double took = seconds * slow <= window ? seconds * slow : window + (seconds - window / slow);
    span(op, 0, compute_clock_, compute_clock_ + took);
    compute_clock_ += took;
    compute_busy_ += took;
    return compute_clock_;
  }

  // Queued behind the stream's earlier collectives; returns when it completes. A started collective
  // handed to a communication thread without a core of its own costs the compute stream the
  // hand-offs first (a blocking one the poster runs itself).
  double post(const ScheduleOp& op, double seconds) {
    if (handoff_ > 0.0 && op_kind_info(op.kind).sync == OpSync::kStart) {
      compute_clock_ += handoff_;
      exposed_ += handoff_;
    }
    // Within a step collectives run at the device's collective efficiency of their measured speed
    // (peers reach them at different times; calibrate fits it).
    seconds /= cost_.device().collective_efficiency;
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
  const ShardLayout shards_;  // the lengths of every unit's shards (the same on every rank)
  const bool inline_comm_;
  const double handoff_;  // per collective, on the compute stream (a thread forced onto a shared core)
  std::map<std::tuple<OpKind, int, int>, double> done_;  // per start kind, unit and bucket: when its collective ends
  double compute_clock_ = 0.0, comm_clock_ = 0.0;
  double compute_busy_ = 0.0, comm_busy_ = 0.0, exposed_ = 0.0;
  std::vector<TraceSpan> spans_;
  bool recording_ = false;
  double origin_ = 0.0;
};

}  // namespace

SimulationResult replay_schedule(const StepSchedule& schedule, const SimulationInputs& in, const CostModel& cost) {
  STRATA_REQUIRE(in.micro_batch >= 1 && in.seq_len >= 1 && in.grad_accum >= 1,
                 "a simulation needs a micro-batch, a sequence length and a gradient accumulation of at least 1");
  SimulationResult r;
  SimulatingExecutor sim(schedule, in, cost);
  CountingExecutor counter(schedule, cost.topology());
  // The engine runs the list once per step, and with the boundary overlapped a step's last
  // collectives finish under the next step's forward. The first run starts from nothing in
  // flight; the second is the steady state, and its step is the compute clock's advance over it.
  for (const ScheduleOp& op : schedule.ops) {
    sim.execute(op);
    counter.execute(op);
  }
  const auto first = sim.clocks();
  sim.record_from(first.compute);
  for (const ScheduleOp& op : schedule.ops) sim.execute(op);
  const auto second = sim.clocks();
  r.ops = schedule.ops.size();
  r.step_seconds = second.compute - first.compute;
  r.compute_seconds = second.compute_busy - first.compute_busy;
  r.communication_seconds = second.comm_busy - first.comm_busy;
  r.exposed_seconds = second.exposed - first.exposed;
  r.counts = counter.counts();
  r.model_flops = r.counts.forward_flops + r.counts.backward_flops;
  r.hardware_flops = r.model_flops + r.counts.recompute_flops;
  r.spans = sim.take_spans();
  static_cast<MemoryPrediction&>(r.memory) = predict_memory(schedule, r.counts, in.model, in.micro_batch, in.seq_len,
                                                            static_cast<std::uint64_t>(cost.device().process_bytes));
  r.memory.gathered = r.counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kGathered)];
  r.memory.secondary = r.counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kSecondary)];
  r.memory.unit_grads = r.counts.peak_by_kind[static_cast<std::size_t>(BufferKind::kUnitGrad)];
  return r;
}

SimulationResult simulate(const SimulationInputs& given, const Topology& topology, const DeviceModel& device,
                          std::vector<TransferCurve> curves) {
  SimulationInputs in = given;
  if (in.seq_len == 0) in.seq_len = in.model.context_length;
  in.model.validate();
  STRATA_REQUIRE(in.seq_len >= 1 && in.seq_len <= in.model.context_length,
                 "sequence length {} must be between 1 and the model's context length {}", in.seq_len,
                 in.model.context_length);
  in.plan.validate(topology);
  const ModelLayout layout(in.model);
  const StepSchedule schedule = build_step_schedule(schedule_inputs(layout, topology, in, in.micro_batch, in.seq_len));
  const CostModel cost(topology, device, std::move(curves));
  return replay_schedule(schedule, in, cost);
}

nlohmann::json simulated_timeline(const SimulationResult& result, const std::string& label) {
  return chrome_trace(chrome_trace_events(0, label, {"compute (simulated)", "communication (simulated)"}, result.spans));
}

}  // namespace strata
