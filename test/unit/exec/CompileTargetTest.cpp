// Compile targets: the compiler routes a graph to the pipeline of its
// target's kind and says what it produced (format, dispatches, fingerprint).
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/exec/CompileTarget.h"
#include "runtime/exec/Executable.h"
#include "runtime/cache/HostFingerprint.h"
#include "runtime/support/HostCaches.h"
#include "runtime/trace/TraceGraph.h"

extern char** environ;

namespace kiln::exec {
namespace {

/// y = g(f(x), x) on an f32 input of `shape`: one input, one output.
trace::TraceGraph unaryThenBinary(core::OpKind f, core::OpKind g, Shape shape) {
  trace::TraceGraph graph;
  trace::Node x;
  x.op = core::OpKind::Param;
  x.dtype = DType::f32;
  x.shape = shape;
  graph.nodes.push_back(x);
  graph.inputs.push_back(0);
  trace::Node e = x;
  e.op = f;
  e.numInputs = 1;
  e.inputs = 0;
  graph.operands.push_back(0);
  graph.nodes.push_back(e);
  trace::Node y = x;
  y.op = g;
  y.numInputs = 2;
  y.inputs = 1;
  graph.operands.push_back(1);
  graph.operands.push_back(0);
  graph.nodes.push_back(y);
  graph.outputs.push_back(2);
  return graph;
}

/// y = f(x) + x on a [4, 8] f32 input, f an elementwise op (exp unless
/// named).
trace::TraceGraph smallGraph(core::OpKind f = core::OpKind::Exp) {
  return unaryThenBinary(f, core::OpKind::Add, Shape{4, 8});
}

/// m = exp(x) @ x on a [32, 32] f32 input: exp(x) is materialised for the
/// GEMM call, in the kernel's scratch.
trace::TraceGraph matmulOfExpGraph() {
  return unaryThenBinary(core::OpKind::Exp, core::OpKind::Matmul, Shape{32, 32});
}

/// The DT_NEEDED entries of an ELF shared object's bytes (read through its
/// section headers: .dynamic and the string table it links to).
std::vector<std::string> neededLibraries(const std::string& elf) {
  std::vector<std::string> needed;
  Elf64_Ehdr header;
  if (elf.size() < sizeof header) return needed;
  std::memcpy(&header, elf.data(), sizeof header);
  auto section = [&](size_t i) {
    Elf64_Shdr s{};
    const size_t at = header.e_shoff + i * sizeof(Elf64_Shdr);
    if (at + sizeof s <= elf.size()) std::memcpy(&s, elf.data() + at, sizeof s);
    return s;
  };
  for (size_t i = 0; i < header.e_shnum; ++i) {
    const Elf64_Shdr dynamic = section(i);
    if (dynamic.sh_type != SHT_DYNAMIC) continue;
    const Elf64_Shdr strings = section(dynamic.sh_link);
    for (size_t at = dynamic.sh_offset; at + sizeof(Elf64_Dyn) <= dynamic.sh_offset + dynamic.sh_size;
         at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry;
      std::memcpy(&entry, elf.data() + at, sizeof entry);
      if (entry.d_tag == DT_NEEDED) needed.emplace_back(elf.c_str() + strings.sh_offset + entry.d_un.d_val);
    }
  }
  return needed;
}

TEST(CompileTarget, NamesFormatsAndFingerprints) {
  const CompileTarget host = CompileTarget::hostCpu();
  const CompileTarget sm90 = CompileTarget::nvptx(90);
  EXPECT_EQ(host.str(), "host-cpu");
  EXPECT_EQ(sm90.str(), "nvptx sm_90 ptx80");
  EXPECT_EQ(host.format(), BinaryFormat::SharedObject);
  EXPECT_EQ(sm90.format(), BinaryFormat::Ptx);
  EXPECT_EQ(host.fingerprint(), hostFingerprint());
  // A GPU binary does not depend on the host CPU, but on its target and the
  // compiler that made it.
  EXPECT_NE(sm90.fingerprint(), CompileTarget::nvptx(80).fingerprint());
  EXPECT_NE(sm90.fingerprint().find("target=nvptx sm_90"), std::string::npos);
  EXPECT_EQ(sm90.fingerprint().find("cpuid="), std::string::npos);
  EXPECT_NE(sm90.fingerprint().find("pipeline="), std::string::npos);
}

TEST(HostCaches, SysfsSizesParseAndTheLastLevelCacheIsKnown) {
  EXPECT_EQ(parseCacheSize("491520K"), int64_t{491520} << 10);
  EXPECT_EQ(parseCacheSize("32M\n"), int64_t{32} << 20);
  EXPECT_EQ(parseCacheSize("1G"), int64_t{1} << 30);
  EXPECT_EQ(parseCacheSize("65536"), 65536);
  for (const char* bad : {"", "K", "12Q", "-4K", "1.5M", "9999999999999K"}) EXPECT_EQ(parseCacheSize(bad), -1) << bad;
  // At least an L1's worth, at most what any machine has.
  EXPECT_GE(lastLevelCacheBytes(), int64_t{32} << 10);
  EXPECT_LE(lastLevelCacheBytes(), int64_t{1} << 40);
}

TEST(CompileTarget, HostPipelineReportsItsDispatch) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  const trace::TraceGraph g = smallGraph(core::OpKind::Sin);  // sin: a call to libm
  CompileResult r = compiler->compile(g, "target_test", CompileTarget::hostCpu(), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.format, BinaryFormat::SharedObject);
  EXPECT_EQ(r.fingerprint, hostFingerprint());
  ASSERT_EQ(r.dispatches.size(), 1u);
  const KernelDispatch& d = r.dispatches[0];
  EXPECT_EQ(d.symbol, r.entry);
  EXPECT_EQ(d.grid, (std::array<int64_t, 3>{1, 1, 1}));
  const std::vector<DispatchArg> args = {
      {DispatchArg::Kind::Input, 0}, {DispatchArg::Kind::Output, 0}, {DispatchArg::Kind::Scratch, 0}};
  EXPECT_EQ(d.args, args);
  // The shared object needs libkiln by its SONAME and nothing else (libm,
  // whose sin it calls, comes with libkiln's dependencies), and loads with
  // every symbol resolved.
  EXPECT_EQ(neededLibraries(r.object), std::vector<std::string>{KILN_RUNTIME_SONAME});
  const std::string path = ::testing::TempDir() + "/kiln_target_test.so";
  std::ofstream(path, std::ios::binary) << r.object;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  EXPECT_NE(dlsym(handle, r.entry.c_str()), nullptr);
  dlclose(handle);
  std::remove(path.c_str());
  // compileTrace takes the target from the graph's device (the CPU here).
  CompileResult viaDevice = compileTrace(g, "target_test_device");
  ASSERT_TRUE(viaDevice.ok()) << viaDevice.error;
  EXPECT_EQ(viaDevice.format, BinaryFormat::SharedObject);
}

// A host compile says its kernel's scratch size as soon as it knows it
// (before LLVM), so that the runtime can back that memory meanwhile; the
// hook is not part of what the target is.
TEST(CompileTarget, HostCompileSaysItsScratchSizeBeforeItsMachineCode) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  std::vector<std::size_t> told;
  CompileTarget target = CompileTarget::hostCpu();
  target.scratchKnown = [&](std::size_t bytes) { told.push_back(bytes); };
  EXPECT_TRUE(target == CompileTarget::hostCpu());
  EXPECT_EQ(target.fingerprint(), CompileTarget::hostCpu().fingerprint());
  CompileResult r = compiler->compile(matmulOfExpGraph(), "scratch_test", target, exec::CodegenEffort::Quick);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_GT(r.scratchBytes, 0u) << "exp(x) should be materialised for the GEMM call";
  EXPECT_EQ(told, std::vector<std::size_t>{r.scratchBytes});
  // A kernel without temporaries has nothing to say.
  told.clear();
  r = compiler->compile(smallGraph(), "no_scratch_test", target, exec::CodegenEffort::Quick);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(told.size(), r.scratchBytes > 0 ? 1u : 0u);
}

