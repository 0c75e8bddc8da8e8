// `strata sample CKPT`: loads the whole model from a checkpoint of any plan and world size (or a
// safetensors file of GPT-2 weights, as --init-from reads them), and prints samples as they are drawn: text for the byte tokenizer, GPT-2 text with llm.c's
// tokenizer file, token ids otherwise.
#include "cli/sample_command.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/simulation_options.hpp"
#include "core/error.hpp"
#include "core/stopwatch.hpp"
#include "core/threads.hpp"
#include "model/cpu/gemm.hpp"
#include "train/byte_tokenizer.hpp"
#include "train/checkpoint_export.hpp"
#include "train/pretrained_weights.hpp"
#include "train/sampling.hpp"
#include "train/token_names.hpp"

namespace strata {

namespace {

struct SampleState {
  std::string checkpoint, prompt, prompt_ids, tokenizer, matmul = "auto";
  SampleSettings settings;
  std::int64_t seed = 1337;
  int count = 1, threads = 0;
  bool ids = false, no_cache = false;
};

void run_sample(const SampleState& st) {
  STRATA_REQUIRE(st.settings.tokens >= 1, "--tokens must be at least 1 (got {})", st.settings.tokens);
  STRATA_REQUIRE(st.settings.temperature >= 0.0, "--temperature must not be negative (got {})", st.settings.temperature);
  STRATA_REQUIRE(st.settings.top_k >= 0, "--top-k must not be negative (0: all tokens; got {})", st.settings.top_k);
  STRATA_REQUIRE(st.count >= 1, "--count must be at least 1 (got {})", st.count);
  STRATA_REQUIRE(st.prompt.empty() || st.prompt_ids.empty(), "give --prompt or --prompt-ids, not both");
  set_thread_count(st.threads);
  cpu::set_matmul(cpu::matmul_settings_from(st.matmul, "fp32"));
  std::optional<TokenNames> names;
  if (!st.tokenizer.empty()) names = TokenNames::load(st.tokenizer);
  std::unique_ptr<StateSource> source;
  GptConfig model;
  std::string described;
  std::error_code ec;
  if (std::filesystem::is_regular_file(st.checkpoint, ec)) {
    model = pretrained_shape(SafetensorsFile::open(st.checkpoint)).model;
    auto weights = std::make_unique<PretrainedWeights>(st.checkpoint, model);
    described = fmt::format("{} ({})", st.checkpoint, weights->shape().layout);
    source = std::move(weights);
  } else {
    auto reader = std::make_unique<CheckpointReader>(CheckpointReader::open_any(resolve_checkpoint_path(st.checkpoint)));
    model = reader->model();
    described = fmt::format("{} (after step {})", reader->dir(), reader->completed_steps());
    source = std::move(reader);
  }
  if (names) {
    STRATA_REQUIRE(names->vocab_size() >= model.vocab_size, "tokenizer '{}' names {} tokens; the model has {}",
                   st.tokenizer, names->vocab_size(), model.vocab_size);
  }
  const bool bytes = !names && model.vocab_size == ByteTokenizer::kVocabSize && !st.ids;
  std::vector<std::int32_t> prompt;
  if (!st.prompt_ids.empty()) {
    for (const int id : parse_int_list(st.prompt_ids, "--prompt-ids", 0)) prompt.push_back(id);
  } else if (!st.prompt.empty()) {
    STRATA_REQUIRE(model.vocab_size == ByteTokenizer::kVocabSize,
                   "--prompt is text for byte-level models (vocabulary 256); this model has {} tokens: give "
                   "--prompt-ids", model.vocab_size);
    prompt = ByteTokenizer::encode(st.prompt, "--prompt");
  } else if (names && names->end_of_text() >= 0) {
    prompt = {names->end_of_text()};  // as llm.c starts its samples
  } else {
    prompt = model.vocab_size == ByteTokenizer::kVocabSize ? std::vector<std::int32_t>{'\n'} : std::vector<std::int32_t>{0};
  }
  for (const std::int32_t t : prompt) {
    STRATA_REQUIRE(t < model.vocab_size, "prompt token {} is outside the model's vocabulary of {}", t, model.vocab_size);
  }
  const UnitBuffers weights = read_whole_weights(*source, model);
  const auto show = [&](std::int32_t t) -> std::string {
    if (names) return names->name(t);
    if (bytes) return std::string(1, static_cast<char>(t));
    return fmt::format("{} ", t);
  };
  std::fprintf(stderr, "sample: %s: %s, %s%s\n", described.c_str(),
               model.name.c_str(), st.settings.cache ? "key/value cache" : "recomputing the context",
               st.settings.top_k == 1 || st.settings.temperature == 0.0 ? ", greedy" : "");
  Rng rng(static_cast<std::uint64_t>(st.seed));
  double seconds = 0.0;
  long drawn = 0;
  for (int s = 0; s < st.count; ++s) {
    if (st.count > 1) fmt::print("--- sample {}/{}\n", s + 1, st.count);
    std::string head;
    for (const std::int32_t t : prompt) head += show(t);
    fmt::print("{}", head);
    std::fflush(stdout);
    Stopwatch watch;
    const std::vector<std::int32_t> out = generate(model, weights, prompt, st.settings, rng, [&](std::int32_t t) {
      fmt::print("{}", show(t));
      std::fflush(stdout);
    });
    seconds += watch.seconds();
    drawn += static_cast<long>(out.size());
    fmt::print("\n");
  }
  std::fprintf(stderr, "sample: %ld tokens in %.2f s: %.1f tokens/s\n", drawn, seconds,
               seconds > 0 ? static_cast<double>(drawn) / seconds : 0.0);
}

}  // namespace

void add_sample_command(CLI::App& app) {
  auto st = std::make_shared<SampleState>();
  CLI::App* c = app.add_subcommand(
      "sample", "Generate text from a checkpoint of any plan and world size (one process; a key/value cache makes each "
                "new token cost one token's forward).");
  c->add_option("checkpoint", st->checkpoint, "a step directory, a checkpoint directory (its newest complete one), or a safetensors file of GPT-2 "
                "weights (Hugging Face's or nanoGPT's layout)")
      ->required();
  c->add_option("--prompt", st->prompt, "text to continue, for byte-level models (default: a newline)");
  c->add_option("--prompt-ids", st->prompt_ids,
                "token ids to continue, separated by commas (default: the tokenizer's end-of-text, else 0)");
  c->add_option("--tokens", st->settings.tokens, "new tokens per sample (past the model's context, the newer half of it is kept)")
      ->capture_default_str();
  c->add_option("--temperature", st->settings.temperature, "softmax temperature of the draws (0: greedy)")
      ->capture_default_str();
  c->add_option("--top-k", st->settings.top_k, "draw among the k most likely tokens only (0: all; 1: greedy)")
      ->capture_default_str();
  c->add_option("--seed", st->seed, "seed of the draws")->capture_default_str();
  c->add_option("--count", st->count, "samples to draw, one after another from the same generator")
      ->capture_default_str();
  c->add_option("--tokenizer", st->tokenizer,
                "llm.c's gpt2_tokenizer.bin (magic 20240328, version 1 or 2): print GPT-2 tokens as text");
  c->add_flag("--ids", st->ids, "print token ids even for a byte-level model");
  c->add_flag("--no-cache", st->no_cache,
              "recompute the whole context with the training forward for every token (slow; the cache's check)");
  c->add_option("--threads", st->threads, "worker threads (0: OMP_NUM_THREADS, else all cores)")->capture_default_str();
  c->add_option("--matmul", st->matmul, "what computes the products, as strata train's --matmul")
      ->capture_default_str();
  c->callback([st]() {
    st->settings.cache = !st->no_cache;
    run_single_process([&] { run_sample(*st); });
  });
}

}  // namespace strata
