#include "runtime/backends/cpu/CachingHostAllocator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "kiln/kiln.h"
#include "runtime/backends/Hal.h"

namespace kiln::hal {
namespace {

TEST(CachingHostAllocator, BucketsBoundWaste) {
  EXPECT_EQ(CachingHostAllocator::bucketSize(1), 64u);
  EXPECT_EQ(CachingHostAllocator::bucketSize(65), 128u);
  EXPECT_EQ(CachingHostAllocator::bucketSize(1 << 20), 1u << 20);
  for (size_t n : {(1ul << 20) + 1, 3ul << 22, (32ul << 20) + 5, 100'000'000ul}) {
    size_t b = CachingHostAllocator::bucketSize(n);
    EXPECT_GE(b, n);
    EXPECT_LE(b, n + n / 4) << n;
  }
}

TEST(CachingHostAllocator, ReusesFreedBlocks) {
  CachingHostAllocator a(1ul << 30);
  void* p = a.allocate(32 << 20);
  a.deallocate(p, 32 << 20);
  void* q = a.allocate((32 << 20) - 100);  // same bucket
  EXPECT_EQ(p, q);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.system_allocs, 1u);
  EXPECT_EQ(s.bytes_peak_active, 32u << 20);
  a.deallocate(q, (32 << 20) - 100);
  EXPECT_EQ(a.stats().bytes_reserved, 32u << 20);
  a.emptyCache();
  EXPECT_EQ(a.stats().bytes_reserved, 0u);
}

TEST(CachingHostAllocator, BlocksNotReusedForAWhileGoBackToTheSystem) {
  using Clock = CachingHostAllocator::Clock;
  CachingHostAllocator a(1ul << 30, std::chrono::milliseconds(200));
  // A loop whose size changes every step: each size is used once.
  for (std::size_t n = 1; n <= 50; ++n) a.deallocate(a.allocate(n * 4096), n * 4096);
  const std::size_t reserved = a.stats().bytes_reserved;
  EXPECT_GE(reserved, 50u * 4096);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  // One size is still in use: returned just now, it stays cached.
  void* kept = a.allocate(1 << 20);
  a.deallocate(kept, 1 << 20);
  EXPECT_EQ(a.releaseIdle(Clock::now()), reserved);
  EXPECT_EQ(a.stats().bytes_reserved, 1u << 20);
  EXPECT_EQ(a.allocate(1 << 20), kept);
  a.deallocate(kept, 1 << 20);
  // Long after, that one has been idle too.
  a.releaseIdle(Clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(a.stats().bytes_reserved, 0u);
  EXPECT_EQ(a.stats().bytes_active, 0u);
}

TEST(CachingHostAllocator, CacheLimitFreesExcess) {
  CachingHostAllocator a(1 << 20);
  void* p = a.allocate(4 << 20);
  a.deallocate(p, 4 << 20);  // larger than the cache may hold
  EXPECT_EQ(a.stats().bytes_reserved, 0u);
}

TEST(CachingHostAllocator, TrainingLoopStopsAllocatingFreshMemory) {
  // After the first step, every buffer of the next steps comes from the cache.
  Tensor x = rand({256, 256}, 1);
  sync();
  auto stepOnce = [&] {
    Tensor y = relu(matmul(x, x) + 1.0f);
    (void)sum(y).item<float>();
    step();
  };
  stepOnce();
  AllocatorStats before = deviceContext(Device::cpu()).allocator().stats();
  for (int i = 0; i < 5; ++i) stepOnce();
  AllocatorStats after = deviceContext(Device::cpu()).allocator().stats();
  EXPECT_GT(after.allocations, before.allocations);
  EXPECT_EQ(after.system_allocs, before.system_allocs);
}

}  // namespace
}  // namespace kiln::hal
