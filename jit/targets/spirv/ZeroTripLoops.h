//===- ZeroTripLoops.h - scf.for results that SPIR-V keeps ------*- C++ -*-===//
//
// MLIR's SCF-to-SPIR-V conversion keeps an scf.for's results in variables its
// body stores, so a loop that runs zero times (a reduction over an axis of
// size 1, a matmul with K = 0) leaves them undefined: on the OpenCL driver a
// sum over a size-1 axis read 0. Used by the SPIR-V pipeline and the tier-0
// kernel generator (tools/kiln-gpu-kernels) before that conversion.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_SPIRV_ZEROTRIPLOOPS_H
#define KILN_JIT_TARGETS_SPIRV_ZEROTRIPLOOPS_H

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace kiln::jit::spirv {

/// After each scf.for with results in `module`, its results' uses read
/// select(upper > lower, result, init).
void guardZeroTripLoopResults(mlir::gpu::GPUModuleOp module);

} // namespace kiln::jit::spirv

#endif // KILN_JIT_TARGETS_SPIRV_ZEROTRIPLOOPS_H
