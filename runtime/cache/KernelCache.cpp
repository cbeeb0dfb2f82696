#include "runtime/cache/KernelCache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/core/OpKind.h"
#include "runtime/cache/CacheEntry.h"
#include "runtime/cache/CacheEntryCheck.h"
#include "runtime/cache/TraceKeyCodec.h"
#include "runtime/backends/Hal.h"
#include "runtime/support/LeastRecentlyUsed.h"
#include "runtime/support/Log.h"
#include "runtime/support/StatsCounters.h"

namespace kiln::exec {

namespace {
using Clock = std::chrono::steady_clock;

/// mkdir -p, new directories private to the user.
bool makeDirectories(const std::string& path, std::string* error) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      *error = partial + ": " + std::strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = path + " is not a directory";
    return false;
  }
  return true;
}

/// Names of the entries in `dir` (no paths).
std::vector<std::string> listEntries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    uint64_t hash;
    while (dirent* e = ::readdir(d))
      if (cache::parseEntryFileName(e->d_name, &hash)) names.emplace_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

/// The loader of kernels for `device`; null when it has no compiler target.
KernelLoader* loaderFor(Device device) {
  return device.kind == Device::CPU ? loadKernelLoader() : hal::deviceContext(device).kernelLoader();
}

/// The loader of the device a key's kernel runs on (the key's device word:
/// kind << 32 | index, after the marker of a dynamic key).
KernelLoader* loaderFor(const std::vector<uint64_t>& words) {
  const size_t at = cache::isDynamicKey(words) ? 1 : 0;
  if (words.size() <= at || (words[at] >> 32) > Device::Test) return nullptr;
  return loaderFor(Device{static_cast<Device::Kind>(words[at] >> 32), static_cast<int>(words[at] & 0xffffffffu)});
}

std::string describeGraphOps(const trace::TraceGraph& g) {
  std::string ops;
  for (const trace::Node& n : g.nodes) {
    if (n.op == core::OpKind::Param) continue;
    ops += (ops.empty() ? "" : ",") + std::string(core::opName(n.op));
  }
  return ops;
}

std::string describeGraphInputs(const trace::TraceGraph& g) {
  std::string s;
  for (uint32_t id : g.inputs) {
    const trace::Node& n = g.nodes[id];
    s += (s.empty() ? "" : " ") + std::string(dtype_name(n.dtype)) + n.shape.str();
  }
  return s;
}
}  // namespace

std::string checkCacheDirectory(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return dir + ": " + std::strerror(errno);
  if (st.st_uid != ::geteuid())
    return dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + "); use a directory of your own (set KILN_CACHE_DIR)";
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return dir + " is writable by group or others (mode " + mode + "), so others could plant native code in it; fix "
           "it with `chmod go-w " + dir + "` or set KILN_CACHE_DIR to a private directory";
  }
  return {};
}

KernelCache& KernelCache::instance() {
  static KernelCache* c = new KernelCache();  // never destroyed: compile threads may use it at exit
  return *c;
}

void KernelCache::trimMemory(std::size_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  // A kernel a profile still holds stays mapped until that profile goes.
  trimLeastRecentlyUsed(memory_, limit, [](const InMemory& m) { return m.lastUse; });
}

void KernelCache::clearMemory() {
  std::lock_guard<std::mutex> lock(mutex_);
  memory_.clear();
  dir_.reset();
}

std::string KernelCache::usableDirectory() {
  std::lock_guard<std::mutex> lock(mutex_);
  DirState& d = dirLocked();
  return d.usable ? d.path : std::string();
}

