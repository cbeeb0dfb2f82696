//===- ScratchLayout.cpp - Where a kernel's temporaries live in scratch ---===//

#include "jit/targets/cpu/ScratchLayout.h"

#include <algorithm>
#include <numeric>

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {
/// The last position of a temporary that escapes the kernel: far past any
/// operation, with room for the reuse distance.
constexpr int64_t kLivesToTheEnd = INT64_MAX / 4;

/// Whether `user` stores `v` itself (an address) to memory, from where it
/// may be read back anywhere.
bool storesValue(Operation *user, Value v) {
  if (auto store = dyn_cast<memref::StoreOp>(user))
    return store.getValueToStore() == v;
  if (auto store = dyn_cast<LLVM::StoreOp>(user))
    return store.getValue() == v;
  return false;
}
} // namespace

std::vector<int64_t> packScratch(llvm::ArrayRef<ScratchLife> lives, int64_t alignment, int64_t distance,
                                 int64_t &totalBytes) {
  const size_t n = lives.size();
  std::vector<int64_t> offsets(n, 0), order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (lives[a].bytes != lives[b].bytes)
      return lives[a].bytes > lives[b].bytes;
    return lives[a].first < lives[b].first;
  });
  distance = std::clamp<int64_t>(distance, 0, kLivesToTheEnd);  // no overflow below
  auto meet = [&](const ScratchLife &a, const ScratchLife &b) {
    // [first, last] widened by `distance` on one side meets the other.
    return a.first <= b.last + distance && b.first <= a.last + distance;
  };
  auto slotBytes = [&](int64_t i) { return (lives[i].bytes + alignment - 1) / alignment * alignment; };
  totalBytes = 0;
  std::vector<int64_t> placed;
  llvm::SmallVector<std::pair<int64_t, int64_t>> taken;  // [begin, end) of placed lives that meet this one
  for (int64_t i : order) {
    const int64_t size = slotBytes(i);
    taken.clear();
    for (int64_t j : placed)
      if (meet(lives[i], lives[j]))
        taken.push_back({offsets[j], offsets[j] + slotBytes(j)});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + size <= begin)
        break;
      offset = std::max(offset, end);
    }
    offsets[i] = offset;
    placed.push_back(i);
    totalBytes = std::max(totalBytes, offset + size);
  }
  return offsets;
}

llvm::DenseMap<Operation *, int64_t> scratchPositions(func::FuncOp kernel) {
  llvm::DenseMap<Operation *, int64_t> position;
  int64_t next = 0;
  for (Operation &op : kernel.getBody().front()) {
    position[&op] = next;
    if (!isPure(&op) && !isa<memref::AllocOp, memref::DeallocOp>(op))
      ++next;
  }
  return position;
}

ScratchLife scratchLife(Value root, int64_t bytes, int64_t allocPosition, func::FuncOp kernel,
                        const llvm::DenseMap<Operation *, int64_t> &position) {
  ScratchLife life{bytes, INT64_MAX, INT64_MIN};
  Block &entry = kernel.getBody().front();
  // What may carry the buffer's address on: memrefs (views, casts), tensors
  // made of it, and indices, integers and pointers (an address taken for a
  // runtime call).
  auto carriesAddress = [](Type t) {
    return isa<BaseMemRefType, TensorType, IndexType, IntegerType, LLVM::LLVMPointerType>(t);
  };
  llvm::SmallVector<Value> work{root};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<memref::DeallocOp>(user) || !seen.insert(user).second)
        continue;
      Operation *top = entry.findAncestorOpInBlock(*user);
      auto at = top ? position.find(top) : position.end();
      if (at == position.end() || isa<func::ReturnOp>(user) || storesValue(user, v)) {
        life.first = std::min(life.first, allocPosition);
        life.last = kLivesToTheEnd;  // escapes: shares no bytes after its first use
        continue;
      }
      life.first = std::min(life.first, at->second);
      life.last = std::max(life.last, at->second);
      if (isa<memref::LoadOp>(user))
        continue;  // an element's value, not an address
      // A value yielded out of a region (scf.yield) goes on as its parent's result.
      Operation *producer = user->hasTrait<OpTrait::IsTerminator>() ? user->getParentOp() : user;
      for (Value result : producer->getResults())
        if (carriesAddress(result.getType()))
          work.push_back(result);
    }
  }
  if (life.first > life.last)
    life.first = life.last = allocPosition;
  return life;
}

} // namespace kiln::jit::cpu
