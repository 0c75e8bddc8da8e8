// Calibration: compute stages timed on the real model, memory bandwidth from a streaming add, the
// interference of collectives with compute, and per level a sweep of call sizes (the curve the cost
// model interpolates) with a latency-bandwidth fit of its ends, t = (f-1) a + bytes / b.
#include "train/calibration.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <cmath>

#include "comm/comm_thread.hpp"
#include "core/aligned_buffer.hpp"
#include "core/error.hpp"
#include "core/median.hpp"
#include "core/process_memory.hpp"
#include "core/stopwatch.hpp"
#include "core/threads.hpp"
#include "model/cpu/gemm.hpp"
#include "model/gpt.hpp"
#include "model/init.hpp"
#include "engine/sharded_engine.hpp"
#include "sim/simulator.hpp"
#include "schedule/op_effects.hpp"
#include "schedule/step_schedule.hpp"
#include "train/train_step.hpp"

namespace strata {

namespace {

// The mean over every rank of one figure each rank measured.
double mean_over_ranks(Communicator& comm, double value) {
  comm.all_reduce_control(&value, 1, 0, comm.topology().level_count() - 1);
  return value / comm.world_size();
}

// The schedule's own FLOP count of each stage (what the simulator will divide by the rate).
std::vector<StageMeasurement> stage_flops(const GptConfig& config, int batch, int seq_len) {
  const ModelLayout layout(config);
  const Topology one = Topology::parse("world:1", 1);
  const StepSchedule s = build_step_schedule(schedule_inputs(layout, one, StepOptions{}, batch, seq_len));
  std::vector<StageMeasurement> stages;
  for (const char* name : {"block_forward", "block_backward", "head_forward", "head_backward"}) {
    StageMeasurement m;
    m.stage = name;
    for (const ScheduleOp& op : s.ops) {
      if ((op.kind == OpKind::kForward || op.kind == OpKind::kBackward) && stage_key(op) == name) {
        m.flops = op.flops;
        break;
      }
    }
    stages.push_back(m);
  }
  return stages;
}

// The model's stages on random weights, timed pass by pass: forward, then backward in reverse.
class StageBench {
 public:
  StageBench(const GptConfig& config, int batch, int seq_len)
      : config_(config), gpt_(config, batch, seq_len), params_(gpt_.layout()), grads_(gpt_.layout()),
        tokens_(gpt_.tokens_per_batch()), targets_(gpt_.tokens_per_batch()) {
    const ModelLayout& layout = gpt_.layout();
    for (std::size_t u = 0; u < layout.unit_count(); ++u) init_unit(layout, u, 1, params_.unit(u));
    grads_.fill_zero();
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      tokens_[i] = static_cast<std::int32_t>((i * 7919) % static_cast<std::size_t>(config.vocab_size));
      targets_[i] = static_cast<std::int32_t>((i * 104729 + 1) % static_cast<std::size_t>(config.vocab_size));
    }
  }

  // One pass; seconds of block forward and backward (per block) and of the head's two.
  std::array<double, 4> pass() {
    const ModelLayout& layout = gpt_.layout();
    const std::size_t emb = ModelLayout::kEmbeddingUnit, fin = layout.final_norm_unit();
    gpt_.embedding_forward(params_.unit(emb), tokens_);
    Stopwatch w;
    for (int l = 0; l < config_.n_layer; ++l) gpt_.block_forward(l, params_.unit(layout.block_unit(l)));
    const double block_fwd = w.seconds() / config_.n_layer;
    w.restart();
    gpt_.head_forward(params_.unit(fin), params_.unit(emb), targets_);
    const double head_fwd = w.seconds();
    w.restart();
    // As the engines write a micro-batch's gradients: whole, into buffers nobody zeroed.
    constexpr GradWrite kWhole = GradWrite::kOverwrite;
    gpt_.head_backward(params_.unit(fin), params_.unit(emb), {grads_.unit(fin), kWhole}, {grads_.unit(emb), kWhole},
                       1.0f);
    const double head_bwd = w.seconds();
    w.restart();
    for (int l = config_.n_layer - 1; l >= 0; --l) {
      gpt_.block_backward(l, params_.unit(layout.block_unit(l)), {grads_.unit(layout.block_unit(l)), kWhole});
    }
    const double block_bwd = w.seconds() / config_.n_layer;
    gpt_.embedding_backward(grads_.unit(emb));
    return {block_fwd, block_bwd, head_fwd, head_bwd};
  }

