#include "runtime/backends/WorkerStream.h"

#include <cstring>

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

}  // namespace

WorkerStream::WorkerStream(DeviceAccess* access) : access_(access), worker_([this] { serve(); }) {}

WorkerStream::~WorkerStream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(fn));
    ++enqueued_;
  }
  cv_.notify_one();
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
    std::string failure;
    try {
      fn();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "unknown exception";
    }
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
