// CompileQueue: background threads that compile hot traces while the
// interpreter keeps serving them. The threads run at the lowest CPU priority
// (SCHED_IDLE, nice 19 on Linux), so a compilation never takes a core the
// user's threads want.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::exec {

/// The nice value of compile threads (the lowest priority).
inline constexpr int kCompileThreadNice = 19;
/// The calling thread's nice value and whether it runs under SCHED_IDLE
/// (tests check the compile threads').
int currentThreadNice();
bool currentThreadIsIdlePriority();

class CompileQueue {
 public:
  explicit CompileQueue(int threads);
  ~CompileQueue();
  CompileQueue(const CompileQueue&) = delete;
  CompileQueue& operator=(const CompileQueue&) = delete;

  void push(std::function<void()> job);
  /// Blocks until every job pushed so far has finished (tests, shutdown).
  void drain();
  /// Drops queued jobs, lets running ones finish, joins the threads; later
  /// pushes are ignored.
  void shutdown();

 private:
  void serve();

  std::mutex mutex_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> jobs_;
  int running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kiln::exec
