// The disk kernel cache and KILN_JIT=replay: warm starts, entries that are
// corrupted, truncated, swapped or foreign, untrusted and full directories,
// several processes sharing one directory, and replay without the compiler.
// Needs libkiln_jit. Process-level cases re-run this
// binary (KernelCacheChild.Main) with a role in KILN_TEST_CHILD.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/kiln.h"
#include "runtime/exec/WarmStart.h"
#include "test/unit/cache/CacheTestSupport.h"
#include "test/unit/exec/TrainingStep.h"
#include "runtime/cache/CacheEntry.h"
#include "runtime/exec/Engine.h"
#include "runtime/exec/Executable.h"
#include "runtime/cache/KernelCache.h"

namespace kiln {
namespace {

using namespace cachetest;

// ---------------------------------------------------------------------------

TEST(KernelCache, WarmStartRunsTheFirstStepCompiledFromDisk) {
  TempDir dir;
  Data d;
  auto reference = d.reference();
  {
    CacheMode m(JitMode::Sync, 2, dir.str());
    reset_stats();
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(close(d.run(), reference));
    Stats s = stats();
    EXPECT_EQ(s.compiles, 1u) << s.str();
    EXPECT_EQ(s.cache_stores, 1u) << s.str();
    EXPECT_EQ(entryFiles(dir.str()).size(), 1u);
  }
  // A new "process": the first run of the key is already compiled.
  CacheMode m(JitMode::Async, 2, dir.str());
  CacheMode::freshProcess();
  reset_stats();
  EXPECT_TRUE(close(d.run(), reference));
  Stats s = stats();
  EXPECT_EQ(s.cache_disk_hits, 1u) << s.str();
  EXPECT_EQ(s.compiled_runs, 1u) << s.str();
  EXPECT_EQ(s.interpreted_runs, 0u) << s.str();
  EXPECT_EQ(s.compiles, 0u) << s.str();
  EXPECT_GT(s.cache_load_ms, 0.0);
  // Profiles forgotten but kernels kept: a memory hit.
  exec::Engine::instance().resetProfilesForTesting();
  reset_stats();
  EXPECT_TRUE(close(d.run(), reference));
  EXPECT_EQ(stats().cache_memory_hits, 1u) << stats().str();
  EXPECT_EQ(stats().cache_disk_hits, 0u);
}

TEST(KernelCache, EveryFlippedByteAndEveryTruncationIsDetected) {
  TempDir dir;
  Data d;
  fs::path file = fillCache(dir.str(), d);
  const std::string good = slurp(file);
  cache::Entry e;
  std::string error;
  ASSERT_TRUE(cache::decode(good, &e, &error)) << error;
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    cache::Entry x;
    // A flip inside a hex digit of key_words may still parse, but then the
    // metadata checksum differs: every position must fail.
    ASSERT_FALSE(cache::decode(bad, &x, &error)) << "byte " << i << " of " << good.size();
  }
  for (size_t n = 0; n < good.size(); n += 1 + n / 64) {
    cache::Entry x;
    ASSERT_FALSE(cache::decode(std::string_view(good).substr(0, n), &x, &error)) << "length " << n;
  }
  cache::Entry x;
  EXPECT_FALSE(cache::decode(good + "x", &x, &error));
}

// A Quick kernel's entry says so (its replacement is due); a Full one's
// metadata is what readers before quick codegen knew.
TEST(KernelCache, EntriesRecordTheirCodegenEffort) {
  TempDir dir;
  Data d;
  cache::Entry e;
  std::string error;
  ASSERT_TRUE(cache::decode(slurp(fillCache(dir.str(), d)), &e, &error)) << error;
  EXPECT_EQ(e.meta.codegen, exec::CodegenEffort::Full);
  EXPECT_EQ(cache::encode(e).find("codegen="), std::string::npos);
  e.meta.codegen = exec::CodegenEffort::Quick;
  const std::string quick = cache::encode(e);
  EXPECT_NE(quick.find("\ncodegen=quick\n"), std::string::npos);
  cache::Entry back;
  ASSERT_TRUE(cache::decode(quick, &back, &error)) << error;
  EXPECT_EQ(back.meta.codegen, exec::CodegenEffort::Quick);
  EXPECT_EQ(back.object, e.object);
}

TEST(KernelCache, CorruptedTruncatedAndSwappedEntriesAreRecompiled) {
  TempDir dir;
  Data d;
  auto reference = d.reference();
  fs::path file = fillCache(dir.str(), d);
  const std::string good = slurp(file);
  const size_t meta = 48 + 10;
  std::vector<std::pair<std::string, std::string>> damaged;
  for (size_t at : {size_t{3}, size_t{20}, size_t{44}, meta, good.size() / 2, good.size() - 1}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x5a);
    damaged.emplace_back("byte " + std::to_string(at), bad);
  }
  damaged.emplace_back("truncated to half", good.substr(0, good.size() / 2));
  damaged.emplace_back("truncated header", good.substr(0, 20));
  damaged.emplace_back("empty", "");
  for (const auto& [what, bytes] : damaged) {
    SCOPED_TRACE(what);
    spit(file, bytes);
    Stats s = runAfterDamage(dir.str(), d, reference);
    EXPECT_GE(s.cache_rejected, 1u) << s.str();
    // Removed and rewritten: valid again.
    std::string error;
    cache::Entry e;
    EXPECT_TRUE(cache::decode(slurp(file), &e, &error)) << error;
  }

