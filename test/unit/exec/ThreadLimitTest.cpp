// Compiling where the system refuses new threads (a process or cgroup limit
// reached): the compile queue reports it instead of terminating the
// process, and a background compile then runs in the calling thread instead
// of failing the step that asked for it. pthread_create is interposed: this
// executable's definition refuses once its budget of threads is spent.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <system_error>
#include <thread>

#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include "kiln/kiln.h"
#include "runtime/exec/CompileQueue.h"
#include "runtime/exec/Engine.h"
#include "test/unit/exec/JitScope.h"

namespace {
/// Threads that may still start; negative: no limit.
std::atomic<int> gThreadsLeft{-1};
}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
  for (int left = gThreadsLeft.load(); left >= 0;) {
    if (left == 0) return EAGAIN;
    if (gThreadsLeft.compare_exchange_weak(left, left - 1)) break;
  }
  return real(thread, attr, start, arg);
}

namespace kiln::exec {
namespace {

struct ThreadBudget {
  explicit ThreadBudget(int threads) { gThreadsLeft = threads; }
  ~ThreadBudget() { gThreadsLeft = -1; }
};

// The worker starts, its governor does not: the constructor throws and the
// worker stops (a joinable std::thread destroyed while unwinding terminated
// the process).
TEST(ThreadLimit, AQueueWhoseThreadsCannotStartThrows) {
  {
    ThreadBudget budget(1);
    EXPECT_THROW(CompileQueue(1, 25), std::system_error);
  }
  {
    ThreadBudget budget(0);
    EXPECT_THROW(CompileQueue(2, 0), std::system_error);
  }
  CompileQueue fine(1, 25);  // and with threads to spare, it works
  std::atomic<bool> ran{false};
  fine.push([&] { ran = true; });
  fine.drain();
  EXPECT_TRUE(ran.load());
}

// A background compile with no thread to run on runs in the step's thread:
// the step's results come back and the trace runs compiled.
TEST(ThreadLimit, ABackgroundCompileWithoutAThreadRunsInTheCaller) {
  // TBB's workers first, every one of them (each takes a task that waits a
  // while): the interpreter's parallel ops need them, and TBB starts them
  // as it needs them.
  const int workers = tbb::this_task_arena::max_concurrency();
  tbb::parallel_for(
      0, 4 * workers, [](int) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); },
      tbb::simple_partitioner());
  JitScope async(JitMode::Async, 2);
  Tensor x = rand({256, 256}, 7);
  auto step = [&] {
    Tensor y = x;
    for (int i = 0; i < 20; ++i) y = tanh(y * 1.01f + 0.5f);
    return sum(y).item<float>();
  };
  float expected = 0;
  {
    JitScope off(JitMode::Off);
    expected = step();
  }
  reset_stats();
  {
    ThreadBudget none(0);
    for (int run = 0; run < 3; ++run) EXPECT_NEAR(step(), expected, 1e-3 * std::abs(expected)) << run;
  }
  const Stats s = stats();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_GE(s.compiled_runs, 1u) << s.str();
}

}  // namespace
}  // namespace kiln::exec
