// Large buffers straight from the kernel and back to it: glibc raises its mmap threshold each time
// a large block is freed (up to 32 MB), after which a transformer block's 28 MB buffers come from
// the heap, which fragments as the step's buffers come and go in different orders and never
// shrinks. gpt2-124m zero3 on 4 ranks peaked 8% above the schedule's buffers that way.
#pragma once

namespace strata {

// Every allocation of at least 4 MiB is its own mapping, returned to the system when freed; a
// no-op outside glibc. Call once, before the first large allocation.
void map_large_allocations();

}  // namespace strata
