// The schedule builder's shared state, seen only by its passes: the list being written, one
// timeline per unit, and the helpers every pass uses (ops, buckets, gathers, compute). The passes
// live in files of their own: forward_pass.cpp, backward_pass.cpp, boundary_pass.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/shard_layout.hpp"
#include "schedule/step_schedule.hpp"
#include "schedule/unit_timeline.hpp"

namespace strata {

class ScheduleBuilder {
 public:
  explicit ScheduleBuilder(const ScheduleInputs& in);
  StepSchedule build();

 private:
  // A forward compute stage and the units whose weights it reads.
  struct Stage {
    ComputeStage stage;
    int layer;
    std::vector<int> units;
  };
  // Gathers of stages issued in order with a prefetch depth and a live-memory bound (see
  // issue_through).
  struct Issuer {
    std::vector<std::vector<int>> units;   // per stage
    std::vector<std::vector<int>> starts;  // per stage: its gather starts, once issued
    std::size_t next = 0;                  // the first stage not issued
    WeightSource source = WeightSource::kPrimary;
    bool backward = false;
  };

  // ---- bookkeeping (schedule_builder.cpp) ----
  void begin_segment(SegmentKind kind, int micro, std::string name);
  void end_segment();
  ScheduleOp make(OpKind kind, int micro, int unit) const;
  int add(ScheduleOp op);
  UnitTimeline& unit(int u) { return units_[static_cast<std::size_t>(u)]; }
  std::size_t numel(int unit) const { return s_.padded_numel.at(static_cast<std::size_t>(unit)); }
  std::uint64_t weight_bytes(std::size_t elements) const { return elements * dtype_size(in_.weight_dtype); }
  std::uint64_t secondary_bytes(int unit) const { return weight_bytes(shards_.unit(unit).secondary.len); }
  bool is_block(int unit) const;
  bool secondary_in_use() const { return plan_.weights != kReplicated && plan_.has_secondary(); }
  void check_live_bound() const;
  void resident_state();
  double stage_flops(ComputeStage stage, int unit, double factor) const;

  // ---- collectives and their buckets (schedule_builder.cpp) ----
  CollectiveSpec with_quant(CollectiveSpec c, QuantFormat f) const;
  CollectiveSpec flat_if_planned(CollectiveSpec c) const;
  std::vector<CollectiveSpec> buckets_of(const CollectiveSpec& c) const;
  std::vector<int> add_bucket_starts(ScheduleOp first, const CollectiveSpec& spec);
  int add_bucket_waits(OpKind kind, int micro, int unit, const std::vector<int>& starts, std::vector<int> deps,
                       ScheduleOp last);
  static CollectiveSpec no_bytes(CollectiveSpec c);

  // ---- gathers, compute, stage issue (schedule_builder.cpp) ----
  std::uint64_t gathered_bytes(int unit, const CollectiveSpec& gather) const;
  CollectiveSpec gather_spec(int unit, WeightSource source, bool backward) const;
  int gather_start(int micro, int unit, WeightSource source, bool backward);
  int gather_wait(int micro, int unit, int start);
  int release(int micro, int unit, std::vector<int> deps);
  int compute(OpKind kind, int micro, ComputeStage stage, int layer, std::vector<int> weight_units,
              std::vector<int> grad_units, std::vector<int> deps);
  std::uint64_t stage_bytes(const std::vector<int>& units, WeightSource source, bool backward) const;
  bool can_issue(const Issuer& is, std::size_t stage) const;
  void issue_stage(int micro, Issuer& is);
  void issue_through(int micro, Issuer& is, std::size_t i, bool prefetch);

  // ---- forward (forward_pass.cpp) ----
  std::vector<Stage> forward_stages() const;
  void forward_pass(int micro, bool training);
  void loss_reduce(int micro, int head_forward);

  // ---- backward and its gradient reductions (backward_pass.cpp) ----
  void backward_pass(int micro);
  void head_backward(int micro, const Stage& head);
  void reduce_scatter_start(int micro, int unit, int backward);
  void reduce_scatter_waits(int micro);

  // ---- the step boundary (boundary_pass.cpp) ----
  CollectiveSpec replica_reduce_scatter_spec(int u) const;
  CollectiveSpec replica_all_reduce_spec(int u) const;
  CollectiveSpec updated_spec(int u) const;
  std::vector<int> replica_starts(OpKind kind, int micro, int unit, const CollectiveSpec& spec);
  void replica_waits(OpKind kind, int unit, const std::vector<int>& starts);
  void replica_start(int micro, int unit);
  void await_update(int micro, int unit);
  void boundary();

  const ScheduleInputs& in_;
  const ShardPlan& plan_;
  int top_;
  ShardLayout shards_;  // rank 0's: the builder needs only the lengths, the same on every rank
  bool overlap_ = false;  // the boundary overlapped (training lists only)
  int step_ = 0;
  StepSchedule s_;
  std::vector<UnitTimeline> units_;
  int last_compute_ = -1;
  int last_loss_reduce_ = -1;
  int last_agree_ = -1;
  int last_gather_start_ = -1;
  int last_release_ = -1;
  std::uint64_t live_gathered_ = 0;  // gathered bytes live at this point of the list
  std::vector<int> reducing_;        // units whose reduce-scatter is in flight, in start order
};

}  // namespace strata
