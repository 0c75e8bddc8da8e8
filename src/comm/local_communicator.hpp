// The communication seam for a job of one rank: every collective over a group of one is the
// identity, so a one-process run (the reference engine, a library caller, a unit test) uses the
// same agreement and checkpoint code as a sharded job, without MPI.
#pragma once

#include "comm/communicator.hpp"

namespace strata {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator();

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  const Topology& topology() const override { return topology_; }
  TrafficMeter& meter() override { return meter_; }
  bool allows_comm_thread() const override { return true; }

  void all_gather(void*, std::size_t, DType, int) override {}
  std::unique_ptr<CommRequest> start_all_gather(void* buffer, std::size_t count, DType type, int level) override;
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType type, int level) override;
  std::unique_ptr<CommRequest> start_reduce_scatter(const void* send, void* recv, std::size_t count, DType type,
                                                    int level) override;
  void all_to_all(const void* send, void* recv, std::size_t count, DType type, int level) override;
  std::unique_ptr<CommRequest> start_all_to_all(const void* send, void* recv, std::size_t count, DType type,
                                                int level) override;
  void broadcast(void*, std::size_t, DType, int, int) override {}
  std::unique_ptr<CommRequest> start_all_gather_flat(void* buffer, std::size_t count, DType type, int first,
                                                     int last) override;
  std::unique_ptr<CommRequest> start_all_to_all_flat(const void* send, void* recv, std::size_t count, DType type,
                                                     int first, int last) override;
  void all_reduce_control(double*, int, int, int, ControlOp) override {}
  void barrier() override {}

 private:
  Topology topology_;
  TrafficMeter meter_;
};

}  // namespace strata
