//===- NvptxPipeline.h - Trace graphs to PTX --------------------*- C++ -*-===//
//
// The NVPTX pipeline (target kind Nvptx): trace graphs to GPU kernels in one
// gpu.module (the front half all GPU targets share, GpuLaunches.h), lowered
// to NVVM and serialised to PTX for the target's SM and PTX versions
// by LLVM's NVPTX back end (offline: no driver, no GPU). The result lists one
// dispatch per kernel with its grid, block and arguments.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_NVPTX_NVPTXPIPELINE_H
#define KILN_JIT_TARGETS_NVPTX_NVPTXPIPELINE_H

#include <memory>

#include "jit/TargetPipeline.h"

namespace kiln::jit::nvptx {

std::unique_ptr<TargetPipeline> createNvptxPipeline();

} // namespace kiln::jit::nvptx

#endif // KILN_JIT_TARGETS_NVPTX_NVPTXPIPELINE_H