  // The whole pass's seconds.
  double timed_pass() {
    Stopwatch w;
    pass();
    return w.seconds();
  }

 private:
  GptConfig config_;
  Gpt gpt_;
  UnitBuffers params_, grads_;
  std::vector<std::int32_t> tokens_, targets_;
};

// The median of a sample and its interquartile range over the median, each averaged over ranks.
TimedFigure timed_figure(Communicator& comm, std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const double mid = median(samples);
  const auto at = [&](double q) { return samples[static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1))]; };
  const double spread = mid > 0.0 ? (at(0.75) - at(0.25)) / mid : 0.0;
  return {mean_over_ranks(comm, mid), mean_over_ranks(comm, spread)};
}

// Every rank times the stages at once, in step order (forward, then backward in reverse), so a
// shared host's cores are as contended as in a step.
void time_stages(Communicator& comm, const CalibrationSettings& s, const GptConfig& config, int seq_len,
                 std::vector<StageMeasurement>& stages) {
  StageBench bench(config, s.batch, seq_len);
  std::vector<std::vector<double>> samples(stages.size());
  for (int r = 0; r < s.repeats + 1; ++r) {  // the first pass warms caches and pages
    comm.barrier();
    const std::array<double, 4> t = bench.pass();
    if (r == 0) continue;
    for (std::size_t i = 0; i < stages.size(); ++i) samples[i].push_back(t[i]);
  }
  for (std::size_t i = 0; i < stages.size(); ++i) stages[i].seconds = mean_over_ranks(comm, median(samples[i]));
}

// How much slower compute runs while collectives run beside it on a communication thread, as the
// engine overlaps them: the same passes of the model timed alone, then while the thread runs
// all-gathers of a unit's piece at the outermost level (the one a step overlaps most), enough of
// them to outlast the pass. Leaves the figures at zero with one rank or no thread support.
void time_interference(Communicator& comm, const CalibrationSettings& s, const GptConfig& config, int seq_len,
                       std::size_t unit_bytes, Calibration& out) {
  const Topology& t = comm.topology();
  int level = -1;
  for (int l = 0; l < t.level_count(); ++l) level = t.level(l).fanout > 1 ? l : level;
  if (level < 0 || !comm.allows_comm_thread()) return;
  const auto f = static_cast<std::size_t>(t.level(level).fanout);
  const std::size_t floats = std::max<std::size_t>(1024, unit_bytes / f / sizeof(float));
  std::vector<float> gathered(floats * f, 1.0f);
  StageBench bench(config, s.batch, seq_len);
  const int repeats = std::max(5, s.repeats);
  std::vector<double> alone, gather;
  for (int r = 0; r < repeats + 1; ++r) {
    comm.barrier();
    const double pass = bench.timed_pass();
    comm.barrier();
    Stopwatch w;
    comm.all_gather(gathered.data(), floats * sizeof(float), DType::kU8, level);
    const double g = w.seconds();
    if (r > 0) alone.push_back(pass), gather.push_back(g);
  }
  out.compute_alone = timed_figure(comm, alone);
  // The same count on every rank: the largest any rank needs to cover 1.5 of its passes.
  double calls = std::ceil(1.5 * median(alone) / std::max(1e-7, median(gather)));
  comm.all_reduce_control(&calls, 1, 0, t.level_count() - 1, ControlOp::kMax);
  const int n = static_cast<int>(std::clamp(calls, 1.0, 10000.0));
  CommThread::Options threading;
  CommThread thread(threading);
  std::vector<double> beside;
  for (int r = 0; r < repeats; ++r) {
    comm.barrier();
    auto running = thread.post("calibration all-gathers", [&] {
      for (int i = 0; i < n; ++i) comm.all_gather(gathered.data(), floats * sizeof(float), DType::kU8, level);
    });
    beside.push_back(bench.timed_pass());
    running->wait();
  }
  out.compute_beside_collectives = timed_figure(comm, beside);
  out.interference_level = t.level(level).name;
}

