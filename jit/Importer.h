//===- Importer.h - Trace graph to the kiln dialect -------------*- C++ -*-===//
//
// Turns a recorded TraceGraph into a module with one func.func in the kiln
// dialect: arguments are the trace parameters, results the live outputs, in
// recording order. A graph node extent e < 0 is dynamic: size number -1 - e
// of a dynamic-shape kernel (see kDynamicSizesAttr in KilnToLinalg.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_IMPORTER_H
#define KILN_JIT_IMPORTER_H

#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::jit {

/// The module as MLIR text (generic op form, exact float bits), so it can be
/// logged, dumped and re-run through kiln-opt.
std::string printTraceGraph(const trace::TraceGraph &graph, const std::string &funcName);

/// Parses printTraceGraph's text in `context`; null with `error` set when the
/// graph does not verify.
mlir::OwningOpRef<mlir::ModuleOp> importTraceGraph(mlir::MLIRContext &context, const trace::TraceGraph &graph,
                                                   const std::string &funcName, std::string &error);

} // namespace kiln::jit

#endif // KILN_JIT_IMPORTER_H
