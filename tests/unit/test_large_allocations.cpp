// map_large_allocations: a buffer above the threshold is a mapping of its own (returned to the
// system when freed), one below it comes from the heap. It once compiled to nothing.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "core/large_allocations.hpp"

namespace strata {
namespace {

std::size_t mapped_bytes() { return mallinfo2().hblkhd; }

TEST(LargeAllocations, BuffersAboveTheThresholdAreTheirOwnMappings) {
  map_large_allocations();
  // Freed mappings first raise glibc's dynamic threshold; the fixed one must not move.
  for (int i = 0; i < 3; ++i) {
    void* big = std::malloc(32u << 20);
    ASSERT_NE(big, nullptr);
    std::memset(big, 1, 4096);
    std::free(big);
  }
  const std::size_t before = mapped_bytes();
  void* large = std::malloc(5u << 20);
  ASSERT_NE(large, nullptr);
  EXPECT_GE(mapped_bytes(), before + (5u << 20)) << "a 5 MiB buffer came from the heap";
  std::free(large);
  EXPECT_EQ(mapped_bytes(), before);
  void* small = std::malloc(1u << 20);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(mapped_bytes(), before) << "a 1 MiB buffer was mapped on its own";
  std::free(small);
}

}  // namespace
}  // namespace strata
