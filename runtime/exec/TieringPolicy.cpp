#include "runtime/exec/TieringPolicy.h"

#include <algorithm>
#include <limits>

namespace kiln::exec {

RegionVerdict decideRegion(const RegionFacts& f) {
  if (f.occurrences < f.threshold) return RegionVerdict::NotHot;
  switch (f.trace) {
    case TraceOutlook::NoWholeKernel:
      return RegionVerdict::Compile;
    case TraceOutlook::WholeKernelComing:
      return RegionVerdict::WholeTraceWillReplace;
    case TraceOutlook::MayRecur:
      break;
  }
  const bool loopBody = f.occurrencesInTrace > 1 && f.recurringWorkShare >= kLoopBodyWorkShare;
  if (loopBody || f.distinctTraces >= kDistinctTracesForRegions) return RegionVerdict::Compile;
  return RegionVerdict::WaitForRecurrence;
}

double paybackRuns(const TraceCompileFacts& f) {
  const double saved = f.interpretedMs * kExpectedSavedFraction;
  return saved > 0 ? f.estimatedCompileMs / saved : std::numeric_limits<double>::infinity();
}

CompilePriority decideCompilePriority(const TraceCompileFacts& f) {
  const double runs = paybackRuns(f);
  return runs <= std::max(kUrgentPaybackRuns, static_cast<double>(f.runs)) ? CompilePriority::Urgent
                                                                          : CompilePriority::Background;
}

CodegenEffort chooseCodegenEffort(double estimatedCompileMs, bool background, double quickFromMs) {
  return background && estimatedCompileMs >= quickFromMs ? CodegenEffort::Quick : CodegenEffort::Full;
}

void CompileCostModel::noteCompile(uint32_t ops, double cpuMs) {
  if (ops == 0 || !(cpuMs > 0)) return;
  const double perOp = std::max(0.0, cpuMs - kFixedMs) / ops;
  msPerOp_ = 0.5 * msPerOp_ + 0.5 * perOp;
}

std::string_view verdictName(RegionVerdict verdict) {
  switch (verdict) {
    case RegionVerdict::Compile:
      return "compile";
    case RegionVerdict::NotHot:
      return "not hot";
    case RegionVerdict::WholeTraceWillReplace:
      return "its trace is hot and will be compiled whole";
    case RegionVerdict::WaitForRecurrence:
      return "a small part of a trace that may recur (compiled whole if it does)";
  }
  return "?";
}

double estimateNodeWork(const trace::Trace& trace, const trace::Node& node) {
  const auto numel = static_cast<double>(node.shape.numel());
  switch (node.op) {
    case core::OpKind::Param:
    case core::OpKind::Reshape:
    case core::OpKind::Permute:
    case core::OpKind::BroadcastTo:
    case core::OpKind::Slice:
      return 0;
    default:
      break;
  }
  const core::OpCategory category = core::opCategory(node.op);
  auto ins = trace.inputsOf(node);
  if (category == core::OpCategory::Matmul && !ins.empty()) {
    const Shape& a = trace.nodes[ins[0]].shape;
    const double k = a.rank() > 0 ? static_cast<double>(a[a.rank() - 1]) : 1.0;
    return numel * k / 8.0;
  }
  if (category == core::OpCategory::Conv && ins.size() == 2) {
    const Shape& w = trace.nodes[ins[1]].shape;  // [C_out, C/groups, kH, kW]
    const double k = w.rank() == 4 ? static_cast<double>(w[1] * w[2] * w[3]) : 1.0;
    return numel * k / 8.0;
  }
  if ((category == core::OpCategory::Reduce || category == core::OpCategory::ArgReduce) && !ins.empty())
    return static_cast<double>(trace.nodes[ins[0]].shape.numel());
  return numel;
}

}  // namespace kiln::exec
