#include "runtime/core/OpKind.h"

namespace kiln::core {

std::string_view opName(OpKind k) {
  static constexpr std::string_view kNames[] = {
#define KILN_OP(Name, mnemonic, Category) mnemonic,
#include "runtime/core/OpKinds.def"
  };
  return kNames[static_cast<int>(k)];
}

OpCategory opCategory(OpKind k) {
  static constexpr OpCategory kCats[] = {
#define KILN_OP(Name, mnemonic, Category) OpCategory::Category,
#include "runtime/core/OpKinds.def"
  };
  return kCats[static_cast<int>(k)];
}

}  // namespace kiln::core
