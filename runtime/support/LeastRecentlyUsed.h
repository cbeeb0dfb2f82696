// trimLeastRecentlyUsed: bounds a table whose entries carry a use counter.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

namespace kiln::exec {

/// When `table` holds more than `limit` entries, erases the least recently
/// used down to 7/8 of `limit` (so the scan runs once per limit/8 new
/// entries). `lastUse(value)` is an entry's use counter. Returns how many
/// entries went.
template <class Table, class LastUse>
std::size_t trimLeastRecentlyUsed(Table& table, std::size_t limit, LastUse lastUse) {
  if (table.size() <= limit) return 0;
  std::vector<uint64_t> uses;
  uses.reserve(table.size());
  for (const auto& entry : table) uses.push_back(lastUse(entry.second));
  const std::size_t drop = table.size() - limit + limit / 8;
  std::nth_element(uses.begin(), uses.begin() + static_cast<std::ptrdiff_t>(drop - 1), uses.end());
  const uint64_t cutoff = uses[drop - 1];
  const std::size_t before = table.size();
  for (auto it = table.begin(); it != table.end();) it = lastUse(it->second) <= cutoff ? table.erase(it) : std::next(it);
  return before - table.size();
}

}  // namespace kiln::exec
