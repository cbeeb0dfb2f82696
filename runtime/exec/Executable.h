// Executable and TraceCompiler: the runtime's view of compiled code. No MLIR
// or LLVM types: the compiler lives in libkiln_jit, loaded on first need.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/exec/CompileTarget.h"
#include "runtime/exec/LaunchProgram.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::exec {

/// Milliseconds spent in each stage of one compilation.
struct CompileTimings {
  double importMs = 0, lowerMs = 0, llvmMs = 0, jitMs = 0;
  double totalMs() const { return importMs + lowerMs + llvmMs + jitMs; }
};

/// A compiled trace. launch(args) runs it: args holds the input buffers
/// (dense row-major, in TraceGraph::inputs order: the parameters, then one
/// element per scalar argument, ScalarArgs.h), then the output buffers
/// (allocated by the runtime, TraceGraph::outputs order), then a scratch
/// buffer of scratchBytes() bytes, then, for a dynamic-shape kernel only, a
/// pointer to its int64 sizes (and dynamicScratchBytes() of scratch).
/// Launches may run concurrently.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual void launch(void** args) const = 0;
  virtual std::size_t scratchBytes() const = 0;
  /// Fused kernels (parallel loops) in the compiled code.
  virtual int kernelCount() const = 0;

  /// Buffer donation: (output, input) pairs for which launch() may be given
  /// the input's buffer as the output's too (the kernel then updates it in
  /// place). Set by the kernel cache from the compile result or cache entry.
  std::vector<std::pair<uint32_t, uint32_t>> donations;

  /// Dynamic-shape kernels (one kernel for a trace structure seen at more
  /// than KILN_MAX_SHAPES sizes): the number of dynamic sizes, passed as an
  /// int64 array in args after the scratch buffer (0: a static kernel), and
  /// the scratch they need beyond scratchBytes() (see dynamicScratchBytes).
  /// Set by the kernel cache like donations.
  int dynamicSizes = 0;
  std::vector<int64_t> dynamicScratch;
  /// Quick: a first-tier kernel that a Full one of the same key replaces
  /// when its trace stays hot (Engine::recompileFull). Set by the kernel
  /// cache like donations.
  CodegenEffort codegen = CodegenEffort::Full;
  /// Scratch bytes for the given sizes: scratchBytes() plus, per term of
  /// dynamicScratch (bytes, count, size numbers...), bytes times the sizes,
  /// rounded up to 64.
  std::size_t dynamicScratchBytes(const int64_t* sizes) const {
    std::size_t total = scratchBytes();
    for (std::size_t i = 0; i + 1 < dynamicScratch.size();) {
      int64_t bytes = dynamicScratch[i];
      const auto count = static_cast<std::size_t>(dynamicScratch[i + 1]);
      for (std::size_t k = 0; k < count && i + 2 + k < dynamicScratch.size(); ++k)
        bytes *= sizes[dynamicScratch[i + 2 + k]];
      total += static_cast<std::size_t>((bytes + 63) / 64 * 64);
      i += 2 + count;
    }
    return total;
  }
};

/// What the compiler produces: a binary of the target's format. For the host
/// an ELF shared object (position independent, linked against libkiln),
/// loaded by a KernelLoader now or in a later process from the disk cache.
struct CompileResult {
  BinaryFormat format = BinaryFormat::SharedObject;
  std::string object;       ///< the binary's bytes (PTX: its text); empty on failure
  std::string entry;        ///< host: symbol of `void entry(void** args)` in it
  std::string fingerprint;  ///< CompileTarget::fingerprint() of the target it was compiled for
  /// The kernels to launch, in order, with their launch shapes and arguments.
  std::vector<KernelDispatch> dispatches;
  /// GPU dynamic-shape kernels: the launch program the dispatches read
  /// (DispatchArg::Kind::Value, ScratchAt, KernelDispatch::gridSteps).
  std::vector<LaunchExpr> launchProgram;
  std::size_t scratchBytes = 0;
  int kernelCount = 0;
  /// (output, input) pairs that may share a buffer (see Executable::donations).
  std::vector<std::pair<uint32_t, uint32_t>> donations;
  /// Dynamic-shape kernels: see Executable::dynamicSizes / dynamicScratch.
  /// The graph's extents < 0 are dynamic: size number -1 - extent.
  int dynamicSizes = 0;
  std::vector<int64_t> dynamicScratch;
  /// The code generator's effort it was built with (a pipeline that has no
  /// quick codegen reports Full whatever it was asked).
  CodegenEffort codegen = CodegenEffort::Full;
  /// Quick host compiles: the optimised LLVM modules (bitcode, one per
  /// share), from which TraceCompiler::codegenFull makes the Full kernel
  /// with machine code only. Empty otherwise.
  std::vector<std::string> optimizedModules;
  std::string error;  ///< why it failed
  CompileTimings timings;
  bool ok() const { return !object.empty(); }
};

