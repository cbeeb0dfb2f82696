//===- Passes.td - kiln conversion passes ------------------*- tablegen -*-===//

#ifndef KILN_CONVERSION_PASSES_TD
#define KILN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnConvertToLinalg : Pass<"kiln-convert-to-linalg"> {
  let summary = "Lower kiln ops to linalg, tensor, arith and math on tensors";
  let description = [{
    Rewrites every kiln op into upstream ops on tensors: elementwise ops
    become `linalg.generic` with broadcasting indexing maps (so
    `linalg-fuse-elementwise-ops` merges chains into one generic), reductions
    `linalg.generic` reductions, matmul `linalg.matmul`/`linalg.batch_matmul`
    with broadcast batch dimensions made explicit, shape ops
    `tensor.expand_shape`/`collapse_shape`/`extract_slice`/`concat` and
    `linalg.transpose`, gathers `linalg.generic` with clamped
    `tensor.extract`, and random ops the counter-based hash of
    runtime/core/Random.h computed inline. `ui8` becomes signless `i8` (also
    in function signatures); f16 and bf16 compute in f32 per op. The
    semantics follow the runtime's interpreter bit for bit where it is
    deterministic.

    Example:

    ```mlir
    %0 = kiln.exp %x : tensor<4xf32>
    // becomes
    %e = tensor.empty() : tensor<4xf32>
    %0 = linalg.generic {...} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %1 = math.exp %in : f32
      linalg.yield %1 : f32
    } -> tensor<4xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // KILN_CONVERSION_PASSES_TD
