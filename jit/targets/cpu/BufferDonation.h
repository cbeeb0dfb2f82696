//===- BufferDonation.h - Outputs that may reuse input buffers -*- C++ -*-===//
//
// Buffer donation: an optimizer step computes `w' = f(w, ...)` and the old
// `w` dies with the step. When the runtime owns the only reference to w's
// buffer it can pass that buffer for w' too, so a compiled step updates its
// parameters in place instead of allocating new ones each iteration. This
// analysis finds, on the bufferized kernel, the (output, input) pairs for
// which sharing one buffer cannot change any result.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_BUFFERDONATION_H
#define KILN_JIT_TARGETS_CPU_BUFFERDONATION_H

#include <cstdint>
#include <utility>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace kiln::jit::cpu {

/// (output index, input index) pairs of `kernel` (bufferized, with
/// `numInputs` input memrefs followed by `numOutputs` out-params) whose
/// buffers may be the same. A pair qualifies when one all-parallel
/// linalg op writes the whole output, reads the input only at the element it
/// writes (same indexing map), the input's value flows into that output, and
/// no other op reads the input after that op or writes the input at all.
/// Each input and output appears at most once.
std::vector<std::pair<uint32_t, uint32_t>> findDonations(mlir::func::FuncOp kernel, unsigned numInputs,
                                                         unsigned numOutputs);

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_BUFFERDONATION_H
