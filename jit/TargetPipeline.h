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
  /// Compiles `graph` for `target` (of this pipeline's kind), with machine
  /// code of `effort` where the pipeline has more than one (the result says
  /// which it used).
  virtual exec::CompileResult compile(const trace::TraceGraph &graph, const std::string &name,
                                      const exec::CompileTarget &target, exec::CodegenEffort effort) = 0;
  /// The Full kernel of a Quick `quick` result of this pipeline, from its
  /// optimizedModules (machine code only). A pipeline with one code
  /// generator never returns Quick results, and says so.
  virtual exec::CompileResult codegenFull(const exec::CompileResult &quick, const std::string &name,
                                          const exec::CompileTarget &target) {
    (void)quick;
    (void)name;
    exec::CompileResult result;
    result.error = "the " + target.str() + " pipeline has one code generator";
    return result;
  }
};

} // namespace kiln::jit

#endif // KILN_JIT_TARGETPIPELINE_H
