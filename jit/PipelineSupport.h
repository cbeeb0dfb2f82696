//===- PipelineSupport.h - Helpers every target pipeline uses ---*- C++ -*-===//

#ifndef KILN_JIT_PIPELINESUPPORT_H
#define KILN_JIT_PIPELINESUPPORT_H

#include <string>

#include "mlir/IR/BuiltinOps.h"

namespace kiln::jit {

/// Parses and runs a textual pass pipeline on `module`; false when either
/// fails (the diagnostics went to the context's handler).
bool runPassPipeline(mlir::ModuleOp module, const char *pipeline);

/// KILN_DUMP_IR: writes `module` to `<dumpDir>/<name>.<stage>.mlir`; nothing
/// when `dumpDir` is empty.
void dumpModule(const std::string &dumpDir, const std::string &name, const char *stage, mlir::ModuleOp module);

} // namespace kiln::jit

#endif // KILN_JIT_PIPELINESUPPORT_H
