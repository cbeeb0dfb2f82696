// OpKind: the recorded primitives (see OpKinds.def) and their categories.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::core {

enum class OpCategory : uint8_t { Leaf, Unary, Binary, Compare, Select, Cast, Reduce, ArgReduce, Matmul, Shape, Index };

enum class OpKind : uint8_t {
#define KILN_OP(Name, mnemonic, Category) Name,
#include "runtime/core/OpKinds.def"
};

inline constexpr int kNumOpKinds = 0
#define KILN_OP(Name, mnemonic, Category) +1
#include "runtime/core/OpKinds.def"
    ;

/// The op's mnemonic, e.g. "reduce_sum" (also the kiln dialect op name).
std::string_view opName(OpKind k);
OpCategory opCategory(OpKind k);
inline bool isElementwise(OpKind k) {
  OpCategory c = opCategory(k);
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Compare ||
         c == OpCategory::Select || c == OpCategory::Cast;
}

}  // namespace kiln::core
