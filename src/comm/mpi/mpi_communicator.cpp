// MPI collectives with every call checked and metered.
#include "comm/mpi/mpi_communicator.hpp"

#include <fmt/format.h>

#include <climits>
#include <exception>

#include "comm/collective_spec.hpp"
#include "comm/progress_pacer.hpp"
#include "comm/mpi/mpi_check.hpp"
#include "comm/mpi/mpi_runtime.hpp"
#include "comm/mpi/mpi_watchdog.hpp"
#include "comm/mpi/ring_reduce_scatter.hpp"
#include "core/error.hpp"

namespace strata {

namespace {

int checked_count(std::size_t count, std::string_view what) {
  STRATA_REQUIRE(count <= static_cast<std::size_t>(INT_MAX), "{}: {} elements exceed MPI's int count", what, count);
  return static_cast<int>(count);
}

// One non-blocking MPI call. Always owned by a MeteredRequest, which waits on it.
class MpiRequest final : public CommRequest {
 public:
  MpiRequest(MPI_Request request, const char* what, const char* waits_on)
      : request_(request), what_(what), waits_on_(waits_on) {}
  MpiRequest(const MpiRequest&) = delete;
  MpiRequest& operator=(const MpiRequest&) = delete;
  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    const MpiWatch watch("MPI_Wait", waits_on_);
    paced_wait(
        [&] {
          int done = 0;
          mpi_check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), what_);
          return done != 0;
        },
        [&] { mpi_check(MPI_Wait(&request_, MPI_STATUS_IGNORE), what_); });
  }

 private:
  MPI_Request request_;
  const char* what_;
  const char* waits_on_;
};

// What one call moves at one level: bytes each way, and whether the call counts there.
struct LevelVolume {
  int level;
  std::uint64_t bytes;
  bool call;
};

// Meters a started collective once, when it completes, under the phase it was started in. The
// one owner of a started collective: dropping it unwaited waits (or ends the job on an error).
class MeteredRequest final : public CommRequest {
 public:
  MeteredRequest(std::unique_ptr<CommRequest> inner, TrafficMeter& meter, int level, std::uint64_t bytes)
      : MeteredRequest(std::move(inner), meter, std::vector<LevelVolume>{{level, bytes, true}}) {}
  MeteredRequest(std::unique_ptr<CommRequest> inner, TrafficMeter& meter, std::vector<LevelVolume> volumes)
      : inner_(std::move(inner)), meter_(meter), phase_(meter.phase()), volumes_(std::move(volumes)),
        start_(MPI_Wtime()) {}
  // Copies would meter one collective twice.
  MeteredRequest(const MeteredRequest&) = delete;
  MeteredRequest& operator=(const MeteredRequest&) = delete;
  ~MeteredRequest() override {
    if (inner_ && std::uncaught_exceptions() == 0) {
      try {
        wait();
      } catch (const Error& e) {
        MpiRuntime::abort(e.what(), 1);
      }
    }
  }
  void wait() override {
    if (!inner_) return;
    inner_->wait();
    inner_.reset();
    const TrafficPhase now = meter_.phase();
    meter_.set_phase(phase_);
    const double seconds = MPI_Wtime() - start_;
    for (const LevelVolume& v : volumes_) meter_.record(v.level, v.bytes, v.bytes, v.call ? seconds : 0.0, v.call);
    meter_.set_phase(now);
  }

 private:
  std::unique_ptr<CommRequest> inner_;
  TrafficMeter& meter_;
  TrafficPhase phase_;
  std::vector<LevelVolume> volumes_;
  double start_;
};

}  // namespace

