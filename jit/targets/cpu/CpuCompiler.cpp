//===- CpuCompiler.cpp - Trace graphs to native host code -------*- C++ -*-===//

#include "jit/targets/cpu/CpuCompiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <unistd.h>

#include "dialects/kiln/InitAll.h"
#include "jit/Importer.h"
#include "jit/PipelineSupport.h"
#include "jit/targets/cpu/BoolBytes.h"
#include "jit/targets/cpu/CodegenGate.h"
#include "jit/targets/cpu/CpuTransforms.h"
#include "jit/targets/cpu/DynamicKernel.h"
#include "jit/targets/cpu/FirstLaneScalars.h"
#include "jit/targets/cpu/HostTarget.h"
#include "jit/targets/cpu/ModulePartition.h"
#include "jit/targets/cpu/Passes.h"
#include "jit/targets/cpu/ScratchLayout.h"
#include "jit/targets/cpu/SharedObjectLinker.h"
#include "jit/targets/cpu/NextRowPrefetch.h"
#include "jit/targets/cpu/StreamingStores.h"
#include "jit/targets/cpu/X86VectorIdioms.h"
#include "runtime/cache/HostFingerprint.h"
#include "runtime/exec/CompileQueue.h"
#include "runtime/support/HostCaches.h"
#include "runtime/support/Settings.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::jit::cpu {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// This machine's physical memory in bytes.
uint64_t hostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && pageSize > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageSize) : UINT64_MAX;
}

/// Why the graph's kernel could not run here: a live output the runtime
/// would have to allocate densely beyond this machine's memory (the
/// interpreter keeps a constant as one element broadcast by stride 0, so
/// such a trace still runs there). "" when there is none.
std::string oversizedOutput(const trace::TraceGraph &graph) {
  const uint64_t limit = hostMemoryBytes();
  for (size_t j = 0; j < graph.outputs.size(); ++j) {
    const trace::Node &n = graph.nodes[graph.outputs[j]];
    uint64_t bytes = dtype_size(n.dtype);
    bool overflow = false;
    for (int64_t d : n.shape)
      if (d > 0)
        overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
    if (overflow || bytes > limit)
      return "output " + std::to_string(j) + " (" + std::string(dtype_name(n.dtype)) + n.shape.str() +
             ") would be a dense kernel output of " + (overflow ? std::string("more than 2^64") : std::to_string(bytes)) +
             " bytes, more than this machine's " + std::to_string(limit) +
             " bytes of memory; the trace runs interpreted";
  }
  return {};
}

/// f32 lanes of the target's widest vectors: 16 with AVX-512, else 8.
unsigned f32VectorLanes(const llvm::TargetMachine &targetMachine) {
  return hasAvx512(targetMachine.getTargetFeatureString()) ? 16 : 8;
}

/// Threads a large kernel's shares compile on: one per core, at most 4 (the
/// kernels split into few groups), for a compile in the user's thread
/// (KILN_JIT=sync, warm-up). A background compile thread runs at the lowest
/// priority (CompileQueue.h), and so would its helpers, which its governor
/// does not raise: a helper starved by the user's threads would hold the
/// compile up for as long as they keep the cores busy. Background compiles
/// stay on their one thread.
unsigned shareThreads() {
  if (exec::onCompileQueueThread())
    return 1;
  return std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
}

/// Runs work(0), ..., work(count - 1) at once: the last on this thread, the
/// others on threads of their own (which inherit this thread's priority).
/// Where the system refuses a thread, its work runs here instead.
void runOnThreads(size_t count, const std::function<void(size_t)> &work) {
  std::vector<std::thread> threads;
  std::vector<size_t> here;
  for (size_t i = 0; i + 1 < count; ++i) {
    try {
      threads.emplace_back(work, i);
    } catch (const std::system_error &) {
      here.push_back(i);
    }
  }
  if (count > 0)
    here.push_back(count - 1);
  for (size_t i : here)
    work(i);
  for (std::thread &t : threads)
    t.join();
}

