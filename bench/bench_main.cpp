// strata_bench: measurements for scripts/bench, each printed as one JSON line.
//   strata_bench step  --model M [--batch B --seq-len T --steps N --warmup W --threads K --profile]
//   strata_bench sgemm [--size N | --m M --n N --k K --trans-a 0|1 --trans-b 0|1] [--bf16-b] [--repeats R]
//   (every subcommand: --matmul onednn|openblas|reference, --compute-dtype fp32|bf16)
//   strata_bench attention [--batch B --seq-len T --channels C --heads H --repeats R --fused-only]
//   strata_bench sample --model M [--tokens N --no-cache] (strata sample's tokens per second)
//   strata_bench quant [--mib M --repeats R] (one thread; memcpy, each kernel per path, block sweep)
//   mpirun -np 8 strata_bench plans --model M --topology T [--plans 'a;b;...'] (one line per plan)
//   mpirun -np 2 strata_bench overlap [--models a,b --plan P] (per model: overlap off, then on)
// Times are medians over repeats; nothing here asserts anything.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/bench_attention.hpp"
#include "bench/bench_plans.hpp"
#include "bench/bench_quant.hpp"
#include "comm/mpi/mpi_runtime.hpp"
#include "core/aligned_buffer.hpp"
#include "core/large_allocations.hpp"
#include "core/blas.hpp"
#include "core/op_profile.hpp"
#include "core/rng.hpp"
#include "core/median.hpp"
#include "core/stopwatch.hpp"
#include "core/threads.hpp"
#include "model/cpu/gemm.hpp"
#include "engine/local_engine.hpp"
#include "model/init.hpp"
#include "train/sampling.hpp"
#include "train/train_step.hpp"

namespace {

// This machine's memory bandwidth on the step's threads, bytes read plus bytes written per second
// over 256 MB arrays, far past the caches: a copy (b = a) and an in-place update (b += a, which
// reads every line it writes, as AdamW and the gradient accumulation do, so no write-allocate
// traffic goes uncounted). The profile's memory-bound rows are set against the update's rate.
struct Bandwidth {
  double copy_gbps, update_gbps;
};
Bandwidth memory_bandwidth() {
  const std::size_t n = std::size_t{64} << 20;
  strata::AlignedBuffer<float> a(n), b(n);
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i & 255);
    b[i] = 0.0f;
  }
  const auto rate = [&](auto&& pass, double bytes_per_element) {
    std::vector<double> seconds;
    for (int r = 0; r < 5; ++r) {
      strata::Stopwatch watch;
      pass();
      seconds.push_back(watch.seconds());
    }
    return bytes_per_element * static_cast<double>(n) / strata::median(seconds) / 1e9;
  };
  const double copy = rate([&] {
#pragma omp parallel for simd schedule(static)
    for (std::size_t i = 0; i < n; ++i) b[i] = a[i];
  }, 8.0);
  const double update = rate([&] {
#pragma omp parallel for simd schedule(static)
    for (std::size_t i = 0; i < n; ++i) b[i] += a[i];
  }, 12.0);
  return {copy, update};
}

