// Turns an MPI return code into a strata::Error naming the call.
#pragma once

#include <mpi.h>

#include <string_view>

namespace strata {

void mpi_check(int code, std::string_view call);

}  // namespace strata
