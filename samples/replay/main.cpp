// replay: start a service on compiled kernels from the disk cache.
//
// `replay` runs the same small inference loop three times, each in a fresh
// process sharing one new cache directory:
//   1. KILN_JIT=sync    compiles the hot trace and stores its kernel (cold);
//   2. KILN_JIT=replay  loads it from disk on the first step, compiles nothing,
//                       and maps neither LLVM nor MLIR;
//   3. KILN_JIT=off     interprets every step (for comparison);
// and prints each run's timeline. `replay --run` is one such process.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kiln/kiln.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

/// Whether a shared library whose file name contains `name` is mapped.
bool mapped(const char* name) {
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (!maps) return false;
  char line[4096];
  bool found = false;
  while (!found && std::fgets(line, sizeof(line), maps)) found = std::strstr(line, name) != nullptr;
  std::fclose(maps);
  return found;
}

/// Resident memory of this process in MB (VmRSS).
double residentMb() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return 0;
  char line[256];
  long kb = 0;
  while (std::fgets(line, sizeof(line), status))
    if (std::sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  std::fclose(status);
  return kb / 1024.0;
}

/// One process: a few steps of a two-layer MLP, one line per step.
int runSteps(Clock::time_point start) {
  using namespace kiln;
  Tensor x = rand({64, 128}, 1), w1 = rand({128, 256}, 2, DType::f32, -0.1, 0.1), b1 = rand({256}, 3);
  Tensor w2 = rand({256, 10}, 4, DType::f32, -0.1, 0.1);
  kiln::sync();
  float checksum = 0;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = Clock::now();
    const Stats before = stats();
    Tensor h = relu(matmul(x, w1) + b1);
    Tensor p = softmax(matmul(h, w2), 1);
    std::vector<float> out = sum(p * p, {1}).to_vector<float>();
    step();
    const auto t1 = Clock::now();
    checksum = 0;
    for (float v : out) checksum += v;
    const bool compiled = stats().compiled_runs > before.compiled_runs;
    std::printf("  step %d: %7.2f ms, done at %7.2f ms since start, %s\n", i,
                std::chrono::duration<double, std::milli>(t1 - t0).count(),
                std::chrono::duration<double, std::milli>(t1 - start).count(),
                compiled ? "compiled" : "interpreted");
  }
  const Stats s = stats();
  std::printf("  compiles %llu, cache disk hits %llu (load %.2f ms), replay misses %llu, checksum %.6f\n",
              static_cast<unsigned long long>(s.compiles), static_cast<unsigned long long>(s.cache_disk_hits),
              s.cache_load_ms, static_cast<unsigned long long>(s.replay_misses), checksum);
  // A replaying service maps kernels with dlopen: no LLVM, no MLIR.
  std::printf("  resident memory %.1f MB; libLLVM mapped: %s, libMLIR mapped: %s\n", residentMb(),
              mapped("libLLVM") ? "yes" : "no", mapped("libMLIR") ? "yes" : "no");
  std::fflush(stdout);
  return 0;
}

/// Runs `self --run` with KILN_JIT=mode and the cache in `dir`.
int runProcess(const std::string& self, const std::string& mode, const std::string& dir, double* wallMs) {
  std::vector<std::string> vars;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "KILN_JIT=", 9) != 0 && std::strncmp(*e, "KILN_CACHE", 10) != 0) vars.emplace_back(*e);
  vars.push_back("KILN_JIT=" + mode);
  vars.push_back("KILN_CACHE_DIR=" + dir);
  vars.push_back("KILN_REPLAY_STRICT=1");  // a miss would be an error, not a silent slowdown
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string arg = "--run";
  char* argv[] = {const_cast<char*>(self.c_str()), arg.data(), nullptr};
  const auto t0 = Clock::now();
  pid_t pid;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  *wallMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = Clock::now();
  if (argc > 1 && std::strcmp(argv[1], "--run") == 0) {
    try {
      return runSteps(start);
    } catch (const kiln::Error& e) {
      std::printf("  error: %s\n", e.what());
      return 1;
    }
  }
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "kiln-replay-XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  int failures = 0;
  for (const char* mode : {"sync", "replay", "off"}) {
    std::printf("KILN_JIT=%s:\n", mode);
    std::fflush(stdout);
    double wall = 0;
    const int rc = runProcess(self, mode, dir, &wall);
    std::printf("  process wall time %.1f ms, exit %d\n", wall, rc);
    failures += rc != 0;
  }
  fs::remove_all(dir);
  std::printf(failures ? "replay: FAILED\n" : "replay: OK\n");
  return failures ? 1 : 0;
}