MpiCommunicator::MpiCommunicator(Topology topology)
    : topology_(std::move(topology)), rank_(MpiRuntime::world_rank()), meter_(topology_.level_count()) {
  STRATA_REQUIRE(topology_.world_size() == MpiRuntime::world_size(),
                 "the topology describes {} ranks but the job has {}", topology_.world_size(),
                 MpiRuntime::world_size());
  MpiRuntime::gather_hosts();
  for (int l = 0; l < topology_.level_count(); ++l) {
    // Color: this rank with coordinate l zeroed; key: coordinate l, so comm rank == coordinate.
    const int color = rank_ - topology_.coordinate(rank_, l) * topology_.span(l - 1);
    MPI_Comm comm = MPI_COMM_NULL;
    mpi_check(MPI_Comm_split(MPI_COMM_WORLD, color, topology_.coordinate(rank_, l), &comm), "MPI_Comm_split (level)");
    level_comms_.emplace_back(comm);
    level_peers_.push_back(MpiRuntime::other_hosts(topology_.levels_group(rank_, l, l).ranks));
  }
  for (int first = 0; first < topology_.level_count(); ++first) {
    for (int last = first; last < topology_.level_count(); ++last) {
      const RankGroup g = topology_.levels_group(rank_, first, last);
      MPI_Comm comm = MPI_COMM_NULL;
      mpi_check(MPI_Comm_split(MPI_COMM_WORLD, g.ranks.front(), rank_, &comm), "MPI_Comm_split (level range)");
      range_comms_.insert_or_assign({first, last}, MpiComm(comm));
      range_peers_.insert_or_assign({first, last}, MpiRuntime::other_hosts(g.ranks));
      // The same group, ranked by shard index, for the flat collectives.
      MPI_Comm flat = MPI_COMM_NULL;
      mpi_check(MPI_Comm_split(MPI_COMM_WORLD, g.ranks.front(), topology_.shard_index(rank_, first, last), &flat),
                "MPI_Comm_split (flat level range)");
      flat_comms_.insert_or_assign({first, last}, MpiComm(flat));
    }
  }
  MPI_Datatype type = MPI_DATATYPE_NULL;
  mpi_check(MPI_Type_contiguous(2, MPI_BYTE, &type), "MPI_Type_contiguous");
  bf16_type_ = MpiDatatype(type);
  mpi_check(MPI_Type_commit(bf16_type_.inout()), "MPI_Type_commit");
}

bool MpiCommunicator::allows_comm_thread() const { return MpiRuntime::allows_comm_thread(); }

MPI_Datatype MpiCommunicator::mpi_type(DType type) const {
  switch (type) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT;
    case DType::kBF16: return bf16_type_.get();
    case DType::kU8: return MPI_BYTE;
  }
  fail("no MPI type for {}", dtype_name(type));
}

std::uint64_t MpiCommunicator::peer_volume(std::size_t count, DType type, int level) const {
  // A piece of `count` elements to or from each of the fanout - 1 peers.
  return (topology_.level(level).fanout - 1ULL) * count * dtype_size(type);
}

void MpiCommunicator::all_gather(void* buffer, std::size_t count, DType type, int level) {
  const double start = MPI_Wtime();
  const MpiWatch watch("MPI_Allgather", peers(level));
  mpi_check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, checked_count(count, "all-gather"),
                          mpi_type(type), level_comm(level)),
            "MPI_Allgather");
  const std::uint64_t bytes = peer_volume(count, type, level);
  meter_.record(level, bytes, bytes, MPI_Wtime() - start);
}

std::unique_ptr<CommRequest> MpiCommunicator::start_all_gather(void* buffer, std::size_t count, DType type,
                                                               int level) {
  MPI_Request request = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, checked_count(count, "all-gather"),
                           mpi_type(type), level_comm(level), &request),
            "MPI_Iallgather");
  return std::make_unique<MeteredRequest>(std::make_unique<MpiRequest>(request, "MPI_Wait (all-gather)", peers(level)), meter_,
                                          level, peer_volume(count, type, level));
}

void MpiCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType type, int level) {
  start_reduce_scatter(send, recv, count, type, level)->wait();
}

// A ring on the level's communicator rather than MPI_(I)reduce_scatter_block: see
// ring_reduce_scatter.hpp for why; it moves exactly the volume the meter counts.
std::unique_ptr<CommRequest> MpiCommunicator::start_reduce_scatter(const void* send, void* recv, std::size_t count,
                                                                   DType type, int level) {
  STRATA_CHECK(type != DType::kU8, "a sum of raw bytes (quantized blobs are summed after decoding)");
  auto ring = start_ring_reduce_scatter(level_comm(level), send, recv, checked_count(count, "reduce-scatter"), type,
                                        mpi_type(type),
                                        "ring reduce-scatter (MPI_Isend/MPI_Irecv)", peers(level));
  return std::make_unique<MeteredRequest>(std::move(ring), meter_, level, peer_volume(count, type, level));
}

