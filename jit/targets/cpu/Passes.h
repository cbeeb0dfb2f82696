//===- Passes.h - Kiln's own steps of the CPU pipeline as passes -*- C++ -*-===//
//
// Pass wrappers of the CPU pipeline's steps (Passes.td), registered in
// kiln-opt for the lit tests; the compiler calls the functions directly.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_PASSES_H
#define KILN_JIT_TARGETS_CPU_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace kiln::jit::cpu {

#define GEN_PASS_DECL
#include "jit/targets/cpu/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "jit/targets/cpu/Passes.h.inc"

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_PASSES_H
