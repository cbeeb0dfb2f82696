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
  // One thread: each thread keeps a GEMM scratch block of its own from the
  // host allocator, taken the first time that thread joins a GEMM.
  const Settings saved = settings();
  Settings one = saved;
  one.num_threads = 1;
  set_settings(one);
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
  set_settings(saved);
  EXPECT_GT(after.allocations, before.allocations);
  EXPECT_EQ(after.system_allocs, before.system_allocs);
}

TEST(CachingHostAllocator, DemandRecordKeepsEachSizesPeak) {
  CachingHostAllocator a(1ul << 30);
  constexpr std::size_t kMiB = 1 << 20;
  void* before = a.allocate(kMiB);  // allocated before the record, freed during it
  a.startDemandRecord();
  void* p = a.allocate(kMiB);
  void* q = a.allocate(kMiB);  // two at once
  a.deallocate(p, kMiB);
  a.deallocate(before, kMiB);
  void* r = a.allocate(kMiB);  // reuses a freed one: no new demand
  void* s = a.allocate(4096);
  a.deallocate(q, kMiB);
  a.deallocate(r, kMiB);
  a.deallocate(s, 4096);
  EXPECT_EQ(a.stopDemandRecord(), (std::vector<BlockDemand>{{kMiB, 2}, {4096, 1}}));
  // Stopped: nothing more is counted.
  a.deallocate(a.allocate(8192), 8192);
  a.startDemandRecord();
  EXPECT_TRUE(a.stopDemandRecord().empty());
}

TEST(CachingHostAllocator, PrefaultFillsTheCacheUpToTheDemand) {
  CachingHostAllocator a(1ul << 30);
  const std::size_t big = CachingHostAllocator::bucketSize(3 << 20);
  void* inUse = a.allocate(big);  // held already: counts towards the demand
  const std::vector<BlockDemand> demand{{big, 3}, {65536, 2}, {1000, 5} /* not a bucket size: skipped */};
  EXPECT_EQ(a.prefault(demand, SIZE_MAX), 2 * big + 2 * 65536);
  const AllocatorStats filled = a.stats();
  EXPECT_EQ(filled.bytes_reserved, 3 * big + 2 * 65536);
  EXPECT_EQ(a.prefault(demand, SIZE_MAX), 0u) << "the demand is held already";
  // The step that follows takes the faulted blocks from the cache.
  void* b1 = a.allocate(big);
  void* b2 = a.allocate(big);
  void* m1 = a.allocate(65536);
  void* m2 = a.allocate(65536);
  const AllocatorStats used = a.stats();
  EXPECT_EQ(used.system_allocs, filled.system_allocs);
  EXPECT_EQ(used.cache_hits, filled.cache_hits + 4);
  for (void* p : {inUse, b1, b2}) a.deallocate(p, big);
  for (void* p : {m1, m2}) a.deallocate(p, 65536);
  // Within the byte budget only.
  CachingHostAllocator small(1ul << 30);
  EXPECT_EQ(small.prefault(std::vector<BlockDemand>{{1 << 20, 4}}, 2 << 20), 2u << 20);
  EXPECT_EQ(small.stats().bytes_reserved, 2u << 20);
}

TEST(CachingHostAllocator, PrefaultOneCachesABlockUnlessOneIsCached) {
  CachingHostAllocator a(1ul << 30);
  const std::size_t bytes = (23u << 20) + 12345;  // a compiled kernel's scratch
  const std::size_t bucket = CachingHostAllocator::bucketSize(bytes);
  void* inUse = a.allocate(bytes);  // in use: the next allocation still needs a block
  EXPECT_EQ(a.prefaultOne(bytes), bucket);
  EXPECT_EQ(a.prefaultOne(bytes), 0u) << "one is cached already";
  const AllocatorStats faulted = a.stats();
  void* scratch = a.allocate(bytes);
  EXPECT_EQ(a.stats().system_allocs, faulted.system_allocs) << "the allocation takes the faulted-in block";
  EXPECT_EQ(a.stats().cache_hits, faulted.cache_hits + 1);
  a.deallocate(scratch, bytes);
  a.deallocate(inUse, bytes);
  // Not beyond the cache's own limit.
  CachingHostAllocator tiny(1u << 20);
  EXPECT_EQ(tiny.prefaultOne(bytes), 0u);
  EXPECT_EQ(tiny.stats().bytes_reserved, 0u);
}

}  // namespace
}  // namespace kiln::hal