// A streaming add over buffers far larger than the caches: 12 bytes moved per element.
double memory_bandwidth(Communicator& comm, int repeats) {
  const std::size_t n = std::size_t{8} << 20;
  AlignedBuffer<float> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) a.data()[i] = 1.0f, b.data()[i] = 0.5f;
  std::vector<double> samples;
  for (int r = 0; r < repeats + 1; ++r) {
    comm.barrier();
    Stopwatch w;
    float* x = a.data();
    const float* y = b.data();
    for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
    const double t = w.seconds();
    if (r > 0) samples.push_back(t);
  }
  STRATA_CHECK(a.data()[n / 2] > 1.0f, "the streaming add did not run");
  return mean_over_ranks(comm, 12.0 * static_cast<double>(n) / median(samples));
}

// One single-level collective of `piece` bytes per rank (u8 for the gather; fp32 sums for the
// reduce-scatter, whose adds are part of its cost), median over the repeats, mean over ranks.
double time_collective(Communicator& comm, int level, std::size_t piece, int repeats, bool reduce) {
  const auto f = static_cast<std::size_t>(comm.topology().level(level).fanout);
  const std::size_t floats = std::max<std::size_t>(1, piece / sizeof(float));
  std::vector<float> send(floats * f, 1.0f), recv(floats, 0.0f);
  std::vector<double> samples;
  for (int r = 0; r < repeats + 2; ++r) {
    comm.barrier();
    Stopwatch w;
    if (reduce) {
      comm.reduce_scatter(send.data(), recv.data(), floats, DType::kF32, level);
    } else {
      comm.all_gather(send.data(), floats * sizeof(float), DType::kU8, level);
    }
    const double t = w.seconds();
    if (r >= 2) samples.push_back(t);
  }
  return mean_over_ranks(comm, median(samples));
}

// The gathers and reductions of a step weigh about equally: their mean time at each size.
double time_level(Communicator& comm, int level, std::size_t piece, int repeats) {
  return 0.5 * (time_collective(comm, level, piece, repeats, false) + time_collective(comm, level, piece, repeats, true));
}

