//===- Passes.td - Kiln's own steps of the CPU pipeline -----*- tablegen -*-===//
//
// Kiln's own steps of the CPU pipeline (jit/targets/cpu). The compiler
// (CpuCompiler.cpp) runs them by name inside its textual pipelines
// (HostTarget.h); the steps that hand results back to it (the donated
// pairs, the scratch size, the parallel dispatches) record them as
// attributes of the kernel function (Passes.h), which it reads back.
// Each has a lit test named after it in test/lit/Target/Cpu.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_PASSES_TD
#define KILN_JIT_TARGETS_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnCpuFuseElementwise : Pass<"kiln-cpu-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "Fuse elementwise linalg producers that are read once per element";
  let description = [{
    Runs upstream's elementwise fusion, reshape folding by expansion and
    constant folding with Kiln's control: a producer is fused into a
    consumer only when the consumer reads each produced element once (its
    indexing map for it is a permutation), so a producer read through a
    broadcast is not recomputed per broadcast element, and named
    contractions (matmul, batch_matmul, fill) are never fused or
    generalised. See `fuseElementwiseOps` (ElementwiseFusion.h).

    Example:

    ```mlir
    %e = linalg.generic {exp} ins(%x) outs(%t0)
    %n = linalg.generic {negf} ins(%e) outs(%t1)
    // becomes one linalg.generic computing negf(exp(x))
    ```
  }];
}

