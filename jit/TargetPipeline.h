//===- TargetPipeline.h - One compiler pipeline per target kind -*- C++ -*-===//
//
// libkiln_jit compiles for several targets (exec::CompileTarget): each kind
// has one registered pipeline, from the trace graph to the target's binary
// and its dispatches. The compiler libkiln loads routes each compilation to
// the pipeline of its target's kind.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_JIT_TARGETPIPELINE_H
#define KILN_JIT_TARGETPIPELINE_H

#include <memory>
#include <string>

#include "runtime/exec/Executable.h"

namespace kiln::jit {

class TargetPipeline {
public:
  virtual ~TargetPipeline() = default;
  /// Compiles `graph` for `target` (of this pipeline's kind).
  virtual exec::CompileResult compile(const trace::TraceGraph &graph, const std::string &name,
                                      const exec::CompileTarget &target) = 0;
};

} // namespace kiln::jit

#endif // KILN_JIT_TARGETPIPELINE_H
