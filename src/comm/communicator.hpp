// The communication seam: collectives over the group of one topology level (the ranks that
// differ from this one only in that level's coordinate), blocking and non-blocking, plus scalar
// control reductions over several levels. Multi-level collectives are built on top of this in
// comm/hierarchical.hpp, so every byte is attributed to the one level it crossed.
#pragma once

#include <cstddef>
#include <memory>

#include "comm/traffic_meter.hpp"
#include "core/dtype.hpp"
#include "topo/topology.hpp"

namespace strata {

// A collective in flight; wait() completes it (and is called by the destructor if needed).
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
};

enum class ControlOp { kSum, kMax };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual const Topology& topology() const = 0;
  virtual TrafficMeter& meter() = 0;
  // Whether the calls may come from a thread other than the one that started the runtime (one
  // thread at a time): what the overlap's communication thread needs.
  virtual bool allows_comm_thread() const = 0;

  // In place: `buffer` holds fanout(level) pieces of `count` elements; this rank's piece sits at
  // its coordinate; on return every piece is filled.
  virtual void all_gather(void* buffer, std::size_t count, DType type, int level) = 0;
  virtual std::unique_ptr<CommRequest> start_all_gather(void* buffer, std::size_t count, DType type, int level) = 0;
  // `send` holds fanout(level) pieces of `count` elements; `recv` gets the sum of every rank's
  // piece at this rank's coordinate.
  virtual void reduce_scatter(const void* send, void* recv, std::size_t count, DType type, int level) = 0;
  virtual std::unique_ptr<CommRequest> start_reduce_scatter(const void* send, void* recv, std::size_t count,
                                                            DType type, int level) = 0;
  // `send` holds fanout(level) pieces of `count` elements, piece j for the rank at coordinate j.
  virtual void all_to_all(const void* send, void* recv, std::size_t count, DType type, int level) = 0;
  virtual std::unique_ptr<CommRequest> start_all_to_all(const void* send, void* recv, std::size_t count, DType type,
                                                         int level) = 0;
  virtual void broadcast(void* buffer, std::size_t count, DType type, int root_coordinate, int level) = 0;

  // Flat: one call over every rank that differs from this one only in levels first..last, the
  // library's own algorithm. Pieces are in shard-index order (Topology::shard_index over
  // first..last). The meter counts each peer's piece at the level of that peer.
  virtual std::unique_ptr<CommRequest> start_all_gather_flat(void* buffer, std::size_t count, DType type, int first,
                                                             int last) = 0;
  virtual std::unique_ptr<CommRequest> start_all_to_all_flat(const void* send, void* recv, std::size_t count, DType type,
                                                             int first, int last) = 0;

  // Sums (or takes the maximum of) `count` doubles over the ranks differing only in levels
  // first..last: control traffic (losses, norms, agreements), metered apart from the data.
  virtual void all_reduce_control(double* values, int count, int first_level, int last_level,
                                  ControlOp op = ControlOp::kSum) = 0;
  virtual void barrier() = 0;
};

}  // namespace strata