nlohmann::json bench_step(const std::string& model, int vocab, int batch, int seq_len, int steps, int warmup,
                          bool profile) {
  strata::GptConfig config = strata::GptConfig::preset(model);
  if (vocab > 0) config.vocab_size = vocab;
  strata::LocalEngine engine(config, batch, seq_len, 1);
  const std::size_t n = static_cast<std::size_t>(batch) * seq_len;
  std::vector<std::int32_t> inputs(n), targets(n);
  strata::Rng rng(5);
  const strata::StepRecipe recipe{strata::LrSchedule{1e-4, 0, steps + warmup, 1.0}, strata::AdamWHyper{}, 1.0, 1};
  auto fill = [&](int, std::span<std::int32_t> in, std::span<std::int32_t> tgt) {
    for (auto& t : in) t = static_cast<std::int32_t>(rng.below(config.vocab_size));
    for (auto& t : tgt) t = static_cast<std::int32_t>(rng.below(config.vocab_size));
  };
  std::vector<double> ms;
  auto& prof = strata::OpProfile::global();
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      prof.reset();
      prof.enable(profile);
    }
    strata::Stopwatch watch;
    strata::train_step(engine, recipe, s, fill, inputs, targets);
    if (s >= warmup) ms.push_back(watch.milliseconds());
  }
  prof.enable(false);
  const double med = strata::median(ms);
  const double flops = config.flops_per_token(seq_len) * static_cast<double>(n);
  nlohmann::json out = {{"bench", "step"},        {"model", model},
                        {"batch", batch},         {"seq_len", seq_len},
                        {"threads", strata::thread_count()},
                        {"parameters", config.parameter_count()},
                        {"median_ms", med},       {"tokens_per_s", static_cast<double>(n) / med * 1e3},
                        {"model_gflops", flops / med / 1e6}, {"steps", steps},
                        {"matmul", strata::cpu::matmul_impl_name(strata::cpu::matmul_settings().impl)},
                        {"compute_dtype", strata::cpu::compute_dtype_name(strata::cpu::matmul_settings().dtype)},
                        {"implementation", strata::cpu::matmul_description()}};
  if (profile) {
    nlohmann::json ops;
    double total = 0;
    for (std::size_t i = 0; i < strata::kOpNames.size(); ++i) {
      const auto op = static_cast<strata::Op>(i);
      const double per_step_ms = prof.seconds(op) * 1e3 / steps;
      ops[std::string(strata::kOpNames[i])] = {
          {"ms", per_step_ms}, {"bytes", prof.bytes(op) / steps}, {"flops", prof.flops(op) / steps}};
      total += per_step_ms;
    }
    ops["other"] = {{"ms", std::max(0.0, med - total)}, {"bytes", 0.0}, {"flops", 0.0}};
    out["profile"] = ops;
    const Bandwidth bandwidth = memory_bandwidth();
    out["copy_gbps"] = bandwidth.copy_gbps;
    out["update_gbps"] = bandwidth.update_gbps;
  }
  return out;
}

// C(m x n) = op(A) op(B) (by default A(m x k) B(n x k)^T, a linear layer's forward), through the
// matmul seam as configured; with bf16_b, B is handed over as a bf16 copy, as the model's weights
// are under bf16 compute (only A is converted per call).
nlohmann::json bench_sgemm(int m, int n, int k, int repeats, bool trans_a, bool trans_b, bool bf16_b) {
  strata::AlignedBuffer<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(n) * k),
      c(static_cast<std::size_t>(m) * n);
  strata::AlignedBuffer<strata::bf16> b16(bf16_b ? b.size() : 0);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 1e-3f * static_cast<float>(i % 7);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 1e-3f * static_cast<float>(i % 5);
  if (bf16_b) strata::fp32_to_bf16(b16.data(), b.data(), b.size());
  std::vector<double> seconds;
  for (int r = 0; r < repeats + 2; ++r) {
    strata::Stopwatch watch;
    strata::cpu::gemm(trans_a ? strata::Transpose::kYes : strata::Transpose::kNo,
                      trans_b ? strata::Transpose::kYes : strata::Transpose::kNo, m, n, k, 1.0f, a.data(), trans_a ? m : k,
                      b.data(), trans_b ? k : n, 0.0f, c.data(), n, {}, bf16_b ? b16.data() : nullptr);
    if (r > 1) seconds.push_back(watch.seconds());  // the first calls pay for threads and primitive creation
  }
  const double med = strata::median(seconds);
  const strata::cpu::MatmulSettings s = strata::cpu::matmul_settings();
  return {{"bench", "sgemm"}, {"m", m}, {"n", n}, {"k", k}, {"trans_a", trans_a}, {"trans_b", trans_b},
          {"bf16_b", bf16_b},
          {"threads", strata::thread_count()},
          {"matmul", strata::cpu::matmul_impl_name(s.impl)}, {"compute_dtype", strata::cpu::compute_dtype_name(s.dtype)},
          {"median_ms", med * 1e3}, {"gflops", 2.0 * m * n * static_cast<double>(k) / med / 1e9},
          {"implementation", strata::cpu::matmul_description()}, {"blas", strata::blas_description()}};
}

