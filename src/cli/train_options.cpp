// Every `strata train` flag: its name (also the TOML key), group and help.
#include "cli/train_options.hpp"

#include "hw/cluster_model.hpp"

namespace strata {

std::vector<OptionSpec> train_option_specs(TrainConfig& c) {
  return {
      {"model", "model",
       "model preset: tiny, small, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1558m, or custom (empty: tiny, or the shape "
       "of --init-from's file)",
       &c.model},
      {"init-from", "model",
       "start from GPT-2 weights in a safetensors file (Hugging Face's layout, with or without 'transformer.', or "
       "nanoGPT's as strata export writes): the shape comes from the file, Adam's moments start at zero, every rank "
       "reads only its shards; a checkpoint found by --resume wins",
       &c.init_from},
      {"n-layer", "model", "transformer blocks (0: the preset's)", &c.shape.n_layer},
      {"n-embd", "model", "embedding width C (0: the preset's)", &c.shape.n_embd},
      {"n-head", "model", "attention heads; must divide n-embd (0: the preset's)", &c.shape.n_head},
      {"vocab-size", "model", "vocabulary size (0: the preset's)", &c.shape.vocab_size},
      {"context-length", "model", "maximum sequence length, the size of the position table (0: the preset's)",
       &c.shape.context_length},
      {"vocab-pad", "model", "pad the token table to a multiple of this; padded logits are masked (1: none)",
       &c.shape.vocab_pad_multiple},

      {"data", "data", "training tokens: an llm.c .bin, a nanoGPT .bin, a UTF-8 .txt, or 'builtin'", &c.data},
      {"val-data", "data", "validation tokens (empty: hold out val-fraction of the training tokens)", &c.val_data},
      {"data-format", "data", "auto, llmc, nanogpt or text (auto: .txt is text, llm.c magic is llmc, else nanogpt)",
       &c.data_format},
      {"val-fraction", "data", "fraction of the training tokens held out for validation when val-data is empty",
       &c.val_fraction},
      {"builtin-bytes", "data", "size of the generated built-in corpus in bytes", &c.builtin_bytes},

      {"batch-size", "batch", "sequences per micro-batch", &c.batch_size},
      {"seq-len", "batch", "tokens per sequence (0: the model's context length)", &c.seq_len},
      {"grad-accum", "batch", "micro-batches accumulated per optimizer step", &c.grad_accum},

      {"steps", "optimizer", "optimizer steps", &c.steps},
      {"lr", "optimizer", "peak learning rate", &c.lr},
      {"min-lr-ratio", "optimizer", "final learning rate of the cosine decay, as a fraction of lr", &c.min_lr_ratio},
      {"warmup-steps", "optimizer", "steps of linear warmup", &c.warmup_steps},
      {"weight-decay", "optimizer", "AdamW decoupled weight decay (matrices and embeddings only)", &c.weight_decay},
      {"beta1", "optimizer", "AdamW beta1", &c.beta1},
      {"beta2", "optimizer", "AdamW beta2", &c.beta2},
      {"eps", "optimizer", "AdamW epsilon", &c.eps},
      {"grad-clip", "optimizer", "clip the global gradient norm to this (0: off)", &c.grad_clip},

      {"topology", "parallel",
       "levels innermost first, name:fanout[@bandwidth][~latency], the outermost may be '*' "
       "(e.g. gcd:2@200GB/s,gpu:4@50GB/s,node:*@12.5GB/s), a cluster preset's levels (" + ClusterModel::preset_list() +
           "; dgx is dgx-a100), flat, or auto (found from the job: hosts from MPI, packages, NUMA nodes and L3 "
       "caches of the cores each rank is bound to from hwloc; printed as the levels it stands for)",
       &c.topology},
      {"plan", "parallel",
       "where each state is partitioned: ddp, zero1, zero2, zero3, zeropp (int8 weight gathers, int4 gradient "
       "reduction), mics, hier3, or weights=L,grads=L,optim=L,secondary=L with L a level name, world or none; "
       "a preset or list may add quant_weights=int8|int4|none, quant_grads=int4|int8|none, "
       "quant_backward=auto|on|off, quant_weights_block=N (default 256), quant_grads_block=N (default 64), "
       "quant_block=N (both) or quant=none (auto: one process runs the plain reference; more rank every valid plan by "
       "the simulated step on --cluster and take the fastest whose predicted peak fits --memory-budget)",
       &c.plan},
      {"dtype", "parallel", "working weights and communicated gradients: fp32 or bf16 (master and Adam stay fp32)",
       &c.dtype},
      {"prefetch", "parallel",
       "stages (units) whose weight gathers start before the current one computes, bounded by max-live-bytes; "
       "0: each gather starts when its unit is reached",
       &c.prefetch},
      {"max-live-bytes", "parallel",
       "at most this many bytes of gathered weights (and their staging) live at once; prefetch waits for room "
       "(0: no bound; below the largest unit is refused)",
       &c.max_live_bytes},
      {"overlap", "parallel",
       "on (1): collectives run on a communication thread while compute goes on (needs MPI_THREAD_SERIALIZED); "
       "off (0): each runs on the compute thread when reached; auto: inline where no hardware thread is free for "
       "the communication thread, else the first steps measure both and every rank keeps the faster",
       &c.overlap},
      {"boundary-overlap", "parallel",
       "1: each unit's boundary replica reduction starts as soon as its last micro-batch gradient is in, and its "
       "updated-weights gather finishes under the next step's forward (waited for just before that unit's first "
       "gather); 0: both run at the step boundary, each waited for at once",
       &c.boundary_overlap},
      {"activation-checkpointing", "parallel",
       "none; blocks: every transformer block keeps only its input in forward and recomputes the rest just "
       "before its backward (on the weights its backward gathers, so zero3 gathers a block once for both; the "
       "gradients are bit for bit those without it, for about one more forward of time); every:K: block 0, K, "
       "2K, ... do",
       &c.activation_checkpointing},
      {"cluster", "parallel",
       "the machine the memory model and --plan auto read: a cluster preset (" + ClusterModel::preset_list() +
           ") or a file strata calibrate wrote; its device's process_bytes is the fixed part of the predicted peak",
       &c.cluster},
      {"memory-budget", "parallel",
       "memory each rank may hold, for --plan auto, e.g. 2.5GB or 3GiB (empty: the host's available memory divided "
       "among its ranks, less 10%); ranks must agree",
       &c.memory_budget},
      {"report", "parallel", "measure one step, print the plan's memory and traffic report, and stop", &c.report},

      {"seed", "run", "seed of the weight initialisation", &c.seed},
      {"threads", "run",
       "worker threads per rank for kernels and BLAS (0: OMP_NUM_THREADS, else the host's cores divided among its "
       "ranks)",
       &c.threads},
      {"matmul", "run",
       "what computes the matrix products: onednn, openblas, reference (plain loops, the check for the others) or "
       "auto (oneDNN where this build has it, else OpenBLAS)",
       &c.matmul},
      {"compute-dtype", "run",
       "matrix-product inputs: fp32, or bf16 with fp32 accumulation and output, as torch.autocast (layer norms, "
       "softmax, GELU, the loss, gradients, AdamW and the master weights stay fp32; independent of --dtype)",
       &c.compute_dtype},
      {"sample-every", "run",
       "print a sample of the model every N steps, as llm.c does (top-k 40 from a newline, or token 0 without a "
       "byte vocabulary; the weights are gathered from every rank; 0: never)",
       &c.sample_every},
      {"sample-tokens", "run", "tokens per sample of --sample-every", &c.sample_tokens},
      {"val-every", "run", "validate every N steps and after the last (0: never)", &c.val_every},
      {"val-batches", "run", "batches per validation", &c.val_batches},
      {"log-every", "run", "print a step line every N steps", &c.log_every},
      {"metrics", "run", "JSON-lines metrics file (empty: none)", &c.metrics},
      {"timeline", "run",
       "write each rank's ops and collectives as a Chrome trace (chrome://tracing, Perfetto) to this file; rank r "
       "> 0 writes FILE.rank<r> (empty: none)",
       &c.timeline},
      {"save", "run",
       "checkpoint directory: a step-N folder is written at the end, on Ctrl-C / SIGTERM, at stop-after and every "
       "checkpoint-every steps (empty: none)",
       &c.save},
      {"checkpoint-every", "run", "also checkpoint every N steps (0: only at the end)", &c.checkpoint_every},
      {"keep-last", "run", "keep the newest K complete checkpoints, deleting older ones once a newer is complete (0: all)",
       &c.keep_last},
      {"resume", "run",
       "continue from 'auto' (the newest complete checkpoint under --save; none: start fresh), a step directory, or "
       "a checkpoint directory (its newest complete one); any world size or plan",
       &c.resume},
      {"collective-timeout", "run",
       "seconds any MPI call may block before the whole job ends with its name: a dead, stopped or unreachable "
       "peer never hangs the run (0: no watchdog)",
       &c.collective_timeout},
      {"stop-after", "run",
       "stop, checkpointing, after N steps of this invocation; the schedule still spans --steps (0: run to the end)",
       &c.stop_after},
      {"force", "run",
       "let --metrics and --timeline replace a file that is not an earlier output of the same kind, an input of "
       "the run, or a file in a checkpoint (a directory or device is never replaced)",
       &c.force},
  };
}

}  // namespace strata
