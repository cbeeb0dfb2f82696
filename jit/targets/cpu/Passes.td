//===- Passes.td - Kiln's own steps of the CPU pipeline -----*- tablegen -*-===//
//
// The steps of jit/targets/cpu that kiln-opt runs alone, for their lit tests
// (test/lit/Target/Cpu). The compiler calls the same functions in order
// (CpuCompiler.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_PASSES_TD
#define KILN_JIT_TARGETS_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnCpuUnshareFills : Pass<"kiln-cpu-unshare-fills", "::mlir::func::FuncOp"> {
  let summary = "Give each linalg op a fill of its own as its init";
  let description = [{
    CSE merges equal `linalg.fill`s of `tensor.empty`, so two reductions
    (layer_norm's two f64 sums) share one init; bufferization then fills a
    temporary once and copies it for each extra user, a loop and a copy
    between the row loops. Each extra user gets a clone of the fill (and of
    the empty it fills). See `unshareFilledInits` (CpuTransforms.h).

    Example:

    ```mlir
    %f = linalg.fill ins(%zero : f64) outs(%e : tensor<4xf64>) -> tensor<4xf64>
    %a = linalg.generic ... outs(%f : tensor<4xf64>)
    %b = linalg.generic ... outs(%f : tensor<4xf64>)
    // becomes: %b takes a fill of a new tensor.empty
    ```
  }];
}

def KilnCpuLocalizeRowScratch
    : Pass<"kiln-cpu-localize-row-scratch", "::mlir::func::FuncOp"> {
  let summary = "Row temporaries of a parallel row loop as stack row buffers";
  let description = [{
    On a kernel after scratch assignment and row fusion (the trailing
    `memref<Nxi8>` argument is the scratch buffer), replaces each temporary
    that only one top-level `scf.parallel` over rows touches, and only at
    its row, by a `memref.alloca` of one row at the start of the loop's body.
    See `localizeRowScratch` (RowScratch.h).

    Example:

    ```mlir
    %t = memref.view %scratch[%c0][] : memref<32xi8> to memref<2x4xf32>
    scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
      memref.store %v, %t[%i, %j] : memref<2x4xf32>
    }
    // becomes
    scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
      %row = memref.alloca() {alignment = 64 : i64} : memref<16xi8>
      %r = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
      memref.store %v, %r[%c0, %j] : memref<1x4xf32>
    }
    ```
  }];
  let options = [
    Option<"maxRowBytes", "max-row-bytes", "int64_t", "65536",
           "Most bytes of row buffers per loop (stack per task)">,
  ];
}

def KilnCpuFuseLoopsInRows
    : Pass<"kiln-cpu-fuse-loops-in-rows", "::mlir::func::FuncOp"> {
  let summary = "Merge adjacent inner loops of a row loop that touch the same elements";
  let description = [{
    Inside each top-level `scf.parallel` over rows, merges adjacent
    innermost `scf.for` loops with equal constant bounds when the second
    uses no result of the first and every conflicting pair of accesses is to
    the same element in the same iteration (exp then sum of a softmax row;
    centre then sum of squares of a layer_norm row): one pass over the row
    instead of two. See `fuseLoopsInRows` (RowFusion.h).

    Example:

    ```mlir
    scf.for %j = %c0 to %c4 step %c1 { store %e, %row[%c0, %j] }
    %s = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %z) { load %row[%c0, %j] ... }
    // becomes one scf.for storing and summing
    ```
  }];
}

def KilnCpuHoistRowBuffers
    : Pass<"kiln-cpu-hoist-row-buffers", "::mlir::func::FuncOp"> {
  let summary = "Row buffers of top-level parallel loops to the entry block";
  let description = [{
    Moves static `memref.alloca`s at the top level of the body of each
    top-level `scf.parallel` to the function's entry block: the function
    runs its loop's iterations one after another (the outlined body of a
    parallel loop runs one task's range), so one buffer serves them all and
    LLVM sees a fixed frame. See `hoistRowBuffers` (RowScratch.h).
  }];
}

def KilnCpuIeeeMinMax : Pass<"kiln-cpu-ieee-min-max"> {
  let summary = "arith.maximumf/minimumf to llvm.intr.maximum/minimum";
  let description = [{
    `arith-expand`, which the LLVM lowering needs for other ops, expands
    `arith.maximumf`/`minimumf` into compare-and-select chains that LLVM does
    not recognise as a reduction; the intrinsics mean the same (IEEE
    754-2019: NaN wins, -0 < +0) and LLVM vectorises reductions of them.

    Example:

    ```mlir
    %m = arith.maximumf %a, %b : f32
    // becomes
    %m = llvm.intr.maximum(%a, %b) : (f32, f32) -> f32
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def KilnCpuStridedCopies
    : Pass<"kiln-cpu-strided-copies", "::mlir::func::FuncOp"> {
  let summary = "memref.copy between non-contiguous memrefs as row copies or linalg.copy";
  let description = [{
    After bufferization, a `memref.copy` whose source or target is not
    contiguous (a slice of a concatenation, a strided view) would lower to
    a call of MLIR's generic runtime `memrefCopy`, which moves one element at
    a time. When both sides have unit-stride rows it becomes loops over the
    outer dimensions copying one row each (a contiguous `memref.copy`, which
    lowers to memcpy); otherwise a `linalg.copy` (parallel loops). Copies
    between two contiguous memrefs stay. See `stridedCopiesToRows`
    (CpuTransforms.h).

    Example:

    ```mlir
    memref.copy %a, %s : memref<2x4xf32> to memref<2x4xf32, strided<[8, 1]>>
    // becomes
    scf.for %i = %c0 to %c2 step %c1 {
      %r = memref.subview %a[%i, 0] [1, 4] [1, 1] : ...
      %t = memref.subview %s[%i, 0] [1, 4] [1, 1] : ...
      memref.copy %r, %t : ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // KILN_JIT_TARGETS_CPU_PASSES_TD
