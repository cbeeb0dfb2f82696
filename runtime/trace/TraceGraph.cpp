#include "runtime/trace/TraceGraph.h"

namespace kiln::trace {

TraceGraph extractGraph(const Trace& trace, const std::vector<uint8_t>& needed, std::vector<int64_t>* paramOfInput,
                        std::vector<uint32_t>* nodeOfOutput, std::span<const uint32_t> scalarArgs) {
  TraceGraph g;
  g.device = trace.device;
  std::vector<uint32_t> scalarInputs;
  size_t nextScalar = 0;
  paramOfInput->clear();
  nodeOfOutput->clear();
  std::vector<uint32_t> renum(trace.nodes.size(), 0);
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    if (!needed[i]) continue;
    Node n = trace.nodes[i];
    renum[i] = static_cast<uint32_t>(g.nodes.size());
    const uint32_t firstOperand = static_cast<uint32_t>(g.operands.size());
    for (uint32_t in : trace.inputsOf(trace.nodes[i])) g.operands.push_back(renum[in]);
    const uint32_t firstAttr = static_cast<uint32_t>(g.attrs.size());
    for (int64_t a : trace.attrsOf(trace.nodes[i])) g.attrs.push_back(a);
    n.inputs = firstOperand;
    n.attrs = firstAttr;
    if (n.op == core::OpKind::Param) {
      paramOfInput->push_back(n.i0);
      n.i0 = static_cast<int64_t>(g.inputs.size());
      g.inputs.push_back(renum[i]);
    } else if (nextScalar < scalarArgs.size() && scalarArgs[nextScalar] == i) {
      // A scalar argument: a rank-0 input whose value the launch passes.
      ++nextScalar;
      n.op = core::OpKind::Param;
      n.f0 = n.f1 = 0;
      scalarInputs.push_back(renum[i]);
    }
    g.nodes.push_back(n);
    if (trace.holders[i]) {
      g.outputs.push_back(renum[i]);
      nodeOfOutput->push_back(static_cast<uint32_t>(i));
    }
  }
  for (uint32_t id : scalarInputs) {
    g.nodes[id].i0 = static_cast<int64_t>(g.inputs.size());
    g.inputs.push_back(id);
  }
  return g;
}

}  // namespace kiln::trace

namespace kiln::trace {
void graphBindings(const Trace& trace, const std::vector<uint8_t>& needed, std::vector<int64_t>* paramOfInput,
                   std::vector<uint32_t>* nodeOfOutput, std::vector<uint32_t>* nodeOfInput) {
  paramOfInput->clear();
  nodeOfOutput->clear();
  nodeOfInput->clear();
  for (size_t i = 0; i < trace.nodes.size(); ++i) {
    if (!needed[i]) continue;
    if (trace.nodes[i].op == core::OpKind::Param) {
      paramOfInput->push_back(trace.nodes[i].i0);
      nodeOfInput->push_back(static_cast<uint32_t>(i));
    }
    if (trace.holders[i]) nodeOfOutput->push_back(static_cast<uint32_t>(i));
  }
}
}  // namespace kiln::trace
