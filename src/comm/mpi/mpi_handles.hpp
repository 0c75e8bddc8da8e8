// Move-only owners of MPI communicators, datatypes and reduction ops, so each is freed exactly once.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <utility>

namespace strata {

namespace mpi_detail {

// The null handles are not constant expressions in every MPI (Open MPI's are addresses of
// globals), hence functions rather than constants.
struct CommTraits {
  using Handle = MPI_Comm;
  static Handle null() noexcept { return MPI_COMM_NULL; }
  static int free(Handle* h) noexcept { return MPI_Comm_free(h); }
  static constexpr const char* free_call = "MPI_Comm_free";
};

struct DatatypeTraits {
  using Handle = MPI_Datatype;
  static Handle null() noexcept { return MPI_DATATYPE_NULL; }
  static int free(Handle* h) noexcept { return MPI_Type_free(h); }
  static constexpr const char* free_call = "MPI_Type_free";
};

struct OpTraits {
  using Handle = MPI_Op;
  static Handle null() noexcept { return MPI_OP_NULL; }
  static int free(Handle* h) noexcept { return MPI_Op_free(h); }
  static constexpr const char* free_call = "MPI_Op_free";
};

template <class Traits>
class MpiHandle {
 public:
  using Handle = typename Traits::Handle;

  MpiHandle() noexcept = default;
  // Adopts a handle an MPI call just created; it is freed when this owner goes.
  explicit MpiHandle(Handle handle) noexcept : handle_(handle) {}
  ~MpiHandle() { reset(); }

  MpiHandle(const MpiHandle&) = delete;
  MpiHandle& operator=(const MpiHandle&) = delete;
  MpiHandle(MpiHandle&& other) noexcept : handle_(std::exchange(other.handle_, Traits::null())) {}
  MpiHandle& operator=(MpiHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, Traits::null());
    }
    return *this;
  }

  Handle get() const noexcept { return handle_; }
  // For MPI calls that take an owned handle INOUT and may rewrite it (MPI_Type_commit).
  Handle* inout() noexcept { return &handle_; }

  // Never throws, since it runs in destructors: a failed free at shutdown is reported and
  // otherwise harmless. After MPI_Finalize every handle is already gone, and freeing is an error.
  void reset() noexcept {
    if (handle_ == Traits::null()) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && Traits::free(&handle_) != MPI_SUCCESS) {
      std::fprintf(stderr, "strata: warning: %s failed\n", Traits::free_call);
    }
    handle_ = Traits::null();
  }

 private:
  Handle handle_ = Traits::null();
};

}  // namespace mpi_detail

using MpiComm = mpi_detail::MpiHandle<mpi_detail::CommTraits>;
using MpiDatatype = mpi_detail::MpiHandle<mpi_detail::DatatypeTraits>;
using MpiOp = mpi_detail::MpiHandle<mpi_detail::OpTraits>;

}  // namespace strata