KernelCache::DirState& KernelCache::dirLocked() {
  const Settings& s = settings();
  const std::string path = s.cache == "off" ? std::string() : s.cache_dir;
  if (dir_ && dir_->path == path) return *dir_;
  dir_ = std::make_unique<DirState>();
  DirState& d = *dir_;
  d.path = path;
  if (s.cache == "off") return d;
  if (path.empty()) {
    log().warn("no kernel cache directory (set KILN_CACHE_DIR, or HOME); compiled kernels are kept in memory only");
    return d;
  }
  std::string error;
  if (!makeDirectories(path, &error)) {
    log().warn("the kernel cache directory cannot be used ({}); compiled kernels are kept in memory only", error);
    return d;
  }
  if (std::string why = checkCacheDirectory(path); !why.empty()) {
    log().warn("not loading cached kernels: {}. Compiled kernels are kept in memory only", why);
    return d;
  }
  d.usable = true;
  d.writable = ::access(path.c_str(), W_OK) == 0;
  if (!d.writable)
    log().warn("the kernel cache directory {} is read-only: cached kernels are loaded, new ones are kept in memory "
               "only",
               path);
  uint64_t hash;
  for (const std::string& name : listEntries(path))
    if (cache::parseEntryFileName(name, &hash)) d.listed.insert(hash);
  return d;
}

std::shared_ptr<Executable> KernelCache::find(const trace::TraceKey& key, Probe probe) {
  Counters& c = counters();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = memory_.find(key); it != memory_.end()) {
    c.cacheMemoryHits.fetch_add(1, std::memory_order_relaxed);
    it->second.lastUse = ++useCounter_;
    return it->second.executable;
  }
  DirState& dir = dirLocked();
  if (!dir.usable) return nullptr;
  if (probe == Probe::Listed && !dir.listed.count(key.hash)) return nullptr;
  KernelLoader* loader = loaderFor(key.words);
  if (!loader) return nullptr;
  return loadFromDisk(dir, key, *loader);
}

bool KernelCache::keyWordsOf(uint64_t hash, Device device, Probe probe, std::vector<uint64_t>* words) {
  std::lock_guard<std::mutex> lock(mutex_);
  DirState& dir = dirLocked();
  if (!dir.usable || (probe == Probe::Listed && !dir.listed.count(hash))) return false;
  KernelLoader* loader = loaderFor(device);
  if (!loader) return false;
  const std::string path = dir.path + "/" + cache::entryFileName(hash, loader->fingerprint());
  std::string bytes, error;
  cache::Entry entry;
  if (!cache::readEntryHead(path, cache::maxEntryBytes(settings().cache_max_mb), &bytes, &error) ||
      !cache::decode(bytes, &entry, &error, /*headerOnly=*/true))
    return false;
  *words = std::move(entry.meta.keyWords);
  return true;
}

std::shared_ptr<Executable> KernelCache::loadFromDisk(DirState& dir, const trace::TraceKey& key,
                                                      KernelLoader& loader) {
  Counters& c = counters();
  const auto t0 = Clock::now();
  const std::string& fp = loader.fingerprint();
  const std::string name = cache::entryFileName(key.hash, fp);
  const std::string path = dir.path + "/" + name;
  auto reject = [&](const std::string& why) -> std::shared_ptr<Executable> {
    c.cacheRejected.fetch_add(1, std::memory_order_relaxed);
    c.cacheMisses.fetch_add(1, std::memory_order_relaxed);
    if (dir.warnedBad.insert(name).second)
      log().warn("ignoring kernel cache entry {}: {}; the trace will be recompiled{}", path, why,
                 dir.writable ? " (entry removed)" : "");
    if (dir.writable) ::unlink(path.c_str());
    return nullptr;
  };
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    c.cacheMisses.fetch_add(1, std::memory_order_relaxed);
    if (log().should_log(spdlog::level::info)) explainMiss(dir, key, fp);
    return nullptr;
  }
  // Regular files only, bounded: a FIFO, a link to /dev/zero or a huge file
  // is refused before anything is read (see cache::readFile).
  std::string bytes, error;
  if (!cache::readFile(path, cache::maxEntryBytes(settings().cache_max_mb), &bytes, &error, false, &st))
    return reject("unreadable: " + error);
  if (st.st_uid != ::geteuid()) return reject("not owned by this user");
  cache::Entry entry;
  if (!cache::decode(bytes, &entry, &error)) return reject(error);
  if (entry.meta.keyWords != key.words) return reject("it holds another trace (hash collision or a swapped file)");
  if (entry.meta.fingerprint != fp)
    return reject("compiled for another target (" +
                  cache::describeDifference(key.words, fp, entry.meta.keyWords, entry.meta.fingerprint) + ")");
  if (std::string why = cache::checkMetadata(entry.meta, key.hash); !why.empty())
    return reject("its metadata does not fit its trace: " + why);
  KernelImage image;
  image.format = entry.meta.format;
  image.object = entry.object;
  image.entry = entry.meta.entry;
  image.dispatches = entry.meta.dispatches;
  image.launchProgram = entry.meta.launchProgram;
  image.dynamicSizes = entry.meta.dynamicSizes;
  image.scratchBytes = entry.meta.scratchBytes;
  image.kernelCount = entry.meta.kernelCount;
  cache::kernelBufferCounts(key.words, &image.inputs, &image.outputs);  // checkMetadata decoded them
  auto exe = loader.load(image, &error);
  if (!exe) return reject("it does not load: " + error);
  exe->donations = entry.meta.donations;
  exe->dynamicSizes = entry.meta.dynamicSizes;
  exe->dynamicScratch = entry.meta.dynamicScratch;
  exe->codegen = entry.meta.codegen;
  if (dir.writable) {
    const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    ::utimensat(AT_FDCWD, path.c_str(), now, 0);  // last use, for LRU eviction
  }
  memory_[key] = {exe, ++useCounter_};
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  c.cacheDiskHits.fetch_add(1, std::memory_order_relaxed);
  c.cacheLoadUs.fetch_add(static_cast<uint64_t>(ms * 1000.0), std::memory_order_relaxed);
  log().info("trace {:016x} ({}): loaded {} kernel(s) from the disk cache in {:.2f} ms (compiled in {:.1f} ms)",
             key.hash, entry.meta.ops, exe->kernelCount(), ms, entry.meta.compileMs);
  return exe;
}

