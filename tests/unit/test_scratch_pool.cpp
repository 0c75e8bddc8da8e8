// The scratch pool reuses a released buffer of the same size, zeroes it when asked, and never
// holds (in use and kept together) more than its in-use peak: kept buffers of other sizes go
// before it allocates past that peak, which is what lets the memory model count the peak alone.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/scratch_pool.hpp"

namespace strata {
namespace {

TEST(ScratchPool, ReusesAReleasedBufferOfTheSameSizeAndZeroesItWhenAsked) {
  ScratchPool pool;
  ScratchPool::Buffer a = pool.acquire(4096, false);
  std::memset(a->data(), 7, a->size());
  const unsigned char* first = a->data();
  pool.release(std::move(a));
  ScratchPool::Buffer again = pool.acquire(4096, true);
  EXPECT_EQ(again->data(), first);
  for (std::size_t i = 0; i < again->size(); ++i) ASSERT_EQ(again->data()[i], 0) << i;
  EXPECT_EQ(pool.peak_bytes(), 4096u);
}

TEST(ScratchPool, KeptBuffersOfOtherSizesGoBeforeItHoldsMoreThanItsPeak) {
  ScratchPool pool;
  pool.release(pool.acquire(1000, false));
  // 600 bytes beside the kept 1000 would hold 1600 with a peak of 1000: the 1000 goes.
  ScratchPool::Buffer b = pool.acquire(600, false);
  EXPECT_EQ(pool.peak_bytes(), 1000u);
  EXPECT_EQ(pool.held_peak_bytes(), 1000u);
  // Both in use at once raise the peak, and what it holds stays that peak.
  ScratchPool::Buffer c = pool.acquire(1000, false);
  EXPECT_EQ(pool.peak_bytes(), 1600u);
  EXPECT_EQ(pool.held_peak_bytes(), 1600u);
  pool.release(std::move(b));
  pool.release(std::move(c));
  // A run of other sizes: it drops what it kept rather than grow.
  for (std::size_t bytes : {300u, 500u, 700u, 1500u}) pool.release(pool.acquire(bytes, false));
  EXPECT_EQ(pool.peak_bytes(), 1600u);
  EXPECT_EQ(pool.held_peak_bytes(), 1600u);
}

}  // namespace
}  // namespace strata
