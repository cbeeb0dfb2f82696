#include "runtime/exec/CompileQueue.h"

#include "runtime/exec/CorePartition.h"

#include "runtime/support/ProcessId.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <pthread.h>

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kiln::exec {

namespace {
/// Lowest CPU priority for the calling thread: SCHED_IDLE, so that any
/// user thread that wakes up takes the core at once (a nice value alone
/// lets the compile thread finish its slice first, which stalls every
/// parallel op of the interpreter), and nice 19 for schedulers that weigh
/// it. Linux sets both per thread, through its tid. Best effort: unchanged
/// where refused.
void lowerThisThreadsPriority() {
#ifdef __linux__
  const auto tid = static_cast<pid_t>(syscall(SYS_gettid));
  sched_param param{};
  param.sched_priority = 0;
  (void)sched_setscheduler(tid, SCHED_IDLE, &param);
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(tid), kCompileThreadNice);
#endif
}

/// Whether thread `tid` of this process is runnable (running or waiting for
/// a core) rather than blocked (a lock, a page read from disk). Linux reads
/// its state from /proc; elsewhere, or unreadable, it counts as runnable.
bool threadRunnable(pid_t tid) {
#ifdef __linux__
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/task/%d/stat", static_cast<int>(tid));
  FILE* f = std::fopen(path, "r");
  if (!f) return true;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');  // the name, in parentheses, may hold anything
  return !close || close[1] != ' ' || close[2] == 'R';
#else
  (void)tid;
  return true;
#endif
}
}  // namespace

bool currentThreadIsIdlePriority() {
#ifdef __linux__
  return sched_getscheduler(static_cast<pid_t>(syscall(SYS_gettid))) == SCHED_IDLE;
#else
  return false;
#endif
}

int currentThreadNice() {
#ifdef __linux__
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  return errno ? 0 : nice;
#else
  return 0;
#endif
}

CompileQueue::CompileQueue(int threads, int minSharePercent)
    : minSharePercent_(minSharePercent), owner_(support::processId()) {
  baseNice_ = currentThreadNice();
  runningUrgent_.assign(static_cast<size_t>(std::max(threads, 0)), -1);
  try {
    startThreads(threads);
  } catch (...) {
    // No thread (a process or cgroup limit): the ones started stop, and the
    // caller learns it (a joinable std::thread destroyed by the unwinding
    // would terminate the process).
    shutdown();
    throw;
  }
}

void CompileQueue::startThreads(int threads) {
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this, i] {
      lowerThisThreadsPriority();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        clockid_t clock{};
        if (pthread_getcpuclockid(pthread_self(), &clock) == 0)
          workers_.push_back({static_cast<pid_t>(syscall(SYS_gettid)), clock});
      }
      serve(static_cast<size_t>(i));
    });
  if (minSharePercent_ > 0) governor_ = std::thread([this] { govern(); });
}

CompileQueue::~CompileQueue() { shutdown(); }

void CompileQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    jobs_.clear();
    releasePartition();  // a running job finishes at the user's parallelism
  }
  cv_.notify_all();
  governorWake_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  if (governor_.joinable()) governor_.join();
  idle_.notify_all();
}

bool compilePartitionActive() { return CorePartition::active(); }
uint64_t compilePartitionChanges() { return CorePartition::changes(); }

bool CompileQueue::urgentNow() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return urgent_;
}

void CompileQueue::updateUrgency() {
  const bool urgent = minSharePercent_ > 0 && urgentRunning_ > 0;
  if (urgent == urgent_) return;
  urgent_ = urgent;
  // Out of urgent mode the governor holds a core again for spells, if the
  // compile threads' share falls short.
  holdCore(urgent);
}

void CompileQueue::holdCore(bool hold) {
  if (hold == held_) return;
  held_ = hold;
  if (hold) {
    ++holds_;
    if (canRaise_ && !raised_) setRaised(true);
    // One core per compile thread, taken from the user's threads (at least
    // one stays theirs).
    coresTaken_ = workers_.size();
    CorePartition::take(coresTaken_);
  } else {
    releasePartition();
    if (raised_) setRaised(false);
  }
}

void CompileQueue::releasePartition() {
  // A forked child's copy of its parent's queue took nothing in the child.
  if (support::processId() == owner_) CorePartition::giveBack(coresTaken_);
  coresTaken_ = 0;
}

void CompileQueue::escalateRunning() {
  for (int8_t& u : runningUrgent_)
    if (u == 0) {
      u = 1;
      ++urgentRunning_;
    }
}

void CompileQueue::makeUrgent() {
  std::lock_guard<std::mutex> lock(mutex_);
  escalateRunning();
  // The queued first compiles, not the upgrades queued behind them: those
  // make kernels that already run faster, at the lowest priority.
  for (Job& job : jobs_)
    if (job.rank != JobRank::Upgrade) job.escalated = true;
  updateUrgency();
}

