// The MPI backend of the communication seam: one communicator per topology level (ranks that
// differ only in that level's coordinate, ordered by it) and one per contiguous level range for
// control reductions, all made once at start-up. Standard MPI-3 only (Open MPI, MPICH, Cray MPICH).
#pragma once

#include <mpi.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/mpi/mpi_handles.hpp"

namespace strata {

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(Topology topology);
  ~MpiCommunicator() override = default;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return topology_.world_size(); }
  const Topology& topology() const override { return topology_; }
  TrafficMeter& meter() override { return meter_; }
  bool allows_comm_thread() const override;

  void all_gather(void* buffer, std::size_t count, DType type, int level) override;
  std::unique_ptr<CommRequest> start_all_gather(void* buffer, std::size_t count, DType type, int level) override;
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType type, int level) override;
  std::unique_ptr<CommRequest> start_reduce_scatter(const void* send, void* recv, std::size_t count, DType type,
                                                    int level) override;
  void all_to_all(const void* send, void* recv, std::size_t count, DType type, int level) override;
  std::unique_ptr<CommRequest> start_all_to_all(const void* send, void* recv, std::size_t count, DType type,
                                                int level) override;
  void broadcast(void* buffer, std::size_t count, DType type, int root_coordinate, int level) override;
  std::unique_ptr<CommRequest> start_all_gather_flat(void* buffer, std::size_t count, DType type, int first,
                                                     int last) override;
  std::unique_ptr<CommRequest> start_all_to_all_flat(const void* send, void* recv, std::size_t count, DType type,
                                                     int first, int last) override;
  void all_reduce_control(double* values, int count, int first_level, int last_level, ControlOp op) override;
  void barrier() override;

 private:
  MPI_Datatype mpi_type(DType type) const;
  std::uint64_t peer_volume(std::size_t count, DType type, int level) const;
  MPI_Comm level_comm(int level) const { return level_comms_.at(static_cast<std::size_t>(level)).get(); }
  const char* peers(int level) const { return level_peers_.at(static_cast<std::size_t>(level)).c_str(); }

  Topology topology_;
  int rank_ = 0;
  TrafficMeter meter_;
  std::vector<MpiComm> level_comms_;
  std::map<std::pair<int, int>, MpiComm> range_comms_;
  std::map<std::pair<int, int>, MpiComm> flat_comms_;  // per level range, ranks in shard-index order
  // Per level and per level range: the hosts of the other ranks, for the watchdog's message.
  std::vector<std::string> level_peers_;
  std::map<std::pair<int, int>, std::string> range_peers_;
  MpiDatatype bf16_type_;
};

}  // namespace strata
