//===- LaunchProgramBuilder.cpp - Host index arithmetic as launch steps ---===//

#include "jit/targets/gpu/LaunchProgramBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/TypeSwitch.h"

namespace kiln::jit::gpu {

using Op = exec::LaunchExpr::Op;

int64_t LaunchProgramBuilder::add(exec::LaunchExpr e) {
  program_.push_back(e);
  return static_cast<int64_t>(program_.size()) - 1;
}

namespace {

/// Index and 64-bit integers: the launch program's int64, with the same
/// arithmetic. (Narrower integers wrap at their width, and i1 true is -1 to
/// signed operations: a step computed in 64 bits would differ.)
bool isWide(mlir::Type t) { return t.isIndex() || t.isSignlessInteger(64); }

} // namespace

std::optional<int64_t> LaunchProgramBuilder::stepOf(mlir::Value v) {
  // i1 only as a comparison's result, a select's condition or a constant:
  // a step of 0 or 1 that only a select reads.
  if (!isWide(v.getType()) && !v.getType().isSignlessInteger(1))
    return std::nullopt;
  if (auto it = steps_.find(v); it != steps_.end())
    return it->second;
  std::optional<int64_t> step;
  if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(v)) {
    const unsigned n = arg.getArgNumber();
    if (arg.getOwner() == entry_ && n >= firstSize_ && n < firstSize_ + numSizes_)
      step = add({Op::Size, n - firstSize_});
  } else if (mlir::Operation *def = v.getDefiningOp()) {
    // Operands first (each a step of its own), then the operation on them.
    auto binary = [&](Op op) -> std::optional<int64_t> {
      if (!isWide(def->getOperand(0).getType()))
        return std::nullopt;
      auto a = stepOf(def->getOperand(0)), b = stepOf(def->getOperand(1));
      if (!a || !b)
        return std::nullopt;
      return add({op, *a, *b});
    };
    step = llvm::TypeSwitch<mlir::Operation *, std::optional<int64_t>>(def)
               .Case([&](mlir::arith::ConstantOp c) -> std::optional<int64_t> {
                 auto attr = llvm::dyn_cast<mlir::IntegerAttr>(c.getValue());
                 if (!attr)
                   return std::nullopt;
                 const llvm::APInt &value = attr.getValue();  // i1 true is 1, not -1
                 return add({Op::Constant, value.getBitWidth() == 1 ? int64_t(value.getZExtValue())
                                                                    : value.getSExtValue()});
               })
               // Between index and i64: the same int64.
               .Case<mlir::arith::IndexCastOp, mlir::arith::IndexCastUIOp>(
                   [&](mlir::Operation *cast) -> std::optional<int64_t> {
                     if (!isWide(cast->getOperand(0).getType()) || !isWide(cast->getResult(0).getType()))
                       return std::nullopt;
                     return stepOf(cast->getOperand(0));
                   })
               .Case([&](mlir::arith::AddIOp) { return binary(Op::Add); })
               .Case([&](mlir::arith::SubIOp) { return binary(Op::Sub); })
               .Case([&](mlir::arith::MulIOp) { return binary(Op::Mul); })
               .Case([&](mlir::arith::DivSIOp) { return binary(Op::DivS); })
               .Case([&](mlir::arith::RemSIOp) { return binary(Op::RemS); })
               .Case([&](mlir::arith::FloorDivSIOp) { return binary(Op::FloorDivS); })
               .Case([&](mlir::arith::CeilDivSIOp) { return binary(Op::CeilDivS); })
               .Case([&](mlir::arith::DivUIOp) { return binary(Op::DivU); })
               .Case([&](mlir::arith::RemUIOp) { return binary(Op::RemU); })
               .Case([&](mlir::arith::CeilDivUIOp) { return binary(Op::CeilDivU); })
               .Case([&](mlir::arith::MinSIOp) { return binary(Op::MinS); })
               .Case([&](mlir::arith::MaxSIOp) { return binary(Op::MaxS); })
               .Case([&](mlir::arith::CmpIOp cmp) -> std::optional<int64_t> {
                 switch (cmp.getPredicate()) {
                 case mlir::arith::CmpIPredicate::eq: return binary(Op::Eq);
                 case mlir::arith::CmpIPredicate::ne: return binary(Op::Ne);
                 case mlir::arith::CmpIPredicate::slt: return binary(Op::Lt);
                 case mlir::arith::CmpIPredicate::sle: return binary(Op::Le);
                 case mlir::arith::CmpIPredicate::sgt: return binary(Op::Gt);
                 case mlir::arith::CmpIPredicate::sge: return binary(Op::Ge);
                 default: return std::nullopt;  // unsigned: not index arithmetic
                 }
               })
               .Case([&](mlir::arith::SelectOp select) -> std::optional<int64_t> {
                 if (!isWide(select.getType()))
                   return std::nullopt;
                 auto c = stepOf(select.getCondition()), t = stepOf(select.getTrueValue()),
                      f = stepOf(select.getFalseValue());
                 if (!c || !t || !f)
                   return std::nullopt;
                 return add({Op::Select, *c, *t, *f});
               })
               .Default([](mlir::Operation *) { return std::nullopt; });
  }
  if (step)
    steps_[v] = *step;
  return step;
}

} // namespace kiln::jit::gpu
