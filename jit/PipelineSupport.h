//===- PipelineSupport.h - Helpers every target pipeline uses ---*- C++ -*-===//

#ifndef KILN_JIT_PIPELINESUPPORT_H
#define KILN_JIT_PIPELINESUPPORT_H

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::jit {

/// The MLIR context of one compilation (single-threaded, every dialect of
/// `registry` loaded), whose diagnostics are collected as text for the
/// compile result's error.
class CompileContext {
public:
  explicit CompileContext(const mlir::DialectRegistry &registry)
      : context(registry, mlir::MLIRContext::Threading::DISABLED), stream_(diagnostics),
        handler_(&context, [this](mlir::Diagnostic &d) {
          stream_ << d << "\n";
          return mlir::success();
        }) {
    context.loadAllAvailableDialects();
  }
  CompileContext(const CompileContext &) = delete;
  CompileContext &operator=(const CompileContext &) = delete;

  mlir::MLIRContext context;
  std::string diagnostics;

private:
  llvm::raw_string_ostream stream_;
  mlir::ScopedDiagnosticHandler handler_;
};

/// The bytes of the first object of the module's first gpu.binary (what
/// gpu-module-to-binary made); empty when there is none.
std::string gpuBinaryObject(mlir::ModuleOp module);

/// KILN_MLIR_TIMING is set (not "0"): each MLIR pipeline, and each LLVM
/// module's optimisation and code generation, print their passes' timings
/// on stderr, to see where a compile spends its time.
bool passTimingRequested();

/// KILN_MLIR_VERIFY is set (not "0"): every pipeline verifies the IR it
/// made, not only those that ask to (the test suite sets it).
bool verifyEachPipelineRequested();

/// Parses and runs a textual pass pipeline on `module`; false when either
/// fails or, with `verify` (or KILN_MLIR_VERIFY), the IR it made does not
/// verify (the diagnostics went to the context's handler). A compile's
/// pipelines before its last may skip the verifier: it walks the whole
/// module, about 13 ms in the 889-op transformer step's first compile
/// (6 % of it), and the last pipeline's IR, which the translation to LLVM
/// needs valid, still verifies.
bool runPassPipeline(mlir::ModuleOp module, const char *pipeline, bool verify = true);

/// KILN_DUMP_IR: writes `module` to `<dumpDir>/<name>.<stage>.mlir`; nothing
/// when `dumpDir` is empty.
void dumpModule(const std::string &dumpDir, const std::string &name, const char *stage, mlir::ModuleOp module);
/// KILN_DUMP_IR: writes a binary or text the pipeline made (PTX, SPIR-V) to
/// `<dumpDir>/<name>.<file>`; nothing when `dumpDir` is empty.
void dumpBytes(const std::string &dumpDir, const std::string &name, const char *file, const std::string &bytes);

} // namespace kiln::jit

#endif // KILN_JIT_PIPELINESUPPORT_H
