// The training loop.
#include "train/trainer.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "comm/agreement.hpp"
#include "core/atomic_file.hpp"
#include "core/blas.hpp"
#include "core/error.hpp"
#include "core/exit_codes.hpp"
#include "core/format_units.hpp"
#include "core/process_memory.hpp"
#include "core/median.hpp"
#include "core/path_checks.hpp"
#include "core/stop_signals.hpp"
#include "model/cpu/gemm.hpp"
#include "train/auto_plan.hpp"
#include "train/engine_setup.hpp"
#include "train/sampling.hpp"
#include "train/output_policy.hpp"
#include "core/stopwatch.hpp"
#include "core/thread_wait.hpp"
#include "train/builtin_corpus.hpp"
#include "train/byte_tokenizer.hpp"
#include "train/metrics_log.hpp"
#include "train/train_step.hpp"

namespace strata {

namespace {

TokenData load_data(const TrainConfig& config, const std::string& path, int vocab) {
  if (path == "builtin") {
    STRATA_REQUIRE(vocab >= ByteTokenizer::kVocabSize,
                   "the built-in corpus is byte-level text: the model needs a vocabulary of at least {} (it has {})",
                   ByteTokenizer::kVocabSize, vocab);
    TokenData data;
    data.source = "built-in corpus";
    data.tokens = ByteTokenizer::encode(builtin_corpus(static_cast<std::size_t>(config.builtin_bytes)), data.source);
    data.description = "generated text, byte tokens";
    return data;
  }
  return load_token_file(path, parse_data_format(config.data_format), vocab);
}

TokenData slice(const TokenData& from, Range range, const std::string& what) {
  TokenData out;
  out.tokens.assign(from.tokens.begin() + static_cast<std::ptrdiff_t>(range.begin),
                    from.tokens.begin() + static_cast<std::ptrdiff_t>(range.end));
  out.source = fmt::format("{} ({})", from.source, what);
  out.description = from.description;
  return out;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace

Trainer::Trainer(const TrainConfig& config, int rank, int world) : config_(config), rank_(rank), world_(world) {
  config_.validate();
  STRATA_CHECK(world_ >= 1 && rank_ >= 0 && rank_ < world_, "rank {} of a job of {}", rank_, world_);
  model_ = config_.model_config();
  seq_len_ = config_.resolved_seq_len();
  // Every path is checked for its kind before anything is read or written.
  if (config_.data != "builtin") require_input_file(config_.data, "--data");
  if (!config_.val_data.empty()) require_input_file(config_.val_data, "--val-data");
  const std::vector<std::string> inputs = {config_.data, config_.val_data, config_.resume, config_.save,
                                           config_.init_from};
  if (!config_.metrics.empty() && rank_ == 0) {
    require_output(config_.metrics, "--metrics", metrics_output(), inputs, config_.force);
  }
  if (!config_.timeline.empty()) {
    require_output(rank_ == 0 ? config_.timeline : fmt::format("{}.rank{}", config_.timeline, rank_), "--timeline",
                   trace_output(), inputs, config_.force);
  }
  TokenData all = load_data(config_, config_.data, model_.vocab_size);
  if (!config_.val_data.empty()) {
    train_data_ = std::move(all);
    val_data_ = load_data(config_, config_.val_data, model_.vocab_size);
  } else if (config_.val_fraction > 0.0) {
    const TrainValSplit split = split_train_val(all.tokens.size(), config_.val_fraction);
    train_data_ = slice(all, split.train, "training split");
    val_data_ = slice(all, split.val, fmt::format("validation split, the last {:g}%", config_.val_fraction * 100));
  } else {
    train_data_ = std::move(all);
  }
  // Checkpoint paths are checked before any step runs, so a bad one costs nothing.
  if (!config_.save.empty()) check_checkpoint_root(config_.save);
  resume_ = choose_resume(config_.resume, config_.save);
  if (!config_.init_from.empty()) {
    require_input_file(config_.init_from, "--init-from");
    init_ = std::make_unique<PretrainedWeights>(config_.init_from, model_);
  }
  // The loaders serve global batches: every rank takes its rows.
  const int global_batch = config_.batch_size * world_;
  train_loader_ = std::make_unique<BatchLoader>(train_data_.tokens, train_data_.source, global_batch, seq_len_);
  if (!val_data_.tokens.empty() || !config_.val_data.empty()) {
    val_loader_ = std::make_unique<BatchLoader>(val_data_.tokens, val_data_.source, global_batch, seq_len_);
  }
}

Trainer::~Trainer() = default;

// STRATA_FILE_SIZE_LIMIT=BYTES: every file this process writes from here on stops growing at
// BYTES (RLIMIT_FSIZE, SIGXFSZ ignored, so writes fail with EFBIG as on a full disk). Set after
// MPI's start-up, whose own files it would otherwise break: how the tests fill a disk.
static void limit_file_size_for_tests() {
  const char* limit = std::getenv("STRATA_FILE_SIZE_LIMIT");
  if (limit == nullptr) return;
  char* end = nullptr;
  const unsigned long long bytes = std::strtoull(limit, &end, 10);
  STRATA_REQUIRE(end != limit && *end == '\0', "STRATA_FILE_SIZE_LIMIT must be a number of bytes (got '{}')", limit);
  std::signal(SIGXFSZ, SIG_IGN);
  const rlimit r{static_cast<rlim_t>(bytes), static_cast<rlim_t>(bytes)};
  STRATA_REQUIRE(setrlimit(RLIMIT_FSIZE, &r) == 0, "STRATA_FILE_SIZE_LIMIT: setrlimit failed");
}

double Trainer::validation_loss(TrainingEngine& engine) {
  const std::size_t n = static_cast<std::size_t>(config_.batch_size) * seq_len_;
  std::vector<std::int32_t> inputs(n), targets(n);
  const int batches = static_cast<int>(std::min<std::uint64_t>(config_.val_batches, val_loader_->batches_per_epoch()));
  double total = 0.0;
  for (int b = 0; b < batches; ++b) {
    val_loader_->fill(static_cast<std::uint64_t>(b), rank_ * config_.batch_size, config_.batch_size, inputs, targets);
    total += engine.evaluate(inputs, targets);
  }
  return total / batches;
}

void Trainer::save(TrainingEngine& engine, Communicator& comm, int completed_steps, std::ostream& out) {
  if (config_.save.empty()) return;
  engine.flush();  // the checkpoint sees the updated weights, and the protocol may use the communicator
  const std::string dir = save_training_checkpoint(engine, comm, ModelLayout(model_), config_.save, completed_steps,
                                                   config_.keep_last, history_);
  fmt::print(out, "checkpoint: {} (after step {})\n", dir, completed_steps);
}

void Trainer::resume(TrainingEngine& engine, Communicator& comm, std::ostream& out) {
  if (!resume_.candidates.empty()) {
    const ResumePoint point = load_training_checkpoint(engine, comm, ModelLayout(model_), resume_, config_.steps, out);
    start_step_ = point.completed_steps;
    history_.resumed_from = point.dir;
    if (!point.dir.empty()) {
      history_.verified.insert(point.dir);  // every chunk was read by some rank
      return;                               // a checkpoint of the run wins over --init-from
    }
  }
  if (!init_) return;
  // Each rank reads its shards from its own copy: copies that differ between hosts would start the
  // replicas from different weights without a word.
  if (!all_equal(comm, init_->fingerprint())) {
    exit_if_any_failed(comm,
                       fmt::format("--init-from '{}': the ranks do not all read the same file (its size, header or "
                                   "data differ between their copies): give every rank the same file",
                                   init_->path()),
                       kExitUsage);
  }
  std::string problem;
  try {
    engine.load_state(*init_);  // each rank reads its own ranges
  } catch (const Error& e) {
    problem = e.what();
  }
  exit_if_any_failed(comm, problem, kExitUsage);
  fmt::print(out, "init: weights from '{}' ({}, heads from {}); Adam's moments start at zero\n",
             init_->path(), init_->shape().layout, init_->shape().heads_from);
}

void Trainer::print_header(TrainingEngine& engine, std::ostream& out, const std::vector<std::string>& notes) const {
  fmt::print(out, "blas: {}\n", blas_description());
  fmt::print(out, "threads: {}\n", loaded_wait_policy());
  fmt::print(out, "matmul: {}\n", cpu::matmul_description());
  fmt::print(out, "model: {} | L {} C {} heads {} vocab {} (padded {}) context {}\n", model_.name, model_.n_layer,
             model_.n_embd, model_.n_head, model_.vocab_size, model_.padded_vocab_size(), model_.context_length);
  fmt::print(out, "parameters: {} ({} stored with the padded vocabulary)\n", model_.parameter_count(),
             model_.stored_parameter_count());
  fmt::print(out, "train data: {}: {}, {} tokens, {} batches per epoch\n", train_data_.source, train_data_.description,
             train_data_.tokens.size(), train_loader_->batches_per_epoch());
  if (val_loader_) fmt::print(out, "val data: {}: {} tokens\n", val_data_.source, val_data_.tokens.size());
  fmt::print(out, "step: {} micro-batch(es) of {} ranks x {} x {} = {} tokens; FLOPs/token = 6N + 12LCT = {:.4g} (N = {})\n",
             config_.grad_accum, world_, config_.batch_size, seq_len_, tokens_per_step(), model_.flops_per_token(seq_len_),
             model_.matmul_parameter_count());
  fmt::print(out, "engine: {}\n", engine.description());
  for (const std::string& note : notes) fmt::print(out, "{}\n", note);
}

void Trainer::print_start(std::ostream& out) const {
  if (!history_.resumed_from.empty()) {
    fmt::print(out, "resumed: {} after step {}\n", history_.resumed_from, start_step_);
  } else if (!config_.resume.empty()) {
    fmt::print(out, "resume: no complete checkpoint under '{}' yet; starting at step 0\n", config_.save);
  }
  if (config_.stop_after > 0 && config_.save.empty() && rank_ == 0) {
    fmt::print(stderr, "strata: warning: --stop-after {} without --save: the run stops after {} steps and saves "
                       "nothing\n", config_.stop_after, config_.stop_after);
  }
}

std::size_t Trainer::tokens_per_step() const {
  return static_cast<std::size_t>(config_.batch_size) * seq_len_ * static_cast<std::size_t>(config_.grad_accum) *
         static_cast<std::size_t>(world_);
}

void Trainer::print_step(const StepRecord& record, std::ostream& out) {
  step_ms_.push_back(record.ms);
  if (record.step % config_.log_every != 0 && record.step != config_.steps && record.step != start_step_ + 1) return;
  // The median of the recent steps: robust to a slow first step, cheap on long runs.
  const std::size_t window = std::min<std::size_t>(step_ms_.size(), 64);
  const double recent = median(std::vector<double>(step_ms_.end() - static_cast<std::ptrdiff_t>(window), step_ms_.end()));
  const double eta = recent / 1e3 * (config_.steps - record.step);
  fmt::print(out, "step {:>5}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.4f} | {:.1f} ms | {:.0f} tok/s | "
                  "{:.3f} TFLOP/s | eta {}\n",
             record.step, config_.steps, record.loss, record.lr, record.grad_norm, record.ms, record.tokens_per_second,
             record.tflops, format_duration(eta));
  out.flush();
}

// Every rank has the same reduced loss and norm, so all stop here together.
[[noreturn]] void Trainer::stop_on_nonfinite(const StepOutcome& outcome, int step) const {
  if (rank_ == 0) {
    fmt::print(stderr,
               "strata: error: step {}: the {} is {} (loss {}, gradient norm {}): stopped before the update, so "
               "the weights are those of step {} and no checkpoint is written over; lower --lr or check the "
               "data, then --resume\n",
               step, std::isfinite(outcome.loss) ? "gradient norm" : "loss",
               std::isfinite(outcome.loss) ? outcome.grad_norm : outcome.loss, outcome.loss, outcome.grad_norm, step - 1);
  }
  throw AgreedExit{kExitFailure};
}

void Trainer::report_memory(TrainingEngine& engine, Communicator& comm, std::ostream& out, MetricsLog& metrics) const {
  const MemoryPrediction predicted = engine.predicted_memory(process_fixed_bytes(config_.cluster));
  // The largest of every rank's figures (shards differ by padding; hosts by their libraries).
  std::array<double, 2> measured{static_cast<double>(process_peak_resident_bytes()),
                                 static_cast<double>(engine.allocated_peak_bytes())};
  comm.all_reduce_control(measured.data(), 2, 0, comm.topology().level_count() - 1, ControlOp::kMax);
  const double resident = measured[0], allocated = measured[1];
  const auto ratio = [](double a, double b) { return b > 0 ? fmt::format("{:+.1f}%", 100.0 * (a / b - 1.0)) : "-"; };
  fmt::print(out,
             "memory per rank: predicted peak {} ({}); measured peak resident set {} (predicted {}); engine "
             "allocations {} (predicted {}, {})\n",
             format_bytes(static_cast<double>(predicted.total())), format_memory(predicted), format_bytes(resident),
             ratio(static_cast<double>(predicted.total()), resident), format_bytes(allocated),
             format_bytes(static_cast<double>(predicted.engine_allocated())),
             ratio(static_cast<double>(predicted.engine_allocated()), allocated));
  metrics.write({{"type", "memory"},
                 {"predicted", memory_json(predicted)},
                 {"measured_peak_resident_bytes", resident},
                 {"measured_engine_allocated_bytes", allocated}});
}

void Trainer::finish(TrainingEngine& engine, Communicator& comm, std::ostream& out, MetricsLog& metrics) {
  // Every rank takes part; the file gets what crossed each level, and each node's link.
  if (const nlohmann::json traffic = engine.traffic_totals(); !traffic.is_null()) metrics.write(traffic);
  if (const std::string report = engine.report(); !report.empty()) fmt::print(out, "\n{}", report);
  report_memory(engine, comm, out, metrics);
  if (!config_.timeline.empty()) {
    // Each rank its own file: rank 0 the path given, rank r the path with ".rank<r>".
    const std::string path = rank_ == 0 ? config_.timeline : fmt::format("{}.rank{}", config_.timeline, rank_);
    write_file_atomically(path, engine.timeline_json());
    fmt::print(out, "timeline: {} (and .rank<r> for the other ranks; open in chrome://tracing or Perfetto)\n",
               config_.timeline);
  }
  if (!step_ms_.empty()) {
    const double med = median(step_ms_);
    const double flops_per_step = model_.flops_per_token(seq_len_) * static_cast<double>(tokens_per_step());
    fmt::print(out, "done: {} steps | median {:.1f} ms/step | {:.0f} tok/s | {:.3f} TFLOP/s\n", step_ms_.size(), med,
               static_cast<double>(tokens_per_step()) / med * 1e3, flops_per_step / med * 1e3 / 1e12);
  }
}

TrainSummary Trainer::run(TrainingEngine& engine, Communicator& comm, std::ostream& console,
                          const std::vector<std::string>& notes) {
  STRATA_REQUIRE(engine.data_parallel_size() == world_ && engine.data_parallel_rank() == rank_ &&
                     comm.world_size() == world_ && comm.rank() == rank_,
                 "the engine is replica {} of {} and the communicator rank {} of {}, but the job's rank is {} of {}",
                 engine.data_parallel_rank(), engine.data_parallel_size(), comm.rank(), comm.world_size(), rank_, world_);
  std::ostream null_stream(nullptr);
  std::ostream& out = rank_ == 0 ? console : null_stream;
  // From before the resume: a signal during set-up still means "stop cleanly", never a kill.
  const StopRequests signals;
  resume(engine, comm, out);
  {
    std::string problem;
    try {
      check_injected_failure_runs(config_, start_step_);
    } catch (const Error& e) {
      problem = e.what();
    }
    exit_if_any_failed(comm, problem, kExitUsage);
  }
  print_header(engine, out, notes);
  STRATA_REQUIRE(config_.timeline.empty() || engine.records_timeline(),
                 "--timeline records collectives, and this run has none (one process runs the plain reference "
                 "engine; give --plan to shard it)");
  if (config_.report) {
    // The schedule alone answers: no step runs.
    fmt::print(out, "\n{}", engine.report());
    const MemoryPrediction predicted = engine.predicted_memory(process_fixed_bytes(config_.cluster));
    fmt::print(out, "memory per rank: predicted peak {} ({})\n", format_bytes(static_cast<double>(predicted.total())),
               format_memory(predicted));
    return TrainSummary{};
  }
  print_start(out);
  MetricsLog metrics(rank_ == 0 ? config_.metrics : std::string(), start_step_ > 0);
  if (metrics.enabled()) fmt::print(out, "metrics: {}\n", config_.metrics);
  metrics.write({{"type", "run"},
                 {"model", model_.name},
                 {"parameters", model_.parameter_count()},
                 {"tokens_per_step", tokens_per_step()},
                 {"flops_per_token", model_.flops_per_token(seq_len_)},
                 {"start_step", start_step_}});
  limit_file_size_for_tests();
  TrainSummary summary = train_steps(engine, comm, out, metrics);
  // Also when no step ran (resumed at the last step): a run with another world size or plan then
  // converts the checkpoint.
  if (!summary.interrupted) save(engine, comm, config_.steps, out);
  finish(engine, comm, out, metrics);
  return summary;
}

void Trainer::log_step(const StepRecord& record, MetricsLog& metrics, std::ostream& out) {
  metrics.write({{"type", "step"},
                 {"step", record.step},
                 {"loss", record.loss},
                 {"lr", record.lr},
                 {"grad_norm", record.grad_norm},
                 {"ms", record.ms},
                 {"tokens_per_s", record.tokens_per_second},
                 {"tflops", record.tflops}});
  print_step(record, out);
}

void Trainer::print_sample(TrainingEngine& engine, int step, std::ostream& out) {
  const UnitBuffers weights = engine.whole_weights();  // every rank: a collective where sharded
  if (rank_ != 0) return;
  const bool bytes = model_.vocab_size == ByteTokenizer::kVocabSize;
  const std::vector<std::int32_t> prompt = {bytes ? std::int32_t{'\n'} : std::int32_t{0}};
  SampleSettings settings;
  settings.tokens = config_.sample_tokens;
  settings.top_k = 40;
  Rng rng(static_cast<std::uint64_t>(step));
  std::string text;
  for (const std::int32_t t : generate(model_, weights, prompt, settings, rng)) {
    text += bytes ? std::string(1, static_cast<char>(t)) : fmt::format("{} ", t);
  }
  fmt::print(out, "sample {:>5}/{} | {}\n", step, config_.steps, text);
}

ValRecord Trainer::validate(TrainingEngine& engine, int step, MetricsLog& metrics, std::ostream& out) {
  const double val = validation_loss(engine);
  metrics.write({{"type", "val"}, {"step", step}, {"val_loss", val}});
  fmt::print(out, "val  {:>5}/{} | val loss {:.4f}\n", step, config_.steps, val);
  return {step, val};
}

TrainSummary Trainer::train_steps(TrainingEngine& engine, Communicator& comm, std::ostream& out, MetricsLog& metrics) {
  const StepRecipe recipe{LrSchedule{config_.lr, config_.warmup_steps, config_.steps, config_.min_lr_ratio},
                          AdamWHyper{static_cast<float>(config_.beta1), static_cast<float>(config_.beta2),
                                     static_cast<float>(config_.eps), static_cast<float>(config_.weight_decay)},
                          config_.grad_clip, config_.grad_accum};
  const std::size_t tokens_per_micro = static_cast<std::size_t>(config_.batch_size) * seq_len_;
  const double flops_per_step = model_.flops_per_token(seq_len_) * static_cast<double>(tokens_per_step());
  std::vector<std::int32_t> inputs(tokens_per_micro), targets(tokens_per_micro);
  TrainSummary summary;
  for (int step = start_step_; step < config_.steps; ++step) {
    Stopwatch watch;
    int signal_here = 0;
    const StepOutcome outcome = train_step(
        engine, recipe, step,
        [&](int micro, std::span<std::int32_t> in, std::span<std::int32_t> tgt) {
          train_loader_->fill(static_cast<std::uint64_t>(step) * config_.grad_accum + micro, rank_ * config_.batch_size,
                              config_.batch_size, in, tgt);
        },
        inputs, targets,
        [&] {
          signal_here = StopRequests::received();
          return signal_here != 0;
        });
    const double seconds = watch.seconds();
    const StepRecord record{step + 1,     outcome.loss, outcome.lr, outcome.grad_norm, seconds * 1e3,
                            static_cast<double>(tokens_per_step()) / seconds, flops_per_step / seconds / 1e12};
    summary.steps.push_back(record);
    log_step(record, metrics, out);
    const bool stop_here = config_.stop_after > 0 && record.step - start_step_ >= config_.stop_after;
    // The signal reached some ranks only, maybe: the step's own agreement (outcome.stop) says.
    const bool signalled = outcome.stop;
    const bool last = record.step == config_.steps || signalled || stop_here;
    if (val_loader_ && config_.val_every > 0 && (record.step % config_.val_every == 0 || last)) {
      summary.vals.push_back(validate(engine, record.step, metrics, out));
    }
    if (config_.sample_every > 0 && record.step % config_.sample_every == 0) print_sample(engine, record.step, out);
    if (outcome.nonfinite) stop_on_nonfinite(outcome, record.step);
    if (config_.checkpoint_every > 0 && record.step % config_.checkpoint_every == 0 && !last) {
      save(engine, comm, record.step, out);
    }
    if (signalled || (stop_here && record.step < config_.steps)) {
      fmt::print(out, "stopping after step {} ({})\n", record.step,
                 !signalled         ? std::string("--stop-after")
                 : signal_here != 0 ? fmt::format("signal received: {}", stop_signal_name(signal_here))
                                    : std::string("signal received by another rank"));
      summary.interrupted = true;
      save(engine, comm, record.step, out);
      break;
    }
  }
  return summary;
}

}  // namespace strata