void MpiCommunicator::all_to_all(const void* send, void* recv, std::size_t count, DType type, int level) {
  const double start = MPI_Wtime();
  const int n = checked_count(count, "all-to-all");
  const MpiWatch watch("MPI_Alltoall", peers(level));
  mpi_check(MPI_Alltoall(send, n, mpi_type(type), recv, n, mpi_type(type), level_comm(level)), "MPI_Alltoall");
  const std::uint64_t bytes = peer_volume(count, type, level);
  meter_.record(level, bytes, bytes, MPI_Wtime() - start);
}

std::unique_ptr<CommRequest> MpiCommunicator::start_all_to_all(const void* send, void* recv, std::size_t count,
                                                               DType type, int level) {
  MPI_Request request = MPI_REQUEST_NULL;
  const int n = checked_count(count, "all-to-all");
  mpi_check(MPI_Ialltoall(send, n, mpi_type(type), recv, n, mpi_type(type), level_comm(level), &request),
            "MPI_Ialltoall");
  return std::make_unique<MeteredRequest>(std::make_unique<MpiRequest>(request, "MPI_Wait (all-to-all)", peers(level)), meter_,
                                          level, peer_volume(count, type, level));
}

void MpiCommunicator::broadcast(void* buffer, std::size_t count, DType type, int root_coordinate, int level) {
  const double start = MPI_Wtime();
  const MpiWatch watch("MPI_Bcast", peers(level));
  mpi_check(MPI_Bcast(buffer, checked_count(count, "broadcast"), mpi_type(type), root_coordinate, level_comm(level)),
            "MPI_Bcast");
  const std::uint64_t bytes = count * dtype_size(type);
  const bool root = topology_.coordinate(rank_, level) == root_coordinate;
  meter_.record(level, root ? bytes : 0, root ? 0 : bytes, MPI_Wtime() - start);
}

namespace {

// A flat call's volume: a piece per peer, at the peer's level; the call at the outermost level.
std::vector<LevelVolume> flat_volume(const Topology& t, std::size_t count, DType type, int first, int last) {
  std::vector<LevelVolume> v;
  const std::vector<std::uint64_t> peers = flat_peers(t, first, last);
  int outer = -1;
  for (int l = last; l >= first && outer < 0; --l) outer = t.level(l).fanout > 1 ? l : -1;
  for (int l = first; l <= last; ++l) {
    v.push_back({l, peers[static_cast<std::size_t>(l)] * count * dtype_size(type), l == outer});
  }
  return v;
}

}  // namespace

std::unique_ptr<CommRequest> MpiCommunicator::start_all_gather_flat(void* buffer, std::size_t count, DType type,
                                                                    int first, int last) {
  MPI_Request request = MPI_REQUEST_NULL;
  mpi_check(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, checked_count(count, "all-gather"),
                           mpi_type(type), flat_comms_.at({first, last}).get(), &request),
            "MPI_Iallgather (flat)");
  return std::make_unique<MeteredRequest>(
      std::make_unique<MpiRequest>(request, "MPI_Wait (flat all-gather)", range_peers_.at({first, last}).c_str()), meter_,
      flat_volume(topology_, count, type, first, last));
}

std::unique_ptr<CommRequest> MpiCommunicator::start_all_to_all_flat(const void* send, void* recv, std::size_t count,
                                                                    DType type, int first, int last) {
  MPI_Request request = MPI_REQUEST_NULL;
  const int n = checked_count(count, "all-to-all");
  mpi_check(MPI_Ialltoall(send, n, mpi_type(type), recv, n, mpi_type(type), flat_comms_.at({first, last}).get(),
                          &request),
            "MPI_Ialltoall (flat)");
  return std::make_unique<MeteredRequest>(
      std::make_unique<MpiRequest>(request, "MPI_Wait (flat all-to-all)", range_peers_.at({first, last}).c_str()), meter_,
      flat_volume(topology_, count, type, first, last));
}

void MpiCommunicator::all_reduce_control(double* values, int count, int first_level, int last_level, ControlOp op) {
  if (last_level < first_level) return;
  const double start = MPI_Wtime();
  const MPI_Comm comm = range_comms_.at({first_level, last_level}).get();
  const MpiWatch watch("MPI_Allreduce", range_peers_.at({first_level, last_level}).c_str());
  mpi_check(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, op == ControlOp::kMax ? MPI_MAX : MPI_SUM, comm),
            "MPI_Allreduce (control)");
  meter_.record_control(static_cast<std::uint64_t>(count) * sizeof(double), MPI_Wtime() - start);
}

void MpiCommunicator::barrier() {
  const MpiWatch watch("MPI_Barrier");
  mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

}  // namespace strata
