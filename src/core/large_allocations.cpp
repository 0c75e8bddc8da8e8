// The allocator setting for large buffers.
#include "core/large_allocations.hpp"

// Any C library header defines __GLIBC__ (through <features.h>): without one included first the
// test below was false and the threshold was never set.
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace strata {

void map_large_allocations() {
#if defined(__GLIBC__)
  // A fixed threshold also turns glibc's dynamic adjustment off (mallopt(3)).
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
#endif
}

}  // namespace strata
