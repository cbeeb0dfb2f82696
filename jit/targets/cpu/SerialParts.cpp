//===- SerialParts.cpp - A large kernel's serial code in parts ---*- C++ -*-===//

#include "jit/targets/cpu/SerialParts.h"
#include "jit/targets/cpu/KernelArguments.h"

#include <algorithm>

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// A value a part can take as an argument besides the kernel's: a scalar,
/// or a row buffer on the kernel's stack (a static memref, one pointer under
/// the bare-pointer convention, a buffer of its own: noalias holds).
bool passable(Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  if (!type)
    return v.getType().isIntOrIndexOrFloat();
  return isa_and_nonnull<memref::AllocaOp>(v.getDefiningOp()) && type.hasStaticShape() &&
         type.getLayout().isIdentity();
}

/// The kernel's top-level operations, split into those that move into parts
/// and those that stay (pure, region-free operations and stack buffers, and
/// nothing that reads a moving operation's result).
struct Classified {
  SmallVector<Operation *> ops;
  DenseMap<Operation *, unsigned> position;
  DenseSet<Operation *> moving;
  SmallVector<int64_t> weight;    // nested operations of each moving op
  SmallVector<unsigned> lastUse;  // last top-level position reading its results
  int64_t total = 0;
};

Classified classify(Block &block) {
  Classified c;
  for (Operation &op : block.without_terminator())
    c.ops.push_back(&op);
  c.weight.assign(c.ops.size(), 0);
  c.lastUse.assign(c.ops.size(), 0);
  for (auto [i, op] : llvm::enumerate(c.ops)) {
    c.position[op] = static_cast<unsigned>(i);
    bool stays = op->getNumRegions() == 0 && (isMemoryEffectFree(op) || isa<memref::AllocaOp>(op));
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp(); def && c.moving.contains(def))
        stays = false;
    if (stays)
      continue;
    c.moving.insert(op);
    op->walk([&](Operation *) { ++c.weight[i]; });
    c.total += c.weight[i];
  }
  const auto end = static_cast<unsigned>(c.ops.size());
  for (auto [i, op] : llvm::enumerate(c.ops)) {
    c.lastUse[i] = static_cast<unsigned>(i);
    if (!c.moving.contains(op))
      continue;
    for (Operation *user : op->getUsers()) {
      Operation *top = block.findAncestorOpInBlock(*user);
      // Read by the terminator (or from nowhere we know): never cut after it.
      c.lastUse[i] = std::max(c.lastUse[i], top && c.position.count(top) ? c.position[top] : end);
    }
  }
  return c;
}

/// Runs of moving operations of at least `partOps` nested operations whose
/// results nobody reads after the run; a shorter tail stays in the kernel.
SmallVector<SmallVector<Operation *>> cutParts(const Classified &c, int64_t partOps) {
  SmallVector<SmallVector<Operation *>> parts;
  SmallVector<Operation *> current;
  int64_t size = 0;
  unsigned reach = 0;
  for (auto [i, op] : llvm::enumerate(c.ops)) {
    if (!c.moving.contains(op))
      continue;
    current.push_back(op);
    size += c.weight[i];
    reach = std::max(reach, c.lastUse[i]);
    if (size >= partOps && reach <= i) {
      parts.push_back(std::move(current));
      current.clear();
      size = 0;
      reach = 0;
    }
  }
  return parts;
}

} // namespace

