// A rank that hangs or leaves early makes the others fail with a clear
// kiln::Error within KILN_DIST_TIMEOUT, never a silent hang. Run under
// `mpirun -np 2` with a mode:
//   hang   rank 1 sleeps instead of joining the collective;
//   exit   rank 1 finalizes and leaves before the collective;
//   die    rank 1 dies (exit without finalizing): mpirun ends the job, so
//          CTest only checks that the run fails, well within its time limit.
// Rank 0 prints "PASS: ..." when its collective failed with the timeout
// error in time (CTest looks for it: mpirun itself reports the job as
// failed, since rank 0 cannot finalize after a timed-out collective).
//
// On CUDA tensors, through NCCL (the fake CUDA driver and the fake NCCL,
// KILN_DEFAULT_DEVICE=cuda:0):
//   nccl-hang   rank 1's second collective never runs on its device
//               (KILN_FAKE_NCCL_HANG=1:1): rank 0's waits on the device until
//               its watchdog aborts it after KILN_DIST_TIMEOUT;
//   nccl-error  rank 0's second collective fails on the device with an
//               asynchronous NCCL error (KILN_FAKE_NCCL_ERROR=0:1): rank 0
//               fails at once naming it, rank 1 (left waiting) after its
//               timeout.
//   nccl-init   rank 1 never joins the NCCL communicator's initialisation
//               (KILN_FAKE_NCCL_INIT_HANG=1): both ranks' first collective on
//               CUDA tensors fails after KILN_DIST_TIMEOUT, the next at once.
// MPI still works there: both ranks finalize.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "kiln/kiln.h"

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The next collective fails at once (the communicator is unusable: it
/// fails before it reaches the other rank), naming `expected`.
bool nextFailsAtOnce(int rank, const char* expected) {
  const auto next = std::chrono::steady_clock::now();
  try {
    kiln::dist::all_reduce(kiln::ones({2})).to_vector<float>();
    std::printf("FAIL: rank %d: a collective after the failure ran\n", rank);
    return false;
  } catch (const kiln::Error& e) {
    if (secondsSince(next) > 1.0 || !std::strstr(e.what(), expected)) {
      std::printf("FAIL: rank %d: the next collective failed after %.1f s: %s\n", rank, secondsSince(next),
                  e.what());
      return false;
    }
    std::printf("PASS: rank %d: the next collective fails at once: %s\n", rank, e.what());
    return true;
  }
}

/// MPI still works: the rank finalizes and says so.
int finalizeAndPass(int rank) {
  kiln::dist::finalize();
  std::printf("PASS: rank %d finalized\n", rank);
  std::fflush(stdout);
  return 0;
}

/// The second collective fails on `rank` (or completes, on nccl-hang's rank
/// 1) and the one after it fails at once.
int ncclFailure(const std::string& mode, int rank) {
  const int64_t timeout = kiln::settings().dist_timeout_s;
  const bool fails = mode == "nccl-error" || rank == 0;
  const bool atOnce = mode == "nccl-error" && rank == 0;  // its own device reported the error
  const auto start = std::chrono::steady_clock::now();
  try {
    kiln::dist::all_reduce(kiln::ones({1000})).to_vector<float>();
    if (fails) {
      std::printf("FAIL: rank %d: the collective completed\n", rank);
      return 1;
    }
  } catch (const kiln::Error& e) {
    const double s = secondsSince(start);
    const bool named = std::strstr(e.what(), "all_reduce") && std::strstr(e.what(), "NCCL") &&
                       std::strstr(e.what(), atOnce ? "remote process exited" : "KILN_DIST_TIMEOUT");
    const bool inTime = atOnce ? s < static_cast<double>(timeout)
                               : s >= static_cast<double>(timeout) && s < static_cast<double>(timeout) + 10;
    if (!fails || !named || !inTime) {
      std::printf("FAIL: rank %d after %.1f s (timeout %lld s): %s\n", rank, s, static_cast<long long>(timeout),
                  e.what());
      return 1;
    }
    std::printf("PASS: rank %d failed after %.1f s: %s\n", rank, s, e.what());
    if (!nextFailsAtOnce(rank, "aborted")) return 1;
  }
  return finalizeAndPass(rank);
}

/// The first collective on CUDA tensors fails on both ranks (the NCCL
/// communicator's initialisation never completes), the next one at once.
int ncclInitFailure(int rank) {
  const int64_t timeout = kiln::settings().dist_timeout_s;
  const auto start = std::chrono::steady_clock::now();
  try {
    kiln::dist::all_reduce(kiln::ones({4})).to_vector<float>();
    std::printf("FAIL: rank %d: the collective completed\n", rank);
    return 1;
  } catch (const kiln::Error& e) {
    const double s = secondsSince(start);
    if (!std::strstr(e.what(), "ncclCommInitRank") || !std::strstr(e.what(), "KILN_DIST_TIMEOUT") ||
        s < static_cast<double>(timeout) || s > static_cast<double>(timeout) + 10) {
      std::printf("FAIL: rank %d after %.1f s: %s\n", rank, s, e.what());
      return 1;
    }
    std::printf("PASS: rank %d failed after %.1f s: %s\n", rank, s, e.what());
  }
  if (!nextFailsAtOnce(rank, "could not be created")) return 1;
  return finalizeAndPass(rank);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const bool nccl = mode == "nccl-hang" || mode == "nccl-error" || mode == "nccl-init";
  if (mode != "hang" && mode != "exit" && mode != "die" && !nccl) {
    std::fprintf(stderr, "usage: %s hang|exit|die|nccl-hang|nccl-error|nccl-init (under mpirun -np 2, with KILN_DIST_TIMEOUT set)\n",
                 argv[0]);
    return 2;
  }
  kiln::dist::init();
  const int rank = kiln::dist::rank();
  if (nccl && kiln::ones({1}).device().kind != kiln::Device::CUDA) {
    std::printf("FAIL: %s needs KILN_DEFAULT_DEVICE=cuda:0 (tensors are on %s)\n", mode.c_str(),
                kiln::ones({1}).device().str().c_str());
    return 1;
  }
  if (mode == "nccl-init") return ncclInitFailure(rank);
  // Both ranks first agree once (the communicator works).
  if (kiln::dist::all_reduce(kiln::ones({4})).to_vector<float>()[0] != 2.0f) {
    std::printf("FAIL: rank %d: the first all_reduce is wrong\n", rank);
    return 1;
  }
  if (nccl) return ncclFailure(mode, rank);
  if (rank == 1) {
    if (mode == "die") std::_Exit(3);
    if (mode == "hang") std::this_thread::sleep_for(std::chrono::seconds(60));
    kiln::dist::finalize();
    return 0;
  }
  const int64_t timeout = kiln::settings().dist_timeout_s;
  const auto start = std::chrono::steady_clock::now();
  try {
    kiln::dist::all_reduce(kiln::ones({1000})).to_vector<float>();
    std::printf("FAIL: the collective completed without rank 1\n");
    return 1;
  } catch (const kiln::Error& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool named = std::strstr(e.what(), "KILN_DIST_TIMEOUT") && std::strstr(e.what(), "all_reduce");
    if (!named || s < static_cast<double>(timeout) || s > static_cast<double>(timeout) + 10) {
      std::printf("FAIL: after %.1f s (timeout %lld s): %s\n", s, static_cast<long long>(timeout), e.what());
      return 1;
    }
    std::printf("PASS: rank 0 failed after %.1f s: %s\n", s, e.what());
  }
  // Later collectives fail at once: the communicator is unusable.
  try {
    kiln::dist::all_reduce(kiln::ones({2})).to_vector<float>();
    std::printf("FAIL: a collective after the timeout ran\n");
  } catch (const kiln::Error& e) {
    std::printf("PASS: the next collective fails at once: %s\n", e.what());
  }
  std::fflush(stdout);
  return 0;
}
