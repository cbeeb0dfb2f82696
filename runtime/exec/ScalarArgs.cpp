#include "runtime/exec/ScalarArgs.h"

#include "runtime/cache/TraceKeyCodec.h"
#include "runtime/exec/Engine.h"
#include "runtime/support/Log.h"

namespace kiln::exec {

std::shared_ptr<const ArgSlots> ScalarArgs::note(uint64_t valueBlind, const std::vector<uint64_t>& values,
                                                 bool* widened) {
  if (widened) *widened = false;
  auto [it, inserted] = structures_.try_emplace(valueBlind);
  Structure& s = it->second;
  if (inserted) {
    s.first = values;
    return nullptr;
  }
  // Another slot count: a different structure with the same hash. It keeps
  // its constants in its key (correct, only not shared).
  if (values.size() != s.first.size()) return nullptr;
  std::shared_ptr<ArgSlots> grown;
  for (size_t k = 0; k < values.size(); ++k) {
    if (values[k] == s.first[k] || (s.args && (*s.args)[k])) continue;
    if (!grown) grown = s.args ? std::make_shared<ArgSlots>(*s.args) : std::make_shared<ArgSlots>(values.size(), 0);
    (*grown)[k] = 1;
  }
  if (grown) {
    s.args = std::move(grown);
    if (widened) *widened = true;
  }
  return s.args;
}

//===----------------------------------------------------------------------===//
// The engine's side (Engine.h): the key a trace runs under.
//===----------------------------------------------------------------------===//

std::shared_ptr<const ArgSlots> Engine::keyTrace(const trace::Trace& trace, const std::vector<uint8_t>& needed,
                                                 trace::TraceKey* key, trace::ScalarSlots* slots) {
  *key = cache::encodeTraceKey(trace, needed, nullptr, slots);
  if (slots->values.empty()) return nullptr;
  bool widened = false;
  std::shared_ptr<const ArgSlots> args;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    args = scalarArgs_.note(key->valueBlindHash, slots->values, &widened);
  }
  if (!args) return nullptr;
  trace::TraceKey exact = std::move(*key);
  *key = cache::encodeTraceKey(trace, needed, args.get(), slots);
  if (widened)
    log().info("trace {:016x}: {} of its {} float constants changed value since its structure was first seen; they "
               "become kernel arguments (trace key {:016x})",
               exact.hash, slots->argNodes.size(), slots->values.size(), key->hash);
  // A trace whose own constants already have a kernel (compiled before they
  // varied: the full batch of a loop whose last batch is smaller) keeps it.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = profiles_.find(exact);
    if (it == profiles_.end() || !it->second->executable) return args;
  }
  *key = std::move(exact);
  slots->argNodes.clear();
  return nullptr;
}

}  // namespace kiln::exec
