// The collective task of each start op.
#include "engine/unit_tasks.hpp"

#include "comm/quantized.hpp"
#include "core/error.hpp"
#include "engine/unit_collectives.hpp"
#include "schedule/op_effects.hpp"

namespace strata {

namespace {

// The op's phase on the meter, then the work.
CollectiveTask in_phase(Communicator& comm, TrafficPhase phase, CollectiveTask work) {
  return [&comm, phase, work = std::move(work)] {
    comm.meter().set_phase(phase);
    work();
  };
}

}  // namespace

CollectiveTask gather_task(Communicator& comm, ScratchPool& scratch, UnitShard& u, const ScheduleOp& op,
                           DType weight_dtype, const void* from) {
  const CollectiveSpec spec = op.comm;
  float* compute = reinterpret_cast<float*>(u.compute->data());
  if (spec.bucketed()) {
    // A bucket gathers its part of every rank's piece through collective scratch, into its parts
    // of the compute copy; the unit's weights are complete when its last bucket is waited for.
    return in_phase(comm, op.phase, [&comm, &scratch, spec, from, weight_dtype, compute] {
      gather_bucket(comm, spec, from, weight_dtype, compute, scratch);
    });
  }
  STRATA_CHECK(spec.dtype == weight_dtype && spec.elements == u.padded, "a gather of unit {} as {} elements of {}", op.unit,
               spec.elements, dtype_name(spec.dtype));
  const std::size_t from_len = op.source == WeightSource::kSecondary ? u.secondary_len : u.weight_len;
  const std::size_t staging = u.staging ? u.staging->size() : 0;
  void* stage = u.staging ? static_cast<void*>(u.staging->data()) : static_cast<void*>(compute);
  if (spec.quant.enabled()) {
    const auto span = static_cast<std::size_t>(comm.topology().span(spec.first_level, spec.last_level));
    STRATA_CHECK(staging == quantized_gather_bytes(spec.quant, from_len, span),
                 "the schedule stages {} bytes for the quantized gather of unit {}, which needs {}", staging, op.unit,
                 quantized_gather_bytes(spec.quant, from_len, span));
  } else {
    STRATA_CHECK(staging == (weight_dtype == DType::kF32 ? 0 : u.padded * dtype_size(weight_dtype)),
                 "the schedule stages {} bytes for the {} gather of unit {}", staging, dtype_name(weight_dtype), op.unit);
    // bf16 compute reads the gathered bf16 copy unconverted, once the wait is past.
    if (weight_dtype == DType::kBF16) u.working_bf16 = static_cast<const bf16*>(stage);
  }
  const std::size_t padded = u.padded;
  return in_phase(comm, op.phase, [&comm, spec, from, from_len, weight_dtype, stage, compute, padded] {
    gather_unit(comm, spec, from, from_len, weight_dtype, stage, compute, padded);
  });
}

CollectiveTask replica_reduce_scatter_task(Communicator& comm, ScratchPool& scratch, UnitShard& u, const ScheduleOp& op) {
  STRATA_CHECK(op.comm.bucketed() ? op.comm.bucket_piece == u.optim_len : op.comm.elements == u.grad_len,
               "a replica reduce-scatter of unit {} as {} elements", op.unit, op.comm.elements);
  const CollectiveSpec spec = op.comm;
  UnitShard* unit = &u;
  return in_phase(comm, op.phase, [&comm, &scratch, spec, unit] {
    reduce_scatter_replicas(comm, spec, unit->grad_shard.data(), unit->reduced_grad(), scratch);
  });
}

CollectiveTask replica_all_reduce_task(Communicator& comm, ScratchPool& scratch, UnitShard& u, const ScheduleOp& op) {
  STRATA_CHECK(op.comm.bucketed() ? op.comm.bucket_piece == u.optim_len : op.comm.elements == u.optim_len,
               "a replica all-reduce of unit {} as {} elements", op.unit, op.comm.elements);
  const CollectiveSpec spec = op.comm;
  UnitShard* unit = &u;
  return in_phase(comm, op.phase,
                  [&comm, &scratch, spec, unit] { all_reduce_replicas(comm, spec, unit->reduced_grad(), scratch); });
}

CollectiveTask gather_updated_task(Communicator& comm, UnitShard& u, const ScheduleOp& op, DType weight_dtype) {
  STRATA_CHECK((op.comm.bucketed() ? op.comm.bucket_piece == u.optim_len : op.comm.elements == u.weight_len) &&
                   op.comm.dtype == weight_dtype,
               "the updated weights of unit {} as {} elements", op.unit, op.comm.elements);
  const CollectiveSpec spec = op.comm;
  UnitShard* unit = &u;
  return in_phase(comm, op.phase, [&comm, spec, unit] {
    gather_updated(comm, spec, unit->master.data(), unit->optim_len, unit->optim_offset, unit->primary.data(),
                   unit->weight_offset);
  });
}

CollectiveTask reduce_scatter_task(Communicator& comm, ScratchPool& scratch, UnitShard& u, const ScheduleOp& op) {
  STRATA_CHECK(op.comm.bucketed() ? op.comm.bucket_piece == u.grad_len : op.comm.elements == u.padded,
               "a reduce-scatter of unit {} as {} elements", op.unit, op.comm.elements);
  STRATA_CHECK(u.grad != nullptr, "the schedule reduces the gradient of unit {} without allocating it", op.unit);
  float* gradient = reinterpret_cast<float*>(u.grad->data());
  if (op.bucket == 0) {
    u.reductions.clear();
    u.reductions.resize(static_cast<std::size_t>(op.buckets));
  }
  UnitShard::Reduction* r = &u.reductions.at(static_cast<std::size_t>(op.bucket));
  const CollectiveSpec spec = op.comm;
  return in_phase(comm, op.phase, [&comm, &scratch, spec, r, gradient] {
    r->reduction = start_unit_reduce_scatter(comm, spec, gradient, scratch);
    r->reduction->complete();
  });
}

}  // namespace strata
