//===- SpirvPipeline.cpp - Trace graphs to SPIR-V ------------------------===//

#include "jit/targets/spirv/SpirvPipeline.h"

#include <chrono>
#include <map>

#include "dialects/kiln/InitAll.h"
#include "jit/PipelineSupport.h"
#include "jit/targets/gpu/GpuLaunches.h"
#include "jit/targets/spirv/ZeroTripLoops.h"
#include "runtime/support/Settings.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Target/SPIRV/Target.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::jit::spirv {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// Capabilities every module has: the Kernel capability with physical
/// addressing and 64-bit indices, and the integer widths of Kiln's dtypes.
/// The target adds what its device offers beyond (Float16, Float64).
const mlir::spirv::Capability kBaseCapabilities[] = {
    mlir::spirv::Capability::Addresses, mlir::spirv::Capability::Int64, mlir::spirv::Capability::Int8,
    mlir::spirv::Capability::Int16, mlir::spirv::Capability::Kernel};

/// Fixes each kernel's work-group size (its dispatch's block) and marks it
/// an entry point. A kernel no launch uses (its launch folded away after
/// outlining) is dropped.
void setEntryPoints(mlir::gpu::GPUModuleOp module, const exec::CompileResult &result) {
  std::map<std::string, std::array<int64_t, 3>> blocks;
  for (const exec::KernelDispatch &d : result.dispatches)
    blocks[d.symbol] = d.block;
  llvm::SmallVector<mlir::gpu::GPUFuncOp> unused;
  module.walk([&](mlir::gpu::GPUFuncOp func) {
    auto it = blocks.find(func.getName().str());
    if (it == blocks.end()) {
      unused.push_back(func);
      return;
    }
    const int32_t size[3] = {static_cast<int32_t>(it->second[0]), static_cast<int32_t>(it->second[1]),
                             static_cast<int32_t>(it->second[2])};
    func->setAttr(mlir::spirv::getEntryPointABIAttrName(),
                  mlir::spirv::getEntryPointABIAttr(func.getContext(), size));
  });
  for (mlir::gpu::GPUFuncOp func : unused)
    func.erase();
}

class SpirvPipeline final : public TargetPipeline {
public:
  SpirvPipeline() {
    mlir::kiln::registerAllDialects(registry_);
    registry_.insert<mlir::gpu::GPUDialect, mlir::spirv::SPIRVDialect>();
    mlir::spirv::registerSPIRVTargetInterfaceExternalModels(registry_);
    mlir::kiln::registerAllPasses();
    mlir::registerGPUPasses();
    mlir::spirv::registerSPIRVPasses();
    mlir::registerSCFPasses();
  }

  /// One code generator effort: the driver (or the SPIR-V consumer) makes
  /// the machine code, so the result reports Full.
  exec::CompileResult compile(const trace::TraceGraph &graph, const std::string &name,
                              const exec::CompileTarget &target, exec::CodegenEffort) override {
    exec::CompileResult result;
    result.format = exec::BinaryFormat::Spirv;
    if (target.kind != exec::CompileTarget::Kind::Spirv) {
      result.error = "the SPIR-V pipeline needs a spirv target, not " + target.str();
      return result;
    }
    llvm::SmallVector<mlir::spirv::Capability> caps(std::begin(kBaseCapabilities), std::end(kBaseCapabilities));
    for (const std::string &c : target.capabilities) {
      auto cap = mlir::spirv::symbolizeCapability(c);
      if (!cap) {
        result.error = "spirv: unknown capability '" + c + "' in target " + target.str();
        return result;
      }
      caps.push_back(*cap);
    }
    std::string capList;  // spirv-attach-target's spelling: "Addresses,Int64,..."
    for (mlir::spirv::Capability cap : caps)
      capList += (capList.empty() ? "" : ",") + mlir::spirv::stringifyCapability(cap).str();
    CompileContext compile(registry_);
    mlir::MLIRContext &context = compile.context;
    const std::string &diagnostics = compile.diagnostics;
    gpu::LaunchOptions options;
    options.target = "spirv";
    options.sinkScratchViews = false;
    options.flatDynamicArguments = true;
    options.workgroupMemorySpace = mlir::spirv::StorageClassAttr::get(&context, mlir::spirv::StorageClass::Workgroup);
    auto module = gpu::lowerToGpuLaunches(context, graph, name, options, diagnostics, result);
    if (!module)
      return result;
    auto fail = [&](const std::string &stage) {
      result.error = "spirv: stage " + stage + " failed: " + diagnostics;
      result.object.clear();
      return result;
    };
    for (auto gpuModule : module->getOps<mlir::gpu::GPUModuleOp>()) {
      guardZeroTripLoopResults(gpuModule);
      setEntryPoints(gpuModule, result);
    }
    auto t2 = Clock::now();
    // Parallel loops left inside kernels (nested in a serial loop) run
    // serially in their thread. Views, reshapes and subviews inside kernels
    // fold into their loads and stores (SPIR-V pointers carry no layout).
    if (!runPassPipeline(*module, "gpu.module(scf-parallel-for-to-nested-fors,fold-memref-alias-ops,lower-affine,"
                                  "canonicalize,cse)"))
      return fail("memref folding");
    // convert-math-to-spirv picks OpenCL's extended instructions from the
    // nearest target environment: the top-level module's.
    module->getOperation()->setAttr(
        mlir::spirv::getTargetEnvAttrName(),
        mlir::spirv::TargetEnvAttr::get(mlir::spirv::VerCapExtAttr::get(mlir::spirv::Version::V_1_0, caps, {},
                                                                         &context),
                                        mlir::spirv::getDefaultResourceLimits(&context)));
    const std::string pipeline = "arith-expand{include-bf16=true},canonicalize,spirv-attach-target{ver=v1.0 caps=" +
                                 capList +
                                 "},map-memref-spirv-storage-class{client-api=opencl},convert-math-to-spirv,"
                                 "convert-gpu-to-spirv{use-64bit-index=true},"
                                 "gpu.module(spirv.module(spirv-lower-abi-attrs,spirv-update-vce))";
    if (!runPassPipeline(*module, pipeline.c_str()))
      return fail("spirv conversion");
    // gpu.barrier orders every memory access of the work-group (GPUOps.td);
    // the conversion orders workgroup memory only, and row kernels pass
    // rows between their threads through global memory too.
    module->walk([](mlir::spirv::ControlBarrierOp barrier) {
      barrier.setMemorySemantics(barrier.getMemorySemantics() | mlir::spirv::MemorySemantics::CrossWorkgroupMemory);
    });
    const std::string dumpDir = exec::irDumpDirectory();
    dumpModule(dumpDir, name, "spirv-6-spirv", *module);
    if (!runPassPipeline(*module, "gpu-module-to-binary{format=bin}"))
      return fail("spirv serialization");
    result.object = gpuBinaryObject(*module);
    dumpBytes(dumpDir, name, "spirv-7.spv", result.object);
    result.timings.llvmMs = msSince(t2);
    if (result.object.empty())
      return fail("serialization (no gpu.binary)");
    result.entry.clear();
    result.fingerprint = target.fingerprint();
    return result;
  }

private:
  mlir::DialectRegistry registry_;
};

} // namespace

std::unique_ptr<TargetPipeline> createSpirvPipeline() { return std::make_unique<SpirvPipeline>(); }

} // namespace kiln::jit::spirv