std::shared_ptr<Executable> KernelCache::install(const trace::TraceKey& key, const trace::TraceGraph& graph,
                                                 const CompileResult& compiled, std::string* error) {
  KernelLoader* loader = loaderFor(key.words);
  if (!loader) {
    *error = "device " + graph.device.str() + " has no kernel loader";
    return nullptr;
  }
  KernelImage image;
  image.format = compiled.format;
  image.object = compiled.object;
  image.entry = compiled.entry;
  image.dispatches = compiled.dispatches;
  image.launchProgram = compiled.launchProgram;
  image.dynamicSizes = compiled.dynamicSizes;
  image.scratchBytes = compiled.scratchBytes;
  image.kernelCount = compiled.kernelCount;
  image.inputs = static_cast<uint32_t>(graph.inputs.size());
  image.outputs = static_cast<uint32_t>(graph.outputs.size());
  auto exe = loader->load(image, error);
  if (!exe) return nullptr;
  exe->donations = compiled.donations;
  exe->dynamicSizes = compiled.dynamicSizes;
  exe->dynamicScratch = compiled.dynamicScratch;
  exe->codegen = compiled.codegen;
  std::lock_guard<std::mutex> lock(mutex_);
  memory_[key] = {exe, ++useCounter_};
  if (compiled.fingerprint != loader->fingerprint()) {
    log().warn("the compiler and the kernel loader disagree on the target; kernel not cached on disk:\n{}\nvs\n{}",
               compiled.fingerprint, loader->fingerprint());
    return exe;
  }
  store(key, graph, compiled, loader->fingerprint());
  return exe;
}

