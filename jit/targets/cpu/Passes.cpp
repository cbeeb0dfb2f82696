//===- Passes.cpp - Kiln's own steps of the CPU pipeline as passes -*- C++ -*-===//

#include "jit/targets/cpu/Passes.h"

#include "jit/targets/cpu/CpuTransforms.h"
#include "jit/targets/cpu/RowFusion.h"
#include "jit/targets/cpu/RowScratch.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

namespace kiln::jit::cpu {

#define GEN_PASS_DEF_KILNCPUUNSHAREFILLS
#define GEN_PASS_DEF_KILNCPULOCALIZEROWSCRATCH
#define GEN_PASS_DEF_KILNCPUFUSELOOPSINROWS
#define GEN_PASS_DEF_KILNCPUHOISTROWBUFFERS
#define GEN_PASS_DEF_KILNCPUIEEEMINMAX
#define GEN_PASS_DEF_KILNCPUSTRIDEDCOPIES
#include "jit/targets/cpu/Passes.h.inc"

namespace {

struct UnshareFills : impl::KilnCpuUnshareFillsBase<UnshareFills> {
  void runOnOperation() override { unshareFilledInits(getOperation()); }
};

struct LocalizeRowScratch : impl::KilnCpuLocalizeRowScratchBase<LocalizeRowScratch> {
  using Base::Base;
  void runOnOperation() override {
    mlir::func::FuncOp fn = getOperation();
    if (fn.isExternal() || fn.getNumArguments() == 0)
      return;
    // The scratch buffer is the kernel's trailing byte buffer (assignScratch).
    const unsigned last = fn.getNumArguments() - 1;
    auto type = llvm::dyn_cast<mlir::MemRefType>(fn.getArgument(last).getType());
    if (!type || type.getRank() != 1 || !type.getElementType().isInteger(8))
      return;
    localizeRowScratch(fn, last, maxRowBytes);
  }
};

struct FuseLoopsInRows : impl::KilnCpuFuseLoopsInRowsBase<FuseLoopsInRows> {
  void runOnOperation() override { fuseLoopsInRows(getOperation()); }
};

struct HoistRowBuffers : impl::KilnCpuHoistRowBuffersBase<HoistRowBuffers> {
  void runOnOperation() override { hoistRowBuffers(getOperation()); }
};

struct IeeeMinMax : impl::KilnCpuIeeeMinMaxBase<IeeeMinMax> {
  void runOnOperation() override { lowerIeeeMinMax(getOperation()); }
};

struct StridedCopies : impl::KilnCpuStridedCopiesBase<StridedCopies> {
  void runOnOperation() override { stridedCopiesToRows(getOperation()); }
};

} // namespace

} // namespace kiln::jit::cpu
