#include "runtime/interp/gemm/WorkSplit.h"

#include <tbb/task_arena.h>

#include <algorithm>

#include "runtime/interp/gemm/Sgemm.h"

namespace kiln::interp::gemm {

int gemmThreads(int64_t M, int64_t N, int64_t K, bool parallel) {
  return parallel && M * N * K >= kSplitMultiplyAdds ? std::max(1, tbb::this_task_arena::max_concurrency()) : 1;
}

void productOverEmptyDepth(int64_t M, int64_t N, float* c, int64_t ldc, bool accumulate, const Epilogue* epilogue) {
  if (!accumulate)
    for (int64_t i = 0; i < M; ++i) std::fill(c + i * ldc, c + i * ldc + N, 0.0f);
  if (epilogue) applyEpilogue(*epilogue, c, ldc, M, N, 0, 0);
}

RowBlocks::RowBlocks(int64_t rows, int rowsPerPanel, int64_t blockRows, int threads)
    : panels((rows + rowsPerPanel - 1) / rowsPerPanel), M(rows), panelRows(rowsPerPanel) {
  const int64_t panelsPerBlock = std::max<int64_t>(1, blockRows / panelRows);
  const int64_t least = (panels + panelsPerBlock - 1) / panelsPerBlock;
  const int64_t t = std::max(1, threads);
  // Rounded up to a multiple of the threads, never past one panel a block.
  count = std::max<int64_t>(1, std::min(panels, (least + t - 1) / t * t));
}

WorkSplit splitWork(int64_t rowPanels, int64_t colPanels, int threads) {
  WorkSplit best;
  double bestCost = -1;
  for (int rows = threads; rows >= 1; --rows) {
    const int cols = threads / rows;
    const int64_t taskRows = (rowPanels + rows - 1) / rows, taskCols = (colPanels + cols - 1) / cols;
    // Packing an A panel costs about half a micro-kernel call; a call whose
    // B panel another thread of its column group packed, kRemotePanelCost
    // more (a group's `rows` threads pack its panels in equal shares).
    const double remote = kRemotePanelCost * static_cast<double>(rows - 1) / rows;
    const double cost = static_cast<double>(taskRows) * (static_cast<double>(taskCols) * (1.0 + remote) + 0.5);
    if (bestCost < 0 || cost < bestCost) {
      best = {rows, cols};
      bestCost = cost;
    }
  }
  return best;
}

}  // namespace kiln::interp::gemm