void KernelCache::store(const trace::TraceKey& key, const trace::TraceGraph& graph, const CompileResult& compiled,
                        const std::string& fingerprint) {
  DirState& dir = dirLocked();
  if (!dir.usable || !dir.writable) return;
  cache::Entry e;
  e.meta.keyHash = key.hash;
  e.meta.keyWords = key.words;
  e.meta.fingerprint = fingerprint;
  e.meta.entry = compiled.entry;
  e.meta.format = compiled.format;
  // A host object's one dispatch is its entry symbol.
  if (compiled.format != BinaryFormat::SharedObject) {
    e.meta.dispatches = compiled.dispatches;
    e.meta.launchProgram = compiled.launchProgram;
  }
  e.meta.device = cache::deviceOfFormat(compiled.format);
  e.meta.ops = describeGraphOps(graph);
  e.meta.inputs = describeGraphInputs(graph);
  e.meta.scratchBytes = compiled.scratchBytes;
  e.meta.kernelCount = compiled.kernelCount;
  e.meta.donations = compiled.donations;
  e.meta.dynamicSizes = compiled.dynamicSizes;
  e.meta.dynamicScratch = compiled.dynamicScratch;
  e.meta.codegen = compiled.codegen;
  e.meta.compileMs = compiled.timings.totalMs();
  e.meta.createdUnix = static_cast<int64_t>(std::time(nullptr));
  e.object = compiled.object;
  // What a later load would refuse is not written (a compiler bug if so).
  if (std::string why = cache::checkMetadata(e.meta, key.hash); !why.empty()) {
    log().warn("trace {:016x}: kernel not cached on disk, its metadata does not fit its trace: {}", key.hash, why);
    return;
  }
  const std::string name = cache::entryFileName(key.hash, fingerprint);
  const std::string bytes = cache::encode(e);
  if (bytes.size() > cache::maxEntryBytes(settings().cache_max_mb)) {
    log().warn("trace {:016x}: its kernel ({} bytes) is larger than a cache entry may be; kept in memory only",
               key.hash, bytes.size());
    return;
  }
  std::string error;
  if (!cache::writeFileAtomic(dir.path, name, bytes, &error)) {
    dir.writable = false;
    if (!dir.warnedWrite) {
      dir.warnedWrite = true;
      log().warn("cannot write to the kernel cache {} ({}); new kernels are kept in memory only", dir.path, error);
    }
    return;
  }
  dir.listed.insert(key.hash);
  if (dir.index) dir.index->noteWritten(name, key.words, fingerprint);
  counters().cacheStores.fetch_add(1, std::memory_order_relaxed);
  evict(dir);
}

void KernelCache::evict(DirState& dir) {
  struct Item {
    std::string path;
    int64_t size;
    struct timespec used;
    bool junk;  ///< cannot be a valid entry (not a regular file, or too large): goes first
  };
  const uint64_t maxEntry = cache::maxEntryBytes(settings().cache_max_mb);
  std::vector<Item> items;
  int64_t total = 0;
  const time_t now = std::time(nullptr);
  if (DIR* d = ::opendir(dir.path.c_str())) {
    uint64_t hash;
    while (dirent* e = ::readdir(d)) {
      const std::string path = dir.path + "/" + e->d_name;
      struct stat st;
      if (std::strncmp(e->d_name, cache::kTempPrefix, std::strlen(cache::kTempPrefix)) == 0) {
        if (::lstat(path.c_str(), &st) != 0) continue;
        if (now - st.st_mtime > cache::kDeadWriterSeconds) ::unlink(path.c_str());  // its writer died
        else total += st.st_size;  // a write in progress: counts, but is not ours to evict
        continue;
      }
      if (!cache::parseEntryFileName(e->d_name, &hash) || ::lstat(path.c_str(), &st) != 0) continue;
      const bool junk = !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) > maxEntry;
      items.push_back({path, static_cast<int64_t>(st.st_size), st.st_mtim, junk});
      total += st.st_size;
    }
    ::closedir(d);
  }
  const int64_t limit = settings().cache_max_mb * (int64_t{1} << 20);
  if (total <= limit) return;
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.junk != b.junk) return a.junk;
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const Item& it : items) {
    if (total <= limit) break;
    // Another process may have removed it already; a reader that opened it
    // keeps its copy.
    ::unlink(it.path.c_str());
    total -= it.size;
    log().debug("kernel cache: evicted {} (least recently used, cache over {} MB)", it.path,
                settings().cache_max_mb);
  }
}

void KernelCache::explainMiss(DirState& dir, const trace::TraceKey& key, const std::string& fingerprint) {
  if (!dir.index) dir.index = std::make_unique<CacheIndex>(dir.path, cache::maxEntryBytes(settings().cache_max_mb));
  log().info("{}", dir.index->explainMiss(key.words, key.hash, fingerprint));
}

}  // namespace kiln::exec