// The two fitted figures, from two reference runs, inline: plan ddp (compute, then one all-reduce
// per unit) and plan zero3 (a gather or reduction around every unit's compute in both directions:
// three times the model's bytes per micro-batch). The device's compute efficiency and its
// collective efficiency (collectives inside a step run slower than alone: peers reach them at
// different times) are the pair that make both simulated steps equal the measured ones. On a host
// whose ranks share cores they absorb what the stage timings miss (ranks drifting apart, spinning
// in MPI); every other plan and shape of the model is then a prediction. Where no core is free for
// a communication thread, zero3 also runs with the thread forced on: the difference per collective
// handed to it is the hand-off cost. With `links_only` (a device kept from an earlier file) only
// the collective efficiency is fitted again: it belongs to the links as much as to the hosts.
void fit_device(Communicator& comm, const CalibrationSettings& s, const GptConfig& config, int seq_len,
                Calibration& out, bool links_only) {
  const int accum = 2;
  out.reference_steps = std::max(20, 4 * s.repeats);
  const int nodes = comm.topology().world_size() / out.cluster.ranks_per_node();
  const Topology topology = out.cluster.topology(nodes);
  struct Reference {
    double measured = 0.0, spread = 0.0;
    std::function<double(double, double)> replay;  // simulated step at (compute, collective) efficiency
    std::size_t handed = 0;  // collectives a communication thread would be handed
  };
  std::vector<std::unique_ptr<ShardedEngine>> engines;  // their schedules, replayed while fitting
  const auto measure = [&](const char* plan, int batch, bool threaded, Reference* fit) {
    ShardedEngineOptions o;
    o.plan = ShardPlan::preset(plan, comm.topology());
    o.weight_dtype = o.grad_dtype = DType::kF32;
    o.grad_accum = accum;
    o.overlap = threaded;
    engines.push_back(std::make_unique<ShardedEngine>(config, batch, seq_len, 1, comm, o));
    ShardedEngine& engine = *engines.back();
    const TimedFigure t =
        timed_figure(comm, step_seconds(engine, comm, config.vocab_size, batch, seq_len, accum, out.reference_steps, 3));
    if (fit == nullptr) return t.median;
    fit->measured = t.median;
    fit->spread = t.spread;
    SimulationInputs in;
    static_cast<StepOptions&>(in) = o;  // the run's own step settings
    in.model = config;
    in.micro_batch = batch;
    in.seq_len = seq_len;
    in.overlap = false;
    fit->replay = [&, in, schedule = &engine.schedule()](double efficiency, double collective) {
      DeviceModel d = out.cluster.device;
      d.efficiency = efficiency;
      d.collective_efficiency = collective;
      const CostModel cost(topology, d, out.cluster.curves());
      return replay_schedule(*schedule, in, cost).step_seconds;
    };
    for (const ScheduleOp& op : engine.schedule().ops) {
      fit->handed += op_kind_info(op.kind).sync == OpSync::kStart && !op.comm.empty() ? 1 : 0;
    }
    return t.median;
  };
  Reference ddp, zero3;
  if (!links_only) measure("ddp", s.batch, false, &ddp);
  measure("zero3", s.batch, false, &zero3);
  if (!links_only) {
    // The memory model's fixed part, measured in the middle of a run: the resident set with both
    // reference engines alive less what they allocated (program, MPI, thread stacks, and the
    // heap's own overhead as training leaves it); the largest over the ranks.
    std::uint64_t allocated = 0;
    for (const auto& engine : engines) allocated += engine->allocated_peak_bytes();
    const auto resident = process_resident_bytes();
    double fixed = resident > allocated ? static_cast<double>(resident - allocated) : 0.0;
    comm.all_reduce_control(&fixed, 1, 0, comm.topology().level_count() - 1, ControlOp::kMax);
    out.cluster.device.process_bytes = fixed;
  }
  if (!links_only) {
    out.reference_measured_seconds = ddp.measured;
    out.reference_spread = ddp.spread;
    out.reference_simulated_seconds = ddp.replay(1.0, 1.0);
  }
  out.second_measured_seconds = zero3.measured;
  out.second_simulated_seconds = zero3.replay(1.0, 1.0);
  // Both simulated steps fall as either efficiency rises: alternate a bisection of each, compute's
  // on ddp (mostly compute) and the collectives' on zero3 (much more communication).
  const auto solve = [](const std::function<double(double)>& f, double target, double lo, double hi) {
    for (int i = 0; i < 60; ++i) {
      const double mid = 0.5 * (lo + hi);
      (f(mid) < target ? hi : lo) = mid;
    }
    return 0.5 * (lo + hi);
  };
  double efficiency = out.cluster.device.efficiency, collective = 1.0;
  for (int round = 0; round < 4; ++round) {
    if (!links_only) efficiency = solve([&](double e) { return ddp.replay(e, collective); }, ddp.measured, 0.02, 1.0);
    collective = solve([&](double c) { return zero3.replay(efficiency, c); }, zero3.measured, 0.05, 1.0);
  }
  out.cluster.device.efficiency = efficiency;
  out.cluster.device.collective_efficiency = collective;
  if (links_only || out.cluster.device.overlaps_communication || !comm.allows_comm_thread()) return;
  out.inline_zero3_seconds = zero3.measured;
  out.threaded_zero3_seconds = measure("zero3", s.batch, true, nullptr);
  out.collectives_handed = static_cast<int>(zero3.handed);
  if (zero3.handed > 0) {
    out.cluster.device.handoff_seconds =
        std::max(0.0, (out.threaded_zero3_seconds - zero3.measured) / static_cast<double>(zero3.handed));
  }
}

