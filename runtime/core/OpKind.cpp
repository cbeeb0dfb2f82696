#include "runtime/core/OpKind.h"

namespace kiln::core {

namespace {

struct OpFacts {
  std::string_view name;
  OpCategory category;
  int arity;
  OpTypes types;
  bool vjp;
  std::string_view publicName;
  std::string_view attributes;
  bool cAbi;
};

constexpr bool Vjp = true, NoVjp = false;

constexpr OpFacts kFacts[] = {
#define KILN_OP(Name, mnemonic, Category, Arity, Types, Grad, public_name, c_abi, attributes, summary) \
  {mnemonic, OpCategory::Category, Arity, OpTypes::Types, Grad, #public_name, attributes, \
   std::string_view(#c_abi) != "NoCAbi"},
#include "kiln/op_table.def"
};
static_assert(sizeof(kFacts) / sizeof(kFacts[0]) == kNumOpKinds);

const OpFacts& facts(OpKind k) { return kFacts[static_cast<int>(k)]; }

}  // namespace

std::string_view opName(OpKind k) { return facts(k).name; }

bool opKindFromName(std::string_view name, OpKind* out) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (kFacts[i].name == name) {
      *out = static_cast<OpKind>(i);
      return true;
    }
  }
  return false;
}

OpCategory opCategory(OpKind k) { return facts(k).category; }
int opArity(OpKind k) { return facts(k).arity; }
OpTypes opTypes(OpKind k) { return facts(k).types; }
bool opHasVjp(OpKind k) { return facts(k).vjp; }
std::string_view opPublicName(OpKind k) { return k == OpKind::Param ? std::string_view() : facts(k).publicName; }
std::string_view opAttributes(OpKind k) { return facts(k).attributes; }
bool opHasCAbi(OpKind k) { return facts(k).cAbi; }
bool opIsLowered(OpKind k) { return k != OpKind::Param && facts(k).category != OpCategory::Collective; }

bool acceptsDType(OpKind k, DType t) {
  switch (facts(k).types) {
    case OpTypes::Any: return true;
    case OpTypes::Numeric: return t != DType::boolean;
    case OpTypes::Float: return is_floating(t);
    case OpTypes::Bool: return t == DType::boolean;
  }
  return false;
}

std::string_view opTypesDescription(OpKind k) {
  switch (facts(k).types) {
    case OpTypes::Any: return "any dtype";
    case OpTypes::Numeric: return "numeric dtypes (not bool)";
    case OpTypes::Float: return "floating dtypes (f32, f64, f16, bf16)";
    case OpTypes::Bool: return "bool";
  }
  return "";
}

}  // namespace kiln::core
