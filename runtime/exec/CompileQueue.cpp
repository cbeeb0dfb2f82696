#include "runtime/exec/CompileQueue.h"

#include <cerrno>

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

CompileQueue::CompileQueue(int threads) {
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      lowerThisThreadsPriority();
      serve();
    });
}

CompileQueue::~CompileQueue() { shutdown(); }

void CompileQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  idle_.notify_all();
}

void CompileQueue::push(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void CompileQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return jobs_.empty() && running_ == 0; });
}

void CompileQueue::serve() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
    }
    job();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --running_;
    }
    idle_.notify_all();
  }
}

}  // namespace kiln::exec
