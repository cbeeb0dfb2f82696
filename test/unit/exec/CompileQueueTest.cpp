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
  std::atomic<int> jobNice[2] = {-100, -100};
  for (int i = 0; i < 2; ++i) queue.push([&jobNice, i] { jobNice[i] = currentThreadNice(); });
  queue.drain();
#ifdef __linux__
  EXPECT_EQ(jobNice[0].load(), kCompileThreadNice);
  EXPECT_EQ(jobNice[1].load(), kCompileThreadNice);
#endif
  EXPECT_EQ(currentThreadNice(), callerNice) << "only the compile threads are lowered";
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
