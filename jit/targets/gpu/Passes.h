//===- Passes.h - The GPU pipelines' own front-half steps ------*- C++ -*-===//
//
// The stages of GpuStages.h and DynamicArguments.h as passes (Passes.td),
// for kiln-opt and the lit tests in test/lit/Target/Gpu.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_GPU_PASSES_H
#define KILN_JIT_TARGETS_GPU_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::jit::gpu {

#define GEN_PASS_DECL
#include "jit/targets/gpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "jit/targets/gpu/Passes.h.inc"

} // namespace kiln::jit::gpu

#endif // KILN_JIT_TARGETS_GPU_PASSES_H
