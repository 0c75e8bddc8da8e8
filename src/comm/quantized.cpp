// qwZ and qgZ over the single-level seam.
#include "comm/quantized.hpp"

#include <cstring>
#include <exception>
#include <vector>

#include "comm/hierarchical.hpp"
#include "comm/multilevel.hpp"
#include "core/error.hpp"
#include "quant/block_quant.hpp"

namespace strata {

namespace {

unsigned char* bytes_at(void* base, std::size_t offset) { return static_cast<unsigned char*>(base) + offset; }
const unsigned char* bytes_at(const void* base, std::size_t offset) {
  return static_cast<const unsigned char*>(base) + offset;
}

void quantize_piece(QuantFormat f, const void* in, DType type, std::size_t n, void* blob) {
  if (type == DType::kBF16) {
    quantize_blocks(f, static_cast<const bf16*>(in), n, blob);
  } else {
    STRATA_CHECK(type == DType::kF32, "quantizing {} data", dtype_name(type));
    quantize_blocks(f, static_cast<const float*>(in), n, blob);
  }
}

void check_format(QuantFormat f) {
  STRATA_CHECK(f.enabled() && f.block >= kMinQuantBlock && f.block <= kMaxQuantBlock && f.block % 2 == 0,
               "a quantized collective as {}", describe_quant(f));
}

class QuantizedGather final : public CommRequest {
 public:
  QuantizedGather(std::unique_ptr<CommRequest> gather, QuantFormat f, const void* blobs, std::size_t piece,
                  std::size_t span, float* out)
      : gather_(std::move(gather)), f_(f), blobs_(blobs), piece_(piece), span_(span), out_(out) {}
  void wait() override {
    if (done_) return;
    done_ = true;
    if (!gather_) return;  // a group of one rank: `out` was filled at the start
    gather_->wait();
    // Slot by slot: each decode splits a long piece over the OpenMP threads itself (a loop over
    // slots here would nest the kernels' parallel regions, which run serially).
    const std::size_t blob = quantized_bytes(f_, piece_);
    for (std::size_t k = 0; k < span_; ++k) dequantize_blocks(f_, bytes_at(blobs_, k * blob), piece_, out_ + k * piece_);
  }
  // As the other chained collectives: never more collectives while an exception unwinds.
  ~QuantizedGather() override {
    if (std::uncaught_exceptions() == 0) wait();
  }

 private:
  std::unique_ptr<CommRequest> gather_;
  QuantFormat f_;
  const void* blobs_;
  std::size_t piece_, span_;
  float* out_;
  bool done_ = false;
};

// One all-to-all per level, innermost first; see the header for the data flow.
class QuantizedReduceScatter final : public CommRequest {
 public:
  QuantizedReduceScatter(Communicator& comm, QuantFormat f, float* data, std::size_t n, int first, int last,
                         float* shard)
      : comm_(comm), f_(f), data_(data), level_(first), last_(last), size_(n), shard_(shard) {
    skip_unit_levels();
    if (level_ <= last_) step_ = start_hop();
  }
  void wait() override {
    if (done_) return;
    done_ = true;
    while (level_ <= last_) {
      if (!step_) step_ = start_hop();
      step_->wait();
      step_.reset();
      finish_hop();
      ++level_;
      skip_unit_levels();
    }
    std::memmove(shard_, data_ + offset_, size_ * sizeof(float));
  }
  ~QuantizedReduceScatter() override {
    if (std::uncaught_exceptions() == 0) wait();
  }

 private:
  void skip_unit_levels() {
    while (level_ <= last_ && comm_.topology().level(level_).fanout == 1) ++level_;
  }
  std::size_t fanout() const { return static_cast<std::size_t>(comm_.topology().level(level_).fanout); }
  std::size_t me() const { return static_cast<std::size_t>(comm_.topology().coordinate(comm_.rank(), level_)); }

