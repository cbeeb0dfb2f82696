//===- Compiler.cpp - The compiler libkiln loads ------------------------===//
//
// Routes each compilation to the pipeline registered for its target's kind.
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "jit/TargetPipeline.h"
#include "jit/targets/cpu/CpuCompiler.h"
#include "jit/targets/nvptx/NvptxPipeline.h"
#include "jit/targets/spirv/SpirvPipeline.h"
#include "llvm/Support/ErrorHandling.h"

namespace kiln::jit {

namespace {

/// An internal error of LLVM (a broken invariant, a pass that did not
/// converge) ends the process, as LLVM requires; but LLVM's own ending is
/// exit(1), which runs the program's exit handlers while its other threads
/// run on, and a test process hung that way instead of failing. Abort at
/// once instead, saying how to run without the compiler.
void onLlvmFatalError(void *, const char *reason, bool) {
  std::fprintf(stderr,
               "kiln: the kernel compiler hit an internal LLVM error: %s\n"
               "kiln: set KILN_JIT=off to run without compiling (and please report the trace: KILN_DUMP_IR=dir "
               "writes its IR)\n",
               reason);
  std::abort();
}

class Compiler final : public exec::TraceCompiler {
public:
  Compiler() {
    llvm::install_fatal_error_handler(onLlvmFatalError);
    pipelines_[exec::CompileTarget::Kind::HostCpu] = cpu::createCpuPipeline();
    pipelines_[exec::CompileTarget::Kind::Nvptx] = nvptx::createNvptxPipeline();
    pipelines_[exec::CompileTarget::Kind::Spirv] = spirv::createSpirvPipeline();
  }

  exec::CompileResult compile(const trace::TraceGraph &graph, const std::string &name,
                              const exec::CompileTarget &target, exec::CodegenEffort effort) override {
    auto it = pipelines_.find(target.kind);
    if (it == pipelines_.end()) {
      exec::CompileResult result;
      result.error = "no compiler pipeline is registered for " + target.str();
      return result;
    }
    return it->second->compile(graph, name, target, effort);
  }

  exec::CompileResult codegenFull(const exec::CompileResult &quick, const std::string &name,
                                  const exec::CompileTarget &target) override {
    auto it = pipelines_.find(target.kind);
    if (it == pipelines_.end()) {
      exec::CompileResult result;
      result.error = "no compiler pipeline is registered for " + target.str();
      return result;
    }
    return it->second->codegenFull(quick, name, target);
  }

private:
  /// Filled once, in the constructor: read-only afterwards (thread-safe).
  std::map<exec::CompileTarget::Kind, std::unique_ptr<TargetPipeline>> pipelines_;
};

} // namespace

} // namespace kiln::jit

/// The factory libkiln looks up after loading this library.
extern "C" __attribute__((visibility("default"))) kiln::exec::TraceCompiler *kiln_jit_create_compiler() {
  static std::unique_ptr<kiln::exec::TraceCompiler> compiler = std::make_unique<kiln::jit::Compiler>();
  return compiler.get();
}
