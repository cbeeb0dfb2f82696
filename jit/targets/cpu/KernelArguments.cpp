//===- KernelArguments.cpp - Outlined functions take what they read -*- C++ -*-===//

#include "jit/targets/cpu/KernelArguments.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;

namespace kiln::jit::cpu {

LogicalResult pruneKernelArguments(func::FuncOp fn, unsigned first, unsigned count, func::FuncOp callee,
                                   unsigned calleeFirst, func::CallOp call) {
  if (fn.isExternal() || first + count > fn.getNumArguments() || calleeFirst + count > callee.getNumArguments() ||
      call.getNumOperands() != callee.getNumArguments())
    return fn.emitError("kiln: outlined function and call do not match the kernel's arguments");
  llvm::BitVector unusedInFn(fn.getNumArguments()), unusedInCallee(callee.getNumArguments());
  SmallVector<int64_t> kept;
  for (unsigned k = 0; k < count; ++k) {
    if (fn.getArgument(first + k).use_empty()) {
      unusedInFn.set(first + k);
      unusedInCallee.set(calleeFirst + k);
    } else {
      kept.push_back(k);
    }
  }
  call->eraseOperands(unusedInCallee);
  if (callee != fn && failed(callee.eraseArguments(unusedInCallee)))
    return failure();
  if (failed(fn.eraseArguments(unusedInFn)))
    return failure();
  fn->setAttr(kKernelArgsAttr, DenseI64ArrayAttr::get(fn.getContext(), kept));
  return success();
}

std::optional<unsigned> kernelArgumentOf(Operation *fn, unsigned first, unsigned param) {
  if (param < first)
    return std::nullopt;
  auto kept = fn->getAttrOfType<DenseI64ArrayAttr>(kKernelArgsAttr);
  if (!kept)
    return param - first;  // not pruned: it takes every kernel argument
  if (param - first >= kept.size())
    return std::nullopt;
  return static_cast<unsigned>(kept[param - first]);
}

} // namespace kiln::jit::cpu
