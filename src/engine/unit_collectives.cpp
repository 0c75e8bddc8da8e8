// Unit collectives over the level-decomposed primitives of comm/hierarchical.
#include "engine/unit_collectives.hpp"

#include <cstring>
#include <vector>

#include "comm/collective_staging.hpp"
#include "comm/hierarchical.hpp"
#include "comm/multilevel.hpp"
#include "comm/quantized.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace strata {

namespace {

unsigned char* byte_at(void* base, std::size_t elements, DType type) {
  return static_cast<unsigned char*>(base) + elements * dtype_size(type);
}

void add_into(float* out, const float* in, std::size_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::size_t i = 0; i < n; ++i) out[i] += in[i];
}

std::size_t piece_of(const Communicator& comm, const CollectiveSpec& spec) {
  return spec.elements / static_cast<std::size_t>(comm.topology().span(spec.first_level, spec.last_level));
}

// The bucket's spec as an unbucketed collective of its packed parts.
CollectiveSpec packed(CollectiveSpec spec) {
  spec.bucket_offset = spec.bucket_piece = 0;
  return spec;
}

class UnitReduction final : public PendingReduction {
 public:
  // fp32 gradients are reduced in place (the buffer is the collective's scratch until finish);
  // other wire types go through a narrowed copy; quantized ones (qgZ) are quantized from fp32 hop
  // by hop and summed in fp32, so their piece is fp32.
  UnitReduction(Communicator& comm, const CollectiveSpec& bucket, float* whole_gradient, ScratchPool& scratch)
      : scratch_(scratch), type_(bucket.quant.enabled() ? DType::kF32 : bucket.dtype), piece_(piece_of(comm, bucket)),
        sizes_(reduction_buffers(comm.topology(), bucket)) {
    // A bucket packs its parts of the unit gradient first, then reduces them as a whole. The
    // buffers' sizes are the memory model's (comm/collective_staging).
    const CollectiveSpec spec = packed(bucket);
    float* gradient = whole_gradient;
    if (sizes_.packed > 0) {
      packed_ = scratch_.acquire(sizes_.packed, false);
      pack_bucket(whole_gradient, packed_->data(), bucket_layout(comm, bucket), DType::kF32);
      gradient = reinterpret_cast<float*>(packed_->data());
    }
    out_ = scratch_.acquire(sizes_.out, false);
    STRATA_CHECK(sizes_.out == piece_ * dtype_size(type_), "a reduced piece of {} bytes for {} elements of {}",
                 sizes_.out, piece_, dtype_name(type_));
    if (spec.quant.enabled()) {
      request_ = start_quantized_reduce_scatter(comm, spec.quant, gradient, spec.elements, spec.first_level,
                                                spec.last_level, reinterpret_cast<float*>(out_->data()));
      return;
    }
    void* wire = gradient;
    if (sizes_.wire > 0) {
      wire_ = scratch_.acquire(sizes_.wire, false);
      narrow_to(wire_->data(), gradient, spec.elements, type_);
      wire = wire_->data();
    }
    request_ = start_reduce_scatter_over(comm, spec.flat, wire, spec.elements, type_, spec.first_level,
                                         spec.last_level, out_->data());
  }
  ~UnitReduction() override {
    request_.reset();  // a request still in flight completes (or, while unwinding, is abandoned) first
    scratch_.release(std::move(wire_));
    scratch_.release(std::move(out_));
    scratch_.release(std::move(wide_));
    scratch_.release(std::move(packed_));
  }
  void complete() override {
    if (completed_) return;
    completed_ = true;
    request_->wait();
    if (sizes_.wide > 0) {  // widened here, so the compute thread only adds
      wide_ = scratch_.acquire(sizes_.wide, false);
      widen_from(reinterpret_cast<float*>(wide_->data()), out_->data(), piece_, type_);
    }
  }
  void accumulate(float* into, std::size_t piece_elements) override {
    STRATA_CHECK(piece_elements == piece_, "a reduce-scatter piece of {} elements accumulated as {}", piece_,
                 piece_elements);
    STRATA_CHECK(completed_, "a reduce-scatter accumulated before it completed");
    const ScratchPool::Buffer& piece = type_ == DType::kF32 ? out_ : wide_;
    add_into(into, reinterpret_cast<const float*>(piece->data()), piece_);
  }

 private:
  ScratchPool& scratch_;
  DType type_;
  std::size_t piece_;
  ReductionBuffers sizes_;
  ScratchPool::Buffer wire_, out_, wide_, packed_;
  std::unique_ptr<CommRequest> request_;
  bool completed_ = false;
};

}  // namespace

BucketLayout bucket_layout(const Communicator& comm, const CollectiveSpec& spec) {
  const auto span = static_cast<std::size_t>(comm.topology().span(spec.first_level, spec.last_level));
  if (!spec.bucketed()) return {1, spec.elements, 0, spec.elements};
  if (spec.kind == CollectiveKind::kAllReduce) return {1, spec.bucket_piece, spec.bucket_offset, spec.elements};
  return {span, spec.bucket_piece, spec.bucket_offset, spec.elements / span};
}

