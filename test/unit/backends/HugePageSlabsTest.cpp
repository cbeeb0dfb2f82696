#include "runtime/backends/cpu/HugePageSlabs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/backends/cpu/CachingHostAllocator.h"

namespace kiln::hal {
namespace {

constexpr std::size_t kChunk = HugePageSlabs::kChunkBytes;

std::uintptr_t chunkOf(const void* p) { return reinterpret_cast<std::uintptr_t>(p) & ~(kChunk - 1); }

TEST(HugePageSlabs, ServesMediumSizesOnly) {
  EXPECT_FALSE(HugePageSlabs::serves(HugePageSlabs::kMinBlock - 1));
  EXPECT_TRUE(HugePageSlabs::serves(HugePageSlabs::kMinBlock));
  EXPECT_TRUE(HugePageSlabs::serves(kChunk - 64));
  EXPECT_FALSE(HugePageSlabs::serves(kChunk));
}

TEST(HugePageSlabs, CarvesAlignedBlocksFromOneChunkUntilItIsFull) {
  HugePageSlabs slabs;
  std::vector<void*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(slabs.allocate(256 << 10));  // 8 x 256 KiB = one chunk
  EXPECT_EQ(slabs.chunkCount(), 1u);
  for (void* b : blocks) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % HugePageSlabs::kAlignment, 0u);
    EXPECT_EQ(chunkOf(b), chunkOf(blocks[0]));
    std::memset(b, 0x5a, 256 << 10);  // every byte is writable
  }
  for (std::size_t i = 1; i < blocks.size(); ++i)
    EXPECT_EQ(static_cast<char*>(blocks[i]) - static_cast<char*>(blocks[i - 1]), 256 << 10);
  void* next = slabs.allocate(100'000);  // does not fit: a second chunk
  EXPECT_EQ(slabs.chunkCount(), 2u);
  EXPECT_NE(chunkOf(next), chunkOf(blocks[0]));
  for (void* b : blocks) slabs.release(b);
  EXPECT_EQ(slabs.chunkCount(), 1u) << "a full chunk whose blocks all came back is unmapped";
  slabs.release(next);
  EXPECT_EQ(slabs.chunkCount(), 1u) << "the chunk being carved is kept";
  EXPECT_EQ(slabs.allocate(64 << 10), next) << "and carved again from its start";
}

TEST(HugePageSlabs, AChunkStaysWhileOneOfItsBlocksIsInUse) {
  HugePageSlabs slabs;
  void* a = slabs.allocate(1536 << 10);
  void* b = slabs.allocate(1536 << 10);  // a second chunk
  ASSERT_EQ(slabs.chunkCount(), 2u);
  void* c = slabs.allocate(256 << 10);  // the tail of b's chunk
  EXPECT_EQ(chunkOf(c), chunkOf(b));
  slabs.release(b);
  std::memset(c, 1, 256 << 10);  // still mapped
  slabs.release(a);
  EXPECT_EQ(slabs.chunkCount(), 1u);
}

TEST(CachingHostAllocator, MediumBlocksComeFromHugePageChunksAndGoBack) {
  CachingHostAllocator a(1ul << 30);
  void* p = a.allocate(300 << 10);
  void* q = a.allocate(40 << 10);
  EXPECT_EQ(chunkOf(p), chunkOf(q)) << "both carved from one 2 MiB chunk";
  std::memset(p, 1, 300 << 10);
  std::memset(q, 2, 40 << 10);
  a.deallocate(p, 300 << 10);
  EXPECT_EQ(a.allocate(300 << 10), p) << "reuse still goes through the cache";
  a.deallocate(p, 300 << 10);
  a.deallocate(q, 40 << 10);
  a.emptyCache();
  EXPECT_EQ(a.stats().bytes_reserved, 0u);
}

}  // namespace
}  // namespace kiln::hal