  // Swapped: another key's entry under this key's name. Its rows are d's, so
  // its constants (mean's 1 / rows) are too: with other ones, the second of
  // the two keys run would take them as kernel arguments (ScalarArgs.h) and
  // not look for its own entry.
  Data other(37, 7, 23);
  auto otherRef = other.reference();
  {
    CacheMode m(JitMode::Sync, 1, dir.str());
    other.run();
  }
  auto files = entryFiles(dir.str());
  ASSERT_EQ(files.size(), 2u);
  fs::path otherFile = files[0] == file ? files[1] : files[0];
  fs::copy_file(otherFile, file, fs::copy_options::overwrite_existing);
  CacheMode m(JitMode::Sync, 1, dir.str());
  CacheMode::freshProcess();
  reset_stats();
  EXPECT_TRUE(close(d.run(), reference));
  EXPECT_TRUE(close(other.run(), otherRef));
  Stats s = stats();
  EXPECT_EQ(s.cache_rejected, 1u) << s.str();
  EXPECT_EQ(s.cache_disk_hits, 1u) << s.str();  // the other key still loads
  EXPECT_EQ(s.compiles, 1u) << s.str();
}

TEST(KernelCache, ForeignFingerprintIsNeverLoaded) {
  TempDir dir;
  Data d;
  auto reference = d.reference();
  fs::path file = fillCache(dir.str(), d);
  std::string error;
  cache::Entry e;
  ASSERT_TRUE(cache::decode(slurp(file), &e, &error)) << error;
  const std::string host = e.meta.fingerprint;
  cache::Entry foreign = e;
  std::string fp = host;
  fp.replace(fp.find("llvm="), fp.find('\n', fp.find("llvm=")) - fp.find("llvm="), "llvm=0.0.1");
  foreign.meta.fingerprint = fp;
  EXPECT_NE(cache::describeDifference(e.meta.keyWords, host, e.meta.keyWords, fp).find("llvm"), std::string::npos);
  std::string featFp = host;
  featFp.replace(featFp.find("features="), 9, "features=+madeup-feature,");
  EXPECT_NE(cache::describeDifference(e.meta.keyWords, host, e.meta.keyWords, featFp).find("+madeup-feature"),
            std::string::npos);

  // (1) A valid entry for another target, placed under this host's name.
  spit(file, cache::encode(foreign));
  {
    CacheMode m(JitMode::Sync, 1, dir.str());
    CacheMode::freshProcess();
    reset_stats();
    EXPECT_TRUE(close(d.run(), reference));
    Stats s = stats();
    EXPECT_EQ(s.cache_rejected, 1u) << s.str();
    EXPECT_EQ(s.compiles, 1u) << s.str();
  }
  // (2) Under its own name: another LLVM's process may share the directory,
  // so it is a plain miss and stays.
  const fs::path foreignFile = fs::path(dir.str()) / cache::entryFileName(e.meta.keyHash, fp);
  spit(foreignFile, cache::encode(foreign));
  fs::remove(file);
  CacheMode m(JitMode::Sync, 1, dir.str());
  CacheMode::freshProcess();
  reset_stats();
  EXPECT_TRUE(close(d.run(), reference));
  Stats s = stats();
  EXPECT_EQ(s.cache_rejected, 0u) << s.str();
  EXPECT_GE(s.cache_misses, 1u) << s.str();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_TRUE(fs::exists(foreignFile));
  // A different shape explains itself by node and shape.
  Data wider(37, 19, 29);
  CacheMode::freshProcess();
  {
    CacheMode m2(JitMode::Sync, 1, dir.str());
    wider.run();
  }
  // The wider run may also compile a smaller trace: the entry of the same
  // structure is the one to compare, whatever the directory's order.
  std::vector<uint64_t> a, b;
  std::vector<std::vector<uint64_t>> others;
  for (const fs::path& p : entryFiles(dir.str())) {
    cache::Entry x;
    ASSERT_TRUE(cache::decode(slurp(p), &x, &error));
    if (x.meta.fingerprint != host) continue;
    if (x.meta.keyWords == e.meta.keyWords)
      a = x.meta.keyWords;
    else
      others.push_back(x.meta.keyWords);
  }
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(others.empty());
  for (const std::vector<uint64_t>& o : others)
    if (cache::sameStructure(a, o)) b = o;
  ASSERT_FALSE(b.empty()) << "no entry of the wider run has the structure of the first";
  const std::string why = cache::describeDifference(a, host, b, host);
  EXPECT_NE(why.find("shape"), std::string::npos) << why;
}

