//===- Libdevice.h - Calls into CUDA's libdevice for NVVM -------*- C++ -*-===//
//
// Arith ops the NVVM lowering has no pattern for, rewritten to calls of
// libdevice functions (linked in by gpu-module-to-binary). Shared by the
// NVPTX pipeline and the tier-0 kernel generator (tools/kiln-gpu-kernels).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_NVPTX_LIBDEVICE_H
#define KILN_JIT_TARGETS_NVPTX_LIBDEVICE_H

#include "mlir/IR/BuiltinOps.h"

namespace kiln::jit::nvptx {

/// arith.remf (f32, f64) inside gpu.modules becomes a call of libdevice's
/// fmod (__nv_fmodf, __nv_fmod).
void remainderToLibdevice(mlir::ModuleOp module);

} // namespace kiln::jit::nvptx

#endif // KILN_JIT_TARGETS_NVPTX_LIBDEVICE_H
