// Compile targets: the compiler routes a graph to the pipeline of its
// target's kind and says what it produced (format, dispatches, fingerprint).
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/exec/CompileTarget.h"
#include "runtime/exec/Executable.h"
#include "runtime/cache/HostFingerprint.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::exec {
namespace {

/// y = f(x) + x on a [4, 8] f32 input, f an elementwise op (exp unless
/// named): one input, one output.
trace::TraceGraph smallGraph(core::OpKind f = core::OpKind::Exp) {
  trace::TraceGraph g;
  trace::Node x;
  x.op = core::OpKind::Param;
  x.dtype = DType::f32;
  x.shape = Shape{4, 8};
  g.nodes.push_back(x);
  g.inputs.push_back(0);
  trace::Node e = x;
  e.op = f;
  e.numInputs = 1;
  e.inputs = 0;
  g.operands.push_back(0);
  g.nodes.push_back(e);
  trace::Node y = x;
  y.op = core::OpKind::Add;
  y.numInputs = 2;
  y.inputs = 1;
  g.operands.push_back(1);
  g.operands.push_back(0);
  g.nodes.push_back(y);
  g.outputs.push_back(2);
  return g;
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

TEST(CompileTarget, HostPipelineReportsItsDispatch) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  const trace::TraceGraph g = smallGraph(core::OpKind::Sin);  // sin: a call to libm
  CompileResult r = compiler->compile(g, "target_test", CompileTarget::hostCpu());
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

TEST(CompileTarget, EachKindGoesToItsPipelineAndAnUnknownKindIsRefused) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  CompileResult r = compiler->compile(smallGraph(), "spirv_test", CompileTarget::spirv({}));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.format, BinaryFormat::Spirv);
  EXPECT_TRUE(r.entry.empty());
  EXPECT_FALSE(r.dispatches.empty());
  r = compiler->compile(smallGraph(), "nvptx_test", CompileTarget::nvptx(90));
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.format, BinaryFormat::Ptx);
  CompileTarget unknown;
  unknown.kind = static_cast<CompileTarget::Kind>(7);  // e.g. written by a newer Kiln
  r = compiler->compile(smallGraph(), "unknown_test", unknown);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("no compiler pipeline is registered"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace kiln::exec
