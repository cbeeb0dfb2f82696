#include "runtime/trace/Trace.h"

namespace kiln::trace {

void Trace::clear() {
  nodes.clear();
  operands.clear();
  attrs.clear();
  params.clear();
  holders.clear();
  opCount = 0;
}

void Trace::liveness(std::vector<uint8_t>& needed, std::vector<uint32_t>& lastUse) const {
  const size_t n = nodes.size();
  needed.assign(n, 0);
  lastUse.assign(n, 0);
  for (size_t i = 0; i < n; ++i) needed[i] = holders[i] != nullptr;
  for (size_t i = n; i-- > 0;) {
    if (!needed[i]) continue;
    for (uint32_t in : inputsOf(nodes[i])) needed[in] = 1;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!needed[i]) continue;
    lastUse[i] = static_cast<uint32_t>(i);
    for (uint32_t in : inputsOf(nodes[i])) lastUse[in] = static_cast<uint32_t>(i);
  }
}

std::string Trace::str() const {
  std::string s;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& nd = nodes[i];
    s += "%" + std::to_string(i) + " = " + std::string(core::opName(nd.op)) + "(";
    bool first = true;
    for (uint32_t in : inputsOf(nd)) {
      s += (first ? "%" : ", %") + std::to_string(in);
      first = false;
    }
    s += ") : " + std::string(dtype_name(nd.dtype)) + nd.shape.str();
    if (holders[i]) s += "  live";
    s += "\n";
  }
  return s;
}

}  // namespace kiln::trace