/// Compiles trace graphs to native code, through the pipeline registered for
/// the target's kind (an error result for a target without one). Thread-safe.
class TraceCompiler {
 public:
  virtual ~TraceCompiler() = default;
  /// `name` identifies the kernel (the TraceKey hash) for IR dumps and logs.
  virtual CompileResult compile(const trace::TraceGraph& graph, const std::string& name, const CompileTarget& target,
                                CodegenEffort effort) = 0;
  /// The Full kernel of a Quick result (CompileResult::optimizedModules) of
  /// `target`: its machine code, the rest as `quick` describes it.
  virtual CompileResult codegenFull(const CompileResult& quick, const std::string& name,
                                    const CompileTarget& target) = 0;
};

/// A compiled binary as a loader maps it: the bytes and what launching them
/// needs.
struct KernelImage {
  BinaryFormat format = BinaryFormat::SharedObject;
  std::string_view object;
  std::string entry;  ///< host: symbol of `void entry(void** args)`
  /// GPU: the kernels to launch, in order (CompileResult::dispatches), and
  /// what a dynamic-shape kernel computes from its sizes for them
  /// (CompileResult::launchProgram).
  std::vector<KernelDispatch> dispatches;
  std::vector<LaunchExpr> launchProgram;
  /// The number of sizes a dynamic-shape kernel takes (0: static).
  int dynamicSizes = 0;
  std::size_t scratchBytes = 0;
  int kernelCount = 1;
  /// GPU: how many input and output buffers precede the scratch buffer in
  /// launch()'s arguments (a dispatch names them by position).
  uint32_t inputs = 0, outputs = 0;
};

/// Maps compiled kernels into the process, for one device: the host's
/// loader (loadKernelLoader) for the CPU and the devices that run host code,
/// each GPU's own (hal::DeviceContext::kernelLoader). Thread-safe.
class KernelLoader {
 public:
  virtual ~KernelLoader() = default;
  /// What code this loader can run (the host: HostFingerprint.h; a GPU: its
  /// CompileTarget::fingerprint()). A kernel compiled for another
  /// fingerprint is never loaded.
  virtual const std::string& fingerprint() const = 0;
  /// Maps `image` (compiled for fingerprint()) and returns it as an
  /// Executable; null and `*error` on failure.
  virtual std::shared_ptr<Executable> load(const KernelImage& image, std::string* error) = 0;
};

/// The process's kernel loader (SharedObjectLoader.cpp): the system's dynamic
/// loader, no LLVM. Counts as started for kernelLoaderLoaded().
KernelLoader* loadKernelLoader();
/// True once loadKernelLoader() has been called (a kernel was wanted).
bool kernelLoaderLoaded();

/// Name of the factory libkiln_jit exports: `TraceCompiler* kiln_jit_create_compiler()`.
inline constexpr const char* kCompilerFactorySymbol = "kiln_jit_create_compiler";

/// Loads libkiln_jit on first call; null (and one warning) when it cannot,
/// and null once the process has begun to exit.
TraceCompiler* loadCompiler();
/// Called by a thread before it queues a background compile: makes exit
/// safe while the compile thread loads the compiler (the load, 50-200 ms of
/// dlopen and static constructors, happens there, not in the caller's step).
void prepareBackgroundCompile();
/// Compiles `graph` with loadCompiler()'s compiler for the target of the
/// graph's device. Refused (an error result) once the process has begun to
/// exit: the exit handler waits for the compilations in flight, then the
/// compiler's statics may be destroyed.
/// `scratchKnown`: CompileTarget::scratchKnown for this compilation.
CompileResult compileTrace(const trace::TraceGraph& graph, const std::string& name,
                           CodegenEffort effort = CodegenEffort::Full,
                           std::function<void(std::size_t)> scratchKnown = {});
/// The Full kernel of `graph` from its Quick compile `quick` (which kept its
/// optimizedModules): machine code only, under the same rules.
CompileResult codegenTraceFull(const trace::TraceGraph& graph, const CompileResult& quick, const std::string& name);
/// True once loadCompiler() has loaded the compiler library in this process.
bool compilerLoaded();
/// True once the process has begun to exit: compilations are refused, and
/// their refusals are not worth a warning.
bool compilesStopped();
/// What exit does before the compiler's statics go (registered with
/// atexit): no new load or compilation, the ones running finished, the
/// compile threads stopped. Tests call it in a forked child that ends by
/// _exit.
void finishCompilesAtExit();

}  // namespace kiln::exec
