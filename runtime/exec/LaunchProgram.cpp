#include "runtime/exec/LaunchProgram.h"

#include <algorithm>
#include <climits>

namespace kiln::exec {

namespace {

using Op = LaunchExpr::Op;

/// How many earlier steps a step of `op` reads.
int operandsOf(Op op) {
  switch (op) {
    case Op::Constant:
    case Op::Size: return 0;
    case Op::Select: return 3;
    default: return 2;
  }
}

int64_t floorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t ceilDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) == (b < 0))) ? q + 1 : q;
}

}  // namespace

std::string checkLaunchProgram(const std::vector<LaunchExpr>& program, int sizes) {
  if (!program.empty() && sizes <= 0) return "a launch program in a kernel that takes no sizes";
  for (std::size_t i = 0; i < program.size(); ++i) {
    const LaunchExpr& e = program[i];
    const std::string step = "launch step " + std::to_string(i);
    if (e.op > Op::Select) return step + " has an unknown operation";
    if (e.op == Op::Size && (e.a < 0 || e.a >= sizes))
      return step + " reads size " + std::to_string(e.a) + " of " + std::to_string(sizes);
    const int64_t operands[3] = {e.a, e.b, e.c};
    for (int k = 0; k < operandsOf(e.op); ++k)
      if (operands[k] < 0 || operands[k] >= static_cast<int64_t>(i))
        return step + " reads step " + std::to_string(operands[k]);
  }
  return {};
}

void runLaunchProgram(const std::vector<LaunchExpr>& program, const int64_t* sizes, std::vector<int64_t>& values) {
  values.resize(program.size());
  for (std::size_t i = 0; i < program.size(); ++i) {
    const LaunchExpr& e = program[i];
    const int n = operandsOf(e.op);
    const int64_t a = n > 0 ? values[static_cast<std::size_t>(e.a)] : 0;
    const int64_t b = n > 1 ? values[static_cast<std::size_t>(e.b)] : 0;
    // Division by 0 (and INT64_MIN / -1) gives 0 here, not a trap.
    const bool noQuotient = b == 0 || (b == -1 && a == INT64_MIN);
    int64_t v = 0;
    switch (e.op) {
      case Op::Constant: v = e.a; break;
      case Op::Size: v = sizes[e.a]; break;
      // Wrapping, as the kernel's index arithmetic does.
      case Op::Add: v = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); break;
      case Op::Sub: v = static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); break;
      case Op::Mul: v = static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); break;
      case Op::DivS: v = noQuotient ? 0 : a / b; break;
      case Op::RemS: v = noQuotient ? 0 : a % b; break;
      case Op::FloorDivS: v = noQuotient ? 0 : floorDiv(a, b); break;
      case Op::CeilDivS: v = noQuotient ? 0 : ceilDiv(a, b); break;
      case Op::DivU: v = b == 0 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) / static_cast<uint64_t>(b)); break;
      case Op::RemU: v = b == 0 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) % static_cast<uint64_t>(b)); break;
      case Op::CeilDivU: {
        const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
        v = b == 0 ? 0 : static_cast<int64_t>(ua / ub + (ua % ub != 0));
        break;
      }
      case Op::MinS: v = std::min(a, b); break;
      case Op::MaxS: v = std::max(a, b); break;
      case Op::Eq: v = a == b; break;
      case Op::Ne: v = a != b; break;
      case Op::Lt: v = a < b; break;
      case Op::Le: v = a <= b; break;
      case Op::Gt: v = a > b; break;
      case Op::Ge: v = a >= b; break;
      case Op::Select: v = a != 0 ? b : values[static_cast<std::size_t>(e.c)]; break;
    }
    values[i] = v;
  }
}

}  // namespace kiln::exec