TEST(KernelCache, GroupWritableDirectoryIsRefused) {
  TempDir dir;
  Data d;
  auto reference = d.reference();
  fillCache(dir.str(), d);
  fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_all);
  EXPECT_NE(exec::checkCacheDirectory(dir.str()).find("chmod go-w"), std::string::npos);
  CacheMode m(JitMode::Sync, 1, dir.str());
  CacheMode::freshProcess();
  reset_stats();
  EXPECT_TRUE(close(d.run(), reference));
  Stats s = stats();
  EXPECT_EQ(s.cache_disk_hits, 0u) << s.str();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_EQ(s.cache_stores, 0u) << s.str();
  EXPECT_EQ(exec::KernelCache::instance().usableDirectory(), "");
}

TEST(KernelCache, MissingAndReadOnlyDirectoriesDegradeToMemory) {
  TempDir dir;
  Data d;
  auto reference = d.reference();
  // Missing: created, private.
  const std::string nested = dir.str() + "/a/b";
  {
    CacheMode m(JitMode::Sync, 1, nested);
    CacheMode::freshProcess();
    EXPECT_TRUE(close(d.run(), reference));
    struct stat st;
    ASSERT_EQ(::stat(nested.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u);
    EXPECT_EQ(entryFiles(nested).size(), 1u);
  }
  // Unusable path (a file, not a directory).
  {
    const std::string notDir = dir.str() + "/file";
    spit(notDir, "x");
    CacheMode m(JitMode::Sync, 1, notDir);
    CacheMode::freshProcess();
    reset_stats();
    EXPECT_TRUE(close(d.run(), reference));
    EXPECT_TRUE(close(d.run(), reference));
    EXPECT_EQ(stats().compiles, 1u);
    EXPECT_EQ(stats().compiled_runs, 2u);
  }
  // Read-only: entries load, new kernels stay in memory.
  if (::geteuid() != 0) {
    const std::string ro = dir.str() + "/ro";
    fillCache(ro, d);
    ::chmod(ro.c_str(), 0500);
    Data other(5, 19, 7);
    auto otherRef = other.reference();
    CacheMode m(JitMode::Sync, 1, ro);
    CacheMode::freshProcess();
    reset_stats();
    EXPECT_TRUE(close(d.run(), reference));
    EXPECT_TRUE(close(other.run(), otherRef));
    Stats s = stats();
    EXPECT_EQ(s.cache_disk_hits, 1u) << s.str();
    EXPECT_EQ(s.compiles, 1u) << s.str();
    EXPECT_EQ(s.cache_stores, 0u) << s.str();
    ::chmod(ro.c_str(), 0700);
  }
}

TEST(KernelCache, LeastRecentlyUsedEntriesAreEvictedBeyondTheLimit) {
  TempDir dir;
  Data d;
  // Three old 600 KiB entries (valid names; content does not matter here).
  std::vector<fs::path> old;
  for (int i = 0; i < 3; ++i) {
    old.push_back(fs::path(dir.str()) / cache::entryFileName(0x1000 + i, "old"));
    spit(old.back(), std::string(600 << 10, 'x'));
    struct timespec t[2] = {{1000 + i, 0}, {1000 + i, 0}};
    ::utimensat(AT_FDCWD, old.back().c_str(), t, 0);
  }
  CacheMode m(JitMode::Sync, 1, dir.str());
  Settings s = settings();
  s.cache_max_mb = 1;
  set_settings(s);
  d.run();
  EXPECT_FALSE(fs::exists(old[0]));
  EXPECT_FALSE(fs::exists(old[1]));
  EXPECT_TRUE(fs::exists(old[2]));  // the most recent one fits with the new entry
  EXPECT_EQ(entryFiles(dir.str()).size(), 2u);
}

// A writer killed mid-write leaves a temporary file: one that is old is
// removed, one still being written counts towards the size cap.
TEST(KernelCache, TemporaryFilesOfDeadWritersGoAndLiveOnesCount) {
  TempDir dir;
  Data d;
  const fs::path dead = fs::path(dir.str()) / (std::string(cache::kTempPrefix) + "1-0-dead");
  const fs::path live = fs::path(dir.str()) / (std::string(cache::kTempPrefix) + "2-0-live");
  spit(dead, std::string(1000, 'x'));
  const time_t old = std::time(nullptr) - cache::kDeadWriterSeconds - 10;
  struct timespec t[2] = {{old, 0}, {old, 0}};
  ::utimensat(AT_FDCWD, dead.c_str(), t, 0);
  spit(live, std::string(3 << 20, 'x'));  // larger than the 2 MiB cap by itself
  CacheMode m(JitMode::Sync, 1, dir.str());
  Settings s = settings();
  s.cache_max_mb = 2;
  set_settings(s);
  d.run();  // stores one entry, then evicts down to the cap
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  // Over the cap only because of the live temporary file: the entry went.
  EXPECT_TRUE(entryFiles(dir.str()).empty());
}

TEST(KernelCache, BundleRoundTripsAndRejectsDamage) {
  TempDir dir;
  Data d;
  fs::path file = fillCache(dir.str(), d);
  std::vector<std::pair<std::string, std::string>> files{{file.filename().string(), slurp(file)}};
  std::string bundle = cache::encodeBundle(files), error;
  std::vector<std::pair<std::string, std::string>> back;
  ASSERT_TRUE(cache::decodeBundle(bundle, &back, &error)) << error;
  EXPECT_EQ(back, files);
  for (size_t at : {size_t{0}, size_t{12}, bundle.size() / 2, bundle.size() - 1}) {
    std::string bad = bundle;
    bad[at] ^= 1;
    back.clear();
    EXPECT_FALSE(cache::decodeBundle(bad, &back, &error)) << at;
  }
  back.clear();
  EXPECT_FALSE(cache::decodeBundle(bundle.substr(0, bundle.size() - 3), &back, &error));
}

// --- Several processes ------------------------------------------------------

TEST(KernelCache, ProcessesCompilingIntoOneDirectoryEndValid) {
  TempDir dir;
  std::vector<pid_t> pids;
  for (int i = 0; i < 4; ++i)
    pids.push_back(spawnChild("worker", {"KILN_JIT=sync", "KILN_JIT_THRESHOLD=1", "KILN_CACHE_DIR=" + dir.str(),
                                         "KILN_TEST_WORKER=" + std::to_string(i)}));
  for (pid_t p : pids) EXPECT_EQ(waitChild(p), 0);
  // Every entry valid and named after its contents; no temporary files.
  size_t count = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    const std::string name = e.path().filename().string();
    if (name == exec::WarmStart::recordFileName()) continue;  // the workers' warm-start record
    uint64_t h;
    ASSERT_TRUE(cache::parseEntryFileName(name, &h)) << "stray file " << name;
    cache::Entry x;
    std::string error;
    ASSERT_TRUE(cache::decode(slurp(e.path()), &x, &error)) << name << ": " << error;
    EXPECT_EQ(name, cache::entryFileName(x.meta.keyHash, x.meta.fingerprint));
    ++count;
  }
  EXPECT_GE(count, 5u);  // at least one shared step, one step per worker
  // A second wave starts warm: everything from disk.
  pids.clear();
  for (int i = 0; i < 4; ++i)
    pids.push_back(spawnChild("worker", {"KILN_JIT=replay", "KILN_REPLAY_STRICT=1", "KILN_CACHE_DIR=" + dir.str(),
                                         "KILN_TEST_WORKER=" + std::to_string(i)}));
  for (pid_t p : pids) EXPECT_EQ(waitChild(p), 0);
}

