// CompileQueue: jobs run on background threads at the lowest CPU priority,
// so compiling never takes a core from the user's threads.
#include <gtest/gtest.h>

#include <atomic>

#include "runtime/exec/CompileQueue.h"

namespace kiln::exec {
namespace {

TEST(CompileQueue, JobsRunAtTheLowestPriorityAndTheCallerKeepsItsOwn) {
  const int callerNice = currentThreadNice();
  CompileQueue queue(2);
  const bool callerIdle = currentThreadIsIdlePriority();
  std::atomic<int> jobNice[2] = {-100, -100};
  std::atomic<bool> jobIdle[2] = {false, false};
  for (int i = 0; i < 2; ++i)
    queue.push([&jobNice, &jobIdle, i] {
      jobNice[i] = currentThreadNice();
      jobIdle[i] = currentThreadIsIdlePriority();
    });
  queue.drain();
#ifdef __linux__
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(jobNice[i].load(), kCompileThreadNice);
    EXPECT_TRUE(jobIdle[i].load());
  }
#endif
  EXPECT_EQ(currentThreadNice(), callerNice) << "only the compile threads are lowered";
  EXPECT_EQ(currentThreadIsIdlePriority(), callerIdle);
}

TEST(CompileQueue, DrainWaitsForEveryJobAndShutdownDropsLaterOnes) {
  CompileQueue queue(1);
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) queue.push([&] { ++done; });
  queue.drain();
  EXPECT_EQ(done.load(), 5);
  queue.shutdown();
  queue.push([&] { ++done; });
  queue.drain();
  EXPECT_EQ(done.load(), 5);
}

}  // namespace
}  // namespace kiln::exec