// The compute rate at other micro-batch sizes than the calibrated one (half its sequence, twice
// and four times its batch), as factors on the calibrated rate: the whole pass's FLOPs over its
// time, every rank at once.
std::vector<DeviceModel::RatePoint> rate_by_tokens(Communicator& comm, const CalibrationSettings& s,
                                                   const GptConfig& config, int seq_len,
                                                   const std::vector<StageMeasurement>& calibrated) {
  const auto pass_rate = [&](const std::vector<StageMeasurement>& st) {
    // Per block the forward and backward, once each the head's: the FLOPs of a pass over its time.
    const double l = config.n_layer;
    const double flops = l * (st[0].flops + st[1].flops) + st[2].flops + st[3].flops;
    const double seconds = l * (st[0].seconds + st[1].seconds) + st[2].seconds + st[3].seconds;
    return flops / seconds;
  };
  const double base = pass_rate(calibrated);
  std::vector<DeviceModel::RatePoint> points;
  const std::array<std::pair<int, int>, 4> shapes = {
      std::pair{s.batch, std::max(1, seq_len / 2)}, std::pair{s.batch, seq_len}, std::pair{2 * s.batch, seq_len},
      std::pair{4 * s.batch, seq_len}};
  for (const auto& [batch, seq] : shapes) {
    const double tokens = static_cast<double>(batch) * seq;
    if (!points.empty() && tokens <= points.back().tokens) continue;  // a sequence of 1 cannot halve
    if (batch == s.batch && seq == seq_len) {
      points.push_back({tokens, 1.0});
      continue;
    }
    CalibrationSettings at = s;
    at.batch = batch;
    std::vector<StageMeasurement> st = stage_flops(config, batch, seq);
    time_stages(comm, at, config, seq, st);
    points.push_back({tokens, pass_rate(st) / base});
  }
  return points;
}

}  // namespace

