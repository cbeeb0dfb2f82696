// Helpers of the disk kernel cache tests: a private temporary directory, the
// JIT mode and cache directory for one scope, a small training step with its
// interpreted reference, and entry files. Header-only, one copy per test.
#pragma once

#include <gtest/gtest.h>

#include <link.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/cache/CacheEntry.h"
#include "runtime/exec/Engine.h"
#include "runtime/cache/KernelCache.h"
#include "test/unit/exec/TrainingStep.h"

extern char** environ;

namespace kiln::cachetest {

namespace fs = std::filesystem;
namespace cache = exec::cache;

/// A private temporary directory, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "kiln-cache-test-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

/// JIT mode, threshold and cache directory for one test, restored after.
class CacheMode {
 public:
  CacheMode(JitMode mode, int64_t threshold, const std::string& dir) : saved_(settings()) {
    set(mode, threshold, dir);
  }
  void set(JitMode mode, int64_t threshold, const std::string& dir) {
    exec::Engine::instance().drainCompiles();
    Settings s = saved_;
    s.jit = mode;
    s.jit_threshold = threshold;
    s.cache = "on";
    s.cache_dir = dir;
    set_settings(s);
  }
  ~CacheMode() {
    freshProcess();
    set_settings(saved_);
  }
  /// Forgets profiles and in-memory kernels: as if the process restarted.
  static void freshProcess() {
    exec::Engine::instance().drainCompiles();
    exec::Engine::instance().resetProfilesForTesting();
    exec::KernelCache::instance().clearMemory();
  }

 private:
  Settings saved_;
};

struct Data {
  Tensor x, w, b;
  explicit Data(int64_t rows = 37, int64_t inner = 19, int64_t cols = 23)
      : x(rand({rows, inner}, 1, DType::f32, -1, 1)),
        w(rand({inner, cols}, 2, DType::f32, -1, 1)),
        b(rand({cols}, 3, DType::f32, -1, 1)) {
    kiln::sync();
  }
  /// The interpreter's answer (KILN_JIT=off for one step).
  std::vector<float> reference(float scale = 0.5f) const {
    Settings saved = settings(), s = saved;
    s.jit = JitMode::Off;
    set_settings(s);
    auto r = stepOnce(x, w, b, scale);
    set_settings(saved);
    return r;
  }
  std::vector<float> run(float scale = 0.5f) const { return stepOnce(x, w, b, scale); }
};

inline ::testing::AssertionResult close(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 2e-5f * (1 + std::fabs(b[i])))
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  return ::testing::AssertionSuccess();
}

inline std::vector<fs::path> entryFiles(const std::string& dir) {
  std::vector<fs::path> out;
  uint64_t h;
  for (const auto& e : fs::directory_iterator(dir))
    if (cache::parseEntryFileName(e.path().filename().string(), &h)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
inline void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// Data's step run twice in a fresh "process" with a sync JIT on `dir`,
/// after its cache entry was damaged: both runs equal `reference`, no disk
/// entry serves them and the trace is compiled anew. Returns the stats, for
/// the caller's check of how many entries were rejected.
inline Stats runAfterDamage(const std::string& dir, const Data& d, const std::vector<float>& reference) {
  CacheMode m(JitMode::Sync, 1, dir);
  CacheMode::freshProcess();
  reset_stats();
  EXPECT_TRUE(close(d.run(), reference));
  EXPECT_TRUE(close(d.run(), reference));
  Stats s = stats();
  EXPECT_EQ(s.cache_disk_hits, 0u) << s.str();
  EXPECT_EQ(s.compiles, 1u) << s.str();
  EXPECT_EQ(s.compiled_runs, 2u) << s.str();
  return s;
}

/// Fills `dir` with the kernel of Data's step; returns the entry's path.
inline fs::path fillCache(const std::string& dir, const Data& d) {
  CacheMode m(JitMode::Sync, 1, dir);
  d.run();
  auto files = entryFiles(dir);
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files[0];
}

/// Runs this binary's KernelCacheChild.Main with `role` and extra
/// environment; returns its exit status.
inline pid_t spawnChild(const std::string& role, const std::vector<std::string>& env) {
  std::vector<std::string> vars;
  for (char** e = environ; *e; ++e) {
    std::string v = *e;
    if (v.rfind("KILN_", 0) == 0) continue;
    vars.push_back(v);
  }
  vars.push_back("KILN_TEST_CHILD=" + role);
  vars.push_back("KILN_CACHE=on");
  for (const std::string& v : env) vars.push_back(v);
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=KernelCacheChild.Main";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  return pid;
}
inline int waitChild(pid_t pid) {
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
inline int runChild(const std::string& role, const std::vector<std::string>& env) {
  return waitChild(spawnChild(role, env));
}

inline bool libraryLoaded(const char* part) {
  struct Find {
    const char* part;
    bool found = false;
  } f{part};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* f = static_cast<Find*>(data);
        if (info->dlpi_name && std::strstr(info->dlpi_name, f->part)) f->found = true;
        return 0;
      },
      &f);
  return f.found;
}

}  // namespace kiln::cachetest
