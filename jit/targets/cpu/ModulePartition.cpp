//===- ModulePartition.cpp - A kernel module in shares for threads -------===//

#include "jit/targets/cpu/ModulePartition.h"

#include <algorithm>
#include <numeric>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace kiln::jit::cpu {

namespace {

/// The functions `caller` calls directly that LLVM may inline into it.
SmallVector<LLVM::LLVMFuncOp> inlinableCallees(LLVM::LLVMFuncOp caller, SymbolTable &symbols) {
  SmallVector<LLVM::LLVMFuncOp> callees;
  caller.walk([&](LLVM::CallOp call) {
    std::optional<StringRef> name = call.getCallee();
    if (!name)
      return;
    auto callee = symbols.lookup<LLVM::LLVMFuncOp>(*name);
    if (callee && !callee.isExternal() && !callee.getNoInline())
      callees.push_back(callee);
  });
  return callees;
}

} // namespace

std::vector<OwningOpRef<ModuleOp>> partitionModule(ModuleOp module, unsigned count) {
  std::vector<OwningOpRef<ModuleOp>> shares;
  if (count < 2)
    return shares;
  // Each share gets its own copy of every global: only private constants
  // may be copied (one copy per share of a variable would not be one
  // variable, and two definitions of an exported symbol would not link).
  for (auto global : module.getOps<LLVM::GlobalOp>())
    if (!global.getConstant() ||
        (global.getLinkage() != LLVM::Linkage::Private && global.getLinkage() != LLVM::Linkage::Internal))
      return shares;

  // Groups: a defined function with the internal functions it may inline.
  SymbolTable symbols(module);
  SmallVector<LLVM::LLVMFuncOp> defined;
  for (auto fn : module.getOps<LLVM::LLVMFuncOp>())
    if (!fn.isExternal())
      defined.push_back(fn);
  llvm::DenseMap<Operation *, unsigned> index;
  for (auto [i, fn] : llvm::enumerate(defined))
    index[fn] = static_cast<unsigned>(i);
  std::vector<unsigned> leader(defined.size());
  std::iota(leader.begin(), leader.end(), 0u);
  auto find = [&](unsigned i) {
    while (leader[i] != i)
      i = leader[i] = leader[leader[i]];
    return i;
  };
  for (auto [i, fn] : llvm::enumerate(defined))
    for (LLVM::LLVMFuncOp callee : inlinableCallees(fn, symbols))
      leader[find(static_cast<unsigned>(i))] = find(index[callee]);
  struct Group {
    SmallVector<unsigned> members;  // in module order
    int64_t size = 0;
  };
  llvm::DenseMap<unsigned, unsigned> groupOf;  // leader -> position in list
  SmallVector<Group> list;
  for (unsigned i = 0; i < defined.size(); ++i) {
    auto [it, fresh] = groupOf.try_emplace(find(i), static_cast<unsigned>(list.size()));
    if (fresh)
      list.emplace_back();
    Group &g = list[it->second];
    g.members.push_back(i);
    defined[i].walk([&](Operation *) { ++g.size; });
  }
  if (list.size() < 2)
    return shares;
  const unsigned n = std::min<unsigned>(count, static_cast<unsigned>(list.size()));

  // Largest first onto the lightest share (LPT); ties by first member, so
  // the same module always splits the same way.
  llvm::stable_sort(list, [](const Group &a, const Group &b) {
    return a.size != b.size ? a.size > b.size : a.members.front() < b.members.front();
  });
  std::vector<int64_t> load(n, 0);
  llvm::StringMap<unsigned> owner;
  for (const Group &g : list) {
    const auto lightest = static_cast<unsigned>(std::min_element(load.begin(), load.end()) - load.begin());
    load[lightest] += g.size;
    for (unsigned m : g.members)
      owner[defined[m].getSymName()] = lightest;
  }

  // Functions referenced from another share: external and hidden.
  llvm::StringMap<bool> exported;
  for (LLVM::LLVMFuncOp fn : defined) {
    const unsigned from = owner[fn.getSymName()];
    fn.walk([&](Operation *op) {
      StringRef target;
      if (auto call = dyn_cast<LLVM::CallOp>(op); call && call.getCallee())
        target = *call.getCallee();
      else if (auto address = dyn_cast<LLVM::AddressOfOp>(op))
        target = address.getGlobalName();
      auto it = owner.find(target);
      if (it != owner.end() && it->second != from)
        exported[target] = true;
    });
  }

  for (unsigned s = 0; s < n; ++s) {
    OwningOpRef<ModuleOp> share(module.clone());
    for (auto fn : share->getOps<LLVM::LLVMFuncOp>()) {
      if (fn.isExternal())
        continue;
      const bool mine = owner.lookup(fn.getSymName()) == s;
      if (!mine) {
        // A declaration: referenced or not, LLVM drops what nobody uses.
        fn.getBody().dropAllReferences();
        fn.getBody().getBlocks().clear();
      }
      if (!mine || exported.count(fn.getSymName())) {
        fn.setLinkage(LLVM::Linkage::External);
        fn.setVisibility_(LLVM::Visibility::Hidden);
      }
    }
    shares.push_back(std::move(share));
  }
  return shares;
}

} // namespace kiln::jit::cpu
