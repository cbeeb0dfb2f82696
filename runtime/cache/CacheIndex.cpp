#include "runtime/cache/CacheIndex.h"

#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <unordered_set>

#include "runtime/cache/CacheEntry.h"

namespace kiln::exec {

CacheIndex::CacheIndex(std::string dir, uint64_t maxEntryBytes) : dir_(std::move(dir)), maxEntryBytes_(maxEntryBytes) {}

void CacheIndex::refresh() {
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) return;
  // Every entry is created by a rename into the directory and removed by
  // an unlink, both of which change its mtime. The file system's clock is
  // coarse, so a listing taken within a second of a change is redone next
  // time (another change may carry the same mtime).
  if (st.st_mtim.tv_sec == listedMtime_.tv_sec && st.st_mtim.tv_nsec == listedMtime_.tv_nsec) return;
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  listedMtime_ = now.tv_sec - st.st_mtim.tv_sec >= 2 ? st.st_mtim : timespec{-1, 0};
  std::unordered_set<std::string> present;
  if (DIR* d = ::opendir(dir_.c_str())) {
    uint64_t hash;
    while (dirent* e = ::readdir(d))
      if (cache::parseEntryFileName(e->d_name, &hash)) present.emplace(e->d_name);
    ::closedir(d);
  }
  // Gone, or unreadable last time (it may have been replaced since).
  for (auto it = entries_.begin(); it != entries_.end();)
    it = present.count(it->first) && !it->second.words.empty() ? std::next(it) : entries_.erase(it);
  for (const std::string& name : present) {
    if (entries_.count(name)) continue;
    Known& k = entries_[name];
    ++headersRead_;
    std::string bytes, error;
    cache::Entry e;
    // FIFOs, links and oversized files are refused unread; they stay
    // known as unreadable until the directory changes.
    if (!cache::readEntryHead(dir_ + "/" + name, maxEntryBytes_, &bytes, &error) ||
        !cache::decode(bytes, &e, &error, /*headerOnly=*/true))
      continue;
    k.words = std::move(e.meta.keyWords);
    k.fingerprint = std::move(e.meta.fingerprint);
    k.structure = cache::structureDigest(k.words);
  }
}

void CacheIndex::noteWritten(const std::string& name, const std::vector<uint64_t>& words,
                             const std::string& fingerprint) {
  Known& k = entries_[name];
  k.words = words;
  k.fingerprint = fingerprint;
  k.structure = cache::structureDigest(words);
}

std::string CacheIndex::explainMiss(const std::vector<uint64_t>& words, uint64_t hash, const std::string& fingerprint) {
  refresh();
  const uint64_t structure = cache::structureDigest(words);
  const Known* best = nullptr;
  const std::string* bestName = nullptr;
  size_t bestScore = ~size_t{0};
  for (const auto& [name, k] : entries_) {
    size_t score;
    if (k.words.empty()) continue;
    if (k.words == words) {
      score = 0;
    } else if (structure != 0 && k.structure == structure) {
      // Same ops: nearer the fewer words (shapes, attributes) differ.
      score = 1;
      const size_t n = std::min(words.size(), k.words.size());
      for (size_t i = 0; i < n; ++i) score += words[i] != k.words[i];
    } else {
      continue;
    }
    if (score < bestScore || (score == bestScore && name < *bestName)) {
      bestScore = score;
      best = &k;
      bestName = &name;
    }
  }
  char key[17];
  std::snprintf(key, sizeof(key), "%016" PRIx64, hash);
  if (!best)
    return "kernel cache miss for trace " + std::string(key) + ": none of the " + std::to_string(entries_.size()) +
           " entries in " + dir_ + " has the same structure";
  return "kernel cache miss for trace " + std::string(key) + ": the nearest entry, " + *bestName + ", differs in " +
         cache::describeDifference(words, fingerprint, best->words, best->fingerprint);
}

}  // namespace kiln::exec