void pack_bucket(const void* full, void* packed, const BucketLayout& b, DType type) {
  const std::size_t e = dtype_size(type);
  for (std::size_t i = 0; i < b.span; ++i) {
    std::memcpy(static_cast<unsigned char*>(packed) + i * b.len * e,
                static_cast<const unsigned char*>(full) + (i * b.piece + b.offset) * e, b.len * e);
  }
}

void unpack_bucket(const void* packed, void* full, const BucketLayout& b, DType type) {
  const std::size_t e = dtype_size(type);
  for (std::size_t i = 0; i < b.span; ++i) {
    std::memcpy(static_cast<unsigned char*>(full) + (i * b.piece + b.offset) * e,
                static_cast<const unsigned char*>(packed) + i * b.len * e, b.len * e);
  }
}

void gather_bucket(Communicator& comm, const CollectiveSpec& spec, const void* shard, DType weight_dtype,
                   float* compute, ScratchPool& scratch) {
  STRATA_CHECK(spec.kind == CollectiveKind::kAllGather && spec.bucketed(), "a bucket gather needs a bucketed all-gather");
  const BucketLayout b = bucket_layout(comm, spec);
  const auto slot = static_cast<std::size_t>(comm.topology().shard_index(comm.rank(), spec.first_level, spec.last_level));
  const unsigned char* mine = static_cast<const unsigned char*>(shard) + b.offset * dtype_size(weight_dtype);
  ScratchPool::Buffer decoded = scratch.acquire(b.span * b.len * sizeof(float), false);
  if (spec.quant.enabled()) {
    ScratchPool::Buffer blobs = scratch.acquire(quantized_gather_bytes(spec.quant, b.len, b.span), false);
    start_quantized_all_gather(comm, spec.quant, mine, weight_dtype, b.len, spec.first_level, spec.last_level,
                               blobs->data(), reinterpret_cast<float*>(decoded->data()), spec.flat)
        ->wait();
    if (weight_dtype == DType::kBF16) round_to_bf16(reinterpret_cast<float*>(decoded->data()), b.span * b.len);
    scratch.release(std::move(blobs));
  } else {
    ScratchPool::Buffer wire = scratch.acquire(b.span * b.len * dtype_size(weight_dtype), false);
    std::memcpy(static_cast<unsigned char*>(wire->data()) + slot * b.len * dtype_size(weight_dtype), mine,
                b.len * dtype_size(weight_dtype));
    start_all_gather_over(comm, spec.flat, wire->data(), b.span * b.len, weight_dtype, spec.first_level,
                          spec.last_level)
        ->wait();
    widen_from(reinterpret_cast<float*>(decoded->data()), wire->data(), b.span * b.len, weight_dtype);
    scratch.release(std::move(wire));
  }
  unpack_bucket(decoded->data(), compute, b, DType::kF32);
  scratch.release(std::move(decoded));
}

void narrow_to(void* out, const float* in, std::size_t n, DType type) {
  if (type == DType::kBF16) {
    fp32_to_bf16(static_cast<bf16*>(out), in, n);
  } else {
    STRATA_CHECK(type == DType::kF32, "narrowing to {}", dtype_name(type));
    std::memcpy(out, in, n * sizeof(float));
  }
}

void widen_from(float* out, const void* in, std::size_t n, DType type) {
  if (type == DType::kBF16) {
    bf16_to_fp32(out, static_cast<const bf16*>(in), n);
  } else {
    STRATA_CHECK(type == DType::kF32, "widening from {}", dtype_name(type));
    std::memcpy(out, in, n * sizeof(float));
  }
}

void gather_unit(Communicator& comm, const CollectiveSpec& spec, const void* shard, std::size_t shard_elements,
                 DType weight_dtype, void* staging, float* compute, std::size_t padded) {
  if (spec.quant.enabled()) {
    start_quantized_all_gather(comm, spec.quant, shard, weight_dtype, shard_elements, spec.first_level, spec.last_level,
                               staging, compute, spec.flat)
        ->wait();
    if (weight_dtype == DType::kBF16) round_to_bf16(compute, padded);
    return;
  }
  start_unit_gather(comm, spec, shard, shard_elements, staging)->wait();
  if (staging != compute) widen_from(compute, staging, padded, weight_dtype);
}

std::unique_ptr<CommRequest> start_unit_gather(Communicator& comm, const CollectiveSpec& spec, const void* shard,
                                               std::size_t shard_elements, void* gathered) {
  STRATA_CHECK(spec.kind == CollectiveKind::kAllGather && !spec.empty() && !spec.quant.enabled(),
               "a plain unit gather needs an unquantized all-gather spec");
  STRATA_CHECK(piece_of(comm, spec) == shard_elements, "a gather of {} elements over {} ranks from a shard of {}",
               spec.elements, comm.topology().span(spec.first_level, spec.last_level), shard_elements);
  const std::size_t at = shard_offset(comm.topology(), comm.rank(), spec.elements, spec.first_level, spec.last_level);
  std::memcpy(byte_at(gathered, at, spec.dtype), shard, shard_elements * dtype_size(spec.dtype));
  return start_all_gather_over(comm, spec.flat, gathered, spec.elements, spec.dtype, spec.first_level, spec.last_level);
}