Calibration calibrate(Communicator& comm, const CalibrationSettings& s) {
  STRATA_REQUIRE(s.repeats >= 1 && s.repeats <= 1000, "--repeats must be between 1 and 1000 (got {})", s.repeats);
  STRATA_REQUIRE(s.batch >= 1, "--batch must be at least 1 (got {})", s.batch);
  const Topology& t = comm.topology();
  STRATA_REQUIRE(t.level_count() >= 1, "calibration needs a topology");
  const GptConfig config = GptConfig::preset(s.model);
  const int seq_len = s.seq_len == 0 ? config.context_length : s.seq_len;
  STRATA_REQUIRE(seq_len >= 1 && seq_len <= config.context_length,
                 "--seq-len must be between 1 and the model's context length {} (got {})", config.context_length, seq_len);
  Calibration out;
  out.ranks_on_host = std::max(1, s.ranks_on_host);
  out.hardware_threads = static_cast<unsigned>(host_hardware_threads());
  if (s.device_from.empty()) {
    out.stages = stage_flops(config, s.batch, seq_len);
    time_stages(comm, s, config, seq_len, out.stages);
  }
  ClusterModel& c = out.cluster;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  c.name = "calibrated";
  const cpu::MatmulSettings mm = cpu::matmul_settings();
  c.description = fmt::format("measured by strata calibrate on {} ({} ranks, {}; {} micro-batch {} x {}; matmul {} {})",
                              host, comm.world_size(), t.to_string(), s.model, s.batch, seq_len,
                              cpu::matmul_impl_name(mm.impl), cpu::compute_dtype_name(mm.dtype));
  c.dtype = "f32";
  if (!s.device_from.empty()) {
    const ClusterModel earlier = ClusterModel::load(s.device_from);
    c.device = earlier.device;
    c.dtype = earlier.dtype;
    out.device_source = s.device_from;
    c.description += fmt::format("; device from {}", s.device_from);
  }
  double peak = 0.0;
  if (s.device_from.empty()) {
    c.device.name = fmt::format("rank on {}", host);
    for (const StageMeasurement& m : out.stages) peak = std::max(peak, m.flops / m.seconds);
    c.device.peak_flops = peak;
    c.device.efficiency = 1.0;
    for (const StageMeasurement& m : out.stages) c.device.stage_efficiency[m.stage] = m.flops / m.seconds / peak;
    c.device.memory_bandwidth = memory_bandwidth(comm, s.repeats);
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    c.device.memory_bytes = pages > 0 && page > 0 ? static_cast<double>(pages) * page / out.ranks_on_host : 0.0;
    c.device.overlaps_communication = spare_core_for_communication(thread_count(), out.ranks_on_host);
  }
  std::size_t largest_unit_bytes = 0;
  const ModelLayout layout(config);  // named: a range over a temporary's member would dangle
  for (const UnitLayout& u : layout.units()) largest_unit_bytes = std::max(largest_unit_bytes, u.numel * sizeof(float));
  for (int l = 0; l < t.level_count(); ++l) {
    const Level& level = t.level(l);
    LevelMeasurement m;
    m.name = level.name;
    m.fanout = level.fanout;
    LinkLevel link;
    link.name = level.name;
    link.fanout = l + 1 == t.level_count() ? 0 : level.fanout;
    if (level.fanout > 1) {
      // Pieces from the smallest up to what a unit's collective moves at this level (so caches hold
      // what they hold in a step), four times larger at each point: the curve the cost model reads.
      const std::size_t piece = std::max(s.large_piece_bytes, largest_unit_bytes / static_cast<std::size_t>(level.fanout));
      const double f1 = level.fanout - 1;
      for (std::size_t p = s.small_piece_bytes;; p = std::min(piece, p * 4)) {
        const double seconds = time_level(comm, l, p, s.repeats);
        // A larger call never takes less time: a dip is noise, and the file refuses it.
        const double kept = m.curve.empty() ? seconds : std::max(seconds, m.curve.back().seconds);
        m.curve.push_back({f1 * static_cast<double>(p), kept});
        if (p == piece) break;
      }
      m.small_seconds = m.curve.front().seconds;
      m.large_seconds = m.curve.back().seconds;
      const double extra = f1 * static_cast<double>(piece - s.small_piece_bytes);
      m.bandwidth = extra / std::max(1e-9, m.large_seconds - m.small_seconds);
      m.latency = std::max(0.0, (m.small_seconds - f1 * static_cast<double>(s.small_piece_bytes) / m.bandwidth) / f1);
      link.link_bandwidth = m.bandwidth;
      link.latency = m.latency;
      link.curve = m.curve;
    } else {
      link.link_bandwidth = 1e12;  // a level of one rank moves nothing
    }
    out.levels.push_back(m);
    c.levels.push_back(link);
  }
  if (s.device_from.empty()) {
    c.device.rate_by_tokens = rate_by_tokens(comm, s, config, seq_len, out.stages);
    time_interference(comm, s, config, seq_len, largest_unit_bytes, out);
    if (out.compute_alone.median > 0.0) {
      c.device.interference = std::max(0.0, out.compute_beside_collectives.median / out.compute_alone.median - 1.0);
    }
    fit_device(comm, s, config, seq_len, out, false);
  } else {
    // The links changed: how collectives behave inside a step on them is theirs to measure again.
    fit_device(comm, s, config, seq_len, out, true);
  }
  return out;
}

}  // namespace strata
