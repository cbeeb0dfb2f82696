// All-reduce bandwidth: Kiln's recorded dist::all_reduce (record, flush,
// agreement exchange, the communication thread, nonblocking MPI polled
// against KILN_DIST_TIMEOUT) against a plain MPI_Allreduce on the same
// buffers, and the communicator alone (no trace). Run under mpirun:
//
//   mpirun -np 2 --oversubscribe build/bench/kiln_dist_bench [MiB] [iterations]
//
// Rank 0 prints, per size: seconds per all-reduce (median of the
// iterations), algorithm bandwidth (bytes / time) of MPI_Allreduce, of
// MPI_Iallreduce + MPI_Wait, of the recorded op and of the communicator
// call, and Kiln's bandwidth as a share of MPI_Allreduce's (goal: >= 0.95
// at 64 MiB).
// C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "kiln/kiln.h"

namespace {

using Clock = std::chrono::steady_clock;

/// Median seconds of `iterations` runs of `fn`, each started together on
/// every rank (a barrier before each).
double median(int iterations, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int i = 0; i < iterations; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // The bench calls MPI itself between Kiln's collectives: it initializes
  // MPI (Kiln's communication thread then shares it, SERIALIZED).
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  kiln::dist::init();
  const int rank = kiln::dist::rank();
  std::vector<int> sizes = {1, 16, 64};
  if (argc > 1) sizes = {std::atoi(argv[1])};
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 10;
  if (rank == 0)
    std::printf("all-reduce (sum, f32) on %d ranks (%s), median of %d\n%8s %14s %14s %14s %14s %10s %10s\n",
                kiln::dist::size(), kiln::dist::world().backend().c_str(), iterations, "MiB", "MPI GB/s",
                "MPI_Iallred", "Kiln op GB/s", "comm GB/s", "op/MPI", "comm/MPI");
  for (int mib : sizes) {
    const int64_t n = static_cast<int64_t>(mib) * (1 << 20) / 4;
    std::vector<float> host(static_cast<size_t>(n), 1.0f + static_cast<float>(rank));
    kiln::Tensor x = kiln::from_vector<float>(host, {n});
    kiln::sync();
    // The output buffer is a Kiln allocation too (2 MiB-aligned, huge
    // pages), like the op's own output: every row reads and writes the same
    // kind of memory.
    kiln::Tensor outTensor = kiln::from_vector<float>(host, {n});
    kiln::sync();
    float* out = static_cast<float*>(const_cast<void*>(outTensor.data()));
    const double mpi = median(iterations, [&] {
      MPI_Allreduce(x.data(), out, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    // The nonblocking collective Kiln's MPI backend starts, waited for by
    // MPI_Wait (its algorithm, without Kiln's polling).
    const double nb = median(iterations, [&] {
      MPI_Request r;
      MPI_Iallreduce(x.data(), out, static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    });
    const double op = median(iterations, [&] {
      kiln::Tensor y = kiln::dist::all_reduce(x);
      kiln::sync();
      if (static_cast<const float*>(y.data())[n - 1] != 3.0f) std::abort();
      kiln::step();
    });
    const double comm = median(iterations, [&] {
      kiln::dist::world().all_reduce(x.data(), out, n, kiln::DType::f32, kiln::dist::ReduceOp::sum);
    });
    const double bytes = static_cast<double>(n) * 4;
    if (rank == 0)
      std::printf("%8d %14.2f %14.2f %14.2f %14.2f %10.3f %10.3f\n", mib, bytes / mpi / 1e9, bytes / nb / 1e9,
                  bytes / op / 1e9, bytes / comm / 1e9, mpi / op, mpi / comm);
  }
  kiln::dist::finalize();
  MPI_Finalize();
  return 0;
}
