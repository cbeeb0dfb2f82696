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
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "kiln/kiln.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "hang" && mode != "exit" && mode != "die") {
    std::fprintf(stderr, "usage: %s hang|exit|die (under mpirun -np 2, with KILN_DIST_TIMEOUT set)\n", argv[0]);
    return 2;
  }
  kiln::dist::init();
  const int rank = kiln::dist::rank();
  // Both ranks first agree once (the communicator works).
  if (kiln::dist::all_reduce(kiln::ones({4})).to_vector<float>()[0] != 2.0f) {
    std::printf("FAIL: rank %d: the first all_reduce is wrong\n", rank);
    return 1;
  }
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
