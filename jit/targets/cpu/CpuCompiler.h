//===- CpuCompiler.h - Trace graphs to native host code ---------*- C++ -*-===//
//
// The CPU tier-1 pipeline (target kind HostCpu): kiln -> linalg -> fused
// loops -> scratch, GEMM calls, outlined parallel bodies -> LLVM dialect ->
// LLVM IR -> O2 (no unrolling) for the host CPU -> shared object (mapped by
// the runtime with dlopen).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_CPU_CPUCOMPILER_H
#define KILN_JIT_TARGETS_CPU_CPUCOMPILER_H

#include <memory>

#include "jit/TargetPipeline.h"

namespace kiln::jit::cpu {

std::unique_ptr<TargetPipeline> createCpuPipeline();

} // namespace kiln::jit::cpu

#endif // KILN_JIT_TARGETS_CPU_CPUCOMPILER_H
