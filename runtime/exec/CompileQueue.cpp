#include "runtime/exec/CompileQueue.h"

#include <cerrno>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace kiln::exec {

namespace {
/// Lowest CPU priority for the calling thread (Linux: nice is per thread,
/// set through its tid): compilation then takes only the cores the user's
/// threads leave idle, so the interpreter keeps its speed while it waits.
void lowerThisThreadsPriority() {
#ifdef __linux__
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  (void)setpriority(PRIO_PROCESS, tid, kCompileThreadNice);  // best effort: unchanged if refused
#endif
}
}  // namespace

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
