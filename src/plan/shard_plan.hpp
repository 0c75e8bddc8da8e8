// Where each model state is partitioned: working weights (primary), an optional secondary
// weight copy (hpZ), gradients and optimizer state, each at a topology level (or replicated).
// Every known method is a preset of this one object, and so are the ZeRO++ quantized collectives
// (qwZ for weight gathers, qgZ for gradient reductions). A plan is validated against a topology
// when it is made and refuses a bad combination with a sentence naming the rule.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "quant/quant_format.hpp"
#include "topo/topology.hpp"

namespace strata {

// A state partitioned "at level l" is split across the ranks of one level-l group (span(l)
// ranks); kReplicated means every rank holds it whole.
constexpr int kReplicated = -1;

// Whether the backward weight gathers are quantized too. kAuto: yes when backward gathers from
// the primary shard (the same blocks as forward, so backward computes with exactly the weights
// forward used), no when it gathers from an hpZ secondary copy, which already holds the
// forward's dequantized weights and would only be quantized a second time.
enum class QuantBackward { kAuto, kOn, kOff };

// How a collective over several levels runs: level by level (each step within one level, the slow
// link moving the smallest pieces, exact bytes per link) or flat (one call over every rank it
// covers, the MPI library's algorithm, as DeepSpeed and FSDP run NCCL/RCCL).
enum class CollectiveAlgorithm { kHierarchical, kFlat };

struct ShardPlan {
  std::string name = "custom";
  int weights = kReplicated;    // primary working weights
  int secondary = kReplicated;  // hpZ copy kept between forward and backward (kReplicated: none)
  int grads = kReplicated;
  int optimizer = kReplicated;  // fp32 master weights and Adam moments
  // Quantized collectives: weight gathers (forward, and backward as quant_backward says) and every
  // gradient reduction (per micro-batch and at the step boundary) move blocks of elements as
  // int8/int4 codes plus one fp32 scale each. The update's gather never is.
  QuantBits quant_weights = QuantBits::kNone;
  QuantBackward quant_backward = QuantBackward::kAuto;
  QuantBits quant_grads = QuantBits::kNone;
  std::uint32_t quant_weights_block = kDefaultWeightQuantBlock;
  std::uint32_t quant_grads_block = kDefaultGradQuantBlock;
  // Flat or level by level, for the data collectives (control sums are flat anyway). qgZ gradient
  // reductions stay two-hop (their definition: quantized per hop, summed between hops).
  CollectiveAlgorithm collectives = CollectiveAlgorithm::kHierarchical;
  // At most this many bytes in one call of a unit's collective (DeepSpeed's bucket sizes), each
  // bucket its own start and wait; 0: one call per unit. Gathers (forward, backward, the update's)
  // and reductions (per micro-batch and the boundary's) have a size each, as DeepSpeed's
  // stage3_prefetch_bucket_size and reduce_bucket_size; the plan key bucket_bytes sets both.
  std::uint64_t gather_bucket_bytes = 0;
  std::uint64_t reduce_bucket_bytes = 0;

  bool has_secondary() const { return secondary != kReplicated; }
  bool quantizes_backward() const;
  // The format of the forward (backward: false) or backward weight gathers; disabled when off.
  QuantFormat weight_quant(bool backward) const;
  QuantFormat grad_quant() const;
  bool quantized() const { return quant_weights != QuantBits::kNone || quant_grads != QuantBits::kNone; }

  // A preset name (ddp, zero1, zero2, zero3, zeropp, mics, hier3), optionally followed by
  // overrides ("hier3,quant_weights=int8,quant_grads=int4", "zeropp,quant=none"), or an explicit
  // list such as "weights=gcd,grads=node,optim=world,secondary=none" (levels by name, "world" or
  // "none"; an omitted state is replicated). Quantization keys: quant_weights=none|int8|int4,
  // quant_grads=none|int8|int4, quant_backward=auto|on|off, quant_weights_block=N,
  // quant_grads_block=N, quant_block=N (both blocks), quant=none (both off). Collective keys:
  // collectives=hierarchical|flat, bucket_bytes=N (both sizes; 0: none), gather_bucket_bytes=N,
  // reduce_bucket_bytes=N.
  static ShardPlan parse(std::string_view spec, const Topology& topology);
  static ShardPlan preset(std::string_view name, const Topology& topology);
  static std::vector<std::string> preset_names();

  // Throws strata::Error naming the violated rule.
  void validate(const Topology& topology) const;

  // "weights=gcd(2) grads=gpu(8) optim=node(16) secondary=none", then the quantization if any:
  // " quant weights=int8/256 (forward) grads=int4/64"
  std::string describe(const Topology& topology) const;
  // The plan as a --plan value that parses back to it ("weights=gcd,secondary=none,grads=gpu,..."),
  // the form a checkpoint and the planner record.
  std::string spec(const Topology& topology) const;
};

std::string level_label(const Topology& topology, int level);

// What a plan amounts to on one topology, so a run can say so before it starts instead of
// leaving the user to wonder why, say, hier3 moves the same bytes as zero3.
struct PlanResolution {
  // The plan to run: the input, less a secondary copy that would span as many ranks as the
  // weights (it would only duplicate the primary and cost memory).
  ShardPlan plan;
  // Empty when the plan is what it says; otherwise one line (no newline) naming the plan, the
  // topology, what it effectively is and why.
  std::string note;
};

// A preset degenerates when levels it means to keep apart cover the same ranks here (one level,
// the innermost level being the node level, levels of fan-out 1); any plan may carry a useless
// secondary copy.
PlanResolution resolve_plan(const ShardPlan& plan, const Topology& topology);

}  // namespace strata
