//===- CpuCompiler.cpp - Trace graphs to native host code -------*- C++ -*-===//

#include "jit/targets/cpu/CpuCompiler.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "dialects/kiln/InitAll.h"
#include "jit/Importer.h"
#include "jit/targets/cpu/CpuTransforms.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

extern "C" void memrefCopy(int64_t elemSize, void *src, void *dst);
extern "C" void kiln_rt_parallel_for(void (*body)(void *, int64_t, int64_t), void *ctx, int64_t n, int64_t grain);
extern "C" void kiln_rt_matmul_f32(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                   int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                   int64_t);

namespace kiln::jit::cpu {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

/// Pipeline stages (textual, upstream passes, anchored on the module), each
/// dumped under KILN_DUMP_IR.
constexpr const char *kToLinalg =
    "canonicalize,kiln-convert-to-linalg,canonicalize,cse,func.func(linalg-fuse-elementwise-ops),"
    "canonicalize,cse";
constexpr const char *kBufferize =
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs modify-public-functions},canonicalize,cse";
constexpr const char *kToLoops = "convert-linalg-to-parallel-loops,canonicalize,cse";
constexpr const char *kToLLVM =
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,convert-math-to-llvm,"
    "convert-math-to-libm,arith-expand,convert-arith-to-llvm,convert-index-to-llvm,finalize-memref-to-llvm,"
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv},convert-cf-to-llvm,reconcile-unrealized-casts";

class NativeExecutable final : public exec::Executable {
 public:
  NativeExecutable(void (*entry)(void **), std::size_t scratch, int kernels)
      : entry_(entry), scratch_(scratch), kernels_(kernels) {}
  void launch(void **args) const override { entry_(args); }
  std::size_t scratchBytes() const override { return scratch_; }
  int kernelCount() const override { return kernels_; }

 private:
  void (*entry_)(void **);
  std::size_t scratch_;
  int kernels_;
};

