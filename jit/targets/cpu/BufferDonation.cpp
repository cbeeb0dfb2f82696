//===- BufferDonation.cpp - Outputs that may reuse input buffers -*- C++ -*-===//

#include "jit/targets/cpu/BufferDonation.h"

#include <deque>

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

constexpr unsigned kNoArgument = ~0u;

/// Which kernel arguments one top-level op reads and writes (through any
/// view), and which its payload reads itself (a gather or index_select
/// fused into a linalg op loads its source at computed elements).
struct Access {
  llvm::SmallBitVector reads, writes, payloadReads;
};

} // namespace

std::vector<std::pair<uint32_t, uint32_t>> findDonations(func::FuncOp kernel, unsigned numInputs,
                                                         unsigned numOutputs) {
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  const unsigned numArgs = numInputs + numOutputs;
  if (numInputs == 0 || numOutputs == 0 || kernel.getNumArguments() != numArgs || !kernel.getBody().hasOneBlock())
    return pairs;
  Block &body = kernel.getBody().front();

  // The argument each memref value is a view of.
  DenseMap<Value, unsigned> argOf;
  for (unsigned k = 0; k < numArgs; ++k)
    argOf[body.getArgument(k)] = k;
  auto rootArg = [&](Value v) {
    auto it = argOf.find(v);
    return it == argOf.end() ? kNoArgument : it->second;
  };

  SmallVector<Operation *> ops;
  SmallVector<Access> access;
  for (Operation &op : body.without_terminator()) {
    // Views, and transposed views (kiln-cpu-fold-matmul-transposes), which
    // are not ViewLikeOpInterface ops.
    Value viewed = isa<ViewLikeOpInterface>(op) ? cast<ViewLikeOpInterface>(op).getViewSource()
                   : isa<memref::TransposeOp>(op) ? cast<memref::TransposeOp>(op).getIn()
                                                  : Value();
    if (viewed) {
      if (unsigned a = rootArg(viewed); a != kNoArgument)
        for (Value result : op.getResults())
          argOf[result] = a;
      continue;
    }
    Access a{llvm::SmallBitVector(numArgs), llvm::SmallBitVector(numArgs), llvm::SmallBitVector(numArgs)};
    // A linalg op's own effects are its operands'; what its payload reads
    // (tensor.extract became memref.load) is found below. Any other op with
    // regions, or with effects we cannot attribute to a value, counts as
    // reading and writing every argument it can reach.
    std::optional<SmallVector<MemoryEffects::EffectInstance>> effects;
    if (op.getNumRegions() == 0 || isa<linalg::LinalgOp>(op))
      effects = getEffectsRecursively(&op);
    bool known = effects.has_value();
    for (const MemoryEffects::EffectInstance &e : known ? *effects : SmallVector<MemoryEffects::EffectInstance>{}) {
      const bool read = isa<MemoryEffects::Read>(e.getEffect()), write = isa<MemoryEffects::Write>(e.getEffect());
      if (!read && !write)
        continue;
      Value v = e.getValue();
      if (!v) {
        known = false;
        break;
      }
      if (unsigned arg = rootArg(v); arg != kNoArgument) {
        if (read)
          a.reads.set(arg);
        if (write)
          a.writes.set(arg);
      }
    }
    if (!known) {
      op.walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          if (unsigned arg = rootArg(v); arg != kNoArgument) {
            a.reads.set(arg);
            a.writes.set(arg);
          }
      });
    } else if (isa<linalg::LinalgOp>(op)) {
      // Payload operations that use an argument's memory (a load of a
      // gathered element): reads, and writes unless they are pure reads.
      for (Region &region : op.getRegions())
        region.walk([&](Operation *inner) {
          for (Value v : inner->getOperands())
            if (unsigned arg = rootArg(v); arg != kNoArgument) {
              a.reads.set(arg);
              a.payloadReads.set(arg);
              if (!isa<memref::LoadOp>(inner))
                a.writes.set(arg);
            }
        });
    }
    ops.push_back(&op);
    access.push_back(std::move(a));
  }

  llvm::SmallBitVector taken(numInputs);
  for (unsigned j = 0; j < numOutputs; ++j) {
    const unsigned out = numInputs + j;
    // Exactly one op writes the output...
    int writer = -1, writers = 0;
    for (size_t x = 0; x < ops.size(); ++x)
      if (access[x].writes.test(out)) {
        writer = static_cast<int>(x);
        ++writers;
      }
    if (writers != 1)
      continue;
    // ...an all-parallel linalg op on buffers, with the output argument
    // itself (not a view of it) as its one operand on that buffer.
    auto linalgOp = dyn_cast<linalg::LinalgOp>(ops[writer]);
    if (!linalgOp || !linalgOp.hasPureBufferSemantics() || !linalgOp.isAllParallelLoops())
      continue;
    OpOperand *init = nullptr;
    int operandsOnOutput = 0;
    for (OpOperand &operand : linalgOp->getOpOperands())
      if (rootArg(operand.get()) == out) {
        ++operandsOnOutput;
        if (operand.get() == body.getArgument(out) && linalgOp.isDpsInit(&operand))
          init = &operand;
      }
    if (!init || operandsOnOutput != 1)
      continue;
    const AffineMap outMap = linalgOp.getMatchingIndexingMap(init);

    auto donatable = [&](unsigned in) {
      if (in >= numInputs || taken.test(in) || body.getArgument(in).getType() != body.getArgument(out).getType())
        return false;
      // The writer reads the input only element-for-element with what it
      // writes (not in its payload: x + index_select(x, 1, perm) read
      // elements it had already overwritten)...
      if (access[writer].payloadReads.test(in))
        return false;
      for (OpOperand &operand : linalgOp->getOpOperands())
        if (rootArg(operand.get()) == in &&
            (operand.get() != body.getArgument(in) || !linalgOp.isDpsInput(&operand) ||
             linalgOp.getMatchingIndexingMap(&operand) != outMap))
          return false;
      // ...nothing writes the input, and nothing reads it after the writer.
      for (size_t x = 0; x < ops.size(); ++x) {
        if (access[x].writes.test(in))
          return false;
        if (access[x].reads.test(in) && static_cast<int>(x) > writer)
          return false;
      }
      return true;
    };

    // Among the donatable inputs, the one nearest (in payload operations) to
    // the value written: for `w' = w - lr * m'` that is w, not m.
    Block *payload = linalgOp.getBlock();
    std::deque<Value> queue{linalgOp.getMatchingYieldValue(init)->get()};
    llvm::DenseSet<Value> seen;
    while (!queue.empty()) {
      Value v = queue.front();
      queue.pop_front();
      if (!seen.insert(v).second)
        continue;
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        if (arg.getOwner() == payload && arg.getArgNumber() < linalgOp.getNumDpsInputs()) {
          const unsigned in = rootArg(linalgOp.getDpsInputOperand(arg.getArgNumber())->get());
          if (donatable(in)) {
            taken.set(in);
            pairs.emplace_back(j, in);
            break;
          }
        }
        continue;
      }
      if (Operation *def = v.getDefiningOp(); def && linalgOp->isProperAncestor(def))
        for (Value operand : def->getOperands())
          queue.push_back(operand);
    }
  }
  return pairs;
}

} // namespace kiln::jit::cpu
