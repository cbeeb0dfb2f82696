#include "runtime/backends/cpu/CpuBackend.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "runtime/backends/cpu/CachingHostAllocator.h"

namespace kiln::hal {

namespace {

/// An in-order queue served by one worker thread, like a GPU stream.
class CpuStream final : public Stream {
 public:
  CpuStream() : worker_([this] { serve(); }) {}
  ~CpuStream() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  void copy(void* dst, const void* src, std::size_t bytes) override {
    enqueue([=] { std::memmove(dst, src, bytes); });
  }
  void fill(void* dst, unsigned char value, std::size_t bytes) override {
    enqueue([=] { std::memset(dst, value, bytes); });
  }
  void hostCall(std::function<void()> fn) override { enqueue(std::move(fn)); }
  void wait(Event& event) override;
  std::unique_ptr<Event> createEvent() override;
  void synchronize() override {
    uint64_t target = enqueuedCount();
    waitFor(target);
  }

  /// Number of tasks enqueued so far (the id of the last one).
  uint64_t enqueuedCount() {
    std::lock_guard<std::mutex> lock(mutex_);
    return enqueued_;
  }
  bool completed(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ >= id;
  }
  void waitFor(uint64_t id) {
    std::unique_lock<std::mutex> lock(mutex_);
    doneCv_.wait(lock, [&] { return completed_ >= id; });
  }

 private:
  void enqueue(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(fn));
      ++enqueued_;
    }
    cv_.notify_one();
  }
  void serve() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++completed_;
      }
      doneCv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_, doneCv_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0, completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

class CpuEvent final : public Event {
 public:
  void record(Stream& stream) override {
    std::lock_guard<std::mutex> lock(mutex_);
    stream_ = static_cast<CpuStream*>(&stream);
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

 private:
  std::pair<CpuStream*, uint64_t> snapshot() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {stream_, id_};
  }
  std::mutex mutex_;
  CpuStream* stream_ = nullptr;
  uint64_t id_ = 0;
};

void CpuStream::wait(Event& event) {
  // The worker blocks on the event before running later work.
  Event* e = &event;
  enqueue([e] { e->synchronize(); });
}

std::unique_ptr<Event> CpuStream::createEvent() { return std::make_unique<CpuEvent>(); }

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "host CPU";
}

class CpuDeviceContext final : public DeviceContext {
 public:
  CpuDeviceContext() : allocator_(std::size_t{4} << 30) {}
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return cpuModelName(); }
  bool hostAccessible() const override { return true; }
  Allocator& allocator() override { return allocator_; }
  std::unique_ptr<Stream> createStream() override { return std::make_unique<CpuStream>(); }
  Stream& defaultStream() override {
    std::call_once(streamOnce_, [this] { stream_ = std::make_unique<CpuStream>(); });
    return *stream_;
  }

 private:
  CachingHostAllocator allocator_;
  std::once_flag streamOnce_;
  std::unique_ptr<CpuStream> stream_;
};

class CpuDriver final : public Driver {
 public:
  std::string name() const override { return "cpu"; }
  Device::Kind kind() const override { return Device::CPU; }
  int deviceCount() const override { return 1; }
  DeviceContext& device(int) override { return device_; }

 private:
  CpuDeviceContext device_;
};

}  // namespace

std::unique_ptr<Driver> createCpuDriver() { return std::make_unique<CpuDriver>(); }

}  // namespace kiln::hal
