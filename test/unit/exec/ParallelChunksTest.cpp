// kiln_rt_parallel_for's chunks (runtime/exec/ParallelChunks.h): the CPU
// compiler's trampolines assume that a loop whose grain is a multiple of
// kParallelChunkAlign starts every chunk at a multiple of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/exec/ParallelChunks.h"

extern "C" void kiln_rt_parallel_for(void (*body)(void*, int64_t, int64_t), void* ctx, int64_t n, int64_t grain);

namespace kiln::exec {
namespace {

struct Chunks {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> ranges;
};

void record(void* ctx, int64_t begin, int64_t end) {
  auto* chunks = static_cast<Chunks*>(ctx);
  std::lock_guard<std::mutex> lock(chunks->mutex);
  chunks->ranges.emplace_back(begin, end);
}

/// The chunks of one loop, in order; fails unless they cover [0, n) once.
std::vector<std::pair<int64_t, int64_t>> chunksOf(int64_t n, int64_t grain) {
  Chunks chunks;
  kiln_rt_parallel_for(record, &chunks, n, grain);
  std::sort(chunks.ranges.begin(), chunks.ranges.end());
  int64_t next = 0;
  for (auto [begin, end] : chunks.ranges) {
    EXPECT_EQ(begin, next) << "n " << n << " grain " << grain;
    EXPECT_LT(begin, end);
    next = end;
  }
  EXPECT_EQ(next, n) << "grain " << grain;
  return chunks.ranges;
}

TEST(ParallelChunks, FlatLoopGrainsSplitAtMultiplesOfTheAlignment) {
  for (int64_t grain : {16 * kParallelChunkAlign, 17 * kParallelChunkAlign, int64_t{16384}}) {
    ASSERT_TRUE(alignsChunks(grain)) << grain;
    for (int64_t n : {int64_t{17}, int64_t{1000}, int64_t{16385}, int64_t{1000003}}) {
      const auto chunks = chunksOf(n, grain);
      for (auto [begin, end] : chunks) EXPECT_EQ(begin % kParallelChunkAlign, 0) << "n " << n << " grain " << grain;
      if (n >= 8 * grain) EXPECT_GT(chunks.size(), 1u) << "n " << n << " grain " << grain << " ran in one chunk";
    }
  }
}

TEST(ParallelChunks, RowLoopGrainsKeepTheirBalance) {
  // A row loop of 1024-wide rows has a grain of 16 rows: its chunks are not
  // rounded to 16 rows, which would split 20 rows 16 + 4.
  EXPECT_FALSE(alignsChunks(kParallelChunkAlign));
  EXPECT_FALSE(alignsChunks(3));
  const auto chunks = chunksOf(20, kParallelChunkAlign);
  if (chunks.size() > 1)  // one chunk where TBB had a single thread
    for (auto [begin, end] : chunks) EXPECT_LE(end - begin, 10) << "20 rows split " << begin << ".." << end;
}

TEST(ParallelChunks, OtherGrainsCoverTheLoopOnce) {
  for (int64_t grain : {1, 3, 1000})
    for (int64_t n : {1, 5, 999, 100001}) chunksOf(n, grain);
}

}  // namespace
}  // namespace kiln::exec
