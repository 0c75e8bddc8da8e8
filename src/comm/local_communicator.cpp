// Collectives over one rank.
#include "comm/local_communicator.hpp"

#include <cstring>

namespace strata {

namespace {

struct DoneRequest final : CommRequest {
  void wait() override {}
};

}  // namespace

LocalCommunicator::LocalCommunicator() : topology_(Topology::parse("world:1", 1)), meter_(1) {}

std::unique_ptr<CommRequest> LocalCommunicator::start_all_gather(void*, std::size_t, DType, int) {
  return std::make_unique<DoneRequest>();
}

void LocalCommunicator::reduce_scatter(const void* send, void* recv, std::size_t count, DType type, int) {
  if (send != recv) std::memmove(recv, send, count * dtype_size(type));
}

std::unique_ptr<CommRequest> LocalCommunicator::start_reduce_scatter(const void* send, void* recv, std::size_t count,
                                                                     DType type, int level) {
  reduce_scatter(send, recv, count, type, level);
  return std::make_unique<DoneRequest>();
}

void LocalCommunicator::all_to_all(const void* send, void* recv, std::size_t count, DType type, int level) {
  reduce_scatter(send, recv, count, type, level);
}

std::unique_ptr<CommRequest> LocalCommunicator::start_all_to_all(const void* send, void* recv, std::size_t count,
                                                                 DType type, int level) {
  all_to_all(send, recv, count, type, level);
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<CommRequest> LocalCommunicator::start_all_gather_flat(void* buffer, std::size_t count, DType type,
                                                                      int level, int) {
  return start_all_gather(buffer, count, type, level);
}

std::unique_ptr<CommRequest> LocalCommunicator::start_all_to_all_flat(const void* send, void* recv, std::size_t count,
                                                                      DType type, int level, int) {
  return start_all_to_all(send, recv, count, type, level);
}

}  // namespace strata