TEST(CompileTarget, EachKindGoesToItsPipelineAndAnUnknownKindIsRefused) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  CompileResult r = compiler->compile(smallGraph(), "spirv_test", CompileTarget::spirv({}), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.format, BinaryFormat::Spirv);
  EXPECT_TRUE(r.entry.empty());
  EXPECT_FALSE(r.dispatches.empty());
  r = compiler->compile(smallGraph(), "nvptx_test", CompileTarget::nvptx(90), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.format, BinaryFormat::Ptx);
  CompileTarget unknown;
  unknown.kind = static_cast<CompileTarget::Kind>(7);  // e.g. written by a newer Kiln
  r = compiler->compile(smallGraph(), "unknown_test", unknown, exec::CodegenEffort::Full);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("no compiler pipeline is registered"), std::string::npos) << r.error;
}

/// The child of LinkFilesOfKilledProcessesAreRemoved: its first compile
/// prepares the linker, which looks in its TMPDIR.
TEST(CompileTargetChild, CompilesOnce) {
  if (!std::getenv("KILN_TEST_LINK_CHILD")) GTEST_SKIP() << "run by LinkFilesOfKilledProcessesAreRemoved";
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  ASSERT_TRUE(compiler->compile(smallGraph(), "link_child", CompileTarget::hostCpu(), exec::CodegenEffort::Full).ok());
}

