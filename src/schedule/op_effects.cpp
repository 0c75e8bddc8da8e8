// The op-kind table and each op's accesses.
#include "schedule/op_effects.hpp"

#include "core/error.hpp"

namespace strata {

namespace {

constexpr auto kGathered = static_cast<std::size_t>(BufferKind::kGathered);
constexpr auto kSecondaryBuffer = static_cast<std::size_t>(BufferKind::kSecondary);
constexpr auto kUnitGradBuffer = static_cast<std::size_t>(BufferKind::kUnitGrad);

OpKindInfo info(const char* name, OpSync sync, OpKind pair = OpKind::kForward, std::initializer_list<std::size_t> allocates = {},
                std::initializer_list<std::size_t> frees = {}) {
  OpKindInfo i;
  i.name = name;
  i.sync = sync;
  i.pair = pair;
  for (std::size_t k : allocates) i.allocates[k] = true;
  for (std::size_t k : frees) i.frees[k] = true;
  return i;
}

}  // namespace

const OpKindInfo& op_kind_info(OpKind kind) {
  // A gather allocates the compute copy it lands in (and its staging); its wait frees the
  // secondary copy it read, which backward needs no more; keep_secondary makes that copy; a
  // backward opens a unit-gradient buffer that its reduce-scatter's wait frees.
  static const OpKindInfo gather_start = info("gather_start", OpSync::kStart, OpKind::kGatherWait, {kGathered});
  static const OpKindInfo gather_wait = info("gather_wait", OpSync::kWait, OpKind::kGatherStart, {}, {kSecondaryBuffer});
  static const OpKindInfo keep_secondary = info("keep_secondary", OpSync::kLocal, OpKind::kForward, {kSecondaryBuffer});
  static const OpKindInfo release = info("release", OpSync::kLocal, OpKind::kForward, {}, {kGathered});
  static const OpKindInfo forward = info("forward", OpSync::kLocal);
  static const OpKindInfo backward = info("backward", OpSync::kLocal, OpKind::kForward, {kUnitGradBuffer});
  static const OpKindInfo recompute = info("recompute", OpSync::kLocal);
  static const OpKindInfo loss_reduce = info("loss_reduce", OpSync::kBlocking);
  static const OpKindInfo rs_start = info("reduce_scatter_start", OpSync::kStart, OpKind::kReduceScatterWait);
  static const OpKindInfo rs_wait =
      info("reduce_scatter_wait", OpSync::kWait, OpKind::kReduceScatterStart, {}, {kUnitGradBuffer});
  static const OpKindInfo rs_replicas_start =
      info("replica_reduce_scatter_start", OpSync::kStart, OpKind::kReplicaReduceScatterWait);
  static const OpKindInfo rs_replicas_wait =
      info("replica_reduce_scatter_wait", OpSync::kWait, OpKind::kReplicaReduceScatterStart);
  static const OpKindInfo ar_replicas_start = info("replica_all_reduce_start", OpSync::kStart, OpKind::kReplicaAllReduceWait);
  static const OpKindInfo ar_replicas_wait = info("replica_all_reduce_wait", OpSync::kWait, OpKind::kReplicaAllReduceStart);
  static const OpKindInfo grad_norm = info("grad_norm", OpSync::kBlocking);
  static const OpKindInfo optimizer_step = info("optimizer_step", OpSync::kLocal);
  static const OpKindInfo gather_updated_start = info("gather_updated_start", OpSync::kStart, OpKind::kGatherUpdatedWait);
  static const OpKindInfo gather_updated_wait = info("gather_updated_wait", OpSync::kWait, OpKind::kGatherUpdatedStart);
  static const OpKindInfo invalidate_secondaries = info("invalidate_secondaries", OpSync::kLocal);
  static const OpKindInfo agree_stop = info("agree_stop", OpSync::kBlocking);
  switch (kind) {
    case OpKind::kGatherStart: return gather_start;
    case OpKind::kGatherWait: return gather_wait;
    case OpKind::kKeepSecondary: return keep_secondary;
    case OpKind::kRelease: return release;
    case OpKind::kForward: return forward;
    case OpKind::kBackward: return backward;
    case OpKind::kRecompute: return recompute;
    case OpKind::kLossReduce: return loss_reduce;
    case OpKind::kReduceScatterStart: return rs_start;
    case OpKind::kReduceScatterWait: return rs_wait;
    case OpKind::kReplicaReduceScatterStart: return rs_replicas_start;
    case OpKind::kReplicaReduceScatterWait: return rs_replicas_wait;
    case OpKind::kReplicaAllReduceStart: return ar_replicas_start;
    case OpKind::kReplicaAllReduceWait: return ar_replicas_wait;
    case OpKind::kGradNorm: return grad_norm;
    case OpKind::kOptimizerStep: return optimizer_step;
    case OpKind::kGatherUpdatedStart: return gather_updated_start;
    case OpKind::kGatherUpdatedWait: return gather_updated_wait;
    case OpKind::kInvalidateSecondaries: return invalidate_secondaries;
    case OpKind::kAgreeStop: return agree_stop;
  }
  STRATA_CHECK(false, "an op kind outside the table ({})", static_cast<int>(kind));
}

std::string op_kind_name(OpKind kind) { return op_kind_info(kind).name; }

bool is_transient(Resource r) {
  return r == Resource::kSecondary || r == Resource::kGathered || r == Resource::kUnitGrad ||
         r == Resource::kBlockActivations || r == Resource::kLoss || r == Resource::kNorm || r == Resource::kStopFlag;
}

std::string resource_name(const StepSchedule& s, Resource r, int unit) {
  const std::string of = unit >= 0 && unit < static_cast<int>(s.unit_names.size())
                             ? " of " + s.unit_names[static_cast<std::size_t>(unit)]
                             : std::string();
  switch (r) {
    case Resource::kPrimary: return "the primary weight shard" + of;
    case Resource::kSecondary: return "the secondary copy" + of;
    case Resource::kGathered: return "the gathered weights" + of;
    case Resource::kUnitGrad: return "the unit gradient" + of;
    case Resource::kGradShard: return "the gradient shard" + of;
    case Resource::kOptimizer: return "the optimizer slice" + of;
    case Resource::kActivations: return "the activations";
    case Resource::kBlockActivations: return "the saved activations" + of;
    case Resource::kLoss: return "the micro-batch loss";
    case Resource::kNorm: return "the gradient norm";
    case Resource::kStopFlag: return "the stop request";
  }
  return "?";
}

Resource gradient_resource(const StepSchedule& s) {
  return s.grads_partitioned ? Resource::kUnitGrad : Resource::kGradShard;
}

namespace {

bool allocates(const ScheduleOp& op, BufferKind kind, int unit) {
  for (const BufferEffect& b : op.alloc) {
    if (b.kind == kind && b.unit == unit) return true;
  }
  return false;
}

}  // namespace

bool writes_gradient_whole(const StepSchedule& s, const ScheduleOp& op, int unit) {
  if (op.kind != OpKind::kBackward) return false;
  if (gradient_resource(s) == Resource::kUnitGrad) return allocates(op, BufferKind::kUnitGrad, unit);
  return op.micro == 0 && op.stage != ComputeStage::kEmbedding;
}

std::vector<Access> op_accesses(const StepSchedule& s, const ScheduleOp& op) {
  std::vector<Access> a;
  const Resource source = op.source == WeightSource::kSecondary ? Resource::kSecondary : Resource::kPrimary;
  switch (op.kind) {
    case OpKind::kGatherStart:
      a.push_back({source, op.unit, true, false});
      a.push_back({Resource::kGathered, op.unit, false, true, After::kInFlight});
      break;
    case OpKind::kGatherWait:
      a.push_back({source, op.unit, true, false});  // the send buffer is in use until the gather ends
      a.push_back({Resource::kGathered, op.unit, false, true});
      // The secondary copy has served its purpose once the last bucket is in.
      if (source == Resource::kSecondary && op.bucket + 1 == op.buckets) {
        a.push_back({Resource::kSecondary, op.unit, false, true, After::kFreed});
      }
      break;
    case OpKind::kKeepSecondary:
      a.push_back({Resource::kGathered, op.unit, true, false});
      a.push_back({Resource::kSecondary, op.unit, false, true});
      break;
    case OpKind::kRelease: a.push_back({Resource::kGathered, op.unit, false, true, After::kReleased}); break;
    case OpKind::kForward:
    case OpKind::kBackward:
    case OpKind::kRecompute: {
      for (int u : op.weight_units) a.push_back({Resource::kGathered, u, true, false});
      a.push_back({Resource::kActivations, -1, true, true});
      if (op.kind == OpKind::kForward && op.stage == ComputeStage::kHead) a.push_back({Resource::kLoss, -1, false, true});
      for (int u : op.grad_units) a.push_back({gradient_resource(s), u, !writes_gradient_whole(s, op, u), true});
      if (op.stage != ComputeStage::kBlock) break;
      // A block's saved activations: its forward writes them (released at once where the block
      // is recomputed), its recompute writes them again, its backward reads them last.
      const Access saved = op.kind == OpKind::kBackward
                               ? Access{Resource::kBlockActivations, op.unit, true, true, After::kReleased}
                               : Access{Resource::kBlockActivations, op.unit, false, true,
                                        op.kind == OpKind::kForward && s.activation_checkpointing.recomputes(op.layer)
                                            ? After::kReleased
                                            : After::kValid};
      a.push_back(saved);
      break;
    }
    case OpKind::kLossReduce: a.push_back({Resource::kLoss, -1, true, false}); break;
    case OpKind::kReduceScatterStart: a.push_back({Resource::kUnitGrad, op.unit, true, false}); break;
    case OpKind::kReduceScatterWait:
      a.push_back({Resource::kUnitGrad, op.unit, true, false});
      a.push_back({Resource::kGradShard, op.unit, true, true});
      // A bucketed reduction frees the unit gradient with its last bucket.
      if (op.bucket + 1 == op.buckets) a.push_back({Resource::kUnitGrad, op.unit, false, true, After::kFreed});
      break;
    case OpKind::kReplicaReduceScatterStart:
    case OpKind::kReplicaAllReduceStart:
      a.push_back({Resource::kGradShard, op.unit, true, true, After::kInFlight});
      break;
    case OpKind::kReplicaReduceScatterWait:
    case OpKind::kReplicaAllReduceWait: a.push_back({Resource::kGradShard, op.unit, false, true}); break;
    case OpKind::kGradNorm:
      for (int u = 0; u < s.unit_count; ++u) a.push_back({Resource::kGradShard, u, true, false});
      a.push_back({Resource::kNorm, -1, false, true});
      break;
    case OpKind::kOptimizerStep:
      a.push_back({Resource::kGradShard, op.unit, true, false});
      a.push_back({Resource::kNorm, -1, true, false});
      a.push_back({Resource::kOptimizer, op.unit, true, true});
      break;
    case OpKind::kGatherUpdatedStart:
      a.push_back({Resource::kOptimizer, op.unit, true, false});
      a.push_back({Resource::kPrimary, op.unit, false, true, After::kInFlight});
      break;
    case OpKind::kGatherUpdatedWait:
      a.push_back({Resource::kOptimizer, op.unit, true, false});  // the send buffer, until the gather ends
      a.push_back({Resource::kPrimary, op.unit, false, true});
      break;
    case OpKind::kInvalidateSecondaries: break;
    case OpKind::kAgreeStop: a.push_back({Resource::kStopFlag, -1, false, true}); break;
  }
  // A later bucket's start touches a part of the buffer the earlier buckets (in flight) do not:
  // it reads no part of theirs.
  if (op.bucket > 0 && op_kind_info(op.kind).sync == OpSync::kStart) {
    for (Access& x : a) {
      if (!x.read) continue;
      for (const Access& y : a) {
        if (y.write && y.after == After::kInFlight && y.resource == x.resource && y.unit == x.unit) x.read = false;
      }
    }
  }
  return a;
}

}  // namespace strata