uint64_t CompileQueue::raises() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return raises_;
}

uint64_t CompileQueue::holds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return holds_;
}

void CompileQueue::setSpellsForTesting(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  spells_ = on;
}

bool CompileQueue::holdingCore() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_;
}

bool CompileQueue::canRaise() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return canRaise_;
}

void CompileQueue::setRaised(bool raised) {
#ifdef __linux__
  bool refused = false;
  for (const Worker& w : workers_) {
    sched_param param{};
    param.sched_priority = 0;
    if (sched_setscheduler(w.tid, raised ? SCHED_OTHER : SCHED_IDLE, &param) != 0 ||
        setpriority(PRIO_PROCESS, static_cast<id_t>(w.tid), raised ? baseNice_ : kCompileThreadNice) != 0)
      refused = refused || raised;
  }
  if (refused) {
    // No right to raise a thread's priority (not root, no CAP_SYS_NICE, no
    // RLIMIT_NICE): the compile threads stay at the lowest priority.
    canRaise_ = false;
    if (raised) setRaised(false);
    return;
  }
  raised_ = raised;
  if (raised) ++raises_;
#else
  (void)raised;
#endif
}

void CompileQueue::govern() {
  using Clock = std::chrono::steady_clock;
  // Sampled every period; the share is the compile threads' CPU time over
  // the wall time of a decaying window (about the last 200 ms).
  constexpr auto kPeriod = std::chrono::milliseconds(20);
  constexpr double kDecay = 0.9;
  const double target = minSharePercent_ / 100.0;
  const auto cpuNanos = [this] {
    int64_t total = 0;
    for (const Worker& w : workers_) {
      timespec ts{};
      if (clock_gettime(w.clock, &ts) == 0) total += int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
    }
    return total;
  };
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    governorWake_.wait(lock, [&] { return stopping_ || running_ > 0; });
    double windowCpu = 0, windowWall = 0;
    int64_t lastCpu = cpuNanos();
    Clock::time_point lastWall = Clock::now();
    while (!stopping_ && running_ > 0) {
      // Woken early by the last job's end: no spell for a queue with none.
      if (governorWake_.wait_for(lock, kPeriod, [&] { return stopping_ || running_ == 0; })) break;
      const int64_t cpu = cpuNanos();
      const Clock::time_point wall = Clock::now();
      const auto wallNanos = std::chrono::duration_cast<std::chrono::nanoseconds>(wall - lastWall).count();
      windowCpu = kDecay * windowCpu + static_cast<double>(cpu - lastCpu);
      windowWall = kDecay * windowWall + static_cast<double>(wallNanos);
      lastCpu = cpu;
      lastWall = wall;
      if (urgent_) {  // the core is held for the whole job, and its time is no share of a later one
        windowCpu = windowWall = 0;
        continue;
      }
      if (!spells_ || windowWall <= 0) continue;
      // A core for the next period while the share is below the target and
      // a compile thread waits for one: the compile gets about the target
      // over the window, and the user's threads lose it in whole spells, not
      // in preempted TBB tasks. A compile blocked (the compiler's libraries
      // read from disk, a lock) would leave a held core idle.
      holdCore(windowCpu < target * windowWall && std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) {
                 return threadRunnable(w.tid);
               }));
    }
    if (!urgent_) holdCore(false);
  }
}

void CompileQueue::push(std::function<void()> job, JobRank rank) {
  const bool urgent = rank == JobRank::Urgent;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    // Ahead of the queued jobs of lower ranks: an urgent job pays back
    // sooner than a background one (TieringPolicy.h), which gives a trace
    // its first kernel where an upgrade only makes one faster.
    auto at = std::find_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.rank > rank; });
    jobs_.insert(at, {std::move(job), rank});
    // Behind a job already running (the compiler's load, another trace's
    // background compile) it waits for that one, which becomes urgent too:
    // at the lowest priority it could hold the urgent one up for as long as
    // the user's threads keep the cores busy.
    if (urgent && running_ > 0) {
      escalateRunning();
      updateUrgency();
    }
  }
  cv_.notify_one();
}

void CompileQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return jobs_.empty() && running_ == 0; });
}

namespace {
thread_local bool tOnCompileQueue = false;
}  // namespace

bool onCompileQueueThread() { return tOnCompileQueue; }

void CompileQueue::serve(size_t w) {
  tOnCompileQueue = true;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
      runningUrgent_[w] = job.urgent() ? 1 : 0;
      urgentRunning_ += job.urgent();
      updateUrgency();
    }
    governorWake_.notify_one();
    job.run();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
      urgentRunning_ -= runningUrgent_[w];  // escalated while it ran, perhaps
      runningUrgent_[w] = -1;
      updateUrgency();
      if (running_ == 0) holdCore(false);  // a spell ends with the last job, not at the governor's next look
    }
    governorWake_.notify_one();
    idle_.notify_all();
  }
}

}  // namespace kiln::exec
