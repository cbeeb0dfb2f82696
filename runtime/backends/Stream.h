// hal::Stream and hal::Event: in-order asynchronous work queues of a device
// and the markers that order them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace kiln::hal {

class Stream;

/// Marks a point in a stream. synchronize() blocks until all work enqueued
/// before the record() has completed; query() tells without blocking. An
/// event never recorded counts as complete.
class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Stream& stream) = 0;
  virtual bool query() = 0;
  virtual void synchronize() = 0;
};

/// Work on one stream runs in enqueue order, asynchronously to the caller.
/// Pointers may be device or host memory as the device allows; they must stay
/// valid until the work has completed.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill(void* dst, unsigned char value, std::size_t bytes) = 0;
  /// Runs `fn` on the host once all earlier work on this stream is done.
  virtual void hostCall(std::function<void()> fn) = 0;
  /// Later work on this stream waits until `event` completes.
  virtual void wait(Event& event) = 0;
  virtual std::unique_ptr<Event> createEvent() = 0;
  /// Blocks until everything enqueued so far has completed.
  virtual void synchronize() = 0;
  /// The driver's own handle of this stream (a CUstream), for libraries that
  /// enqueue work on it themselves (NCCL); null where there is none.
  virtual void* nativeHandle() { return nullptr; }
};

}  // namespace kiln::hal