// strata sample's speed on freshly initialised weights of a preset: `tokens` new tokens after a
// one-token prompt, greedy, with the key/value cache or recomputing the context for every token.
nlohmann::json bench_sample(const std::string& model, int tokens, bool cache) {
  const strata::GptConfig config = strata::GptConfig::preset(model);
  const strata::ModelLayout layout(config);
  strata::UnitBuffers weights(layout);
  for (std::size_t u = 0; u < layout.unit_count(); ++u) strata::init_unit(layout, u, 1, weights.unit(u));
  strata::SampleSettings settings;
  settings.tokens = tokens;
  settings.top_k = 1;
  settings.cache = cache;
  strata::Rng rng(1);
  const std::vector<std::int32_t> prompt = {0};
  strata::generate(config, weights, prompt, {1, 1, 0, cache}, rng);  // warm-up: threads, primitives
  strata::Stopwatch watch;
  const auto out = strata::generate(config, weights, prompt, settings, rng);
  const double seconds = watch.seconds();
  return {{"bench", "sample"}, {"model", model}, {"tokens", out.size()}, {"cache", cache},
          {"threads", strata::thread_count()}, {"seconds", seconds},
          {"tokens_per_s", static_cast<double>(out.size()) / seconds}};
}

}  // namespace

int main(int argc, char** argv) {
  strata::map_large_allocations();  // as strata itself runs
  strata::MpiRuntime mpi(&argc, &argv);
  CLI::App app{"strata_bench: one measurement per call, printed as a JSON line"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("--threads", threads, "worker threads (0: OMP_NUM_THREADS or all cores)");
  std::string matmul = "auto", compute_dtype = "fp32";
  app.add_option("--matmul", matmul, "onednn, openblas, reference or auto (oneDNN where built)")->capture_default_str();
  app.add_option("--compute-dtype", compute_dtype, "fp32 or bf16 matrix-product inputs")->capture_default_str();

  std::string model = "tiny";
  int vocab = 0, batch = 4, seq_len = 64, steps = 10, warmup = 2;
  bool profile = false;
  CLI::App* step = app.add_subcommand("step", "median time of a full training step (forward, backward, AdamW)");
  step->add_option("--model", model, "model preset")->capture_default_str();
  step->add_option("--vocab-size", vocab, "override the preset's vocabulary (0: keep)");
  step->add_option("--batch", batch, "sequences per step")->capture_default_str();
  step->add_option("--seq-len", seq_len, "tokens per sequence")->capture_default_str();
  step->add_option("--steps", steps, "measured steps")->capture_default_str();
  step->add_option("--warmup", warmup, "unmeasured steps first")->capture_default_str();
  step->add_flag("--profile", profile, "add per-operation milliseconds, bytes moved and FLOPs per step, and the memory bandwidth");

  int size = 2048, repeats = 5, gm = 0, gn = 0, gk = 0;
  CLI::App* sgemm = app.add_subcommand("sgemm", "the matmul seam's rate on size^3, or on m x n x k");
  sgemm->add_option("--size", size, "matrix size")->capture_default_str();
  sgemm->add_option("--m", gm, "rows of A and C (with --n and --k instead of --size)");
  sgemm->add_option("--n", gn, "columns of C");
  sgemm->add_option("--k", gk, "the inner dimension");
  bool ta = false, tb = true;
  sgemm->add_option("--trans-a", ta, "A stored k x m (1) or m x k (0)")->capture_default_str();
  sgemm->add_option("--trans-b", tb, "B stored n x k (1) or k x n (0)")->capture_default_str();
  sgemm->add_option("--repeats", repeats, "measured repeats")->capture_default_str();
  bool bf16_b = false;
  sgemm->add_flag("--bf16-b", bf16_b, "hand B over as a bf16 copy, as the model's weights are under bf16 compute");

  int sample_tokens = 64;
  bool no_cache = false;
  CLI::App* sample = app.add_subcommand("sample", "strata sample's tokens per second on a preset (greedy)");
  sample->add_option("--model", model, "model preset")->capture_default_str();
  sample->add_option("--tokens", sample_tokens, "new tokens after a one-token prompt")->capture_default_str();
  sample->add_flag("--no-cache", no_cache, "recompute the whole context for every token");

  strata::AttentionBenchSettings attention_settings;
  bool fused_only = false;
  CLI::App* attention = app.add_subcommand("attention", "fused and plain causal attention, forward and backward");
  attention->add_option("--batch", attention_settings.batch, "sequences")->capture_default_str();
  attention->add_option("--seq-len", attention_settings.seq_len, "tokens per sequence")->capture_default_str();
  attention->add_option("--channels", attention_settings.channels, "model width C")->capture_default_str();
  attention->add_option("--heads", attention_settings.heads, "heads (C / heads per head)")->capture_default_str();
  attention->add_option("--repeats", attention_settings.repeats, "measured repeats")->capture_default_str();
  attention->add_flag("--fused-only", fused_only, "skip the plain attention (its T x T buffer)");

  strata::QuantBenchSettings quant_settings;
  CLI::App* quant = app.add_subcommand("quant", "block quantization kernels on one thread against memcpy, and a block sweep");
  quant->add_option("--mib", quant_settings.mib, "MiB of fp32 input")->capture_default_str();
  quant->add_option("--repeats", quant_settings.repeats, "measured repeats")->capture_default_str();

  strata::PlanBenchSettings plan_settings;
  // Every preset, and zero3, zeropp and hier3 each with and without quantized collectives.
  plan_settings.plans = {"ddp",   "zero1", "zero2", "zero3", "zero3,quant_weights=int8,quant_grads=int4",
                         "zeropp,quant=none", "zeropp", "mics", "hier3", "hier3,quant_weights=int8,quant_grads=int4"};
  CLI::App* plans = app.add_subcommand("plans", "under mpirun: each plan's ms/step and bytes per level");
  plans->add_option("--model", plan_settings.model, "model preset")->capture_default_str();
  plans->add_option("--vocab-size", plan_settings.vocab, "override the preset's vocabulary (0: keep)");
  plans->add_option("--topology", plan_settings.topology, "virtual topology")->capture_default_str();
  // ';' between plans: a plan itself may hold commas ("hier3,quant_grads=int4").
  plans->add_option("--plans", plan_settings.plans, "plans to run, separated by ';'")->delimiter(';')->capture_default_str();
  plans->add_option("--dtype", plan_settings.dtype, "fp32 or bf16")->capture_default_str();
  plans->add_option("--batch", plan_settings.batch, "sequences per rank per micro-batch")->capture_default_str();
  plans->add_option("--seq-len", plan_settings.seq_len, "tokens per sequence")->capture_default_str();
  plans->add_option("--grad-accum", plan_settings.grad_accum, "micro-batches per step")->capture_default_str();
  plans->add_option("--steps", plan_settings.steps, "measured steps per plan")->capture_default_str();
  plans->add_option("--overlap", plan_settings.overlap,
                    "off (0): inline; on (1): the communication thread forced; auto: as strata train resolves it")
      ->capture_default_str()->check(CLI::IsMember({"off", "on", "auto", "0", "1"}));
  plans->add_option("--boundary-overlap", plan_settings.boundary_overlap,
                    "1: the step boundary's collectives overlap the last backward and the next forward; 0: at the boundary")
      ->capture_default_str();
  plans->add_option("--cluster", plan_settings.cluster, "also replay each plan's schedule on this cluster file or preset");

  strata::OverlapBenchSettings overlap_settings;
  CLI::App* overlap = app.add_subcommand("overlap", "under mpirun: step time and exposed communication, overlap off and on");
  overlap->add_option("--models", overlap_settings.models, "model presets")->delimiter(',')->capture_default_str();
  overlap->add_option("--plan", overlap_settings.plan, "shard plan")->capture_default_str();
  overlap->add_option("--batch", overlap_settings.batch, "sequences per rank")->capture_default_str();
  overlap->add_option("--seq-len", overlap_settings.seq_len, "tokens per sequence")->capture_default_str();
  overlap->add_option("--steps", overlap_settings.steps, "measured steps")->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  try {
    strata::set_thread_count(threads);
    strata::cpu::set_matmul(strata::cpu::matmul_settings_from(matmul, compute_dtype));
    if (*step) fmt::print("{}\n", bench_step(model, vocab, batch, seq_len, steps, warmup, profile).dump());
    if (*sample) fmt::print("{}\n", bench_sample(model, sample_tokens, !no_cache).dump());
    if (*sgemm) {
      const bool shaped = gm > 0 && gn > 0 && gk > 0;
      fmt::print("{}\n", bench_sgemm(shaped ? gm : size, shaped ? gn : size, shaped ? gk : size, repeats, ta, tb, bf16_b).dump());
    }
    if (*attention) {
      attention_settings.plain = !fused_only;
      strata::bench_attention(attention_settings);
    }
    if (*quant) strata::bench_quant(quant_settings);
    if (*plans) strata::bench_plans(plan_settings);
    if (*overlap) strata::bench_overlap(overlap_settings);
  } catch (const std::exception& e) {
    strata::MpiRuntime::abort(std::string("strata_bench: ") + e.what(), 1);
  }
  return 0;
}