std::vector<std::string> outlineSerialParts(ModuleOp module, func::FuncOp kernel, int64_t partOps) {
  std::vector<std::string> names;
  if (partOps <= 0 || kernel.isExternal() || !kernel.getBody().hasOneBlock())
    return names;
  Block &block = kernel.getBody().front();
  const Classified c = classify(block);
  if (c.total < 2 * partOps)
    return names;
  MLIRContext *ctx = module.getContext();
  OpBuilder mb(ctx);
  mb.setInsertionPointAfter(kernel);
  for (const SmallVector<Operation *> &part : cutParts(c, partOps)) {
    DenseSet<Operation *> inPart(part.begin(), part.end());
    // Values the part reads from outside it.
    llvm::SetVector<Value> liveIns;
    for (Operation *op : part)
      op->walk([&](Operation *nested) {
        for (Value v : nested->getOperands()) {
          Operation *anchor = v.getDefiningOp() ? v.getDefiningOp() : v.getParentBlock()->getParentOp();
          Operation *top = block.findAncestorOpInBlock(*anchor);
          if (!top || !inPart.contains(top))
            liveIns.insert(v);
        }
      });
    // Kernel arguments map to the part's; pure operations are cloned (with
    // what they read); everything else must travel as an extra argument.
    llvm::SetVector<Operation *> clones;
    SmallVector<Value> extras;
    DenseSet<Value> seen;
    SmallVector<Value> work(liveIns.rbegin(), liveIns.rend());
    bool ok = true;
    while (ok && !work.empty()) {
      Value v = work.pop_back_val();
      if (!seen.insert(v).second)
        continue;
      if (auto arg = dyn_cast<BlockArgument>(v); arg && arg.getOwner() == &block)
        continue;
      Operation *def = v.getDefiningOp();
      if (def && def->getBlock() == &block && !c.moving.contains(def) && isMemoryEffectFree(def)) {
        if (clones.insert(def))
          for (Value operand : def->getOperands())
            work.push_back(operand);
        continue;
      }
      if (passable(v))
        extras.push_back(v);
      else
        ok = false;
    }
    if (!ok)
      continue;  // this run stays in the kernel

    const std::string name = kernel.getName().str() + "_part" + std::to_string(names.size());
    SmallVector<Type> argTypes(kernel.getArgumentTypes());
    for (Value v : extras)
      argTypes.push_back(v.getType());
    auto fn = func::FuncOp::create(mb, kernel.getLoc(), name, FunctionType::get(ctx, argTypes, {}));
    fn.setPrivate();
    mb.setInsertionPointAfter(fn);
    Block *entry = fn.addEntryBlock();
    IRMapping map;
    for (unsigned i = 0; i < kernel.getNumArguments(); ++i)
      map.map(kernel.getArgument(i), entry->getArgument(i));
    for (auto [k, v] : llvm::enumerate(extras))
      map.map(v, entry->getArgument(kernel.getNumArguments() + static_cast<unsigned>(k)));
    SmallVector<Operation *> ordered(clones.begin(), clones.end());
    llvm::sort(ordered, [&](Operation *a, Operation *b) { return c.position.lookup(a) < c.position.lookup(b); });
    OpBuilder bb = OpBuilder::atBlockEnd(entry);
    for (Operation *op : ordered)
      bb.clone(*op, map);
    for (Operation *op : part)
      bb.clone(*op, map);
    func::ReturnOp::create(bb, kernel.getLoc());

    // The call goes where the run's last operation was: every live-in is
    // defined by then, and nothing after reads what the run defined.
    OpBuilder cb(part.back());
    SmallVector<Value> callArgs(kernel.getArguments().begin(), kernel.getArguments().end());
    llvm::append_range(callArgs, extras);
    auto call = func::CallOp::create(cb, part.back()->getLoc(), fn, callArgs);
    for (Operation *op : llvm::reverse(part))
      op->erase();
    names.push_back(name);
    if (failed(pruneKernelArguments(fn, 0, kernel.getNumArguments(), fn, 0, call)))
      break;
  }
  // Constants and views only the parts read (users before what they use).
  SmallVector<Operation *> stayed;
  for (Operation &op : block.without_terminator())
    stayed.push_back(&op);
  for (Operation *op : llvm::reverse(stayed))
    if (op->use_empty() && op->getNumRegions() == 0 && isMemoryEffectFree(op))
      op->erase();
  return names;
}

} // namespace kiln::jit::cpu
