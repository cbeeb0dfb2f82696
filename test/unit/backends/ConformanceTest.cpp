// Backend conformance suite: written once, instantiated for every registered
// device (CPU now; GPU drivers join when they register).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kiln/error.h"
#include "runtime/backends/Hal.h"

namespace kiln::hal {
namespace {

std::vector<Device> registeredDevices() {
  std::vector<Device> out;
  for (Driver* d : drivers())
    for (int i = 0; i < d->deviceCount(); ++i) out.push_back(d->device(i).device());
  return out;
}

class Conformance : public ::testing::TestWithParam<Device> {
 protected:
  DeviceContext& ctx() { return deviceContext(GetParam()); }
  /// Copies device memory to a host vector through a stream.
  std::vector<unsigned char> download(Stream& s, const void* src, size_t n) {
    std::vector<unsigned char> host(n);
    s.copy(host.data(), src, n);
    s.synchronize();
    return host;
  }
};

TEST_P(Conformance, AllocationIsAlignedAndStatsTrackIt) {
  Allocator& a = ctx().allocator();
  AllocatorStats before = a.stats();
  std::vector<std::pair<void*, size_t>> blocks;
  for (size_t n : {1ul, 63ul, 64ul, 1000ul, 1ul << 20, (1ul << 20) + 17}) {
    void* p = a.allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << n;
    blocks.emplace_back(p, n);
  }
  AllocatorStats during = a.stats();
  EXPECT_EQ(during.allocations - before.allocations, blocks.size());
  EXPECT_GT(during.bytes_active, before.bytes_active);
  for (auto [p, n] : blocks) a.deallocate(p, n);
  ctx().synchronize();  // frees are stream-ordered on asynchronous devices
  EXPECT_EQ(a.stats().bytes_active, before.bytes_active);
}

TEST_P(Conformance, CopiesRoundTrip) {
  Allocator& a = ctx().allocator();
  auto s = ctx().createStream();
  const size_t n = 1 << 16;
  std::vector<unsigned char> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<unsigned char>(i * 7);
  void* d1 = a.allocate(n);
  void* d2 = a.allocate(n);
  s->copy(d1, host.data(), n);  // host -> device
  s->copy(d2, d1, n);           // device -> device
  EXPECT_EQ(download(*s, d2, n), host);
  a.deallocate(d1, n);
  a.deallocate(d2, n);
}

TEST_P(Conformance, StreamRunsInOrder) {
  Allocator& a = ctx().allocator();
  auto s = ctx().createStream();
  const size_t n = 4096;
  void* d = a.allocate(n);
  for (int v = 1; v <= 50; ++v) s->fill(d, static_cast<unsigned char>(v), n);
  std::vector<int> order;
  for (int i = 0; i < 10; ++i) s->hostCall([&order, i] { order.push_back(i); });
  auto host = download(*s, d, n);
  EXPECT_EQ(host, std::vector<unsigned char>(n, 50));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  a.deallocate(d, n);
}

TEST_P(Conformance, EventsOrderStreams) {
  auto producer = ctx().createStream();
  auto consumer = ctx().createStream();
  auto ev = producer->createEvent();
  EXPECT_TRUE(ev->query());  // never recorded counts as complete
  std::atomic<bool> release{false}, produced{false};
  bool consumerSawProduced = false;
  producer->hostCall([&] {
    while (!release) std::this_thread::yield();
    produced = true;
  });
  ev->record(*producer);
  EXPECT_FALSE(ev->query());
  consumer->wait(*ev);
  consumer->hostCall([&] { consumerSawProduced = produced.load(); });
  release = true;
  ev->synchronize();
  EXPECT_TRUE(ev->query());
  consumer->synchronize();
  EXPECT_TRUE(consumerSawProduced);
}

TEST_P(Conformance, WaitTakesTheEventAsRecordedThen) {
  // A wait is for the record() before it: the event may be recorded again or
  // destroyed while the waiting stream has not got there yet.
  auto producer = ctx().createStream();
  auto consumer = ctx().createStream();
  auto ev = producer->createEvent();
  std::atomic<bool> release{false}, produced{false};
  bool consumerSawProduced = false;
  producer->hostCall([&] {
    while (!release) std::this_thread::yield();
    produced = true;
  });
  ev->record(*producer);
  consumer->wait(*ev);
  consumer->hostCall([&] { consumerSawProduced = produced.load(); });
  ev.reset();
  release = true;
  consumer->synchronize();
  EXPECT_TRUE(consumerSawProduced);
  producer->synchronize();
}

TEST_P(Conformance, SynchronizeReturnsAfterTasksReleasedTheirCaptures) {
  // What a task keeps alive (a buffer, a kernel) is released by the time
  // synchronize() returns.
  auto s = ctx().createStream();
  bool released = false;
  {
    std::shared_ptr<void> guard(nullptr, [&released](void*) { released = true; });
    s->hostCall([guard] {});
  }
  s->synchronize();
  EXPECT_TRUE(released);
}

TEST_P(Conformance, DefaultStreamIsShared) {
  Stream& a = ctx().defaultStream();
  Stream& b = ctx().defaultStream();
  EXPECT_EQ(&a, &b);
  EXPECT_FALSE(ctx().name().empty());
}

INSTANTIATE_TEST_SUITE_P(AllDevices, Conformance, ::testing::ValuesIn(registeredDevices()),
                         [](const ::testing::TestParamInfo<Device>& info) {
                           std::string s = info.param.str();
                           for (char& c : s)
                             if (c == ':') c = '_';
                           return s;
                         });

TEST(Registry, MissingDriverIsACleanError) {
  // No Level Zero driver here (the CUDA one registers when KILN_CUDA_LIBRARY
  // names the fake driver).
  EXPECT_EQ(findDriver(Device::LevelZero), nullptr);
  EXPECT_THROW(deviceContext(Device{Device::LevelZero, 0}), Error);
  EXPECT_THROW(deviceContext(Device{Device::CPU, 3}), Error);
  EXPECT_NE(findDriver(Device::CPU), nullptr);
}

}  // namespace
}  // namespace kiln::hal