class CpuCompiler final : public exec::TraceCompiler {
 public:
  CpuCompiler() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    mlir::kiln::registerAllDialects(registry_);
    mlir::registerBuiltinDialectTranslation(registry_);
    mlir::registerLLVMDialectTranslation(registry_);
    mlir::kiln::registerAllPasses();
    warmUp();
  }

  exec::CompileResult compile(const trace::TraceGraph &graph, const std::string &name) override {
    exec::CompileResult result;
    std::string error;
    if (!ensureJit(error)) {
      result.error = error;
      return result;
    }
    const char *dumpEnv = std::getenv("KILN_DUMP_IR");
    const std::string dumpDir = dumpEnv ? dumpEnv : "";
    auto t0 = Clock::now();
    mlir::MLIRContext context(registry_, mlir::MLIRContext::Threading::DISABLED);
    context.loadAllAvailableDialects();
    std::string diagnostics;
    llvm::raw_string_ostream diag(diagnostics);
    mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
      diag << d << "\n";
      return mlir::success();
    });
    const std::string kernelName = "kernel_" + name;
    auto module = importTraceGraph(context, graph, kernelName, error);
    if (!module) {
      result.error = error;
      return result;
    }
    dump(dumpDir, name, "0-kiln", *module);
    result.timings.importMs = msSince(t0);

    auto t1 = Clock::now();
    int64_t scratchBytes = 0;
    int loopNests = 0;
    ParallelDispatches dispatches;
    auto fail = [&](const char *stage) {
      result.error = std::string("stage ") + stage + " failed: " + diagnostics;
      return result;
    };
    if (!runPipeline(*module, kToLinalg))
      return fail("kiln-to-linalg");
    dump(dumpDir, name, "1-linalg", *module);
    if (auto k = module->lookupSymbol<mlir::func::FuncOp>(kernelName))
      makeResultsDistinct(k);
    if (!runPipeline(*module, kBufferize))
      return fail("bufferize");
    auto kernel = module->lookupSymbol<mlir::func::FuncOp>(kernelName);
    if (!kernel || mlir::failed(assignScratch(kernel, scratchBytes)) || mlir::failed(matmulToRuntimeCalls(*module)) ||
        mlir::failed(approximateMath(*module)))
      return fail("scratch/matmul/math");
    dump(dumpDir, name, "2-bufferized", *module);
    if (!runPipeline(*module, kToLoops) || mlir::failed(outlineParallelLoops(*module, kernel, dispatches, loopNests)))
      return fail("loops");
    dump(dumpDir, name, "3-loops", *module);
    if (!runPipeline(*module, kToLLVM))
      return fail("to-llvm");
    const std::string entryName = "kiln_entry_" + name + "_" + std::to_string(counter_++);
    if (mlir::failed(finalizeLLVMModule(*module, kernelName, entryName, dispatches)))
      return fail("finalize");
    dump(dumpDir, name, "4-llvm-dialect", *module);
    result.timings.lowerMs = msSince(t1);

    auto t2 = Clock::now();
    auto llvmContext = std::make_unique<llvm::LLVMContext>();
    auto llvmModule = mlir::translateModuleToLLVMIR(*module, *llvmContext, name);
    if (!llvmModule)
      return fail("translate");
    if (!optimize(*llvmModule, error)) {
      result.error = error;
      return result;
    }
 if (!dumpDir.empty()) {
      std::error_code ec;
      llvm::raw_fd_ostream os(dumpDir + "/" + name + ".5-optimized.ll", ec);
      if (!ec)
        llvmModule->print(os, nullptr);
    }
    result.timings.llvmMs = msSince(t2);

    auto t3 = Clock::now();
    void (*entry)(void **) = nullptr;
    {
      std::lock_guard<std::mutex> lock(jitMutex_);
      if (auto err = jit_->addIRModule(llvm::orc::ThreadSafeModule(std::move(llvmModule), std::move(llvmContext)))) {
        result.error = "ORC: " + llvm::toString(std::move(err));
        return result;
      }
      auto sym = jit_->lookup(entryName);
      if (!sym) {
        result.error = "ORC lookup: " + llvm::toString(sym.takeError());
        return result;
      }
      entry = sym->toPtr<void (*)(void **)>();
    }
    result.timings.jitMs = msSince(t3);
    result.executable = std::make_shared<NativeExecutable>(entry, static_cast<std::size_t>(scratchBytes),
                                                           std::max(loopNests, 1));
    return result;
  }

 private:
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
    g.outputs.push_back(1);
    (void)compile(g, "warmup");
  }

  bool runPipeline(mlir::ModuleOp module, const char *pipeline) {
    mlir::PassManager pm(module.getContext());
    if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)))
      return false;
    return mlir::succeeded(pm.run(module));
  }

  void dump(const std::string &dumpDir, const std::string &name, const char *stage, mlir::ModuleOp module) {
    if (dumpDir.empty())
      return;
    std::error_code ec;
    llvm::raw_fd_ostream os(dumpDir + "/" + name + "." + stage + ".mlir", ec);
    if (!ec)
      module.print(os);
  }

  /// One LLJIT for the process, for the host CPU with all its features.
  bool ensureJit(std::string &error) {
    std::lock_guard<std::mutex> lock(jitMutex_);
    if (jit_)
      return true;
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
      error = llvm::toString(jtmb.takeError());
      return false;
    }
    jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    auto tm = jtmb->createTargetMachine();
    if (!tm) {
      error = llvm::toString(tm.takeError());
      return false;
    }
    targetMachine_ = std::move(*tm);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) {
      error = llvm::toString(jit.takeError());
      return false;
    }
    jit_ = std::move(*jit);
    auto &jd = jit_->getMainJITDylib();
    // The runtime's entry points by address (libkiln may be loaded locally),
    // the rest (libm) from the process.
    auto &es = jit_->getExecutionSession();
    llvm::orc::SymbolMap runtime;
    runtime[es.intern(jit_->mangle("kiln_rt_parallel_for"))] = {
        llvm::orc::ExecutorAddr::fromPtr(&kiln_rt_parallel_for), llvm::JITSymbolFlags::Exported};
    runtime[es.intern(jit_->mangle("kiln_rt_matmul_f32"))] = {llvm::orc::ExecutorAddr::fromPtr(&kiln_rt_matmul_f32),
                                                             llvm::JITSymbolFlags::Exported};
    runtime[es.intern(jit_->mangle("memrefCopy"))] = {llvm::orc::ExecutorAddr::fromPtr(&memrefCopy),
                                                     llvm::JITSymbolFlags::Exported};
    if (auto err = jd.define(llvm::orc::absoluteSymbols(std::move(runtime)))) {
      error = llvm::toString(std::move(err));
      return false;
    }
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit_->getDataLayout().getGlobalPrefix());
    if (!gen) {
      error = llvm::toString(gen.takeError());
      return false;
    }
    jd.addGenerator(std::move(*gen));
    return true;
  }

  bool optimize(llvm::Module &module, std::string &error) {
    module.setDataLayout(targetMachine_->createDataLayout());
    module.setTargetTriple(targetMachine_->getTargetTriple());
    const std::string cpu = targetMachine_->getTargetCPU().str();
    const std::string features = targetMachine_->getTargetFeatureString().str();
    for (llvm::Function &f : module) {
      if (f.isDeclaration())
        continue;
      f.addFnAttr("target-cpu", cpu);
      f.addFnAttr("target-features", features);
    }
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(targetMachine_.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(module, mam);
    (void)error;
    return true;
  }

  mlir::DialectRegistry registry_;
  std::mutex jitMutex_;
  std::unique_ptr<llvm::TargetMachine> targetMachine_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::atomic<int> counter_{0};
};

} // namespace

std::unique_ptr<exec::TraceCompiler> createCpuCompiler() { return std::make_unique<CpuCompiler>(); }

} // namespace kiln::jit::cpu

/// The factory libkiln looks up after loading this library.
extern "C" __attribute__((visibility("default"))) kiln::exec::TraceCompiler *kiln_jit_create_compiler() {
  static std::unique_ptr<kiln::exec::TraceCompiler> compiler = kiln::jit::cpu::createCpuCompiler();
  return compiler.get();
}