TEST(CompileTarget, LinkFilesOfKilledProcessesAreRemoved) {
  namespace fs = std::filesystem;
  std::string t = (fs::temp_directory_path() / "kiln-link-files-XXXXXX").string();
  ASSERT_NE(::mkdtemp(t.data()), nullptr);
  const fs::path dir = t;
  // A process that has exited: its pid names the files it left.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ::waitpid(gone, nullptr, 0);
  const std::string dead = std::to_string(gone), alive = std::to_string(::getpid());
  auto make = [&](const std::string& name, bool old) {
    std::ofstream(dir / name) << "x";
    if (old) {
      const time_t hourAgo = std::time(nullptr) - 3600;
      const utimbuf times{hourAgo, hourAgo};
      ::utime((dir / name).c_str(), &times);
    }
  };
  make("kiln-kernel-" + dead + "-a1b2c3.o", true);       // a killed link: removed
  make("kiln-soname-" + dead + "-d4e5f6.so", true);      // a killed process's stub: removed
  make("kiln-kernel-" + dead + "-g7h8i9.log", false);    // too recent to judge: kept
  make("kiln-kernel-" + alive + "-j1k2l3.o", true);      // a running process's: kept
  make("kiln-kernel-0a1b2c.o", true);                    // no pid in the name: kept
  make("other-" + dead + "-m4n5o6.o", true);             // not the linker's: kept
  // A fresh process whose temporary directory this is compiles once.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "TMPDIR=", 7) != 0) env.emplace_back(*e);
  env.push_back("TMPDIR=" + dir.string());
  env.push_back("KILN_TEST_LINK_CHILD=1");
  std::vector<char*> envp;
  for (std::string& v : env) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string exe = fs::read_symlink("/proc/self/exe").string(), filter = "--gtest_filter=CompileTargetChild.*";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t child = -1;
  ASSERT_EQ(::posix_spawn(&child, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child's compile failed";
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  const std::vector<std::string> kept = {"kiln-kernel-" + alive + "-j1k2l3.o", "kiln-kernel-" + dead + "-g7h8i9.log",
                                         "kiln-kernel-0a1b2c.o", "other-" + dead + "-m4n5o6.o"};
  std::vector<std::string> want = kept;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(left, want) << "the child's own files are gone at its exit; the stale ones at its first compile";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln::exec
