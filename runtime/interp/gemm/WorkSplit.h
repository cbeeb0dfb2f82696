// How the GEMM splits one packed B block's work over threads.
#pragma once

#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "runtime/interp/gemm/Sgemm.h"

namespace kiln::interp::gemm {

/// One task's share of a WorkSplit grid: rows [i0, i1) of C and column
/// panels [p0, p1) of B (empty when the grid has more groups than panels).
struct TaskShare {
  int64_t i0, i1;
  int p0, p1;
  bool empty() const { return i0 >= i1 || p0 >= p1; }
};

/// A grid of rows x cols tasks over the row panels of A and the column
/// panels of B (rows * cols <= threads).
struct WorkSplit {
  int rows = 1, cols = 1;

  /// Task t's share (t in [0, rows * cols)): its group of whole row panels
  /// of `panelRows` rows, the last cut at M, and its group of column panels.
  TaskShare share(int t, int64_t rowPanels, int64_t colPanels, int panelRows, int64_t M) const {
    const int64_t rg = t / cols, cg = t % cols;
    return {rowPanels * rg / rows * panelRows, std::min(M, rowPanels * (rg + 1) / rows * panelRows),
            static_cast<int>(colPanels * cg / cols), static_cast<int>(colPanels * (cg + 1) / cols)};
  }
};

/// The grid whose slowest task does the least: micro-kernel calls, the A
/// packing that each task repeats for its rows, and the reads of B panels
/// that other threads of its column group packed (kRemotePanelCost): they
/// come from another core's cache, not from its own. Ties go to more row
/// groups (no A panel packed twice).
WorkSplit splitWork(int64_t rowPanels, int64_t colPanels, int threads);

/// What a micro-kernel call pays on top when its B panel was packed by
/// another thread, as a share of the call. Split by rows only, every
/// thread sweeps the whole packed B block, half of it (on 2 threads) from
/// the other core; split by columns, each thread reads only the panels it
/// packed itself, which stay in its L2. On a 2-core Sapphire Rapids
/// (kiln_gemm_bench, 2 threads, GFLOP/s, rows only -> columns only):
/// 128x512x512 230-240 -> 306-338, 256x1024x1024 264 -> 311-344, 512^3
/// 314-334 -> 342-353, 1024^3 347-358 -> 366-383; 784x512x256,
/// 2048x512x512 and 4096x4096x1024 level.
inline constexpr double kRemotePanelCost = 0.25;

/// The threads one GEMM of M x N x K splits over: the current TBB arena's
/// when `parallel` and the product is large enough (kSplitMultiplyAdds),
/// else 1.
int gemmThreads(int64_t M, int64_t N, int64_t K, bool parallel);

/// C[M,N] = 0 unless `accumulate`, then the epilogue if one is given: the
/// product over an empty depth.
void productOverEmptyDepth(int64_t M, int64_t N, float* c, int64_t ldc, bool accumulate, const Epilogue* epilogue);

/// Runs f(t) for t in [0, tasks), one task per thread when there are several.
template <class F>
void forEachTask(int tasks, F&& f) {
  if (tasks == 1) {
    f(0);
    return;
  }
  tbb::parallel_for(0, tasks, [&](int t) { f(t); }, tbb::static_partitioner());
}

/// Rows of C cut into blocks for threads that take them as they come: at
/// most `blockRows` rows each (a packed A block), whole panels of
/// `panelRows` rows but for the last block, cut at M, and as many blocks as
/// a multiple of `threads`, of near-equal panels, so that threads running at
/// the same speed finish together. Equal mc blocks do not: 1024 rows in
/// blocks of 56 are 19 blocks, and on 2 threads one ran 560 rows while the
/// other ran 464 (1024^3 on 2 threads, 2-core Sapphire Rapids: 300 GFLOP/s
/// so, 324 for 1008 rows, which split evenly).
struct RowBlocks {
  int64_t count = 1;   ///< blocks
  int64_t panels = 1;  ///< row panels, the last perhaps cut at M
  int64_t M = 0;
  int panelRows = 1;

  RowBlocks(int64_t M, int panelRows, int64_t blockRows, int threads);

  /// The first row of block b (b in [0, count]; start(count) == M): panel
  /// panels * b / count, rounded to the nearest.
  int64_t start(int64_t b) const {
    if (b >= count) return M;
    return std::min(M, (2 * panels * b / count + 1) / 2 * panelRows);
  }
};

/// Runs f(share) over the shares of `grid` (colPanels column panels of B,
/// A in row panels of panelRows rows, M rows in all). Each column group of
/// B's panels (grid.cols of them) has its rows cut into RowBlocks (at most
/// `blockRows` rows, a multiple of panelRows: a packed A block, so nothing
/// is packed twice within a group), and grid.rows threads take its blocks
/// as they come; a thread whose group has none left takes the blocks of the
/// others. So a core slowed by another process does less: beside a busy
/// process on a 2-core Sapphire Rapids, 4096x4096x1024 (f32, 2 threads) ran
/// 199-208 ms with static halves, 159-185 ms with row blocks taken as they
/// come (kiln_gemm_bench). Thread t belongs to group t / grid.rows: the
/// threads whose B packing (panels colPanels * t / threads onwards) made
/// the group's panels, so they read them from their own cache.
template <class F>
void forEachShare(const WorkSplit& grid, int64_t colPanels, int panelRows, int64_t M, int64_t blockRows, F&& f) {
  const int groups = grid.cols, tasks = grid.rows * grid.cols;
  if (tasks == 1) {
    f(TaskShare{0, M, 0, static_cast<int>(colPanels)});
    return;
  }
  const RowBlocks blocks(M, panelRows, blockRows, grid.rows);
  std::unique_ptr<std::atomic<int64_t>[]> next(new std::atomic<int64_t>[groups]);
  for (int g = 0; g < groups; ++g) next[g].store(0, std::memory_order_relaxed);
  forEachTask(tasks, [&](int t) {
    const int own = t / grid.rows;
    for (int k = 0; k < groups; ++k) {
      const int g = (own + k) % groups;
      const int p0 = static_cast<int>(colPanels * g / groups), p1 = static_cast<int>(colPanels * (g + 1) / groups);
      for (int64_t b = next[g].fetch_add(1, std::memory_order_relaxed); b < blocks.count;
           b = next[g].fetch_add(1, std::memory_order_relaxed))
        f(TaskShare{blocks.start(b), blocks.start(b + 1), p0, p1});
    }
  });
}

}  // namespace kiln::interp::gemm
