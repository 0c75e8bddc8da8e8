// Resolution and validation of training settings.
#include "train/train_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <tuple>

#include "core/error.hpp"
#include "core/path_checks.hpp"
#include "core/format_units.hpp"
#include "model/activation_checkpointing.hpp"
#include "model/cpu/gemm.hpp"
#include "train/pretrained_weights.hpp"

namespace strata {

GptConfig TrainConfig::model_config() const {
  GptConfig c;
  if (model.empty()) {
    c = GptConfig::preset("tiny");
  } else if (model == "custom") {
    STRATA_REQUIRE(shape.n_layer > 0 && shape.n_embd > 0 && shape.n_head > 0 && shape.vocab_size > 0 &&
                       shape.context_length > 0,
                   "model 'custom' needs n-layer, n-embd, n-head, vocab-size and context-length");
  } else {
    c = GptConfig::preset(model);
  }
  for (auto [size, given] : {std::pair{&c.n_layer, shape.n_layer}, std::pair{&c.n_embd, shape.n_embd},
                             std::pair{&c.n_head, shape.n_head}, std::pair{&c.vocab_size, shape.vocab_size},
                             std::pair{&c.context_length, shape.context_length}}) {
    if (given > 0) *size = given;
  }
  c.vocab_pad_multiple = shape.vocab_pad_multiple;
  c.validate();
  return c;
}

namespace {

// The model's shape from --init-from's file; --model and any size given must agree with it.
void take_shape_from_file(TrainConfig& c) {
  require_input_file(c.init_from, "--init-from");
  PretrainedShape file;
  try {
    file = pretrained_shape(SafetensorsFile::open(c.init_from), c.shape.n_head);
  } catch (const Error& e) {
    fail("--init-from {}", e.what());  // each sentence starts with the quoted path
  }
  const GptConfig& f = file.model;
  if (!c.model.empty()) {
    const GptConfig given = c.model_config();
    STRATA_REQUIRE(given.same_shape(f),
                   "--model {} is {}, but --init-from '{}' holds {} (leave --model out to take the file's shape)",
                   c.model, given.shape_text(), c.init_from, f.shape_text());
  }
  for (const auto& [flag, given, held] :
       {std::tuple{"n-layer", c.shape.n_layer, f.n_layer}, std::tuple{"n-embd", c.shape.n_embd, f.n_embd},
        std::tuple{"n-head", c.shape.n_head, f.n_head}, std::tuple{"vocab-size", c.shape.vocab_size, f.vocab_size},
        std::tuple{"context-length", c.shape.context_length, f.context_length}}) {
    STRATA_REQUIRE(given == 0 || given == held, "--{} {} disagrees with --init-from '{}', which holds {} ({})", flag,
                   given, c.init_from, held, f.shape_text());
  }
  c.model = f.name;
  const int pad = c.shape.vocab_pad_multiple;
  c.shape = f;
  c.shape.vocab_pad_multiple = pad;
}

}  // namespace

void TrainConfig::resolve_defaults() {
  if (!init_from.empty()) take_shape_from_file(*this);
  if (model.empty()) model = "tiny";
  shape = model_config();
  seq_len = resolved_seq_len();
}

bool TrainConfig::sharded(int world_size) const {
  return world_size > 1 || plan != "auto" || dtype != "fp32" || topology != "flat" || report;
}

int TrainConfig::resolved_seq_len() const { return seq_len > 0 ? seq_len : model_config().context_length; }

void TrainConfig::validate() const {
  STRATA_REQUIRE(shape.n_layer >= 0 && shape.n_embd >= 0 && shape.n_head >= 0 && shape.vocab_size >= 0 &&
                     shape.context_length >= 0,
                 "model sizes must not be negative");
  STRATA_REQUIRE(batch_size >= 1, "batch-size must be at least 1 (got {})", batch_size);
  STRATA_REQUIRE(seq_len >= 0, "seq-len must not be negative (0: the model's context length; got {})", seq_len);
  // With --init-from and no --model the shape is the file's, known only after resolve_defaults():
  // checked against it then (the trainer validates the resolved settings again), not against tiny's.
  if (init_from.empty() || !model.empty()) {
    const GptConfig c = model_config();
    STRATA_REQUIRE(resolved_seq_len() <= c.context_length,
                   "seq-len {} must be between 1 and the model's context length {}", resolved_seq_len(),
                   c.context_length);
  }
  STRATA_REQUIRE(grad_accum >= 1, "grad-accum must be at least 1 (got {})", grad_accum);
  STRATA_REQUIRE(steps >= 1, "steps must be at least 1 (got {})", steps);
  // NaN passes every comparison below and infinity most: each real-valued setting is checked
  // for finiteness first.
  for (const auto& [name, value] : {std::pair{"lr", lr}, std::pair{"min-lr-ratio", min_lr_ratio},
                                    std::pair{"weight-decay", weight_decay}, std::pair{"beta1", beta1},
                                    std::pair{"beta2", beta2}, std::pair{"eps", eps}, std::pair{"grad-clip", grad_clip},
                                    std::pair{"val-fraction", val_fraction},
                                    std::pair{"collective-timeout", collective_timeout}}) {
    STRATA_REQUIRE(std::isfinite(value), "{} must be a finite number (got {})", name, value);
  }
  STRATA_REQUIRE(lr > 0.0, "lr must be positive (got {})", lr);
  STRATA_REQUIRE(min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0, "min-lr-ratio must be in [0, 1] (got {})",
                 min_lr_ratio);
  STRATA_REQUIRE(warmup_steps >= 0, "warmup-steps must not be negative (got {})", warmup_steps);
  STRATA_REQUIRE(weight_decay >= 0.0, "weight-decay must not be negative (got {})", weight_decay);
  STRATA_REQUIRE(beta1 >= 0.0 && beta1 < 1.0, "beta1 must be in [0, 1) (got {})", beta1);
  STRATA_REQUIRE(beta2 >= 0.0 && beta2 < 1.0, "beta2 must be in [0, 1) (got {})", beta2);
  STRATA_REQUIRE(eps > 0.0, "eps must be positive (got {})", eps);
  STRATA_REQUIRE(grad_clip >= 0.0, "grad-clip must not be negative (0 turns clipping off; got {})", grad_clip);
  STRATA_REQUIRE(val_fraction >= 0.0 && val_fraction < 1.0, "val-fraction must be in [0, 1) (got {})",
                 val_fraction);
  STRATA_REQUIRE(builtin_bytes >= 1024, "builtin-bytes must be at least 1024 (got {})", builtin_bytes);
  STRATA_REQUIRE(threads >= 0, "threads must not be negative (got {})", threads);
  cpu::matmul_settings_from(matmul, compute_dtype);  // refuses unknown names and onednn without oneDNN
  STRATA_REQUIRE(sample_every >= 0, "sample-every must not be negative (0: never; got {})", sample_every);
  STRATA_REQUIRE(sample_tokens >= 1, "sample-tokens must be at least 1 (got {})", sample_tokens);
  STRATA_REQUIRE(val_every >= 0, "val-every must not be negative (0 turns validation off; got {})", val_every);
  STRATA_REQUIRE(val_batches >= 1, "val-batches must be at least 1 (got {})", val_batches);
  STRATA_REQUIRE(log_every >= 1, "log-every must be at least 1 (got {})", log_every);
  STRATA_REQUIRE(checkpoint_every >= 0, "checkpoint-every must not be negative (got {})", checkpoint_every);
  STRATA_REQUIRE(checkpoint_every == 0 || !save.empty(), "checkpoint-every needs a checkpoint directory (--save)");
  STRATA_REQUIRE(keep_last >= 0, "keep-last must not be negative (0 keeps every checkpoint; got {})", keep_last);
  STRATA_REQUIRE(keep_last == 0 || !save.empty(), "keep-last needs a checkpoint directory (--save)");
  STRATA_REQUIRE(dtype == "fp32" || dtype == "bf16", "dtype must be fp32 or bf16 (got '{}')", dtype);
  STRATA_REQUIRE(prefetch >= 0 && prefetch <= 64, "prefetch must be between 0 and 64 stages (got {})", prefetch);
  STRATA_REQUIRE(max_live_bytes >= 0, "max-live-bytes must not be negative (0: no bound; got {})", max_live_bytes);
  STRATA_REQUIRE(overlap == "auto" || overlap == "on" || overlap == "off" || overlap == "1" || overlap == "0",
                 "overlap must be auto, on (1) or off (0) (got '{}')", overlap);
  STRATA_REQUIRE(boundary_overlap == 0 || boundary_overlap == 1, "boundary-overlap must be 0 or 1 (got {})",
                 boundary_overlap);
  parse_activation_checkpointing(activation_checkpointing);  // refuses a malformed setting with the forms
  if (!memory_budget.empty()) {
    STRATA_REQUIRE(parse_byte_size(memory_budget, "memory-budget") > 0.0, "memory-budget must be more than 0 (got '{}')",
                   memory_budget);
  }
  STRATA_REQUIRE(std::isfinite(collective_timeout) && collective_timeout >= 0.0 && collective_timeout <= 1e6,
                 "collective-timeout must be between 0 (no watchdog) and 1e6 seconds (got {})", collective_timeout);
  STRATA_REQUIRE(stop_after >= 0, "stop-after must not be negative (got {})", stop_after);
}

}  // namespace strata
