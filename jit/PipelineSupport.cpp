//===- PipelineSupport.cpp - Helpers every target pipeline uses ---------===//

#include "jit/PipelineSupport.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::jit {

bool runPassPipeline(mlir::ModuleOp module, const char *pipeline) {
  mlir::PassManager pm(module.getContext());
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)))
    return false;
  return mlir::succeeded(pm.run(module));
}

void dumpModule(const std::string &dumpDir, const std::string &name, const char *stage, mlir::ModuleOp module) {
  if (dumpDir.empty())
    return;
  std::error_code ec;
  llvm::raw_fd_ostream os(dumpDir + "/" + name + "." + stage + ".mlir", ec);
  if (!ec)
    module.print(os);
}

} // namespace kiln::jit