def KilnCpuSplitFullReductions
    : Pass<"kiln-cpu-split-full-reductions", "::mlir::func::FuncOp"> {
  let summary = "Reductions of a whole tensor as parallel partial reductions";
  let description = [{
    Each `linalg.generic` on tensors that reduces all its loops (at least
    2^16 iterations, static extents, inputs read through identity maps, one
    result) has its loops merged into one, then upstream
    `linalg::splitReduction` splits it into a generic over [chunks,
    elements / chunks] whose chunk loop is parallel and a reduction of the
    chunks' partial results. See `splitFullReductions` (SplitReduction.h).

    Example:

    ```mlir
    %s = linalg.generic {indexing_maps = [(i, j) -> (i, j), (i, j) -> ()],
                         iterator_types = ["reduction", "reduction"]}
        ins(%x : tensor<512x512xf32>) outs(%zero : tensor<f64>) { ... }
    // becomes
    %p = linalg.generic {indexing_maps = [(c, i) -> (c, i), (c, i) -> (c)],
                         iterator_types = ["parallel", "reduction"]}
        ins(%x64x4096 : tensor<64x4096xf32>) outs(%partials : tensor<64xf64>) { ... }
    %s = linalg.generic {indexing_maps = [(c) -> (c), (c) -> ()], iterator_types = ["reduction"]}
        ins(%p : tensor<64xf64>) outs(%zero : tensor<f64>) { ... }
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
}

def KilnCpuDistinctResults
    : Pass<"kiln-cpu-distinct-results", "::mlir::func::FuncOp"> {
  let summary = "Give every result of the kernel a tensor of its own";
  let description = [{
    Bufferization to out-params needs each output buffer written exactly
    once: a value returned twice, a returned argument or a returned
    constant becomes a `linalg.copy` into a new `tensor.empty`, and a
    result computed into a `tensor.empty` that other ops share gets its
    own. See `makeResultsDistinct` (CpuTransforms.h).

    Example:

    ```mlir
    return %a, %a : tensor<4xf32>, tensor<4xf32>
    // becomes
    %c = linalg.copy ins(%a) outs(%e) -> tensor<4xf32>
    return %a, %c : tensor<4xf32>, tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"];
}

def KilnCpuBufferDonation
    : Pass<"kiln-cpu-buffer-donation", "::mlir::func::FuncOp"> {
  let summary = "Find the outputs that may share their buffer with an input";
  let description = [{
    An analysis of the bufferized kernel (`num-inputs` input memrefs then
    `num-outputs` out-params): the (output, input) pairs whose buffers the
    runtime may make one (an optimizer step's `w' = f(w, ...)` updates `w`
    in place). The pass records them as the function's `kiln.donations`
    attribute, one `array<i64: output, input>` per pair (`[]` when none),
    which the compiler hands to the runtime, and their arguments as
    `kiln.shared_args`, which `kiln-cpu-fuse-row-loops` reads. Arguments
    after the outputs (a dynamic-shape kernel's sizes) are not buffers.
    See `findDonations` (BufferDonation.h).

    Example:

    ```mlir
    func.func @k(%w: memref<4xf32>, %g: memref<4xf32>, %out: memref<4xf32>)
    // a linalg.generic reading %w and %g at the element it writes to %out:
    // attributes {kiln.donations = [array<i64: 0, 0>], kiln.shared_args = array<i64: 0, 2>}
    ```
  }];
  let options = [
    Option<"numInputs", "num-inputs", "unsigned", "0", "Input memrefs (the leading arguments)">,
    Option<"numOutputs", "num-outputs", "unsigned", "0", "Out-params (the arguments after the inputs)">,
  ];
}

def KilnCpuConvToRuntimeCalls
    : Pass<"kiln-cpu-conv-to-runtime-calls", "::mlir::ModuleOp"> {
  let summary = "f32 convolutions as calls of the runtime's implicit GEMM";
  let description = [{
    Rewrites each f32 `linalg.conv_2d_ngchw_gfchw` on memrefs into a call
    of `kiln_rt_conv2d_f32` (shape and strides of each operand as
    arguments); a zero fill of the output just before is dropped and a
    zero-padded copy of the input is replaced by the unpadded input and
    the paddings. Other convolutions stay. See `convToRuntimeCalls`
    (CpuTransforms.h).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def KilnCpuAssignScratch
    : Pass<"kiln-cpu-assign-scratch", "::mlir::func::FuncOp"> {
  let summary = "Temporaries as views of one scratch argument";
  let description = [{
    Replaces every static `memref.alloc` of the kernel by a
    `memref.view` into a new trailing `memref<Nxi8>` argument (the
    runtime's scratch buffer, 64-byte aligned slots), so kernels never
    call malloc; no argument is added when nothing is allocated. The pass
    records N as the `kiln.scratch_bytes` attribute. A temporary that is
    strided or allocated inside a loop is an error, and so is a dynamic one
    unless `dynamic-sizes` is set: then the kernel's trailing `index`
    arguments are its sizes, dynamic temporaries follow the static part and
    `kiln.dynamic_scratch` records how the runtime sizes them. See
    `assignScratch` (CpuTransforms.h).

    Example:

    ```mlir
    %t = memref.alloc() : memref<4xf32>
    // becomes, with a new argument %scratch: memref<64xi8>
    %t = memref.view %scratch[%c0][] : memref<64xi8> to memref<4xf32>
    ```
  }];
  let options = [
    Option<"dynamicSizes", "dynamic-sizes", "bool", "false",
           "A dynamic-shape kernel: temporaries may be sized by its size arguments">,
    Option<"shareDistance", "share-distance", "int64_t", "-1",
           "When >= 0: static temporaries whose lives (their top-level "
           "operations from first to last use, through views and taken "
           "addresses) do not come within this many operations with memory "
           "effects of each other share bytes">,
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect"];
}

def KilnCpuMatmulToRuntimeCalls
    : Pass<"kiln-cpu-matmul-to-runtime-calls", "::mlir::ModuleOp"> {
  let summary = "f32 and bf16 matmuls as calls of the runtime's packed GEMMs (and index_adds of its scatter-add)";
  let description = [{
    Rewrites `linalg.matmul` and `linalg.batch_matmul` on memrefs of f32 (or
    bf16 operands into f32) into calls of `kiln_rt_matmul_f32`
    (`kiln_rt_matmul_bf16`), declared once in the module; other element types
    stay linalg ops (they become loops). A zero-filled f32 2-D result that is
    a temporary (or the consumer's own output, computed in place) and whose
    only reader is its consumer (the next op with memory effects, reading C
    or C's rows expanded to a higher rank), an elementwise constant scale,
    bias add, residual add (a matrix of C's shape) and/or ReLU into another
    buffer, is computed into that buffer by
    `kiln_rt_matmul_epilogue_f32`, which applies them to each tile as the
    GEMM finishes it; after bf16 operands the consumer may also round the
    result (or its epilogue) to bf16, and
    `kiln_rt_matmul_epilogue_bf16` rounds each block of C as it finishes it,
    so that no f32 C is written. An f32 operand that a cast from bf16 or
    f16 wrote into a temporary only the matmul reads is replaced by the half
    buffer, which the GEMM widens as it packs it
    (`kiln_rt_matmul_widening_f32`, or the epilogue call's operand flags):
    no cast loop and no f32 copy. See `matmulToRuntimeCalls`
    (CpuTransforms.h). The generics of kiln.index_add (marked
    `kiln.index_add = axis`) become calls of `kiln_rt_index_add`, those of
    kiln.cumsum (`kiln.cumsum = axis`) calls of `kiln_rt_cumsum` (see
    `runtimeCallGenericsToCalls`).
  }];
  let options = [
    Option<"numInputs", "num-inputs", "unsigned", "0",
           "The kernel's input buffers, its first arguments (kiln.donations counts outputs after them); "
           "0: unknown, and an output that may take an input's buffer gets no residual epilogue">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def KilnCpuApproximateMath
    : Pass<"kiln-cpu-approximate-math", "::mlir::ModuleOp"> {
  let summary = "f32 tanh, exp, log, erf, ... as polynomials LLVM vectorises";
  let description = [{
    Upstream's polynomial approximation patterns of the math dialect: the
    f32 functions become arith polynomials (libm calls would stay scalar).
    f64 math stays. f32 exp scales its polynomial by 2^k without flushing
    denormal results (upstream clamps k to [-127, 127]): with `scalef` (CPUs
    with AVX-512) by `llvm.intr.ldexp`, one vscalefps that also saturates to
    0 and infinity; elsewhere by 2^(k/2) and then 2^(k - k/2), each built
    from its bits. See `approximateMath` (CpuTransforms.h).
  }];
  let options = [Option<"scalef", "scalef", "bool", /*default=*/"false",
                        "exp scales by 2^k with llvm.intr.ldexp (vscalefps on AVX-512)">];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect", "::mlir::LLVM::LLVMDialect"];
}

def KilnCpuOrderReductionLoops
    : Pass<"kiln-cpu-order-reduction-loops", "::mlir::func::FuncOp"> {
  let summary = "Reductions' kept loops outside their reduced loops; adjacent reduced loops merged";
  let description = [{
    Each bufferized `linalg.generic` whose innermost loop is a reduction and
    that has a parallel loop after a reduction loop is interchanged: its
    parallel loops first, then its reduction loops, each in their order.
    Adjacent reduction loops that all indexing maps keep adjacent are then
    merged when every operand is a static memref with the identity layout.
    A per-channel sum over [N, C, H, W] then runs as one parallel loop over
    channels around long contiguous sums, instead of a parallel launch per
    image over rows of W. See `orderReductionLoops` (ReductionOrder.h).

    Example:

    ```mlir
    linalg.generic {indexing_maps = [(n, c, h, w) -> (n, c, h, w), (n, c, h, w) -> (c)],
                    iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
        ins(%x : memref<16x64x56x56xf32>) outs(%acc : memref<64xf64>)
    // becomes
    linalg.generic {indexing_maps = [(c, n, hw) -> (n, c, hw), (c, n, hw) -> (c)],
                    iterator_types = ["parallel", "reduction", "reduction"]}
        ins(%collapsed : memref<16x64x3136xf32>) outs(%acc : memref<64xf64>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::memref::MemRefDialect"];
}

def KilnCpuPromoteAccumulators
    : Pass<"kiln-cpu-promote-accumulators", "::mlir::ModuleOp"> {
  let summary = "Reduction accumulators in memory as scf.for iteration arguments";
  let description = [{
    In each `scf.for` whose body loads one element at loop-invariant
    indices and stores back to it, with no other access that may overlap,
    loads it once before the loop, carries it as an iteration argument and
    stores it once after; a sum into a wider accumulator is marked
    reassociable. See `promoteReductionAccumulators` (ScalarPromotion.h).

    Example:

    ```mlir
    scf.for %j = %c0 to %c4 step %c1 {
      %a = memref.load %acc[%i] ; %s = arith.addf %a, %x ; memref.store %s, %acc[%i]
    }
    // becomes
    %init = memref.load %acc[%i]
    %r = scf.for %j = ... iter_args(%a = %init) -> (f32) { ... scf.yield %s }
    memref.store %r, %acc[%i]
    ```
  }];
}

def KilnCpuHoistInvariantLoads
    : Pass<"kiln-cpu-hoist-invariant-loads", "::mlir::ModuleOp"> {
  let summary = "Split multi-dimensional parallel loops; hoist invariant loads";
  let description = [{
    Turns each top-level multi-dimensional `scf.parallel` into a parallel
    loop over its first dimension around `scf.for` loops over the others,
    then moves loads at loop-invariant indices out of each innermost
    `scf.for` when nothing in the loop may store to them (softmax's row
    max). See `hoistInvariantLoads` (ScalarPromotion.h).
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def KilnCpuFuseRowLoops
    : Pass<"kiln-cpu-fuse-row-loops", "::mlir::func::FuncOp"> {
  let summary = "Merge adjacent parallel loops over the same rows";
  let description = [{
    Merges adjacent top-level one-dimensional `scf.parallel` loops with
    equal constant bounds when every pair of accesses of the two bodies
    that may conflict touches only the row of the current iteration (the
    loop's variable as first index of views that split the same bytes
    into the same rows). Arguments listed in `shared-args` or in the
    function's `kiln.shared_args` (donated pairs, from
    `kiln-cpu-buffer-donation`) may alias one another when they have one
    type, and then only as whole buffers: their rows of the same bytes are
    the same rows. Loads and stores between the loops that touch nothing
    the first writes (nor write what it reads) move before it. See
    `fuseRowLoops` (RowFusion.h).

    Example:

    ```mlir
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) { row max into %m[%i] }
    scf.parallel (%i) = (%c0) to (%c8) step (%c1) { reads %m[%i], writes %o[%i, ...] }
    // becomes one scf.parallel whose body runs both
    ```
  }];
  let options = [
    ListOption<"sharedArgs", "shared-args", "unsigned",
               "Kernel arguments that the runtime may pass one buffer for">,
  ];
}

def KilnCpuOutlineParallelLoops
    : Pass<"kiln-cpu-outline-parallel-loops", "::mlir::ModuleOp"> {
  let summary = "Top-level parallel loops as bodies the runtime's pool runs";
  let description = [{
    Moves each top-level `scf.parallel` of the kernel `kernel` that starts
    at 0 by 1 and does enough work into a function
    `<kernel>_par<i>(begin, end, kernel args it reads...)`, and calls a
    declaration `__kiln_parallel_<i>(n, the same args...)` in its place;
    small loops stay inline. The body's `kiln.kernel_args` lists which
    kernel arguments it takes. The pass records the dispatches on the kernel as
    `kiln.dispatches = {__kiln_parallel_<i> = @<kernel>_par<i>, ...}`, the
    number of loop nests and runtime calls as `kiln.loop_nests`, and each
    dispatch's grain as the body's `kiln.grain` attribute. See
    `outlineParallelLoops` (CpuTransforms.h).
  }];
  let options = [
    Option<"kernel", "kernel", "std::string", "\"\"", "The kernel function (default: the first defined function)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def KilnCpuOutlineSerialParts
    : Pass<"kiln-cpu-outline-serial-parts", "::mlir::ModuleOp"> {
  let summary = "A large kernel's serial code as parts the kernel calls";
  let description = [{
    Moves runs of the kernel `kernel`'s top-level operations (loops, runtime
    calls, dispatches) of at least `part-ops` nested operations each into
    private functions `<kernel>_part<i>(kernel args it reads..., live-ins...)`
    (`kiln.kernel_args`: which kernel arguments) that the kernel calls in
    their place, in order. A run ends only where no
    value it defines is read after it; pure operations without regions
    (constants, views) stay and are cloned into the parts that read them;
    stack buffers and scalars become extra arguments. Kernels under
    2 * `part-ops` operations stay whole. LLVM optimises and generates code
    for a large kernel faster in parts (its costs grow faster than a
    function's size), and parts can be compiled on several threads. The pass
    records the parts on the kernel as
    `kiln.serial_parts = [@<kernel>_part0, ...]`. See `outlineSerialParts`
    (SerialParts.h).

    Example (`part-ops=4`):

    ```mlir
    func.func @kernel(%x: memref<8xf32>, %y: memref<8xf32>) {
      scf.for ... { x[i] = x[i] * 2 }   // 6 ops
      scf.for ... { y[i] = x[i] + 1 }   // 6 ops
      return
    }
    // becomes
    func.func @kernel(%x: memref<8xf32>, %y: memref<8xf32>)
        attributes {kiln.serial_parts = [@kernel_part0, @kernel_part1]} {
      call @kernel_part0(%x, %y)
      call @kernel_part1(%x, %y)
      return
    }
    ```
  }];
  let options = [
    Option<"kernel", "kernel", "std::string", "\"\"", "The kernel function (default: the first defined function)">,
    Option<"partOps", "part-ops", "int64_t", "400", "Nested operations a part holds at least">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

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
    When it moved some, a `kiln.scratch_bytes` attribute (from
    `kiln-cpu-assign-scratch`) shrinks to the bytes still addressed. See
    `localizeRowScratch` (RowScratch.h).

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
    instead of two. Arguments listed in `shared-args` or in the function's
    `kiln.shared_args` (donated pairs) may be one buffer: their accesses
    conflict too. See `fuseLoopsInRows` (RowFusion.h).

    Example:

    ```mlir
    scf.for %j = %c0 to %c4 step %c1 { store %e, %row[%c0, %j] }
    %s = scf.for %j = %c0 to %c4 step %c1 iter_args(%a = %z) { load %row[%c0, %j] ... }
    // becomes one scf.for storing and summing
    ```
  }];
  let options = [
    ListOption<"sharedArgs", "shared-args", "unsigned",
               "Kernel arguments that the runtime may pass one buffer for">,
  ];
}

def KilnCpuRowBuffersIntoOutputs
    : Pass<"kiln-cpu-row-buffers-into-outputs", "::mlir::func::FuncOp"> {
  let summary = "Row buffers written where their last reader stores them";
  let description = [{
    After `kiln-cpu-fuse-loops-in-rows`: a row buffer whose last reader
    loads element j and stores element j of the same row of an output
    (softmax's exp row, scaled into the result; layer_norm's centred row)
    becomes that output row, when nothing else in the row loop may touch the
    output's bytes. Arguments listed in `shared-args` or in the function's
    `kiln.shared_args` (donated pairs) may alias one another. The exp row's
    store then brings the output's lines into the cache while the loop
    computes, instead of a copy loop stalled on write misses. A buffer whose
    output store is `nontemporal` (`kiln-cpu-streaming-stores`, which runs
    first) stays: the last loop streams the row out of it. See
    `rowBuffersIntoOutputs` (RowScratch.h).

    Example:

    ```mlir
    scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
      %row = memref.alloca() : memref<16xi8>
      %e = memref.view %row[%c0][] : memref<16xi8> to memref<1x4xf32>
      scf.for %j { store %w, %e[%c0, %j] }
      scf.for %j { %v = load %e[%c0, %j]; store %v * %s, %out[%i, %j] }
    }
    // becomes
    scf.parallel (%i) = (%c0) to (%c2) step (%c1) {
      scf.for %j { store %w, %out[%i, %j] }
      scf.for %j { %v = load %out[%i, %j]; store %v * %s, %out[%i, %j] }
    }
    ```
  }];
  let options = [
    ListOption<"sharedArgs", "shared-args", "unsigned",
               "Kernel arguments that the runtime may pass one buffer for">,
  ];
}

def KilnCpuBlockWideSums
    : Pass<"kiln-cpu-block-wide-sums", "::mlir::func::FuncOp"> {
  let summary = "f32 terms of f64 sums added in f32 blocks, widened once per block";
  let description = [{
    An innermost `scf.for` (constant bounds, step 1, at least two blocks)
    that carries an f64 sum of widened f32 terms (`arith.addf` with
    `reassoc` of the accumulator and an `arith.extf` from f32, yielded back)
    becomes a loop over blocks (`block` iterations, or half of that, and
    so on down to `min-block`: the largest that the loop holds twice and
    that leaves fewer than `min-block` iterations after its last whole
    block) whose inner loop sums
    the terms in f32 from zero; the outer loop adds each block's widened sum
    to the f64 accumulator. Other carried values pass through the inner
    loop; iterations past the last whole block run in a copy of the loop.
    See `blockWideSums` (BlockedWideSums.h).

    Example:

    ```mlir
    %s = scf.for %j = %c0 to %c256 step %c1 iter_args(%a = %zero) -> (f64) {
      %w = arith.extf %v : f32 to f64
      %n = arith.addf %a, %w fastmath<reassoc> : f64
      scf.yield %n : f64
    }
    // becomes
    %s = scf.for %b = %c0 to %c256 step %c64 iter_args(%a = %zero) -> (f64) {
      %p = scf.for %k = %c0 to %c64 step %c1 iter_args(%q = %zero32) -> (f32) {
        %n = arith.addf %q, %v fastmath<reassoc> : f32
        scf.yield %n : f32
      }
      %w = arith.extf %p : f32 to f64
      %n = arith.addf %a, %w fastmath<reassoc> : f64
      scf.yield %n : f64
    }
    ```
  }];
  let options = [
    Option<"block", "block", "int64_t", "256", "Most iterations summed in f32 before widening">,
    Option<"minBlock", "min-block", "int64_t", "64",
           "Fewest: a loop takes the largest of block, block / 2, ... down to min-block that it holds twice "
           "with fewer than min-block iterations left after the last whole block">,
  ];
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

def KilnCpuFoldMatmulTransposes
    : Pass<"kiln-cpu-fold-matmul-transposes", "::mlir::func::FuncOp"> {
  let summary = "Matmuls read transposed operands through views instead of copies";
  let description = [{
    On the bufferized kernel, before buffer donation: an f32 `linalg.matmul`
    or `batch_matmul` operand that is a temporary filled by a
    `linalg.transpose` of its last two dimensions becomes a
    `memref.transpose` view of the transpose's source, and the copy goes,
    when nothing in between touches the temporary or writes the source and
    nothing after the matmul reads what the copy wrote. The runtime GEMM
    reads any strides. See `foldTransposesIntoMatmuls` (TransposeFolding.h).

    Example:

    ```mlir
    %t = memref.alloc() : memref<4x8xf32>
    linalg.transpose ins(%w : memref<8x4xf32>) outs(%t : memref<4x8xf32>) permutation = [1, 0]
    linalg.matmul ins(%x, %t : memref<2x4xf32>, memref<4x8xf32>) outs(%y : memref<2x8xf32>)
    // becomes
    %v = memref.transpose %w (d0, d1) -> (d1, d0) : memref<8x4xf32> to memref<4x8xf32, strided<[1, 4]>>
    linalg.matmul ins(%x, %v : memref<2x4xf32>, memref<4x8xf32, strided<[1, 4]>>) outs(%y : memref<2x8xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def KilnCpuMarkParallelLoops : Pass<"kiln-cpu-mark-parallel-loops"> {
  let summary = "Annotate innermost loops whose iterations touch disjoint elements as parallel";
  let description = [{
    A donated buffer pair (kiln-cpu-buffer-donation) makes two kernel
    arguments alias, so LLVM guards loops over them with a runtime overlap
    check that an in-place update always fails, and runs them as scalar
    code. Each innermost `scf.for` with a straight-line body whose stores
    each write one element per iteration (the loop's variable is an index,
    the other indices come from outside the loop), and whose other accesses
    that may overlap a store (another argument included) are to the same
    element in the same iteration, gets an `llvm.loop_annotation` with a
    parallel access group of its own. kiln-cpu-tag-parallel-accesses
    completes it after the lowering to LLVM. With `f32-lanes`, a marked
    loop over f32 data that carries an f64 sum (Kiln sums f32 in f64) also
    asks for that vector width, which LLVM would otherwise size by the f64
    sum. An element loop whose body is one long dependence chain (32 to
    200 float operations, no loop-carried value) also asks LLVM to
    interleave four vector iterations (eight with `f32-lanes` 16, two above
    64 operations). An innermost scf.parallel without
    reductions (the element loop of an outlined parallel body) first
    becomes the scf.for nest that convert-scf-to-cf would make of it, so
    that it can be annotated (scf-to-cf drops a parallel loop's
    attributes). See
    `markParallelLoops` (ParallelLoops.h).

    Example:

    ```mlir
    scf.for %j = %c0 to %c4 step %c1 {
      %p = memref.load %param[%i, %j] : memref<2x4xf32>
      memref.store %q, %updated[%i, %j] : memref<2x4xf32>
    } {llvm.loop_annotation = #llvm.loop_annotation<parallelAccesses = #group>}
    ```
  }];
  let options = [Option<"f32Lanes", "f32-lanes", "unsigned", /*default=*/"0",
                        "Vector lanes for f32 loops with an f64 sum (0: LLVM's choice)">];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def KilnCpuVectorizeParallelLoops : Pass<"kiln-cpu-vectorize-parallel-loops"> {
  let summary = "Rewrite parallel element loops of static length as loops over vectors";
  let description = [{
    LLVM's loop vectoriser cost a third of a first compile's time from a hot
    trace to its kernel, for loops Kiln knows to be parallel, of static
    length and contiguous. Each innermost `scf.for` that
    kiln-cpu-mark-parallel-loops marked parallel, carries no value, runs
    from a constant to a constant by 1 a multiple of `lanes` times, and
    whose body holds only loads and stores where the loop's variable
    indexes a dimension of unit stride followed only by dimensions of size 1
    (other indices uniform; elements of whole bytes; no `nontemporal`
    store), loads of uniform indices, prefetches indexed like the loads, and
    elementwise arith and math ops, becomes a loop over vectors of `lanes`
    elements (times the annotation's interleave count where the length
    divides and the loop has no prefetch). Uniform values stay scalar and are
    broadcast; the loop's annotation gains `isVectorized`, so LLVM's
    vectoriser skips it. See `vectorizeParallelLoops` (VectorizeLoops.h).

    Example (lanes=16):

    ```mlir
    scf.for %j = %c0 to %c128 step %c16 {
      %a = vector.load %x[%i, %j] : memref<4x128xf32>, vector<16xf32>
      %s = arith.mulf %a, %lr16 : vector<16xf32>
      vector.store %s, %y[%i, %j] : memref<4x128xf32>, vector<16xf32>
    } {llvm.loop_annotation = #llvm.loop_annotation<isVectorized = true, parallelAccesses = #group>}
    ```
  }];
  let options = [Option<"lanes", "lanes", "unsigned", /*default=*/"16",
                        "Vector lanes (the f32 lanes of the target's widest vectors)">];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::vector::VectorDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def KilnCpuConvertToLLVM : Pass<"kiln-cpu-convert-to-llvm", "::mlir::ModuleOp"> {
  let summary = "arith, index, memref, func (bare pointers) and cf to the LLVM dialect in one conversion";
  let description = [{
    The patterns of convert-arith-to-llvm, convert-index-to-llvm,
    finalize-memref-to-llvm, convert-func-to-llvm with
    `use-bare-ptr-memref-call-conv` and convert-cf-to-llvm, applied in one
    dialect conversion: one walk of the module instead of five, each of
    which visited every operation of a large trace's kernel to find the few
    of its dialect. The lowering to LLVM of the 889-op transformer step's
    loops took 120-189 ms instead of 212-285 ms (kiln-opt, three
    alternating runs; the same IR comes out). Math, SCF and affine operations must
    have been lowered before (convert-math-to-llvm, convert-math-to-libm,
    convert-scf-to-cf, lower-affine); reconcile-unrealized-casts follows.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def KilnCpuFoldDescriptors : Pass<"kiln-cpu-fold-descriptors", "::mlir::ModuleOp"> {
  let summary = "Fold memref descriptor reads and drop the unused descriptors";
  let description = [{
    On the LLVM dialect, after the lowering: each `llvm.extractvalue` of a
    chain of `llvm.insertvalue`s (a memref descriptor the lowering built)
    becomes the value inserted at its position, and the pure operations
    left without users (the descriptors of the many arguments a kernel part
    never reads, their constants) go. One walk each, where canonicalize
    would try every pattern on every operation. The lowered 889-op
    transformer step shrinks from 20,300 to 8,200 lines (the pass takes
    7 ms). With kiln-cpu-convert-to-llvm, the step's single-core compile
    went from 751 to 716 ms (medians of 18 alternating runs against the
    pipeline before both; their spread was larger than the gain).
  }];
}

def KilnCpuTagParallelAccesses : Pass<"kiln-cpu-tag-parallel-accesses"> {
  let summary = "Put a parallel loop's access group on its memory accesses";
  let description = [{
    On the LLVM dialect: moves the `llvm.loop_annotation` that the lowering
    leaves on a loop's back-edge `llvm.br` into the branch's loop annotation
    and adds the annotation's parallel access groups to every load, store
    and call in the loop's blocks (the header and the blocks that reach the
    back edge without passing through it); LLVM treats a loop as parallel
    only when all its memory accesses are in the group. See
    `tagParallelAccesses` (ParallelLoops.h).
  }];
}

def KilnCpuStreamingStores
    : Pass<"kiln-cpu-streaming-stores", "::mlir::func::FuncOp"> {
  let summary = "Mark the stores into large outputs the kernel never reads non-temporal";
  let description = [{
    On the kernel's loops (`num-inputs` input memrefs, then `num-outputs`
    out-params), if those memrefs take at least `min-footprint-bytes` in
    all: an out-param of static shape and at least `min-bytes`
    bytes whose every use, through view-like ops, is the memref of a
    `memref.store` gets those stores marked `nontemporal` (they write its
    lines without reading them first); in a loop body of more than 24
    operations only where its vectors can be aligned (a rank-1 memref, or
    rows of whole 64-byte lines). See `markStreamingStores`
    (StreamingStores.h).

    Example:

    ```mlir
    func.func @k(%x: memref<16777216xf32>, %out: memref<16777216xf32>)
    // memref.store %v, %out[%i] becomes
    memref.store %v, %out[%i] {nontemporal = true} : memref<16777216xf32>
    ```
  }];
  let options = [
    Option<"numInputs", "num-inputs", "unsigned", "0", "Input memrefs (the leading arguments)">,
    Option<"numOutputs", "num-outputs", "unsigned", "0", "Out-params (the arguments after the inputs)">,
    Option<"minBytes", "min-bytes", "int64_t", "::kiln::jit::cpu::kStreamingOutputBytes",
           "Smallest output written with streaming stores">,
    Option<"minFootprintBytes", "min-footprint-bytes", "int64_t", "0",
           "Smallest total of the kernel's static input and output memrefs for any store to stream "
           "(the compiler passes streamingFootprintBytes of the host's last-level cache)">,
  ];
}

def KilnCpuPrefetchNextRows : Pass<"kiln-cpu-prefetch-next-rows", "::mlir::func::FuncOp"> {
  let summary = "Prefetch the next row during a row kernel's heaviest later pass";
  let description = [{
    In a loop over rows (a one-dimensional `scf.parallel` whose body holds
    two or more `scf.for` nests, its passes over a row): in the innermost
    loop of the pass after the first with the most operations, each load
    from a function argument the function never writes, indexed by the row
    first, of static shape with rows of at least `min-row-bytes`, gets a
    prefetch of the same element of the next row before it (the last row
    prefetches itself). The row's first pass then finds it in cache. See
    `prefetchNextRows` (NextRowPrefetch.h).

    Example:

    ```mlir
    scf.parallel (%r) = (%lo) to (%hi) step (%c1) {
      scf.for %j ... { ... memref.load %x[%r, %j] ... }   // row max
      scf.for %j ... {                                     // exp and sum
        // added: %n = min(%r + 1, 4095)
        memref.prefetch %x[%n, %j], read, locality<3>, data : memref<4096x1024xf32>
        %v = memref.load %x[%r, %j] : memref<4096x1024xf32>
        ...
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect"];
  let options = [
    Option<"minRowBytes", "min-row-bytes", "int64_t", "::kiln::jit::cpu::kPrefetchMinRowBytes",
           "Smallest row whose next row is prefetched">,
  ];
}

#endif // KILN_JIT_TARGETS_CPU_PASSES_TD