TEST(KernelCache, ReplayRunsCachedKernelsWithoutTheCompiler) {
  TempDir dir;
  Data d;
  fillCache(dir.str(), d);
  EXPECT_EQ(runChild("replay-hit", {"KILN_JIT=replay", "KILN_CACHE_DIR=" + dir.str()}), 0);
}

TEST(KernelCache, ReplayMissesAreInterpretedCountedOrErrors) {
  TempDir dir;
  EXPECT_EQ(runChild("replay-miss", {"KILN_JIT=replay", "KILN_CACHE_DIR=" + dir.str()}), 0);
  EXPECT_EQ(runChild("replay-strict", {"KILN_JIT=replay", "KILN_REPLAY_STRICT=1", "KILN_CACHE_DIR=" + dir.str()}),
            0);
  EXPECT_TRUE(entryFiles(dir.str()).empty());
}

/// Exit status of the full-disk child when it cannot have a mount namespace.
constexpr int kNoMountNamespace = 77;

// Full: the cache directory is a tmpfs with no space left (mounted by a
// child in its own mount namespace); kernels still compile and run, kept in
// memory, and nothing is left behind.
TEST(KernelCache, FullDirectoryDegradesToMemory) {
  TempDir dir;
  const std::string full = dir.str() + "/full";
  ::mkdir(full.c_str(), 0700);
  const int rc = runChild("full-disk", {"KILN_JIT=sync", "KILN_JIT_THRESHOLD=1", "KILN_CACHE_DIR=" + full});
  if (rc == kNoMountNamespace) GTEST_SKIP() << "no private mount namespace here to mount a full filesystem";
  EXPECT_EQ(rc, 0);
}

