// ScalarArgs: float constants that vary become kernel arguments.
//
// A kernel is specialised to the constants of its trace. A training step
// whose learning rate decays (Optimizer::set_lr every step) would so give a
// new TraceKey, a new profile and, were it ever hot, a new kernel at every
// step. Instead, the engine records the values of the scalar slots
// (TraceKey.h: rank-0 float constants, not pow exponents) of each trace
// structure (TraceKey::valueBlindHash: sizes and those values left out):
//
//  - while every trace of a structure has the first values seen, its keys
//    hold them and its kernels fold them in, as before;
//  - once a slot's value differs from the first one seen, that slot becomes
//    a kernel argument for every later trace of the structure: the key
//    encodes it as a rank-0 parameter without its value, so the step keeps
//    one key and one kernel, which the launch hands the values (Engine.cpp);
//  - a constant that depends on the sizes (mean's 1 / n) varies with them,
//    so a structure run at several sizes has it as an argument too, and its
//    keys differ only in sizes: DynamicShapes can give them one kernel;
//  - a slot that varies later widens the set (one more key and kernel).
//    Each structure has at most one key per set, and the sets only grow, so
//    profiles, kernels and this table plateau whatever the values.
//
// Plain C++; the engine calls it under its lock.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::exec {

/// Per scalar slot (recording order): nonzero when it is a kernel argument.
using ArgSlots = std::vector<uint8_t>;

class ScalarArgs {
 public:
  /// Records the slot values of a trace of structure `valueBlind` and
  /// returns the structure's argument slots, widened when a slot that was
  /// not an argument has a value other than the first seen; null while none
  /// has varied. `widened`, when given, is set when this call widened them.
  std::shared_ptr<const ArgSlots> note(uint64_t valueBlind, const std::vector<uint64_t>& values,
                                       bool* widened = nullptr);
  /// Structures tracked (one entry each, whatever the number of values).
  size_t size() const { return structures_.size(); }
  void clear() { structures_.clear(); }
  /// Forgets every structure not in `live` (value-blind hashes of the trace
  /// keys the engine still holds).
  void retain(const std::unordered_set<uint64_t>& live) {
    std::erase_if(structures_, [&](const auto& entry) { return !live.contains(entry.first); });
  }

 private:
  struct Structure {
    std::vector<uint64_t> first;  ///< slot values of the first trace seen
    std::shared_ptr<const ArgSlots> args;
  };
  std::unordered_map<uint64_t, Structure> structures_;
};

}  // namespace kiln::exec
