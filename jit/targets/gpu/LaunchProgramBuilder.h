//===- LaunchProgramBuilder.h - Host index arithmetic as launch steps -*- C++ -*-===//
//
// A dynamic-shape GPU kernel's host function computes, from its size
// arguments, the grid of each launch and the extents and offsets its
// kernels take (index arithmetic that lower-affine left: adds, products,
// divisions, comparisons, selects). The runtime has no MLIR: it gets that
// arithmetic as a launch program (runtime/exec/LaunchProgram.h), which the
// GPU kernel loaders run at each launch.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_GPU_LAUNCHPROGRAMBUILDER_H
#define KILN_JIT_TARGETS_GPU_LAUNCHPROGRAMBUILDER_H

#include <optional>
#include <vector>

#include "runtime/exec/LaunchProgram.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

namespace kiln::jit::gpu {

class LaunchProgramBuilder {
public:
  /// Size k is argument `firstSize + k` of the host function's entry block.
  LaunchProgramBuilder(mlir::Block *entry, unsigned firstSize, unsigned numSizes)
      : entry_(entry), firstSize_(firstSize), numSizes_(numSizes) {}

  /// The step that computes host value `v`, after the steps it reads; none
  /// when `v` is not an integer computed from constants and sizes by
  /// operations a launch program has.
  std::optional<int64_t> stepOf(mlir::Value v);

  const std::vector<exec::LaunchExpr> &program() const { return program_; }

private:
  int64_t add(exec::LaunchExpr e);

  mlir::Block *entry_;
  unsigned firstSize_, numSizes_;
  llvm::DenseMap<mlir::Value, int64_t> steps_;
  std::vector<exec::LaunchExpr> program_;
};

} // namespace kiln::jit::gpu

#endif // KILN_JIT_TARGETS_GPU_LAUNCHPROGRAMBUILDER_H
