// Shared simulation flags and their resolution.
#include "cli/simulation_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/exit_codes.hpp"
#include "comm/mpi/mpi_runtime.hpp"
#include "core/error.hpp"
#include "hw/cluster_model.hpp"
#include "sim/engine_profile.hpp"

namespace strata {

void add_simulation_options(CLI::App& c, SimulationFlags& f) {
  c.add_option("--cluster", f.cluster, "cluster preset (" + ClusterModel::preset_list() + ") or TOML file")
      ->capture_default_str()->group("cluster");
  c.add_option("--model", f.model, "model preset (see 'strata models'), up to gpt-20b")->capture_default_str()->group("model");
  c.add_option("--seq-len", f.seq_len, "tokens per sequence (0: the model's context length)")->capture_default_str()->group("model");
  c.add_option("--micro-batch", f.micro_batch, "sequences per device per micro-batch")->capture_default_str()->group("batch");
  c.add_option("--global-batch", f.global_batch,
               "sequences per optimizer step over all devices (0: use --grad-accum); must be a multiple of "
               "micro-batch x devices, and sets the accumulation at each node count")
      ->capture_default_str()->group("batch");
  c.add_option("--grad-accum", f.grad_accum, "micro-batches per optimizer step when --global-batch is 0 (default 1)")
      ->group("batch");
  c.add_option("--dtype", f.dtype, "f32 or bf16 working weights and gradients (default: the cluster's)")->group("model");
  c.add_option("--overlap", f.overlap, "1: collectives on the communication stream as the engine runs them; 0: inline")
      ->capture_default_str()->group("executor");
  c.add_option("--activation-checkpointing", f.activation_checkpointing,
               "none; blocks: every block keeps only its input and redoes its forward before its backward (a "
               "recompute op of the schedule, as strata train --activation-checkpointing runs it); every:K: "
               "blocks 0, K, 2K, ... do")
      ->capture_default_str()->group("executor");
  c.add_option("--max-live-bytes", f.max_live_bytes, "bound on gathered-but-not-released bytes, e.g. 4GiB (0: none)")
      ->capture_default_str()->group("executor");
  c.add_option("--engine", f.engine,
               "how the plan's collectives are issued: strata (level by level, whole units, step boundary overlapped) "
               "or deepspeed (flat, in DeepSpeed ZeRO's default buckets, boundary not overlapped); simulate takes a "
               "comma-separated list and prints each")
      ->capture_default_str()->group("executor");
}

namespace {

// The items between separators, empty ones included ("a,,b" is three).
std::vector<std::string> split_on(const std::string& text, char separator) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t at = text.find(separator, start);
    items.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return items;
    start = at + 1;
  }
}

}  // namespace

std::vector<std::string> parse_engine_list(const std::string& text) {
  std::vector<std::string> engines;
  for (const std::string& item : split_on(text, ',')) {
    (void)describe_engine_profile(item);  // refuses an unknown profile, naming the known ones
    STRATA_REQUIRE(std::find(engines.begin(), engines.end(), item) == engines.end(), "--engine names '{}' twice", item);
    engines.push_back(item);
  }
  return engines;
}

std::vector<int> parse_int_list(const std::string& text, const std::string& what, int minimum) {
  std::vector<int> values;
  for (const std::string& item : split_on(text, ',')) {
    int v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    STRATA_REQUIRE(!item.empty() && ec == std::errc() && ptr == item.data() + item.size() && v >= minimum,
                   "{} must be a comma-separated list of {} (got '{}')", what,
                   minimum == 1 ? std::string("positive integers") : fmt::format("integers of at least {}", minimum),
                   text);
    values.push_back(v);
  }
  return values;
}

std::vector<std::string> split_plan_list(const std::string& text) {
  std::vector<std::string> plans;
  for (const std::string& group : split_on(text, ';')) {
    bool open = false;  // a plan of this group takes key=value items
    for (const std::string& item : split_on(group, ',')) {
      if (open && item.find('=') != std::string::npos) {
        plans.back() += "," + item;
      } else {
        plans.push_back(item);
        open = true;
      }
    }
  }
  for (const std::string& p : plans) STRATA_REQUIRE(!p.empty(), "--plan has an empty item in '{}'", text);
  return plans;
}

