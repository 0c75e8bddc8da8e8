// `strata calibrate`: runs the calibration on every rank, prints what it measured, and writes the
// cluster file (rank 0) that `strata simulate --cluster FILE` reads.
#include "cli/calibrate_command.hpp"

#include <fmt/format.h>

#include <memory>

#include "core/exit_codes.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "comm/mpi/mpi_runtime.hpp"
#include "comm/mpi/topology_detection.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/format_units.hpp"
#include "core/threads.hpp"
#include "comm/agreement.hpp"
#include "model/cpu/gemm.hpp"
#include "train/engine_setup.hpp"
#include "train/output_policy.hpp"
#include "train/calibration.hpp"

namespace strata {

namespace {

struct CalibrateState {
  CalibrationSettings settings;
  std::string topology = "flat";
  std::string out = "calibrated-cluster.toml";
  bool force = false;
  int threads = 0;
  std::string matmul = "auto", compute_dtype = "fp32";
};

void print_calibration(const Calibration& c, const std::string& path) {
  fmt::print("calibration: {}\n", c.cluster.description);
  if (c.device_source.empty()) {
    fmt::print("\n{:<16} {:>14} {:>12} {:>12}\n", "compute stage", "GFLOP per call", "ms per call", "GFLOP/s");
    for (const StageMeasurement& m : c.stages) {
      fmt::print("{:<16} {:>14.4g} {:>12.4g} {:>12.4g}\n", m.stage, m.flops / 1e9, m.seconds * 1e3,
                 m.flops / m.seconds / 1e9);
    }
    fmt::print("memory bandwidth (streaming add, every rank at once): {:.4g} GB/s per rank\n",
               c.cluster.device.memory_bandwidth / 1e9);
    fmt::print("process memory beyond the engine's (program, MPI, threads, allocator; the memory model's fixed "
               "part): {}\n",
               format_bytes(c.cluster.device.process_bytes));
    fmt::print("compute rate by tokens per micro-batch (a whole pass, against the calibrated shape's):");
    for (const DeviceModel::RatePoint& p : c.cluster.device.rate_by_tokens) fmt::print(" {:g}: {:.3g};", p.tokens, p.factor);
    fmt::print("\n");
  } else {
    fmt::print("\ndevice: kept from {} (efficiency {:.4g}, {:.4g} GFLOP/s peak); only the links were measured, and "
               "the collective efficiency on them: zero3 measured {:.4g} ms/step, {:.4g} from the figures alone; "
               "collective efficiency {:.4g}\n",
               c.device_source, c.cluster.device.efficiency, c.cluster.device.peak_flops / 1e9,
               c.second_measured_seconds * 1e3, c.second_simulated_seconds * 1e3, c.cluster.device.collective_efficiency);
  }
  fmt::print("\nper level: mean of an all-gather and a reduce-scatter, small and unit-sized pieces, fitted to "
             "(f-1) latency + bytes / bandwidth\n{:<8} {:>6} {:>14} {:>14} {:>16} {:>12}\n", "level", "fanout", "small (us)", "large (ms)",
             "GB/s per rank", "latency us");
  for (const LevelMeasurement& m : c.levels) {
    if (m.fanout <= 1) {
      fmt::print("{:<8} {:>6} {:>14} {:>14} {:>16} {:>12}\n", m.name, m.fanout, "-", "-", "-", "-");
      continue;
    }
    fmt::print("{:<8} {:>6} {:>14.4g} {:>14.4g} {:>16.4g} {:>12.4g}\n", m.name, m.fanout, m.small_seconds * 1e6,
               m.large_seconds * 1e3, m.bandwidth / 1e9, m.latency * 1e6);
  }
  fmt::print("\nbandwidth by call size (the curve the simulator interpolates): bytes one rank sends per call, then "
             "microseconds and achieved GB/s per rank\n");
  for (const LevelMeasurement& m : c.levels) {
    if (m.curve.empty()) continue;
    fmt::print("{:<8}", m.name);
    for (const TransferPoint& p : m.curve) {
      fmt::print(" {}: {:.4g} us {:.3g} GB/s;", format_bytes(p.bytes), p.seconds * 1e6, p.bytes / p.seconds / 1e9);
    }
    fmt::print("\n");
  }
  if (c.device_source.empty()) {
    fmt::print("\n{} ranks on this host, {} hardware threads: the communication thread {}\n", c.ranks_on_host,
               c.hardware_threads,
               c.cluster.device.overlaps_communication ? "overlaps compute" : "cannot overlap compute (no spare core)");
    if (c.interference_level.empty()) {
      fmt::print("interference: not measured (one rank, or an MPI library without MPI_THREAD_SERIALIZED): 0\n");
    } else {
      fmt::print("interference: a model pass takes {:.4g} ms alone (spread {:.0f}%) and {:.4g} ms while the communication "
                 "thread runs {}-level all-gathers (spread {:.0f}%): compute is {:.0f}% slower beside collectives\n",
                 c.compute_alone.median * 1e3, 100 * c.compute_alone.spread, c.compute_beside_collectives.median * 1e3,
                 c.interference_level, 100 * c.compute_beside_collectives.spread, 100 * c.cluster.device.interference);
    }
    fmt::print("reference runs ({} steps each, 2 micro-batches, inline): ddp measured {:.4g} ms/step (spread {:.0f}%), "
               "zero3 {:.4g}; the stage and link figures alone simulate {:.4g} and {:.4g} ms; fitted device efficiency "
               "{:.4g}, collective efficiency {:.4g}\n",
               c.reference_steps, c.reference_measured_seconds * 1e3, 100 * c.reference_spread,
               c.second_measured_seconds * 1e3, c.reference_simulated_seconds * 1e3, c.second_simulated_seconds * 1e3,
               c.cluster.device.efficiency, c.cluster.device.collective_efficiency);
    if (c.collectives_handed > 0) {
      fmt::print("hand-offs (no core for the communication thread): zero3 {:.4g} ms/step inline, {:.4g} with the thread "
                 "forced on, {} collectives handed to it per step: {:.3g} us each (handoff_seconds)\n",
                 c.inline_zero3_seconds * 1e3, c.threaded_zero3_seconds * 1e3, c.collectives_handed,
                 c.cluster.device.handoff_seconds * 1e6);
    }
    for (const auto& [what, spread] : {std::pair{"the reference step", c.reference_spread},
                                       std::pair{"compute alone", c.compute_alone.spread},
                                       std::pair{"compute beside collectives", c.compute_beside_collectives.spread}}) {
      if (spread > Calibration::kWideSpread) {
        fmt::print("warning: the times of {} spread {:.0f}% around their median: the machine was busy or noisy, and "
                   "a second calibration may differ as much; calibrate on a quiet machine, or with more --repeats\n",
                   what, 100 * spread);
      }
    }
  }
  fmt::print("cluster file: {} (strata simulate --cluster {} --nodes N)\n", path, path);
}

void run_calibrate(CalibrateState st) {
  MpiCommunicator world(Topology::parse("flat", MpiRuntime::world_size()));
  const bool root = world.rank() == 0;
  std::unique_ptr<Topology> topology;
  std::string problem;
  // Detection is collective: every rank must ask for it, or none (a mixed launch is refused).
  const bool detect = st.topology == "auto";
  if (!all_equal(world, detect ? 1 : 0)) {
    exit_if_any_failed(world, detect ? "--topology auto on some ranks only: every rank must run the same settings" : "",
                       kExitUsage);
  }
  try {
    // The levels found are the ones measured.
    if (detect) {
      const DetectedTopology found = detect_topology();
      st.topology = found.levels.spec;
      if (root) {
        for (const std::string& line : found.lines()) fmt::print("{}\n", line);
      }
    }
    STRATA_REQUIRE(st.threads >= 0, "--threads must not be negative (got {})", st.threads);
    cpu::set_matmul(cpu::matmul_settings_from(st.matmul, st.compute_dtype));
    topology = std::make_unique<Topology>(resolve_topology(st.topology, world.world_size()));
    // Rank 0 writes the file: a path it cannot write is refused before anything is measured.
    if (root) require_output(st.out, "--out", calibrated_cluster_output(), {st.settings.device_from}, st.force);
  } catch (const Error& e) {
    problem = e.what();
  }
  exit_if_any_failed(world, problem, kExitUsage);
  st.settings.ranks_on_host = MpiRuntime::ranks_on_this_host();
  set_thread_count(worker_threads(st.threads, st.settings.ranks_on_host));
  MpiCommunicator comm(*topology);
  Calibration c;
  problem.clear();
  try {
    c = calibrate(comm, st.settings);
  } catch (const Error& e) {
    problem = e.what();
  }
  exit_if_any_failed(world, problem, kExitUsage);
  if (!root) return;
  write_file_atomically(st.out, "# " + c.cluster.description + "\n" + c.cluster.to_toml());
  print_calibration(c, st.out);
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto st = std::make_shared<CalibrateState>();
  CLI::App* c = app.add_subcommand(
      "calibrate",
      "Under mpirun: measure this machine's compute rate for the model's stages, its memory bandwidth, and the "
      "bandwidth and latency of each level of the declared topology (all ranks at once), and write a cluster file "
      "for 'strata simulate --cluster FILE'.");
  c->add_option("--topology", st->topology, "the declared topology, e.g. gcd:2,gpu:2,node:2, or auto (found from the job, as train's)")->capture_default_str();
  c->add_option("--model", st->settings.model, "model preset whose stages are timed")->capture_default_str();
  c->add_option("--batch", st->settings.batch, "sequences per micro-batch")->capture_default_str();
  c->add_option("--seq-len", st->settings.seq_len, "tokens per sequence (0: the model's context length)")
      ->capture_default_str();
  c->add_option("--repeats", st->settings.repeats, "timed repetitions per figure (medians)")->capture_default_str();
  c->add_option("--out", st->out, "cluster file to write")->capture_default_str();
  c->add_option("--device", st->settings.device_from,
                "keep the device figures (stage rates, memory bandwidth, fitted efficiency) of this earlier cluster "
                "file and measure only the links (e.g. after a network change; empty: measure everything)");
  c->add_option("--threads", st->threads,
                 "worker threads per rank, as strata train's --threads (0: OMP_NUM_THREADS, else the host's cores "
                 "divided among its ranks)")
      ->capture_default_str();
  c->add_option("--matmul", st->matmul,
                "what computes the matrix products, as strata train's --matmul: auto, onednn, openblas or reference")
      ->capture_default_str();
  c->add_option("--compute-dtype", st->compute_dtype,
                "matrix-product inputs, as strata train's --compute-dtype: fp32 or bf16 (calibrate with the mode you "
                "will train in: the stage rates differ)")
      ->capture_default_str();
  c->add_flag("--force", st->force,
              "replace the --out file even when it is not an earlier calibrated cluster file, the --device file or in "
              "a checkpoint");
  c->callback([st]() { run_calibrate(*st); });
}

}  // namespace strata
