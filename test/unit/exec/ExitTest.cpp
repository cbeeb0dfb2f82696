// Process exit while Kiln works: compiles in flight on the background
// threads, exit() called from a thread other than main, a detached thread
// still recording. Each case runs in fresh child processes (this binary,
// KILN_TEST_EXIT_CASE set), repeated, and every child must exit with status 0:
// no crash, no abort ("pure virtual method called"), no hang.
// CTest runs it under ThreadSanitizer too (kiln_exit_tests_tsan), as does
// scripts/tsan.sh.
#include <gtest/gtest.h>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kiln/kiln.h"

extern char** environ;

namespace kiln {
namespace {

/// One small training-like step whose shapes change with `n`: a new trace
/// key (and, hot at once, a new compile) for every n.
void stepOfSize(int64_t n) {
  Tensor x = rand({n, 16}, static_cast<uint64_t>(n), DType::f32, -1, 1);
  Tensor w = rand({16, 8}, 2, DType::f32, -1, 1);
  Tensor y = tanh(matmul(x, w) + 0.5) * sigmoid(x.sum({1}, true));
  (void)y.sum().item<float>();
  kiln::step();
}

/// Records new keys until the compiler has finished `count` compiles (or
/// failed them, or 30 s passed), so that the exit below meets a loaded
/// compiler with work in flight. A child that compiled nothing tested
/// nothing: it exits with status 4.
int64_t warmUntilCompiled(uint64_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int64_t n = 1;
  while (stats().compiles + stats().compile_failures < count && std::chrono::steady_clock::now() < deadline)
    stepOfSize(n++ % 64 + 1);
  if (stats().compiles < count) {
    std::fprintf(stderr, "exit test: %llu compiles finished (%llu failed), %llu needed: no compiler at work\n",
                 static_cast<unsigned long long>(stats().compiles),
                 static_cast<unsigned long long>(stats().compile_failures), static_cast<unsigned long long>(count));
    std::_Exit(4);
  }
  return n;
}

/// Child side: runs one case and returns from main (or exits) while work is
/// in flight.
[[noreturn]] void runCase(const std::string& which) {
  // Where in the compile the exit lands varies from run to run.
  const auto jitter = std::chrono::microseconds(static_cast<int64_t>(::getpid() % 20) * 1000);
  if (which == "return-while-compiling") {
    // Every step a new key, compiled at its first run in the background:
    // the process ends with compiles queued and one running.
    int64_t n = warmUntilCompiled(1);
    for (int i = 0; i < 6; ++i) stepOfSize(64 + n + i);
    std::this_thread::sleep_for(jitter);
    std::exit(0);
  }
  if (which == "return-during-first-load") {
    // Compiles queued but none finished: the exit meets the compiler library
    // being loaded or its first compiles, which construct the compiler's
    // lazily built static objects (their destructors run before any exit
    // handler registered earlier).
    for (int64_t n = 1; n <= 12; ++n) stepOfSize(n);
    std::this_thread::sleep_for(jitter * 5);
    std::exit(0);
  }
  if (which == "exit-from-other-thread") {
    std::atomic<bool> started{false};
    std::thread exiter([&] {
      while (!started.load()) std::this_thread::yield();
      std::this_thread::sleep_for(jitter);
      std::exit(0);
    });
    warmUntilCompiled(1);
    started = true;
    for (int64_t n = 1;; n = n % 40 + 1) stepOfSize(n);  // ends by the other thread's exit
  }
  if (which == "detached-recorder") {
    warmUntilCompiled(1);
    std::thread([] {
      for (int64_t n = 1;; n = n % 40 + 1) stepOfSize(n);
    }).detach();
    std::this_thread::sleep_for(jitter);
    for (int64_t n = 1; n <= 8; ++n) stepOfSize(n);
    std::exit(0);
  }
  std::fprintf(stderr, "unknown exit case %s\n", which.c_str());
  std::_Exit(3);
}

/// Runs this binary as a child for `which`; its exit status (128 + signal).
int runChild(const std::string& which) {
  std::vector<std::string> vars;
  // The child's settings are its own, except the TBB thread count (the
  // ThreadSanitizer runs use one thread: libtbb is not instrumented) and
  // where the compiler is (the CI's TSan build has none of its own).
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "KILN_", 5) != 0 || std::strncmp(*e, "KILN_NUM_THREADS=", 17) == 0 ||
        std::strncmp(*e, "KILN_JIT_LIBRARY=", 17) == 0)
      vars.emplace_back(*e);
  vars.push_back("KILN_TEST_EXIT_CASE=" + which);
  vars.push_back("KILN_JIT=async");
  vars.push_back("KILN_JIT_THRESHOLD=1");
  vars.push_back("KILN_COMPILE_THREADS=2");
  vars.push_back("KILN_CACHE=off");
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  char* argv[] = {exe.data(), nullptr};
  pid_t pid;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int repetitions() {
  const char* r = std::getenv("KILN_TEST_EXIT_REPETITIONS");
  return r && *r ? std::atoi(r) : 6;
}

class ProcessExit : public ::testing::TestWithParam<const char*> {};

TEST_P(ProcessExit, EndsCleanly) {
  const int n = repetitions();
  for (int i = 0; i < n; ++i) EXPECT_EQ(runChild(GetParam()), 0) << GetParam() << ", run " << i + 1 << " of " << n;
}

INSTANTIATE_TEST_SUITE_P(Cases, ProcessExit,
                         ::testing::Values("return-while-compiling", "return-during-first-load",
                                           "exit-from-other-thread", "detached-recorder"));

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  if (const char* which = std::getenv("KILN_TEST_EXIT_CASE")) kiln::runCase(which);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