  // Quantizes every chunk bound for a peer into its slot and starts the exchange.
  std::unique_ptr<CommRequest> start_hop() {
    const std::size_t f = fanout(), chunk = size_ / f, blob = quantized_bytes(f_, chunk);
    send_.resize(f * blob);
    recv_.resize(f * blob);
    for (std::size_t j = 0; j < f; ++j) {  // each call splits a long chunk over the threads itself
      if (j == me()) {
        std::memset(send_.data() + j * blob, 0, blob);  // our own slot is not sent; keep it defined
      } else {
        quantize_blocks(f_, data_ + offset_ + j * chunk, chunk, send_.data() + j * blob);
      }
    }
    return comm_.start_all_to_all(send_.data(), recv_.data(), blob, DType::kU8, level_);
  }

  // Our chunk: its own exact values plus every peer's decoded contribution, in coordinate order.
  void finish_hop() {
    const std::size_t f = fanout(), chunk = size_ / f, blob = quantized_bytes(f_, chunk), mine = me();
    float* sum = data_ + offset_ + mine * chunk;
    for (std::size_t j = 0; j < f; ++j) {
      if (j != mine) dequantize_add_blocks(f_, recv_.data() + j * blob, chunk, sum);
    }
    offset_ += mine * chunk;
    size_ = chunk;
  }

  Communicator& comm_;
  QuantFormat f_;
  float* data_;
  int level_, last_;
  std::size_t size_, offset_ = 0;
  float* shard_;
  std::vector<unsigned char> send_, recv_;
  std::unique_ptr<CommRequest> step_;
  bool done_ = false;
};

}  // namespace

std::size_t quantized_gather_bytes(QuantFormat f, std::size_t piece_elements, std::size_t span) {
  return span * quantized_bytes(f, piece_elements);
}

std::unique_ptr<CommRequest> start_quantized_all_gather(Communicator& comm, QuantFormat f, const void* piece,
                                                        DType type, std::size_t piece_elements, int first, int last,
                                                        void* blobs, float* out, bool flat) {
  check_format(f);
  const Topology& t = comm.topology();
  const auto span = static_cast<std::size_t>(t.span(first, last));
  if (span == 1) {  // no peers: nothing moves, so nothing is rounded
    if (type == DType::kBF16) {
      bf16_to_fp32(out, static_cast<const bf16*>(piece), piece_elements);
    } else {
      std::memcpy(out, piece, piece_elements * sizeof(float));
    }
    return std::make_unique<QuantizedGather>(nullptr, f, blobs, 0, 0, out);
  }
  const std::size_t blob = quantized_bytes(f, piece_elements);
  const auto slot = static_cast<std::size_t>(t.shard_index(comm.rank(), first, last));
  quantize_piece(f, piece, type, piece_elements, bytes_at(blobs, slot * blob));
  auto gather = start_all_gather_over(comm, flat, blobs, span * blob, DType::kU8, first, last);
  return std::make_unique<QuantizedGather>(std::move(gather), f, blobs, piece_elements, span, out);
}

std::unique_ptr<CommRequest> start_quantized_reduce_scatter(Communicator& comm, QuantFormat f, float* data,
                                                            std::size_t n, int first, int last, float* shard) {
  check_format(f);
  const auto span = static_cast<std::size_t>(comm.topology().span(first, last));
  STRATA_REQUIRE(n % span == 0, "quantized reduce-scatter of {} elements over {} ranks: the buffer must be padded to a "
                 "multiple", n, span);
  return std::make_unique<QuantizedReduceScatter>(comm, f, data, n, first, last, shard);
}

void quantized_all_reduce(Communicator& comm, QuantFormat f, float* data, std::size_t n, int first, int last) {
  const Topology& t = comm.topology();
  const auto span = static_cast<std::size_t>(t.span(first, last));
  if (span == 1) return;  // no peers: the sum is the data
  const std::size_t piece = n / span;
  std::vector<float> shard(piece);
  start_quantized_reduce_scatter(comm, f, data, n, first, last, shard.data())->wait();
  std::vector<unsigned char> blobs(quantized_gather_bytes(f, piece, span));
  start_quantized_all_gather(comm, f, shard.data(), DType::kF32, piece, first, last, blobs.data(), data)->wait();
}

}  // namespace strata
