//===- GpuLaunches.h - Trace graphs to outlined GPU kernels -----*- C++ -*-===//
//
// The front half every GPU pipeline shares (NVPTX, SPIR-V): the CPU
// pipeline's front half (kiln -> linalg, elementwise fusion, bufferization,
// scratch), then parallel loops tiled onto blocks and threads, the serial
// rest as one-thread launches, kernels outlined into one gpu.module, and the
// host function read back as the list of launches (exec::KernelDispatch).
// Each pipeline then lowers the gpu.module to its binary.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETS_GPU_GPULAUNCHES_H
#define KILN_JIT_TARGETS_GPU_GPULAUNCHES_H

#include <string>

#include "runtime/exec/Executable.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace kiln::jit::gpu {

struct LaunchOptions {
  /// "nvptx", "spirv": prefixes messages and IR dump stages.
  const char *target = "gpu";
  /// Views into the scratch buffer move into the kernels (LLVM lowers
  /// memref.view of the byte buffer), or stay on the host as launch
  /// arguments of their own element type (SPIR-V has no untyped pointers).
  bool sinkScratchViews = true;
  /// Where a kernel's workgroup (shared) memory comes from. Null: a
  /// workgroup attribution of the launch, in #gpu.address_space<workgroup>
  /// (NVVM: shared memory). Else a memref.alloc in this memory space at the
  /// top of the kernel (SPIR-V converts it to a Workgroup variable, and
  /// converts no workgroup attributions).
  mlir::Attribute workgroupMemorySpace;
  /// Dynamic-shape kernels: N-D buffers of dynamic extents as 1-D memrefs
  /// expanded where used (DynamicArguments.h: SPIR-V), or as bare pointers
  /// reinterpreted with their sizes (NVPTX).
  bool flatDynamicArguments = false;
};

/// Imports `graph` as "kernel_<name>" and lowers it to launches of kernels
/// in one gpu.module. On success fills `result`'s dispatches, scratchBytes,
/// kernelCount and importMs/lowerMs, and for a graph with dynamic extents
/// its dynamicSizes, dynamicScratch and launchProgram; on failure returns null with
/// `result.error` (what stage failed, with `diagnostics`: the text the
/// caller's diagnostic handler collected).
mlir::OwningOpRef<mlir::ModuleOp> lowerToGpuLaunches(mlir::MLIRContext &context, const trace::TraceGraph &graph,
                                                     const std::string &name, const LaunchOptions &options,
                                                     const std::string &diagnostics, exec::CompileResult &result);

} // namespace kiln::jit::gpu

#endif // KILN_JIT_TARGETS_GPU_GPULAUNCHES_H
