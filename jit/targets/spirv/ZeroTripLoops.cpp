//===- ZeroTripLoops.cpp - scf.for results that SPIR-V keeps -------------===//

#include "jit/targets/spirv/ZeroTripLoops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace kiln::jit::spirv {

void guardZeroTripLoopResults(mlir::gpu::GPUModuleOp module) {
  llvm::SmallVector<mlir::scf::ForOp> loops;
  module.walk([&](mlir::scf::ForOp f) {
    if (f.getNumResults() > 0)
      loops.push_back(f);
  });
  for (mlir::scf::ForOp f : loops) {
    mlir::OpBuilder b(f->getContext());
    b.setInsertionPointAfter(f);
    mlir::Location loc = f.getLoc();
    mlir::Value runs = b.create<mlir::arith::CmpIOp>(loc, mlir::arith::CmpIPredicate::sgt, f.getUpperBound(),
                                                     f.getLowerBound());
    for (auto [result, init] : llvm::zip(f.getResults(), f.getInitArgs())) {
      auto select = b.create<mlir::arith::SelectOp>(loc, runs, result, init);
      result.replaceAllUsesExcept(select.getResult(), select);
    }
  }
}

} // namespace kiln::jit::spirv
