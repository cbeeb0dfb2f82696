#include "runtime/backends/WorkerStream.h"

#include <algorithm>
#include <new>

#include <tbb/global_control.h>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/error.h"

namespace kiln::hal {

namespace {

/// A point in one WorkerStream: complete once the stream's task count passes it.
class WorkerEvent final : public Event {
 public:
  void record(Stream& stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    stream_ = &dynamic_cast<WorkerStream&>(stream);
    id_ = stream_->enqueuedCount();
  }
  bool query() override {
    auto [s, id] = snapshot();
    return !s || s->completed(id);
  }
  void synchronize() override {
    auto [s, id] = snapshot();
    if (s) s->waitFor(id);
  }
  /// The stream and task count of the last record() (null: never recorded).
  std::pair<WorkerStream*, uint64_t> snapshot() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {stream_, id_};
  }

 private:
  std::mutex mutex_;
  WorkerStream* stream_ = nullptr;
  uint64_t id_ = 0;
};

/// The streams alive, for the exit handler (leaked: streams of leaked
/// devices outlive every static object).
std::mutex gStreamsMutex;
std::vector<WorkerStream*>& liveStreams() {
  static auto* streams = new std::vector<WorkerStream*>();
  return *streams;
}

/// At exit, before the static objects of TBB (which the tasks use) are
/// destroyed: the worker threads finish their queues and end. A device's
/// streams are never destroyed (the device registry is leaked), and a
/// worker still alive while TBB shut down made it call a destroyed object
/// ("pure virtual method called" after the program's last line, in about
/// one exit in five of a test-device program, sometimes SIGABRT). Later
/// tasks (frees during exit) run in the calling thread.
void stopStreamsAtExit() {
  {
    std::lock_guard<std::mutex> lock(gStreamsMutex);
    for (WorkerStream* s : liveStreams()) s->stopWorker();
  }
  // And TBB's own workers, which the streams' tasks woke: still leaving
  // their arena while TBB's statics went, they did the same. Best effort:
  // false where TBB cannot wait (a thread still inside it). With both, about
  // one exit in 60 of such a program still prints the message (was one in
  // five): its cause there is not found yet.
  tbb::task_scheduler_handle handle{tbb::attach{}};
  (void)tbb::finalize(handle, std::nothrow);
}
}  // namespace

WorkerStream::WorkerStream(DeviceAccess* access) : access_(access), worker_([this] { serve(); }) {
  std::lock_guard<std::mutex> lock(gStreamsMutex);
  liveStreams().push_back(this);
}

void WorkerStream::registerExitStop() {
  // At the first task: TBB (loaded with libkiln) constructed its static
  // objects before any of this, and exit destroys them after the handlers
  // registered since, so this one runs first.
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(stopStreamsAtExit); });
}

namespace {
/// The stream whose task this thread runs in enqueue() (its worker stopped).
thread_local WorkerStream* tRunningInline = nullptr;

/// Runs a task; what it threw, as text ("" when it returned).
std::string runCatching(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
  return {};
}
}  // namespace

void WorkerStream::stopWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
}

WorkerStream::~WorkerStream() {
  {
    std::lock_guard<std::mutex> lock(gStreamsMutex);
    auto& all = liveStreams();
    all.erase(std::remove(all.begin(), all.end(), this), all.end());
  }
  stopWorker();
}

void WorkerStream::copy(void* dst, const void* src, std::size_t bytes) {
  enqueue([=] { std::memmove(dst, src, bytes); });
}

void WorkerStream::fill(void* dst, unsigned char value, std::size_t bytes) {
  enqueue([=] { std::memset(dst, value, bytes); });
}

void WorkerStream::hostCall(std::function<void()> fn) { enqueue(std::move(fn)); }

void WorkerStream::wait(Event& event) {
  // The worker blocks on the event before running later work. What it waits
  // for is the event's last record() before this call, taken now (as on a
  // GPU): the caller may record the event again, or destroy it, before the
  // worker gets to this task.
  if (auto* ours = dynamic_cast<WorkerEvent*>(&event)) {
    auto [stream, id] = ours->snapshot();
    if (stream) enqueue([stream, id] { stream->waitFor(id); });
    return;
  }
  Event* e = &event;
  enqueue([e] { e->synchronize(); });
}

std::unique_ptr<Event> WorkerStream::createEvent() { return std::make_unique<WorkerEvent>(); }

void WorkerStream::synchronize() {
  waitFor(enqueuedCount());
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error.swap(error_);
  }
  if (!error.empty()) throw Error("a task on a device stream failed: " + error);
}

uint64_t WorkerStream::enqueuedCount() {
  std::lock_guard<std::mutex> lock(mutex_);
  return enqueued_;
}

bool WorkerStream::completed(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= id;
}

void WorkerStream::waitFor(uint64_t id) {
  std::unique_lock<std::mutex> lock(mutex_);
  doneCv_.wait(lock, [&] { return completed_ >= id; });
}

void WorkerStream::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!stopping_) {
    queue_.push_back(std::move(fn));
    ++enqueued_;
    lock.unlock();
    cv_.notify_one();
    return;
  }
  // The worker is ending (the process is exiting): the task runs here, after
  // what the worker had, one at a time, as it would have on the worker. One
  // enqueued by a task running here (its release frees a buffer) runs at
  // once: it would wait for itself.
  const bool nested = tRunningInline == this;
  if (!nested) doneCv_.wait(lock, [&] { return completed_ >= enqueued_; });
  ++enqueued_;
  lock.unlock();
  std::unique_lock<std::mutex> inOrder(inlineMutex_, std::defer_lock);
  if (!nested) inOrder.lock();
  WorkerStream* const outer = tRunningInline;
  tRunningInline = this;
  if (access_ && !nested) access_->open();
  const std::string failure = runCatching(fn);
  fn = nullptr;
  if (access_ && !nested) access_->close();
  tRunningInline = outer;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure.empty() && error_.empty()) error_ = failure;
    ++completed_;
  }
  doneCv_.notify_all();
}

void WorkerStream::serve() {
  bool open = false;
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (queue_.empty() && open) {
        // Idle: the device's memory is closed to everyone again.
        lock.unlock();
        access_->close();
        open = false;
        lock.lock();
      }
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    if (access_ && !open) {
      access_->open();
      open = true;
    }
    const std::string failure = runCatching(fn);
    registerExitStop();
    // Release what the task holds (buffers it keeps alive, a kernel, a host
    // buffer's storage) before it counts as complete: once synchronize()
    // returns, nothing of the task runs any more, e.g. a Storage freed into
    // an allocator while the caller reads its stats, or a kernel's last
    // reference dropped while the process exits.
    fn = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!failure.empty() && error_.empty()) error_ = failure;
      ++completed_;
    }
    doneCv_.notify_all();
  }
}

}  // namespace kiln::hal
