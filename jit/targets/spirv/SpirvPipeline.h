//===- SpirvPipeline.h - Trace graphs to SPIR-V -----------------*- C++ -*-===//
//
// The SPIR-V pipeline (target kind Spirv, Level Zero): trace graphs to GPU
// kernels in one gpu.module (the front half all GPU targets share,
// GpuLaunches.h), lowered by MLIR's SPIR-V path for the Kernel capability
// (OpenCL memory model, physical 64-bit addressing, 64-bit indices, OpenCL
// extended instructions for math) into one SPIR-V module. Each kernel's
// work-group size is fixed in the module (LocalSize) and equals the block
// of its dispatch.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_SPIRV_SPIRVPIPELINE_H
#define KILN_JIT_TARGETS_SPIRV_SPIRVPIPELINE_H

#include <memory>

#include "jit/TargetPipeline.h"

namespace kiln::jit::spirv {

std::unique_ptr<TargetPipeline> createSpirvPipeline();

} // namespace kiln::jit::spirv

#endif // KILN_JIT_TARGETS_SPIRV_SPIRVPIPELINE_H
