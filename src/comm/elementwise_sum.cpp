// Element-wise sums.
#include "comm/elementwise_sum.hpp"

#include <cstdint>

#include "core/bf16.hpp"
#include "core/error.hpp"

namespace strata {

void add_elements(const void* a, const void* b, void* dst, std::size_t count, DType type) {
  auto add = [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    T* out = static_cast<T*>(dst);
    for (std::size_t i = 0; i < count; ++i) out[i] = x[i] + y[i];
  };
  switch (type) {
    case DType::kF32: add(float{}); return;
    case DType::kF64: add(double{}); return;
    case DType::kI32: add(std::int32_t{}); return;
    case DType::kBF16: {
      const auto* x = static_cast<const bf16*>(a);
      const auto* y = static_cast<const bf16*>(b);
      auto* out = static_cast<bf16*>(dst);
      for (std::size_t i = 0; i < count; ++i) out[i] = to_bf16(from_bf16(x[i]) + from_bf16(y[i]));
      return;
    }
    case DType::kU8: break;
  }
  fail("a sum of {} elements (quantized blobs are summed after decoding)", dtype_name(type));
}

}  // namespace strata
