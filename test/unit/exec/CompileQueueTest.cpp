// CompileQueue: jobs run on background threads at the lowest CPU priority,
// so compiling never takes a core from the user's threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

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

/// CPU time of the calling thread.
std::chrono::nanoseconds threadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// Every core kept busy by normal-priority threads: at the lowest priority
// alone a compile would wait until they stop; the governor gives it its
// share of a core (25% asked; at least 10% checked, the machine being
// shared), and no more than a bounded part of one (spells while its share
// is below the target: never the whole core the user's threads want).
TEST(CompileQueue, GovernorGivesCompilesTheirShareOfABusyMachine) {
  using Clock = std::chrono::steady_clock;
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i)
    hogs.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  CompileQueue queue(1, 25);
  std::chrono::nanoseconds jobCpu{0};
  Clock::duration jobWall{};
  queue.push([&] {
    const Clock::time_point start = Clock::now();
    while (threadCpuTime() < std::chrono::milliseconds(300) && Clock::now() - start < std::chrono::seconds(20)) {
    }
    jobCpu = threadCpuTime();
    jobWall = Clock::now() - start;
  });
  queue.drain();
  stop = true;
  for (auto& t : hogs) t.join();
  if (!queue.canRaise()) GTEST_SKIP() << "this process may not raise a thread's priority (not root, no CAP_SYS_NICE)";
  const double share = std::chrono::duration<double>(jobCpu).count() / std::chrono::duration<double>(jobWall).count();
  EXPECT_GE(queue.raises(), 1u);
  EXPECT_GE(share, 0.10) << "the compile got " << share << " of a core in "
                         << std::chrono::duration<double>(jobWall).count() << " s";
  EXPECT_LE(share, 0.90) << "the compile took a whole core from the busy threads";
}

size_t parallelism() { return tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism); }

/// A user thread that keeps TBB's threads busy with parallel loops until
/// `stop` is set.
std::thread busyTbbUser(std::atomic<bool>& stop) {
  return std::thread([&stop] {
    using Clock = std::chrono::steady_clock;
    while (!stop.load(std::memory_order_relaxed))
      tbb::parallel_for(0, 64, [](int) {
        const Clock::time_point until = Clock::now() + std::chrono::microseconds(200);
        while (Clock::now() < until) {
        }
      });
  });
}

// The user's threads are TBB's, busy with parallel loops on every core: the
// governor takes the compile's share in spells during which the user's TBB
// parallelism is one lower (a preempted TBB thread would stall the whole
// loop), and gives the core back between spells and after the job.
TEST(CompileQueue, GovernorTakesItsShareInSpellsOfACoreHeldBack) {
  using Clock = std::chrono::steady_clock;
  const size_t before = parallelism();
  if (before < 2) GTEST_SKIP() << "one thread for TBB: no core to hold back";
  std::atomic<bool> stop{false};
  std::thread user = busyTbbUser(stop);
  const uint64_t changesBefore = compilePartitionChanges();
  CompileQueue queue(1, 25);
  std::chrono::nanoseconds jobCpu{0};
  Clock::duration jobWall{};
  size_t heldParallelism = 0;
  queue.push([&] {
    const Clock::time_point start = Clock::now();
    while (threadCpuTime() < std::chrono::milliseconds(300) && Clock::now() - start < std::chrono::seconds(20))
      if (heldParallelism == 0 && compilePartitionActive()) heldParallelism = parallelism();
    jobCpu = threadCpuTime();
    jobWall = Clock::now() - start;
  });
  queue.drain();
  stop = true;
  user.join();
  const double share = std::chrono::duration<double>(jobCpu).count() / std::chrono::duration<double>(jobWall).count();
  EXPECT_EQ(heldParallelism, before - 1) << "the job never ran in a spell with a core held back";
  EXPECT_GE(queue.holds(), 1u);
  EXPECT_GE(compilePartitionChanges() - changesBefore, 2u) << "no spell began and ended";
  EXPECT_FALSE(compilePartitionActive()) << "the core stays held after the job";
  EXPECT_EQ(parallelism(), before);
  EXPECT_GE(share, 0.10) << "the compile got " << share << " of a core";
  EXPECT_LE(share, 0.90) << "the compile held a core for the whole job";
}

