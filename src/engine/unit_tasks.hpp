// The work each start op of the schedule posts to the communication stream, assembled from the
// unit's buffers and the op's CollectiveSpec, with the size checks that tie the two. Each task
// sets the op's phase on the meter first (the thread that runs it is the one that counts).
#pragma once

#include <functional>

#include "comm/communicator.hpp"
#include "core/dtype.hpp"
#include "engine/scratch_pool.hpp"
#include "engine/unit_shards.hpp"
#include "schedule/step_schedule.hpp"

namespace strata {

using CollectiveTask = std::function<void()>;

// A weight gather (gather_start), from `from`: the primary shard or the secondary copy, as the op
// says. Unbucketed, it fills the compute copy (through the staging buffer for qwZ and bf16, and
// leaves u.working_bf16 pointing at a bf16 gather's staging); a bucket, its parts of it.
CollectiveTask gather_task(Communicator& comm, ScratchPool& scratch, UnitShard& u, const ScheduleOp& op,
                           DType weight_dtype, const void* from);
// The boundary: the replica reduce-scatter of the gradient shard into the optimizer slice, the
// replica all-reduce of that slice, and the gather of the updated weights into the primary shard.
CollectiveTask replica_reduce_scatter_task(Communicator& comm, ScratchPool& scratch, UnitShard& u, const ScheduleOp& op);
CollectiveTask replica_all_reduce_task(Communicator& comm, ScratchPool& scratch, UnitShard& u, const ScheduleOp& op);
CollectiveTask gather_updated_task(Communicator& comm, UnitShard& u, const ScheduleOp& op, DType weight_dtype);
// A micro-batch's gradient reduce-scatter of the unit gradient; the bucket's pending reduction
// is left in `r` for the wait to accumulate.
CollectiveTask reduce_scatter_task(Communicator& comm, ScratchPool& scratch, UnitShard& u, const ScheduleOp& op);

}  // namespace strata