std::unique_ptr<PendingReduction> start_unit_reduce_scatter(Communicator& comm, const CollectiveSpec& spec,
                                                            float* gradient, ScratchPool& scratch) {
  STRATA_CHECK(spec.kind == CollectiveKind::kReduceScatter && !spec.empty(), "a unit reduction needs a reduce-scatter spec");
  return std::make_unique<UnitReduction>(comm, spec, gradient, scratch);
}

void reduce_scatter_replicas(Communicator& comm, const CollectiveSpec& spec, const float* shard, float* slice,
                             ScratchPool& scratch) {
  STRATA_CHECK(spec.kind == CollectiveKind::kReduceScatter && !spec.empty(), "replica reduction needs a reduce-scatter spec");
  const std::size_t piece = piece_of(comm, spec);
  float* into = slice + spec.bucket_offset;
  if (spec.bucketed()) {
    // The reduction packs its parts of the shard (a copy already), so the shard survives it.
    UnitReduction reduction(comm, spec, const_cast<float*>(shard), scratch);
    std::memset(into, 0, piece * sizeof(float));
    reduction.finish(into, piece);
    return;
  }
  // A copy: the rest of the shard must survive the collective's use of its input as scratch.
  ScratchPool::Buffer copy = scratch.acquire(spec.elements * sizeof(float), false);
  std::memcpy(copy->data(), shard, spec.elements * sizeof(float));
  UnitReduction reduction(comm, spec, reinterpret_cast<float*>(copy->data()), scratch);
  // The piece replaces the slice's old contents (it is their sum with every replica's).
  std::memset(into, 0, piece * sizeof(float));
  reduction.finish(into, piece);
  scratch.release(std::move(copy));
}

void all_reduce_replicas(Communicator& comm, const CollectiveSpec& spec, float* whole_slice, ScratchPool& scratch) {
  STRATA_CHECK(spec.kind == CollectiveKind::kAllReduce && !spec.empty(), "replica all-reduce needs an all-reduce spec");
  float* slice = whole_slice + spec.bucket_offset;  // a bucket is a contiguous part of the slice
  if (spec.quant.enabled()) {
    quantized_all_reduce(comm, spec.quant, slice, spec.elements, spec.first_level, spec.last_level);
    return;
  }
  const DType type = spec.dtype;
  ScratchPool::Buffer wire = scratch.acquire(spec.elements * dtype_size(type), false);
  narrow_to(wire->data(), slice, spec.elements, type);
  all_reduce_over(comm, spec.flat, wire->data(), spec.elements, type, spec.first_level, spec.last_level);
  widen_from(slice, wire->data(), spec.elements, type);
  scratch.release(std::move(wire));
}

void gather_updated(Communicator& comm, const CollectiveSpec& spec, const float* master, std::size_t master_elements,
                    std::size_t master_offset, void* primary, std::size_t primary_offset) {
  if (spec.empty()) {
    // The optimizer slice holds the whole primary shard: take its part, no collective.
    STRATA_CHECK(primary_offset >= master_offset && primary_offset - master_offset + spec.elements <= master_elements,
                 "the primary shard [{}, +{}) is not inside the optimizer slice [{}, +{})", primary_offset, spec.elements,
                 master_offset, master_elements);
    narrow_to(primary, master + (primary_offset - master_offset), spec.elements, spec.dtype);
    return;
  }
  STRATA_CHECK(spec.kind == CollectiveKind::kAllGather && !spec.quant.enabled(),
               "updated weights travel by an unquantized all-gather");
  if (spec.bucketed()) {
    const BucketLayout b = bucket_layout(comm, spec);
    STRATA_CHECK(b.piece == master_elements, "an updated-weights bucket of pieces of {} from a slice of {}", b.piece,
                 master_elements);
    const std::size_t e = dtype_size(spec.dtype);
    std::vector<unsigned char> wire(b.span * b.len * e);
    const auto slot = static_cast<std::size_t>(comm.topology().shard_index(comm.rank(), spec.first_level, spec.last_level));
    narrow_to(wire.data() + slot * b.len * e, master + b.offset, b.len, spec.dtype);
    start_all_gather_over(comm, spec.flat, wire.data(), b.span * b.len, spec.dtype, spec.first_level, spec.last_level)
        ->wait();
    unpack_bucket(wire.data(), primary, b, spec.dtype);
    return;
  }
  STRATA_CHECK(piece_of(comm, spec) == master_elements, "an updated-weights gather of {} elements from a slice of {}",
               spec.elements, master_elements);
  const std::size_t at = master_offset - primary_offset;
  STRATA_CHECK(at == shard_offset(comm.topology(), comm.rank(), spec.elements, spec.first_level, spec.last_level),
               "the optimizer slice sits at {} of the primary shard, not where the gather puts this rank's piece", at);
  narrow_to(byte_at(primary, at, spec.dtype), master, master_elements, spec.dtype);
  start_all_gather_over(comm, spec.flat, primary, spec.elements, spec.dtype, spec.first_level, spec.last_level)->wait();
}

}  // namespace strata
