// OpKind: the recorded primitives and their facts, from the op table
// (OpKinds.def).
#pragma once

#include <cstdint>
#include <string_view>

#include "kiln/dtype.h"

namespace kiln::core {

enum class OpCategory : uint8_t { Leaf, Unary, Binary, Compare, Select, Cast, Reduce, ArgReduce, Scan, Matmul, Conv, Shape, Index, Collective };

/// Which element types an op's data operands (a leaf's result) may have.
enum class OpTypes : uint8_t { Any, Numeric, Float, Bool };

enum class OpKind : uint8_t {
#define KILN_OP(Name, mnemonic, Category, Arity, Types, Grad, public_name, c_abi, attributes, summary) Name,
#include "kiln/op_table.def"
};

inline constexpr int kNumOpKinds = 0
#define KILN_OP(Name, mnemonic, Category, Arity, Types, Grad, public_name, c_abi, attributes, summary) +1
#include "kiln/op_table.def"
    ;

/// The op's mnemonic, e.g. "reduce_sum" (also the kiln dialect op name).
std::string_view opName(OpKind k);
/// The kind whose mnemonic is `name`; false when there is none.
bool opKindFromName(std::string_view name, OpKind* out);
OpCategory opCategory(OpKind k);
/// Number of tensor inputs; -1 for a variadic op (one or more).
int opArity(OpKind k);
OpTypes opTypes(OpKind k);
/// True when autograd has a vector-Jacobian product for the op.
bool opHasVjp(OpKind k);
/// The public kiln:: function that records the op ("" for Param).
std::string_view opPublicName(OpKind k);
/// What the node's attribute slots mean ("" when it has none).
std::string_view opAttributes(OpKind k);
/// True when the C ABI has a kiln_op for it (the row's c_abi is not NoCAbi).
bool opHasCAbi(OpKind k);
/// True when the compiler lowers it into kernels; false for Collective rows,
/// which the engine runs between compiled regions (and for Param, the
/// kernels' arguments).
bool opIsLowered(OpKind k);

/// The one dtype-legality rule: may the op's data operands (a leaf's result)
/// have element type `t`? The public API, the lowering's support check and
/// the kiln dialect's type constraints agree with it (OpTableTest checks).
bool acceptsDType(OpKind k, DType t);
/// "float", "numeric (not bool)", ... for error messages.
std::string_view opTypesDescription(OpKind k);

inline bool isElementwise(OpKind k) {
  OpCategory c = opCategory(k);
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Compare ||
         c == OpCategory::Select || c == OpCategory::Cast;
}

}  // namespace kiln::core