// A compile that is blocked (its libraries read from disk, a lock) gets no
// spell however far below its share it falls: a core held for it would idle
// while the user's threads wait for it.
TEST(CompileQueue, ABlockedCompileHoldsNoCore) {
  if (parallelism() < 2) GTEST_SKIP() << "one thread for TBB: no core to hold back";
  std::atomic<bool> stop{false};
  std::thread user = busyTbbUser(stop);
  CompileQueue queue(1, 25);
  // Starved, the job gets spells to start in and to go on after its sleep
  // (it is runnable then); none while it sleeps.
  std::atomic<bool> started{false};
  queue.push([&] {
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // asleep, and any spell over, by now
  const uint64_t holdsAsleep = queue.holds();
  int heldSamples = 0;
  for (int i = 0; i < 30; ++i) {  // fifteen of the governor's periods
    heldSamples += queue.holdingCore();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const uint64_t holdsAwake = queue.holds();
  queue.drain();
  stop = true;
  user.join();
  EXPECT_EQ(heldSamples, 0) << "a core was held for a sleeping compile";
  EXPECT_EQ(holdsAwake, holdsAsleep);
}

/// Pushes an urgent job that holds the queue's thread (and so a core) until
/// `release` is set, and waits until it runs.
void holdACore(CompileQueue& queue, std::atomic<bool>& release) {
  std::atomic<bool> started{false};
  queue.push(
      [&started, &release] {
        started = true;
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      JobRank::Urgent);
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// The queues of two lanes (whole traces, hot regions) hold a core each: the
// user's TBB parallelism is lowered by both from what it was before either
// (at least one thread stays the user's), and one queue's job ending leaves
// the other's core held. A child forked meanwhile starts with none held.
TEST(CompileQueue, QueuesOfTwoLanesShareOnePartition) {
  const size_t before = parallelism();
  if (before < 2) GTEST_SKIP() << "one thread for TBB: no core to hold back";
  CompileQueue traces(1, 25), regions(1, 25);
  std::atomic<bool> releaseTraces{false}, releaseRegions{false};
  holdACore(traces, releaseTraces);
  holdACore(regions, releaseRegions);
  EXPECT_EQ(parallelism(), std::max<size_t>(1, before - 2));
  const pid_t child = fork();
  if (child == 0) _exit(compilePartitionActive() ? 1 : 0);
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child started with its parent's cores held";
  EXPECT_EQ(parallelism(), std::max<size_t>(1, before - 2)) << "the fork gave the parent's cores back";
  releaseTraces = true;
  traces.drain();
  EXPECT_TRUE(compilePartitionActive()) << "one lane's job ending gave back the other's core";
  EXPECT_EQ(parallelism(), before - 1);
  releaseRegions = true;
  regions.drain();
  EXPECT_FALSE(compilePartitionActive());
  EXPECT_EQ(parallelism(), before);
}

/// What a job saw of its thread and of the process.
struct JobSight {
  size_t parallelism = 0;
  bool idlePriority = false;
  bool partitioned = false;
};

/// A job that records what it sees into `sight`.
std::function<void()> lookInto(JobSight& sight) {
  return [&sight] {
    sight.parallelism = parallelism();
    sight.idlePriority = currentThreadIsIdlePriority();
    sight.partitioned = compilePartitionActive();
  };
}

JobSight runOneJob(CompileQueue& queue, JobRank rank) {
  JobSight sight;
  queue.push(lookInto(sight), rank);
  queue.drain();
  return sight;
}

/// Pushes a job that holds the queue's thread until `release` is set, and
/// waits until it runs.
void holdTheThread(CompileQueue& queue, std::atomic<bool>& release, std::function<void()> then = {}) {
  std::atomic<bool> started{false};
  queue.push([&started, &release, then] {
    started = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (then) then();
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// An urgent job gets a core of its own: its thread runs at normal priority
// and the process's TBB parallelism leaves it one core (at least one stays
// the user's); both end with the job. A background job keeps the lowest
// priority and the user's parallelism.
TEST(CompileQueue, UrgentJobsTakeACoreForAsLongAsTheyRun) {
  const size_t before = parallelism();
  const size_t during = before > 1 ? before - 1 : before;
  CompileQueue queue(1, 25);
  queue.setSpellsForTesting(false);  // what each job sees, whatever the load
  JobSight urgent = runOneJob(queue, JobRank::Urgent);
  EXPECT_FALSE(queue.urgentNow());
  EXPECT_EQ(parallelism(), before) << "the user's parallelism comes back after the job";
  EXPECT_FALSE(compilePartitionActive());
  EXPECT_EQ(urgent.parallelism, during);
  EXPECT_EQ(urgent.partitioned, before > 1);
  if (queue.canRaise()) {
    EXPECT_FALSE(urgent.idlePriority) << "an urgent job runs at normal priority";
  }

  JobSight background = runOneJob(queue, JobRank::Background);
  EXPECT_EQ(background.parallelism, before);
  EXPECT_FALSE(background.partitioned);
#ifdef __linux__
  EXPECT_TRUE(background.idlePriority);
#endif

  // A background job that turns urgent while it runs (makeUrgent).
  std::atomic<bool> release{false}, urgentInJob{false};
  std::atomic<size_t> inJob{0};
  holdTheThread(queue, release, [&] {
    urgentInJob = queue.urgentNow();
    inJob = parallelism();
  });
  EXPECT_FALSE(queue.urgentNow());
  queue.makeUrgent();
  EXPECT_TRUE(queue.urgentNow());
  release = true;
  queue.drain();
  EXPECT_TRUE(urgentInJob.load());
  EXPECT_EQ(inJob.load(), during);
  EXPECT_FALSE(queue.urgentNow()) << "urgency ends when the queue is idle";
  EXPECT_EQ(parallelism(), before);
  queue.makeUrgent();  // an idle queue: nothing to hurry
  EXPECT_FALSE(queue.urgentNow());
}

/// The order in which jobs of the given ranks, pushed in this order (job i
/// is the i-th, from 1) while the queue's one thread is held, ran.
std::vector<int> runOrder(std::initializer_list<JobRank> ranks) {
  CompileQueue queue(1, 25);
  std::atomic<bool> release{false};
  std::mutex orderMutex;
  std::vector<int> order;
  holdTheThread(queue, release);  // while the others queue up
  int pushed = 0;
  for (JobRank rank : ranks) {
    queue.push(
        [&, id = ++pushed] {
          std::lock_guard<std::mutex> lock(orderMutex);
          order.push_back(id);
        },
        rank);
  }
  release = true;
  queue.drain();
  return order;
}

TEST(CompileQueue, UrgentJobsGoAheadOfQueuedBackgroundOnes) {
  EXPECT_EQ(runOrder({JobRank::Background, JobRank::Urgent, JobRank::Background, JobRank::Urgent}),
            (std::vector<int>{2, 4, 1, 3}));
}

// An upgrade (a faster kernel for a trace that already runs compiled) waits
// behind every first compile, background ones included, queued before or
// after it; upgrades keep their order among themselves.
TEST(CompileQueue, UpgradesWaitBehindFirstCompiles) {
  EXPECT_EQ(runOrder({JobRank::Upgrade, JobRank::Background, JobRank::Upgrade, JobRank::Urgent, JobRank::Background}),
            (std::vector<int>{4, 2, 5, 1, 3}));
}

// An urgent job queued behind a running background job (the compiler's
// load) waits for it: the running one is hurried for it.
TEST(CompileQueue, AJobRunningAheadOfAnUrgentOneBecomesUrgent) {
  const size_t before = parallelism();
  CompileQueue queue(1, 25);
  std::atomic<bool> release{false};
  std::atomic<size_t> inJob{0};
  holdTheThread(queue, release, [&] { inJob = parallelism(); });
  EXPECT_FALSE(queue.urgentNow());
  queue.push([] {});
  EXPECT_FALSE(queue.urgentNow()) << "a background job behind it changes nothing";
  queue.push([] {}, JobRank::Urgent);
  EXPECT_TRUE(queue.urgentNow());
  release = true;
  queue.drain();
  EXPECT_EQ(inJob.load(), before > 1 ? before - 1 : before);
  EXPECT_FALSE(queue.urgentNow()) << "urgency ends when the queue is idle";
  EXPECT_EQ(parallelism(), before);
}

// Only the job running ahead of the urgent one is hurried: the jobs queued
// behind both (a background compile queued before, an upgrade) run as they
// were pushed, and so does one pushed while the queue is still busy.
TEST(CompileQueue, JobsBehindAnUrgentOneStayBackground) {
  const size_t before = parallelism();
  CompileQueue queue(1, 25);
  queue.setSpellsForTesting(false);  // what each job sees, whatever the load
  std::atomic<bool> release{false};
  holdTheThread(queue, release);
  JobSight background, upgrade, later, urgent;
  queue.push(lookInto(background));
  queue.push(lookInto(upgrade), JobRank::Upgrade);
  queue.push(lookInto(urgent), JobRank::Urgent);
  EXPECT_TRUE(queue.urgentNow()) << "the running job is hurried";
  queue.push(lookInto(later));
  release = true;
  queue.drain();
  EXPECT_EQ(urgent.parallelism, before > 1 ? before - 1 : before);
  for (const JobSight* sight : {&background, &upgrade, &later}) {
    EXPECT_EQ(sight->parallelism, before);
    EXPECT_FALSE(sight->partitioned);
  }
  EXPECT_EQ(parallelism(), before);
}

// makeUrgent hurries what runs and the first compiles queued, not the
// upgrades behind them nor jobs pushed afterwards.
TEST(CompileQueue, MakeUrgentHurriesFirstCompilesNotUpgrades) {
  const size_t before = parallelism();
  CompileQueue queue(1, 25);
  queue.setSpellsForTesting(false);  // what each job sees, whatever the load
  std::atomic<bool> release{false};
  std::atomic<bool> heldUrgent{false};
  holdTheThread(queue, release, [&] { heldUrgent = queue.urgentNow(); });
  JobSight background, upgrade, later;
  queue.push(lookInto(background));
  queue.push(lookInto(upgrade), JobRank::Upgrade);
  queue.makeUrgent();
  queue.push(lookInto(later));
  release = true;
  queue.drain();
  EXPECT_TRUE(heldUrgent.load());
  if (before > 1) {
    EXPECT_EQ(background.parallelism, before - 1);
    EXPECT_TRUE(background.partitioned);
  }
  EXPECT_EQ(upgrade.parallelism, before);
  EXPECT_FALSE(upgrade.partitioned);
  EXPECT_EQ(later.parallelism, before);
  EXPECT_FALSE(later.partitioned);
  EXPECT_FALSE(queue.urgentNow());
}

// KILN_COMPILE_SHARE=0: a compile never takes a core, urgent or not.
TEST(CompileQueue, WithoutAShareUrgentJobsStayAtTheLowestPriority) {
  CompileQueue queue(1, 0);
  JobSight sight = runOneJob(queue, JobRank::Urgent);
  EXPECT_EQ(sight.parallelism, parallelism());
  EXPECT_FALSE(sight.partitioned);
#ifdef __linux__
  EXPECT_TRUE(sight.idlePriority);
#endif
}

TEST(CompileQueue, WithoutAShareThereIsNoGovernor) {
  CompileQueue queue(1, 0);
  queue.push([] {});
  queue.drain();
  EXPECT_EQ(queue.raises(), 0u);
}

}  // namespace
}  // namespace kiln::exec
