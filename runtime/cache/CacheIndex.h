// CacheIndex: the key and target of each entry in one cache directory, read
// once per entry file (its header and metadata only, bounded, regular files
// only) and kept in memory, so that a miss is explained (KILN_LOG=info) by
// comparing keys in memory rather than by reading every entry again on every
// miss. Refreshed from the directory listing when the directory changed
// (its modification time), so entries of other processes count too; entries
// this process writes are added without a read. Not thread-safe: the kernel
// cache calls it under its lock.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::exec {

class CacheIndex {
 public:
  CacheIndex(std::string dir, uint64_t maxEntryBytes);

  /// Why no entry serves key `words` (hash `hash`) on target `fingerprint`:
  /// the nearest entry of the same structure and its first difference, or
  /// that none has the same structure. One line for the log.
  std::string explainMiss(const std::vector<uint64_t>& words, uint64_t hash, const std::string& fingerprint);

  /// Records an entry this process has just written as `name`.
  void noteWritten(const std::string& name, const std::vector<uint64_t>& words, const std::string& fingerprint);

  /// Entry files opened so far (each once while it stays in the directory).
  uint64_t headersRead() const { return headersRead_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Known {
    std::vector<uint64_t> words;  ///< empty for an unreadable entry
    std::string fingerprint;
    uint64_t structure = 0;  ///< cache::structureDigest(words)
  };
  void refresh();

  std::string dir_;
  uint64_t maxEntryBytes_;
  std::unordered_map<std::string, Known> entries_;
  struct timespec listedMtime_ = {-1, 0};
  uint64_t headersRead_ = 0;
};

}  // namespace kiln::exec