/// The full-disk child's set-up, before any thread exists: a private mount
/// namespace (a user namespace too when not root) with a 8 KiB tmpfs on
/// `dir`, filled up. False when the system does not allow it.
bool mountFullFilesystem(const std::string& dir) {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  if (::unshare(CLONE_NEWNS) != 0) {
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
    spit("/proc/self/setgroups", "deny");
    spit("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
    spit("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
  }
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (::mount("kiln-full", dir.c_str(), "tmpfs", 0, "size=8k,mode=0700") != 0) return false;
  const int fd = ::open((dir + "/filler").c_str(), O_WRONLY | O_CREAT, 0600);
  if (fd < 0) return false;
  const std::string chunk(4096, 'x');
  while (::write(fd, chunk.data(), chunk.size()) > 0) {
  }
  ::close(fd);
  return true;
}

/// The child side of the process tests; does nothing in a normal run.
TEST(KernelCacheChild, Main) {
  const char* role = std::getenv("KILN_TEST_CHILD");
  if (!role) GTEST_SKIP() << "run by the process tests";
  const std::string r = role;
  if (r == "full-disk") {
    const std::string full = std::getenv("KILN_CACHE_DIR");
    if (!mountFullFilesystem(full)) std::_Exit(kNoMountNamespace);
    Data d;
    auto reference = d.reference();
    reset_stats();
    EXPECT_TRUE(close(d.run(), reference));
    EXPECT_TRUE(close(d.run(), reference));
    Stats s = stats();
    EXPECT_EQ(s.compiles, 1u) << s.str();
    EXPECT_EQ(s.cache_stores, 0u) << s.str();
    EXPECT_EQ(s.compiled_runs, 2u) << s.str();
    EXPECT_TRUE(entryFiles(full).empty());
    for (const auto& e : fs::directory_iterator(full))
      if (e.path().filename() != "filler") ADD_FAILURE() << "left behind: " << e.path();
    return;
  }
  if (r == "worker") {
    const int i = std::atoi(std::getenv("KILN_TEST_WORKER"));
    Data shared, own(3 + i, 19, 11);
    auto refShared = shared.reference(), refOwn = own.reference();
    reset_stats();
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(close(shared.run(), refShared));
      EXPECT_TRUE(close(own.run(), refOwn));
    }
    Stats s = stats();
    EXPECT_EQ(s.compiled_runs, 6u) << s.str();
    if (settings().jit == JitMode::Replay) {
      EXPECT_EQ(s.compiles, 0u) << s.str();
      EXPECT_FALSE(exec::compilerLoaded());
    }
    return;
  }
  Data d;
  auto reference = d.reference();
  reset_stats();
  if (r == "replay-hit") {
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(close(d.run(), reference));
    Stats s = stats();
    EXPECT_EQ(s.compiles, 0u) << s.str();
    EXPECT_EQ(s.cache_disk_hits, 1u) << s.str();
    EXPECT_EQ(s.compiled_runs, 3u) << s.str();  // from the first run
    EXPECT_TRUE(exec::kernelLoaderLoaded());
  } else if (r == "replay-miss") {
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(close(d.run(), reference));
    Stats s = stats();
    EXPECT_EQ(s.compiles, 0u) << s.str();
    EXPECT_EQ(s.replay_misses, 1u) << s.str();
    EXPECT_EQ(s.compiled_runs, 0u) << s.str();
    EXPECT_EQ(s.interpreted_runs, 3u) << s.str();
  } else if (r == "replay-strict") {
    // The reference run was the key's first; this one reaches the threshold.
    try {
      d.run();
      ADD_FAILURE() << "expected an error for the missing kernel";
    } catch (const Error& e) {
      char hash[17];
      std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(exec::Engine::lastKey().hash));
      EXPECT_NE(std::string(e.what()).find("KILN_REPLAY_STRICT"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("no cached kernel"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(hash), std::string::npos) << e.what();
    }
  } else {
    FAIL() << "unknown role " << r;
  }
  // Never compiled, so neither the compiler nor MLIR was ever loaded; and
  // cached kernels are mapped with dlopen, so LLVM was not either.
  EXPECT_FALSE(exec::compilerLoaded());
  EXPECT_FALSE(libraryLoaded("libkiln_jit"));
  EXPECT_FALSE(libraryLoaded("libMLIR"));
  EXPECT_FALSE(libraryLoaded("libLLVM"));
}

}  // namespace
}  // namespace kiln
