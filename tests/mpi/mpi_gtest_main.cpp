// GoogleTest under mpirun: every rank runs every test (the tests make collective calls in the
// same order); only rank 0 prints; the job fails when any rank saw a failure.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);  // the overlap tests use a communication thread
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int local = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && local == 0 && any != 0) std::fprintf(stderr, "a test failed on another rank\n");
  MPI_Finalize();
  return any;
}
