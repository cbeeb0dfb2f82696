// Executable and TraceCompiler: the runtime's view of compiled code. No MLIR
// or LLVM types: the compiler lives in libkiln_jit, loaded on first need.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/trace/TraceGraph.h"

namespace kiln::exec {

/// Milliseconds spent in each stage of one compilation.
struct CompileTimings {
  double importMs = 0, lowerMs = 0, llvmMs = 0, jitMs = 0;
  double totalMs() const { return importMs + lowerMs + llvmMs + jitMs; }
};

/// A compiled trace. launch(args) runs it: args holds the input buffers
/// (dense row-major, in TraceGraph::inputs order), then the output buffers
/// (allocated by the runtime, TraceGraph::outputs order), then a scratch
/// buffer of scratchBytes() bytes. Launches may run concurrently.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual void launch(void** args) const = 0;
  virtual std::size_t scratchBytes() const = 0;
  /// Fused kernels (parallel loops) in the compiled code.
  virtual int kernelCount() const = 0;
};

struct CompileResult {
  std::shared_ptr<Executable> executable;  ///< null on failure
  std::string error;                       ///< why it failed
  CompileTimings timings;
};

/// Compiles trace graphs to native code. Thread-safe.
class TraceCompiler {
 public:
  virtual ~TraceCompiler() = default;
  /// `name` identifies the kernel (the TraceKey hash) for IR dumps and logs.
  virtual CompileResult compile(const trace::TraceGraph& graph, const std::string& name) = 0;
};

/// Name of the factory libkiln_jit exports: `TraceCompiler* kiln_jit_create_compiler()`.
inline constexpr const char* kCompilerFactorySymbol = "kiln_jit_create_compiler";

/// Loads libkiln_jit on first call; null (and one warning) when it cannot.
TraceCompiler* loadCompiler();
/// True once loadCompiler() has loaded the compiler library in this process.
bool compilerLoaded();

}  // namespace kiln::exec
