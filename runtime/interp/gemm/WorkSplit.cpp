#include "runtime/interp/gemm/WorkSplit.h"

namespace kiln::interp::gemm {

WorkSplit splitWork(int64_t rowPanels, int64_t colPanels, int threads) {
  WorkSplit best;
  double bestCost = -1;
  for (int rows = threads; rows >= 1; --rows) {
    const int cols = threads / rows;
    const int64_t taskRows = (rowPanels + rows - 1) / rows, taskCols = (colPanels + cols - 1) / cols;
    // Packing an A panel costs about half a micro-kernel call.
    const double cost = static_cast<double>(taskRows) * (static_cast<double>(taskCols) + 0.5);
    if (bestCost < 0 || cost < bestCost) {
      best = {rows, cols};
      bestCost = cost;
    }
  }
  return best;
}

}  // namespace kiln::interp::gemm