SimulationInputs simulation_inputs(const SimulationFlags& f, const ClusterModel& cluster, int ranks) {
  SimulationInputs in;
  in.model = GptConfig::preset(f.model);
  in.model.validate();
  STRATA_REQUIRE(f.seq_len >= 0 && f.seq_len <= in.model.context_length,
                 "--seq-len must be between 1 and the model's context length {} (0: all of it; got {})",
                 in.model.context_length, f.seq_len);
  in.seq_len = f.seq_len == 0 ? in.model.context_length : f.seq_len;
  STRATA_REQUIRE(f.micro_batch >= 1, "--micro-batch must be at least 1 (got {})", f.micro_batch);
  in.micro_batch = f.micro_batch;
  STRATA_REQUIRE(f.global_batch >= 0, "--global-batch must not be negative (got {})", f.global_batch);
  STRATA_REQUIRE(f.grad_accum >= 0, "--grad-accum must be at least 1 (got {})", f.grad_accum);
  STRATA_REQUIRE(f.global_batch == 0 || f.grad_accum == 0,
                 "give --global-batch or --grad-accum, not both (the global batch sets the accumulation)");
  if (f.global_batch > 0) {
    const long long per_micro = static_cast<long long>(f.micro_batch) * ranks;
    STRATA_REQUIRE(f.global_batch % per_micro == 0,
                   "--global-batch {} is not a multiple of micro-batch {} x {} devices = {}", f.global_batch,
                   f.micro_batch, ranks, per_micro);
    STRATA_REQUIRE(f.global_batch / per_micro <= 100000, "--global-batch {} needs {} micro-batches per step; at most 100000",
                   f.global_batch, f.global_batch / per_micro);
    in.grad_accum = static_cast<int>(f.global_batch / per_micro);
  } else {
    in.grad_accum = f.grad_accum == 0 ? 1 : f.grad_accum;
  }
  const std::string dtype = f.dtype.empty() ? cluster.dtype : f.dtype;
  STRATA_REQUIRE(dtype == "f32" || dtype == "bf16", "--dtype must be f32 or bf16 (got '{}')", dtype);
  in.weight_dtype = in.grad_dtype = dtype == "bf16" ? DType::kBF16 : DType::kF32;
  STRATA_REQUIRE(f.overlap == 0 || f.overlap == 1, "--overlap must be 0 or 1 (got {})", f.overlap);
  in.overlap = f.overlap == 1;
  in.activation_checkpointing = parse_activation_checkpointing(f.activation_checkpointing);
  in.max_live_bytes = static_cast<std::uint64_t>(parse_byte_size(f.max_live_bytes, "--max-live-bytes"));
  return in;
}

std::string describe_cluster(const ClusterModel& c) {
  std::string levels;
  for (const LinkLevel& l : c.levels) {
    if (!levels.empty()) levels += ", ";
    levels += fmt::format("{}:{} {:g} GB/s per rank", l.name, l.fanout == 0 ? std::string("*") : std::to_string(l.fanout),
                          l.rank_bandwidth() / 1e9);
    if (l.ranks_per_link > 1) levels += fmt::format(" ({:g} GB/s link / {} ranks)", l.link_bandwidth / 1e9, l.ranks_per_link);
    levels += fmt::format(" {:g} us", l.latency * 1e6);
  }
  return fmt::format("cluster {}: {}\n  device {}: {:g} TFLOP/s x {:g}, {:g} GB/s memory, {:g} GB; {}\n  levels: {}",
                     c.name, c.description, c.device.name, c.device.peak_flops / 1e12, c.device.efficiency,
                     c.device.memory_bandwidth / 1e9, c.device.memory_bytes / 1e9,
                     c.device.overlaps_communication ? "computes while communicating" : "does not compute while communicating",
                     levels);
}

std::string describe_model(const SimulationInputs& in, int ranks) {
  return fmt::format("model {}: {:.3g}B parameters, L={} C={} heads={} T={}; micro-batch {}, {} micro-batches x {} "
                     "devices = {} sequences per step; {}{}",
                     in.model.name, static_cast<double>(in.model.parameter_count()) / 1e9, in.model.n_layer,
                     in.model.n_embd, in.model.n_head, in.seq_len, in.micro_batch, in.grad_accum, ranks,
                     static_cast<long long>(in.micro_batch) * in.grad_accum * ranks, dtype_name(in.weight_dtype),
                     in.activation_checkpointing.enabled()
                         ? ", activation checkpointing " + activation_checkpointing_name(in.activation_checkpointing)
                         : std::string());
}

void run_single_process(const std::function<void()>& body) {
  if (MpiRuntime::world_rank() != 0) return;
  try {
    body();
  } catch (const Error& e) {
    fmt::print(stderr, "strata: error: {}\n", e.what());
    throw AgreedExit{kExitUsage};
  }
}

}  // namespace strata