class CpuCompiler final : public TargetPipeline {
 public:
  CpuCompiler() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    mlir::kiln::registerAllDialects(registry_);
    mlir::registerBuiltinDialectTranslation(registry_);
    mlir::registerLLVMDialectTranslation(registry_);
    mlir::kiln::registerAllPasses();
    static std::once_flag registered;
    std::call_once(registered, [] { registerKilnCpuPasses(); });
    prepareSharedObjectLinker();
    if (auto host = llvm::orc::JITTargetMachineBuilder::detectHost())
      host_ = std::move(*host);
    else
      hostError_ = llvm::toString(host.takeError());
    warmUp();
  }

  exec::CompileResult compile(const trace::TraceGraph &graph, const std::string &name,
                              const exec::CompileTarget &target, exec::CodegenEffort effort) override {
    exec::CompileResult result;
    result.codegen = effort;
    const bool quick = effort == exec::CodegenEffort::Quick;
    if (target.kind != exec::CompileTarget::Kind::HostCpu) {
      result.error = "the CPU pipeline compiles for the host CPU, not for " + target.str();
      return result;
    }
    std::string error;
    std::unique_ptr<llvm::TargetMachine> targetMachine;
    if (!createTargetMachine(targetMachine, error, quick)) {
      result.error = error;
      return result;
    }
    if (std::string why = oversizedOutput(graph); !why.empty()) {
      result.error = why;
      return result;
    }
    // KILN_DUMP_IR, checked (created if missing, warned about once if
    // unusable); not for the warm-up kernel, which is no user's.
    const std::string dumpDir = linkKernels_ ? exec::irDumpDirectory() : std::string();
    auto t0 = Clock::now();
    CompileContext compile(registry_);
    mlir::MLIRContext &context = compile.context;
    const std::string &diagnostics = compile.diagnostics;
    const std::string kernelName = "kernel_" + name;
    auto module = importTraceGraph(context, graph, kernelName, error);
    if (!module) {
      result.error = error;
      return result;
    }
    dumpModule(dumpDir, name, "0-kiln", *module);
    result.timings.importMs = msSince(t0);

    auto t1 = Clock::now();
    auto fail = [&](const char *stage) {
      result.error = std::string("stage ") + stage + " failed: " + diagnostics;
      return result;
    };
    // The module holds the one kernel function until the runtime calls add
    // their declarations, so the function passes run on the kernel alone.
    // The IR is verified after the last pipeline only (PipelineSupport.h).
    if (!runPassPipeline(*module, kCpuToLinalg, /*verify=*/false))
      return fail("kiln-to-linalg");
    dumpModule(dumpDir, name, "1-linalg", *module);
    // Distinct results; every fill-initialised op (reductions, matmuls,
    // convolutions) gets its own fill: a shared one costs a copy and splits
    // row loops.
    if (!runPassPipeline(*module, kCpuBufferize, /*verify=*/false))
      return fail("bufferize");
    auto kernel = module->lookupSymbol<mlir::func::FuncOp>(kernelName);
    if (!kernel)
      return fail("scratch/matmul/math");
    // Dynamic-shape kernels: sizes behind the out-params (see DynamicKernel.h).
    // Functions, not passes: which size each `?` extent is comes from the
    // trace graph, which the IR does not carry.
    const auto numSizes = static_cast<unsigned>(dynamicSizeCount(graph));
    if (numSizes > 0 && mlir::failed(moveSizeArguments(kernel, graph, numSizes)))
      return fail("dynamic sizes");
    // Transposed matmul operands as views (before donation, which must see
    // those reads); donated pairs on the bufferized kernel; convolutions before scratch (a
    // padded copy they no longer read frees its scratch); matmuls and math.
    const std::string scratch = std::string(kCpuFoldMatmulTransposes) + ",func.func(kiln-cpu-buffer-donation{num-inputs=" + std::to_string(graph.inputs.size()) +
                                " num-outputs=" + std::to_string(graph.outputs.size()) + "})," + kCpuConvCalls +
                                ",func.func(kiln-cpu-assign-scratch{share-distance=" +
                                std::to_string(kScratchReuseDistance) + (numSizes > 0 ? " dynamic-sizes" : "") +
                                "})," + kCpuMatmulCalls + "{num-inputs=" + std::to_string(graph.inputs.size()) + "}," +
                                kCpuApproximateMath +
                                (hasAvx512(targetMachine->getTargetFeatureString()) ? "{scalef=true}" : "");
    if (!runPassPipeline(*module, scratch.c_str(), /*verify=*/false))
      return fail("scratch/matmul/math");
    for (auto pair : kernel->getAttrOfType<mlir::ArrayAttr>(kDonationsAttr).getAsRange<mlir::DenseI64ArrayAttr>())
      result.donations.emplace_back(static_cast<uint32_t>(pair[0]), static_cast<uint32_t>(pair[1]));
    std::set<unsigned> sharedArgs;
    for (int64_t arg : kernel->getAttrOfType<mlir::DenseI64ArrayAttr>(kSharedArgsAttr).asArrayRef())
      sharedArgs.insert(static_cast<unsigned>(arg));
    int64_t scratchBytes = kernel->getAttrOfType<mlir::IntegerAttr>(kScratchBytesAttr).getInt();
    if (numSizes > 0) {
      llvm::ArrayRef<int64_t> sizes = kernel->getAttrOfType<mlir::DenseI64ArrayAttr>(kDynamicScratchAttr).asArrayRef();
      result.dynamicScratch.assign(sizes.begin(), sizes.end());
    }
    if (static_cast<uint64_t>(scratchBytes) > hostMemoryBytes()) {
      result.error = "the kernel's temporaries need " + std::to_string(scratchBytes) +
                     " bytes, more than this machine's memory; the trace runs interpreted";
      return result;
    }
    if (numSizes > 0 && mlir::failed(bindDynamicArguments(kernel, graph, numSizes)))
      return fail("dynamic arguments");
    if (!runPassPipeline(*module, kCpuStridedCopies, /*verify=*/false))
      return fail("copies");
    dumpModule(dumpDir, name, "2-bufferized", *module);
    // Loops, accumulators and invariant loads, then row fusion (donated
    // buffer pairs may alias: kiln.shared_args), then row temporaries on the
    // stack, which shrinks the scratch (static kernels: a dynamic one sizes
    // its scratch from the allocations).
    std::string toLoops = std::string(kCpuToLoops) + ",func.func(kiln-cpu-fuse-row-loops)";
    if (scratchBytes > 0 && numSizes == 0)
      toLoops += ",func.func(kiln-cpu-localize-row-scratch)";
    if (!runPassPipeline(*module, toLoops.c_str(), /*verify=*/false))
      return fail("loops");
    scratchBytes = kernel->getAttrOfType<mlir::IntegerAttr>(kScratchBytesAttr).getInt();
    if (target.scratchKnown && scratchBytes > 0 && numSizes == 0)
      target.scratchKnown(static_cast<std::size_t>(scratchBytes));
    // Streaming stores once the rows are fused and before row buffers
    // become output rows: a row that streams out keeps its buffer (one
    // written into the output row would be read back).
    const std::string rows = std::string(kCpuFuseLoopsInRows) + ",func.func(kiln-cpu-streaming-stores{num-inputs=" +
                             std::to_string(graph.inputs.size()) + " num-outputs=" +
                             std::to_string(graph.outputs.size()) + " min-footprint-bytes=" +
                             std::to_string(streamingFootprintBytes(exec::lastLevelCacheBytes())) + "})," +
                             kCpuRowBuffersIntoOutputs +
                             ",kiln-cpu-outline-parallel-loops{kernel=" +
                             kernelName + "},kiln-cpu-outline-serial-parts{kernel=" + kernelName +
                             " part-ops=" + std::to_string(kSerialPartOps) + "}," + kCpuIeeeMinMax + "," +
                             kCpuMarkParallelLoops +
                             "{f32-lanes=" + std::to_string(f32VectorLanes(*targetMachine)) + "}," +
                             kCpuPrefetchNextRows + "," + kCpuVectorizeParallelLoops +
                             "{lanes=" + std::to_string(f32VectorLanes(*targetMachine)) + "}";
    if (!runPassPipeline(*module, rows.c_str(), /*verify=*/false))
      return fail("loops");
    const int loopNests = static_cast<int>(kernel->getAttrOfType<mlir::IntegerAttr>(kLoopNestsAttr).getInt());
    ParallelDispatches dispatches;
    for (mlir::NamedAttribute d : kernel->getAttrOfType<mlir::DictionaryAttr>(kDispatchesAttr)) {
      auto body = module->lookupSymbol<mlir::func::FuncOp>(llvm::cast<mlir::FlatSymbolRefAttr>(d.getValue()).getValue());
      dispatches[d.getName().str()] = {body.getSymName().str(), body->getAttrOfType<mlir::IntegerAttr>(kGrainAttr).getInt()};
      body->removeAttr(kGrainAttr);
    }
    std::set<std::string> parts;
    for (auto part : kernel->getAttrOfType<mlir::ArrayAttr>(kSerialPartsAttr).getAsRange<mlir::FlatSymbolRefAttr>())
      parts.insert(part.getValue().str());
    // What the compiler read back is not part of the kernel.
    for (const char *attr : {kDonationsAttr, kSharedArgsAttr, kScratchBytesAttr, kDynamicScratchAttr, kDispatchesAttr,
                             kLoopNestsAttr, kSerialPartsAttr})
      kernel->removeAttr(attr);
    dumpModule(dumpDir, name, "3-loops", *module);
    if (numSizes > 0 && !runPassPipeline(*module, kResolveDynamicReshapes, /*verify=*/false))
      return fail("to-llvm");
    if (!runPassPipeline(*module, kToLLVM))
      return fail("to-llvm");
    const std::string entryName = "kiln_entry_" + name;
    // The sizes of a dynamic-shape kernel follow the inputs, outputs and scratch.
    const int sizesSlot = numSizes > 0 ? static_cast<int>(graph.inputs.size() + graph.outputs.size() + 1) : -1;
    if (mlir::failed(finalizeLLVMModule(*module, kernelName, entryName, dispatches, parts, sharedArgs, sizesSlot)))
      return fail("finalize");
    dumpModule(dumpDir, name, "4-llvm-dialect", *module);
    result.timings.lowerMs = msSince(t1);

    // The module whole, or for a kernel cut into parts, in shares that
    // compile on threads of their own (ModulePartition.h); one LLVM context
    // and target machine per share. Translation stays on this thread (the
    // MLIR context is single-threaded).
    auto t2 = Clock::now();
    std::vector<mlir::OwningOpRef<mlir::ModuleOp>> shares;
    if (!parts.empty() && linkKernels_)
      shares = partitionModule(*module, shareThreads());
    std::vector<Unit> units(std::max<size_t>(1, shares.size()));
    for (size_t i = 0; i < units.size(); ++i) {
      Unit &unit = units[i];
      unit.context = std::make_unique<llvm::LLVMContext>();
      unit.context->setOptPassGate(unit.gate);
      unit.module = mlir::translateModuleToLLVMIR(shares.empty() ? *module : *shares[i], *unit.context, name);
      if (!unit.module)
        return fail("translate");
      KernelPassGate::markLatencyBound(*unit.module);
      if (i == 0)
        unit.targetMachine = std::move(targetMachine);
      else if (!createTargetMachine(unit.targetMachine, error, quick)) {
        result.error = error;
        return result;
      }
    }
    shares.clear();
    runOnThreads(units.size(), [&](size_t i) { optimize(*units[i].targetMachine, *units[i].module); });
    if (!dumpDir.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream os(dumpDir + "/" + name + ".5-optimized.ll", ec);
      for (size_t i = 0; !ec && i < units.size(); ++i) {
        if (units.size() > 1)
          os << "; share " << i << " of " << units.size() << "\n";
        units[i].module->print(os, nullptr);
      }
    }
    // A Quick kernel keeps its optimised modules: its Full kernel needs only
    // their machine code (codegenFull). Written before codegen, which
    // rewrites the IR it lowers.
    if (quick) {
      for (Unit &unit : units) {
        std::string &bitcode = result.optimizedModules.emplace_back();
        llvm::raw_string_ostream os(bitcode);
        llvm::WriteBitcodeToFile(*unit.module, os);
      }
    }
    result.timings.llvmMs = msSince(t2);

    // Machine code, linked into a shared object: the runtime maps it with
    // dlopen now and stores it in the disk cache for later runs.
    auto t3 = Clock::now();
    if (!emitSharedObject(units, result))
      return result;
    result.timings.jitMs = msSince(t3);
    result.entry = entryName;
    result.format = exec::BinaryFormat::SharedObject;
    result.fingerprint = target.fingerprint();
    // One dispatch, the entry: its parallel loops run on the runtime's pool.
    exec::KernelDispatch entry;
    entry.symbol = entryName;
    for (size_t i = 0; i < graph.inputs.size(); ++i)
      entry.args.push_back({exec::DispatchArg::Kind::Input, static_cast<int64_t>(i)});
    for (size_t j = 0; j < graph.outputs.size(); ++j)
      entry.args.push_back({exec::DispatchArg::Kind::Output, static_cast<int64_t>(j)});
    entry.args.push_back({exec::DispatchArg::Kind::Scratch, 0});
    if (numSizes > 0)
      entry.args.push_back({exec::DispatchArg::Kind::Sizes, 0});
    result.dispatches.push_back(std::move(entry));
    result.scratchBytes = static_cast<std::size_t>(scratchBytes);
    result.kernelCount = std::max(loopNests, 1);
    result.dynamicSizes = static_cast<int>(numSizes);
    return result;
  }

  exec::CompileResult codegenFull(const exec::CompileResult &quick, const std::string &name,
                                  const exec::CompileTarget &target) override {
    exec::CompileResult result;
    if (target.kind != exec::CompileTarget::Kind::HostCpu || quick.optimizedModules.empty()) {
      result.error = "codegenFull needs a quick host compile's optimised modules (" + target.str() + ")";
      return result;
    }
    auto t0 = Clock::now();
    std::vector<Unit> units(quick.optimizedModules.size());
    for (size_t i = 0; i < units.size(); ++i) {
      Unit &unit = units[i];
      unit.context = std::make_unique<llvm::LLVMContext>();
      unit.context->setOptPassGate(unit.gate);
      llvm::MemoryBufferRef buffer(quick.optimizedModules[i], name);
      auto module = llvm::parseBitcodeFile(buffer, *unit.context);
      if (!module) {
        result.error = "the quick compile's module " + std::to_string(i) +
                       " does not parse: " + llvm::toString(module.takeError());
        return result;
      }
      unit.module = std::move(*module);
      if (!createTargetMachine(unit.targetMachine, result.error, false))
        return result;
    }
    result.timings.llvmMs = msSince(t0);
    auto t1 = Clock::now();
    if (!emitSharedObject(units, result))
      return result;
    result.timings.jitMs = msSince(t1);
    // The kernel the quick compile describes, with Full machine code.
    exec::CompileResult full = quick;
    full.optimizedModules.clear();
    full.codegen = exec::CodegenEffort::Full;
    full.object = std::move(result.object);
    full.timings = result.timings;
    return full;
  }

 private:
  /// One LLVM module on its way to machine code: a kernel's whole module or
  /// one share of it (ModulePartition.h), with a context and target machine
  /// of its own, so that shares compile on threads of their own.
  struct Unit {
    KernelPassGate gate; ///< outlives the context, which refers to it
    std::unique_ptr<llvm::LLVMContext> context;
    std::unique_ptr<llvm::Module> module;
    std::unique_ptr<llvm::TargetMachine> targetMachine;
    llvm::SmallVector<char, 0> object;
    std::string error;
  };

  /// Machine code for the units (on threads of their own), linked into one
  /// shared object in result.object (during warmUp: the first unit's object
  /// file). False with result.error on failure.
  bool emitSharedObject(std::vector<Unit> &units, exec::CompileResult &result) {
    runOnThreads(units.size(), [&](size_t i) {
      Unit &unit = units[i];
      unit.gate.noteModule(*unit.module);
      llvm::raw_svector_ostream os(unit.object);
      llvm::legacy::PassManager codegen;
      if (unit.targetMachine->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
        unit.error = "the target cannot emit object files";
        return;
      }
      codegen.run(*unit.module);
    });
    std::vector<llvm::StringRef> objects;
    for (const Unit &unit : units) {
      if (!unit.error.empty()) {
        result.error = unit.error;
        return false;
      }
      objects.emplace_back(unit.object.data(), unit.object.size());
    }
    if (!linkKernels_) {
      result.object.assign(units[0].object.begin(), units[0].object.end());
      return true;
    }
    auto shared = linkSharedObject(objects);
    if (!shared) {
      result.error = llvm::toString(shared.takeError());
      return false;
    }
    result.object = std::move(*shared);
    return true;
  }

  /// Compiles a tiny trace once, so that the lazily created static objects
  /// of MLIR and LLVM exist before libkiln registers its exit handler (which
  /// waits for in-flight compilations and must run before their destructors).
  void warmUp() {
    trace::TraceGraph g;
    trace::Node x;
    x.op = core::OpKind::Param;
    x.dtype = DType::f32;
    x.shape = Shape{4};
    g.nodes.push_back(x);
    g.inputs.push_back(0);
    trace::Node y = x;
    y.op = core::OpKind::Exp;
    y.numInputs = 1;
    y.inputs = 0;
    g.operands.push_back(0);
    g.nodes.push_back(y);
    // An output of another type than the input, so no buffer is donated and
    // the kernel's arguments carry attributes (noalias): their translation
    // creates a static of MLIR's that must exist before the exit handler.
    trace::Node z = y;
    z.op = core::OpKind::Cast;
    z.dtype = DType::f64;
    z.inputs = 1;
    g.operands.push_back(1);
    g.nodes.push_back(z);
    g.outputs.push_back(2);
    // Codegen only: linking (a cc process) creates no static of ours and
    // would lengthen the load, which runs in the user's thread.
    // Both code generators, and a Quick kernel's way to its Full one: each
    // creates statics of its own.
    linkKernels_ = false;
    const exec::CompileTarget host = exec::CompileTarget::hostCpu();
    exec::CompileResult warm = compile(g, "warmup", host, exec::CodegenEffort::Quick);
    if (warm.ok())
      warm = codegenFull(warm, "warmup", host);
    if (!warm.ok())
      std::fprintf(stderr, "kiln: the compiler's warm-up compilation failed: %s\n", warm.error.c_str());
    linkKernels_ = true;
  }

  /// A target machine for the host (one per compilation: they are not
  /// thread-safe, and cheap next to the pipeline).
  bool createTargetMachine(std::unique_ptr<llvm::TargetMachine> &out, std::string &error, bool quick) {
    if (!host_) {
      error = hostError_;
      return false;
    }
    auto tm = hostTargetMachineBuilder(*host_, quick).createTargetMachine();
    if (!tm) {
      error = llvm::toString(tm.takeError());
      return false;
    }
    out = std::move(*tm);
    return true;
  }

  static void optimize(llvm::TargetMachine &targetMachine, llvm::Module &module) {
    module.setDataLayout(targetMachine.createDataLayout());
    module.setTargetTriple(targetMachine.getTargetTriple());
    const std::string cpu = targetMachine.getTargetCPU().str();
    const std::string features = targetMachine.getTargetFeatureString().str();
    const char *vectorWidth = preferredVectorWidth(features);
    for (llvm::Function &f : module) {
      if (f.isDeclaration())
        continue;
      f.addFnAttr("target-cpu", cpu);
      f.addFnAttr("target-features", features);
      if (vectorWidth)
        f.addFnAttr("prefer-vector-width", vectorWidth);
    }
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    // KILN_MLIR_TIMING: LLVM's pass timers (TimePassesIsEnabled also times
    // the code generator's passes, reported when its pass manager ends).
    llvm::PassInstrumentationCallbacks instrumentation;
    std::optional<llvm::StandardInstrumentations> timers;
    if (passTimingRequested()) {
      llvm::TimePassesIsEnabled = true;
      timers.emplace(module.getContext(), /*DebugLogging=*/false);
      timers->registerCallbacks(instrumentation, &mam);
    }
    llvm::PassBuilder pb(&targetMachine, llvm::PipelineTuningOptions(), std::nullopt,
                         timers ? &instrumentation : nullptr);
    registerBoolBytesPasses(pb);
    registerStreamingStorePasses(pb);
    registerPrefetchPasses(pb);
    registerFirstLaneScalarPasses(pb);
    registerX86VectorIdiomPasses(pb);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm;
    if (llvm::Error err = pb.parsePassPipeline(mpm, kKernelPassPipeline))
      llvm::report_fatal_error(std::move(err));
    mpm.run(module, mam);
    if (timers)
      timers->getTimePasses().print();
  }

  mlir::DialectRegistry registry_;
  /// The host CPU, detected once in the constructor (read-only after), or
  /// why it could not be.
  std::optional<llvm::orc::JITTargetMachineBuilder> host_;
  std::string hostError_;
  /// False only during warmUp() (in the constructor, before any other use).
  bool linkKernels_ = true;
};

} // namespace

std::unique_ptr<TargetPipeline> createCpuPipeline() { return std::make_unique<CpuCompiler>(); }

} // namespace kiln::jit::cpu
