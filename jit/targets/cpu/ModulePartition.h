//===- ModulePartition.h - A kernel module in shares for threads -*- C++ -*-===//
//
// LLVM optimises and generates code for one module on one thread. A large
// kernel (a whole training step, cut into serial parts by SerialParts.h)
// compiles faster on several: this splits its LLVM-dialect module into
// clones that each define a share of its functions and declare the rest,
// each translated into an LLVM context of its own, optimised and compiled on
// its own thread, and linked back together into one shared object.
//
// Functions stay together where LLVM should inline one into the other: a
// function and the internal functions it calls directly (the entry and the
// kernel, a trampoline and its parallel body), except callees marked
// no_inline (the serial parts). A function another share references becomes
// external with hidden visibility (no symbol leaves the shared object);
// private constant globals are copied into every share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_MODULEPARTITION_H
#define KILN_JIT_TARGETS_CPU_MODULEPARTITION_H

#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln::jit::cpu {

/// Up to `count` clones of the LLVM-dialect `module` that together define
/// each of its functions once, balanced by size. Empty when the module does
/// not split (`count` < 2, a single group of functions, or a global that is
/// not a private constant): the caller compiles `module` whole.
std::vector<mlir::OwningOpRef<mlir::ModuleOp>> partitionModule(mlir::ModuleOp module, unsigned count);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_MODULEPARTITION_H
