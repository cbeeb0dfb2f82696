// KernelCache: compiled kernels by TraceKey, in memory (shared by all
// threads) and on disk (KILN_CACHE_DIR, shared by processes), so a process
// can start on kernels an earlier one compiled. Entries are keyed on the
// full TraceKey and the loader's fingerprint, written atomically and read
// with verification (see CacheEntry.h); a bad entry is discarded, never
// trusted. Callers treat the cache as possibly empty.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "kiln/device.h"
#include "runtime/cache/CacheIndex.h"
#include "runtime/exec/Executable.h"
#include "runtime/trace/TraceGraph.h"
#include "runtime/trace/TraceKey.h"

namespace kiln::exec {

class KernelCache {
 public:
  static KernelCache& instance();

  /// How hard find() looks on disk.
  enum class Probe {
    /// Only if this process's listing of the directory names the key: no
    /// file opened, and no loader started, for keys never cached.
    Listed,
    /// Always open the entry.
    Always,
  };

  /// The kernel of `key` from memory or disk; null on a miss (counted, and
  /// explained with KILN_LOG=info). Thread-safe.
  std::shared_ptr<Executable> find(const trace::TraceKey& key, Probe probe);

  /// The key words of the disk entry named by `hash` for `device`, whatever
  /// trace they describe (a dynamic-shape kernel is named by its structure:
  /// the caller rebuilds its key from them and loads it with find()). False
  /// when there is none, or with Probe::Listed when the directory listing
  /// does not name it. Reads the entry's header only.
  bool keyWordsOf(uint64_t hash, Device device, Probe probe, std::vector<uint64_t>* words);

  /// Links a fresh compilation with the loader, keeps it in memory and
  /// writes it to disk. Null and `*error` when it cannot be linked.
  std::shared_ptr<Executable> install(const trace::TraceKey& key, const trace::TraceGraph& graph,
                                      const CompileResult& compiled, std::string* error);

  /// Forgets the kernels held in memory (tests: simulate a new process).
  void clearMemory();
  /// Drops the least recently used kernels from memory beyond `limit` (down
  /// to 7/8 of it); the disk cache keeps them.
  void trimMemory(std::size_t limit);

  /// The directory this process uses, or "" when the disk cache is off or
  /// unusable (checks it on first call for each KILN_CACHE_DIR).
  std::string usableDirectory();

 private:
  struct DirState {
    std::string path;
    bool usable = false;    ///< may load entries
    bool writable = false;  ///< may store entries
    bool warnedWrite = false;
    std::unordered_set<uint64_t> listed;  ///< key hashes named in the directory
    std::unordered_set<std::string> warnedBad;
    std::unique_ptr<CacheIndex> index;  ///< built on the first explained miss
  };
  DirState& dirLocked();
  std::shared_ptr<Executable> loadFromDisk(DirState& dir, const trace::TraceKey& key, KernelLoader& loader);
  void store(const trace::TraceKey& key, const trace::TraceGraph& graph, const CompileResult& compiled,
             const std::string& fingerprint);
  void explainMiss(DirState& dir, const trace::TraceKey& key, const std::string& fingerprint);
  void evict(DirState& dir);

  std::mutex mutex_;
  /// Kernels in memory with the use counter at their last lookup.
  struct InMemory {
    std::shared_ptr<Executable> executable;
    uint64_t lastUse = 0;
  };
  std::unordered_map<trace::TraceKey, InMemory, trace::TraceKeyHash> memory_;
  uint64_t useCounter_ = 0;
  std::unique_ptr<DirState> dir_;
};

/// Checks that `dir` may hold native code this process loads: owned by this
/// user and not writable by group or others. "" when it may; otherwise why
/// not and how to fix it.
std::string checkCacheDirectory(const std::string& dir);

}  // namespace kiln::exec
