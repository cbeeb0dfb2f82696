// WorkerStream: a stream served by one worker thread, for devices whose
// kernels are host code (the CPU and the test device). Work runs in enqueue
// order; a task that throws leaves the stream's first error, which the next
// synchronize() reports.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/backends/Stream.h"

namespace kiln::hal {

/// Opens and closes a device's memory to the worker around runs of tasks
/// (the test device keeps its memory inaccessible outside its own work).
class DeviceAccess {
 public:
  virtual ~DeviceAccess() = default;
  virtual void open() = 0;
  virtual void close() = 0;
};

class WorkerStream final : public Stream {
 public:
  /// `access` (may be null) is opened before a run of tasks and closed when
  /// the queue is empty again; it must outlive the stream.
  explicit WorkerStream(DeviceAccess* access = nullptr);
  ~WorkerStream() override;

  void copy(void* dst, const void* src, std::size_t bytes) override;
  void fill(void* dst, unsigned char value, std::size_t bytes) override;
  void hostCall(std::function<void()> fn) override;
  void wait(Event& event) override;
  std::unique_ptr<Event> createEvent() override;
  /// Waits for the work enqueued so far; throws kiln::Error (once) when a
  /// task of this stream failed since the last call.
  void synchronize() override;

  /// Ends the worker thread once its queue is done; later tasks run in the
  /// enqueuing thread (the exit handler, ~WorkerStream).
  void stopWorker();

  /// Tasks enqueued so far (the id of the last one).
  uint64_t enqueuedCount();
  bool completed(uint64_t id);
  void waitFor(uint64_t id);

 private:
  void enqueue(std::function<void()> fn);
  void serve();
  /// Registers the exit handler that stops the workers (at the first task).
  static void registerExitStop();

  DeviceAccess* access_;
  std::mutex mutex_;
  std::mutex inlineMutex_;  ///< tasks run by enqueue() once the worker stopped, one at a time
  std::condition_variable cv_, doneCv_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0, completed_ = 0;
  std::string error_;  ///< the first failure since the last synchronize()
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace kiln::hal
