// How a backward kernel writes a parameter gradient: added to what the buffer holds, or written
// whole, so the first micro-batch after a buffer is opened need not zero it first.
#pragma once

namespace strata {

enum class GradWrite { kAccumulate, kOverwrite };

}  // namespace strata
