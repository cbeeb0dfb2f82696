//===- NvptxPipeline.cpp - Trace graphs to PTX -------------------------===//
//
// The shared GPU front half (GpuLaunches.h), then arith.remf to libdevice
// and gpu-lower-to-nvvm-pipeline for the target's SM and PTX versions.
//
//===----------------------------------------------------------------------===//

#include "jit/targets/nvptx/NvptxPipeline.h"

#include <chrono>
#include <cstdio>

#include "dialects/kiln/InitAll.h"
#include "jit/PipelineSupport.h"
#include "jit/targets/gpu/GpuLaunches.h"
#include "jit/targets/nvptx/Libdevice.h"
#include "runtime/support/Settings.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::jit::nvptx {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

class NvptxPipeline final : public TargetPipeline {
public:
  NvptxPipeline() {
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    mlir::kiln::registerAllDialects(registry_);
    registry_.insert<mlir::gpu::GPUDialect, mlir::NVVM::NVVMDialect, mlir::nvgpu::NVGPUDialect>();
    mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry_);
    mlir::registerBuiltinDialectTranslation(registry_);
    mlir::registerLLVMDialectTranslation(registry_);
    mlir::registerGPUDialectTranslation(registry_);
    mlir::registerNVVMDialectTranslation(registry_);
    mlir::kiln::registerAllPasses();
    mlir::registerGPUPasses();
    mlir::gpu::registerGPUToNVVMPipeline();
  }

  /// One code generator effort: the driver (or the SPIR-V consumer) makes
  /// the machine code, so the result reports Full.
  exec::CompileResult compile(const trace::TraceGraph &graph, const std::string &name,
                              const exec::CompileTarget &target, exec::CodegenEffort) override {
    exec::CompileResult result;
    result.format = exec::BinaryFormat::Ptx;
    if (target.kind != exec::CompileTarget::Kind::Nvptx || target.smVersion <= 0 || target.ptxVersion <= 0) {
      result.error = "the NVPTX pipeline needs an nvptx target with SM and PTX versions, not " + target.str();
      return result;
    }
    CompileContext compile(registry_);
    mlir::MLIRContext &context = compile.context;
    const std::string &diagnostics = compile.diagnostics;
    gpu::LaunchOptions options;
    options.target = "nvptx";
    auto module = gpu::lowerToGpuLaunches(context, graph, name, options, diagnostics, result);
    if (!module)
      return result;
    auto fail = [&](const std::string &stage) {
      result.error = "nvptx: stage " + stage + " failed: " + diagnostics;
      return result;
    };
    remainderToLibdevice(*module);
    const std::string dumpDir = exec::irDumpDirectory();
    char pipeline[256];
    std::snprintf(pipeline, sizeof pipeline,
                  "gpu-lower-to-nvvm-pipeline{cubin-chip=sm_%d cubin-features=+ptx%d cubin-format=isa "
                  "kernel-bare-ptr-calling-convention=true}",
                  target.smVersion, target.ptxVersion);
    auto t2 = Clock::now();
    if (!runPassPipeline(*module, pipeline))
      return fail("nvvm/ptx");
    dumpModule(dumpDir, name, "nvptx-6-binary", *module);
    result.object = gpuBinaryObject(*module);
    dumpBytes(dumpDir, name, "nvptx-7.ptx", result.object);
    result.timings.llvmMs = msSince(t2);
    if (result.object.empty())
      return fail("ptx (no gpu.binary)");
    result.entry.clear();
    result.fingerprint = target.fingerprint();
    return result;
  }

private:
  mlir::DialectRegistry registry_;
};

} // namespace

std::unique_ptr<TargetPipeline> createNvptxPipeline() { return std::make_unique<NvptxPipeline>(); }

} // namespace kiln::jit::nvptx
