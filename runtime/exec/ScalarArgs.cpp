#include "runtime/exec/ScalarArgs.h"

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

}  // namespace kiln::exec
