// Everything `strata train` can be told: model, data, batch, optimizer and run settings, with
// the defaults the built-in demo uses.
#pragma once

#include <cstdint>
#include <string>

#include "model/gpt_config.hpp"

namespace strata {

struct TrainConfig {
  // Model: a preset, and a shape whose non-zero fields override the preset's (the vocabulary
  // padding always applies). model_config() is the two merged. An empty model is "tiny", or with
  // init_from the file's shape (resolve_defaults() reads it).
  std::string model;
  GptConfig shape;  // sizes 0: the preset's
  std::string init_from;  // safetensors file of GPT-2 weights to start from (empty: random initialisation)

  // Data.
  std::string data = "builtin";  // a path, or "builtin" for the generated corpus
  std::string val_data;          // empty: hold out val_fraction of the training tokens
  std::string data_format = "auto";
  double val_fraction = 0.1;
  std::int64_t builtin_bytes = 1 << 20;

  // Batch: micro-batch of batch_size sequences of seq_len tokens, grad_accum per step.
  int batch_size = 8;
  int seq_len = 0;  // 0: the model's context length
  int grad_accum = 1;

  // Optimizer and schedule.
  int steps = 1000;
  double lr = 1e-3;
  double min_lr_ratio = 0.1;
  int warmup_steps = 20;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;

  // Partitioning (the sharding engine; one process without these uses the plain reference).
  std::string topology = "flat";  // levels, innermost first, e.g. "gcd:2,gpu:4,node:*", or a preset
  std::string plan = "auto";      // preset or explicit list; auto: local reference for one process, else hier3
  std::string dtype = "fp32";     // working weights and communicated gradients: fp32 or bf16
  int prefetch = 1;               // stages whose gathers start before the current one computes
  std::int64_t max_live_bytes = 0;  // bound on gathered-but-not-released weight bytes (0: none)
  std::string overlap = "auto";   // on (1), off (0), or auto: the faster of the two, measured in the first steps
  int boundary_overlap = 1;       // 1: the step boundary's collectives overlap the last backward and the next forward
  std::string activation_checkpointing = "none";  // none, blocks, or every:K: blocks that recompute in backward
  // The machine the memory model and --plan auto read: a cluster preset or a file strata
  // calibrate wrote (its device's process_bytes is the memory model's fixed part).
  std::string cluster = "cpu";
  // Memory each rank may hold, for --plan auto (a size such as 2.5GB; empty: the host's available
  // memory divided among its ranks, less a margin).
  std::string memory_budget;
  std::string timeline;           // Chrome trace of the run's ops and collectives (empty: none)
  bool report = false;            // print the plan report from the schedule and stop, no step run

  // Run.
  std::int64_t seed = 1337;
  int threads = 0;  // 0: OMP_NUM_THREADS or all cores
  std::string matmul = "auto";         // onednn, openblas, reference, or auto: oneDNN where the build has it
  std::string compute_dtype = "fp32";  // matrix-product inputs: fp32, or bf16 with fp32 accumulation
  int sample_every = 0;    // print a sample of the model every N steps (0: never)
  int sample_tokens = 64;  // tokens per such sample
  int val_every = 100;
  int val_batches = 10;
  int log_every = 1;
  std::string metrics = "strata-metrics.jsonl";  // empty: no metrics file
  std::string save;                              // checkpoint directory (holds step-N folders); empty: none
  int checkpoint_every = 0;                      // 0: only at the end
  int keep_last = 0;                             // complete checkpoints kept (0: all)
  std::string resume;                            // "auto", a step directory, or a checkpoint directory
  double collective_timeout = 300.0;             // seconds an MPI call may block before the job ends (0: never)
  int stop_after = 0;                            // stop after N steps of this invocation (0: run to the end)
  bool force = false;                            // outputs may replace files that are not Strata's own

  GptConfig model_config() const;
  // Whether this run uses the sharding engine rather than the single-process reference.
  bool sharded(int world_size) const;
  int resolved_seq_len() const;
  // Replaces every "0: from the preset" field by the value it stands for; with init_from, takes
  // the model's shape from the file (refusing a --model or size that disagrees with it).
  void resolve_defaults();
  // Throws strata::Error naming the first bad setting.
  void validate() const;
};

}  // namespace strata
