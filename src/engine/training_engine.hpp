// The seam between the training loop and whatever holds the model state: the single-process
// reference engine, or a sharded engine whose ranks each hold a part.
#pragma once

#include "model/unit_buffers.hpp"

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint_format.hpp"
#include "optim/adamw.hpp"
#include "schedule/memory_model.hpp"

namespace strata {

// What one optimizer step is told, handed over as one value.
struct UpdateOperands {
  AdamWHyper hyper;
  double lr = 0.0;
  int step = 1;               // counts from 1
  float grad_scale = 1.0f;    // multiplies the gradient first (clipping)
  bool stop_requested = false;  // this rank was asked to stop after this step (a signal)
};

class TrainingEngine {
 public:
  virtual ~TrainingEngine() = default;

  virtual void zero_grad() = 0;
  // Forward and backward of this process's part of one micro-batch; gradients accumulate,
  // scaled by loss_scale. Returns the micro-batch's mean loss over all processes.
  virtual float forward_backward(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                                 float loss_scale) = 0;
  // Mean loss without gradients.
  virtual float evaluate(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) = 0;
  // Completes every collective still in flight (a step's boundary overlaps the next step's
  // forward): after it the weights are the updated ones and the caller may use the communicator
  // itself. The flush point of checkpoints, evaluation and the end of a run.
  virtual void flush() {}
  // Global L2 norm of the accumulated gradient.
  virtual double grad_norm() = 0;
  // The update. Returns whether any rank asked to stop after this step: the agreement is part of
  // the step (a scheduled control op in the sharded engine), so no rank stops alone.
  virtual bool optimizer_step(const UpdateOperands& update) = 0;

  // This process's place among the data-parallel replicas: it trains rows
  // [rank * batch, (rank + 1) * batch) of every global batch.
  virtual int data_parallel_rank() const { return 0; }
  virtual int data_parallel_size() const { return 1; }

  // What this process writes into a checkpoint (engine/checkpoint_format.hpp): its fp32 master,
  // Adam m and v slices in unit coordinates; a slice replicated on several ranks is written by
  // the first of them only. No collective: the caller agrees on success.
  virtual std::vector<CheckpointPiece> checkpoint_pieces() = 0;
  // Reads this process's part of a starting state: a checkpoint written with any world size or
  // plan (each chunk checked), or pretrained weights; rebuilds the working weights from the
  // master and invalidates every secondary copy. No collective, so a refusal on one rank can be
  // agreed on by all.
  virtual void load_state(const StateSource& source) = 0;
  // The run's description for the manifest (completed_steps left for the caller).
  virtual CheckpointRun checkpoint_run() const = 0;
  // The whole model's fp32 master weights, on every rank (a collective where sharded): what
  // sampling during training reads.
  virtual UnitBuffers whole_weights() = 0;

  // This rank's peak memory as the memory model predicts it (schedule/memory_model), `fixed`
  // being the process's own part; and what the engine allocated at its peak (states, schedule
  // buffers, staging, activations), the model's figures to compare with.
  virtual MemoryPrediction predicted_memory(std::uint64_t fixed) const = 0;
  virtual std::uint64_t allocated_peak_bytes() const = 0;

  // One line for the run's header: what engine, plan and settings this is.
  virtual std::string description() const = 0;
  // The report printed at the end of a run (and by --report instead of training): empty when the
  // engine has nothing to report.
  virtual std::string report() { return std::string(); }
  // The run's ops and collectives as a Chrome trace (JSON text), when the engine was asked to
  // record them; engines with no collectives record nothing and say so.
  virtual bool records_timeline() const { return false; }
  virtual std::string timeline_json() const { return std::string(); }
  // Collective: the whole job's traffic meter so far (per level, and the outermost level per
  // node), for the metrics file; null for an engine with no collectives.
  virtual nlohmann::json traffic_totals();
};

}  // namespace strata
