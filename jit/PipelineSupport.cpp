//===- PipelineSupport.cpp - Helpers every target pipeline uses ---------===//

#include "jit/PipelineSupport.h"

#include <cstdlib>
#include <string_view>

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::jit {

namespace {
/// Whether the environment variable `name` is set and not "0".
bool envFlagSet(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::string_view(v) != "0";
}
} // namespace

bool passTimingRequested() {
  static const bool timing = envFlagSet("KILN_MLIR_TIMING");
  return timing;
}

bool verifyEachPipelineRequested() {
  static const bool each = envFlagSet("KILN_MLIR_VERIFY");
  return each;
}

bool runPassPipeline(mlir::ModuleOp module, const char *pipeline, bool verify) {
  mlir::PassManager pm(module.getContext());
  // The IR is verified once per pipeline, not after each of its passes: a
  // JIT pipeline runs ~20 passes over modules of 10^5 lines.
  pm.enableVerifier(false);
  if (passTimingRequested())
    pm.enableTiming();
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)))
    return false;
  if (mlir::failed(pm.run(module)))
    return false;
  return !(verify || verifyEachPipelineRequested()) || mlir::succeeded(mlir::verify(module));
}

void dumpModule(const std::string &dumpDir, const std::string &name, const char *stage, mlir::ModuleOp module) {
  if (dumpDir.empty())
    return;
  std::error_code ec;
  llvm::raw_fd_ostream os(dumpDir + "/" + name + "." + stage + ".mlir", ec);
  if (!ec)
    module.print(os);
}

void dumpBytes(const std::string &dumpDir, const std::string &name, const char *file, const std::string &bytes) {
  if (dumpDir.empty())
    return;
  std::error_code ec;
  llvm::raw_fd_ostream os(dumpDir + "/" + name + "." + file, ec);
  if (!ec)
    os << bytes;
}

std::string gpuBinaryObject(mlir::ModuleOp module) {
  for (auto binary : module.getOps<mlir::gpu::BinaryOp>())
    for (mlir::Attribute a : binary.getObjects())
      if (auto object = llvm::dyn_cast<mlir::gpu::ObjectAttr>(a))
        return object.getObject().getValue().str();
  return {};
}

} // namespace kiln::jit
