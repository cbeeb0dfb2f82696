// The SPIR-V pipeline, checked without a GPU: trace graphs of each op family
// compile to one SPIR-V module each, spirv-val accepts every module (OpenCL
// environment), each launch names an entry point of the module with the
// work-group size it was compiled for, and the launches cover the graph's
// buffers. (The Level Zero tests run such modules for real, on the OpenCL
// test driver.)
#include <gtest/gtest.h>

#include <algorithm>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "runtime/exec/CompileTarget.h"
#include "runtime/exec/Executable.h"
#include "test/unit/exec/GpuTargetCases.h"

namespace kiln::exec {
namespace {

/// Runs spirv-val on `binary` for the OpenCL 1.2 environment (what Level
/// Zero consumes: SPIR-V 1.0 with the Kernel capability).
bool spirvValAccepts(const std::string& binary, std::string* log) {
  char path[] = "/tmp/kiln-spirv-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return false;
  close(fd);
  { std::ofstream(path, std::ios::binary) << binary; }
  const std::string out = std::string(path) + ".log";
  const std::string cmd = std::string(KILN_SPIRV_VAL) + " --target-env opencl1.2 " + path + " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  log->assign(std::istreambuf_iterator<char>(in), {});
  std::remove(path);
  std::remove(out.c_str());
  return rc == 0;
}

TEST(SpirvTarget, EveryFamilyCompilesToSpirvThatSpirvValAccepts) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  const CompileTarget target = CompileTarget::spirv({"Float16", "Float64"}, "test device 0x1 driver 7");
  for (const Case& c : gpuTargetCases()) {
    SCOPED_TRACE(c.name);
    const trace::TraceGraph g = c.graph();
    CompileResult r = compiler->compile(g, std::string(c.name) + "_spirv", target, exec::CodegenEffort::Full);
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.format, BinaryFormat::Spirv);
    EXPECT_EQ(r.fingerprint, target.fingerprint());
    EXPECT_NE(r.fingerprint.find("device=test device 0x1 driver 7"), std::string::npos) << r.fingerprint;
    ASSERT_GE(r.object.size(), 20u);
    EXPECT_EQ(r.object.substr(0, 4), std::string("\x03\x02\x23\x07", 4)) << "not SPIR-V (magic number)";
    std::string log;
    EXPECT_TRUE(spirvValAccepts(r.object, &log)) << log;
    ASSERT_FALSE(r.dispatches.empty());
    EXPECT_EQ(r.kernelCount, static_cast<int>(r.dispatches.size()));
    std::set<int64_t> inputs, outputs;
    for (const KernelDispatch& d : r.dispatches) {
      // OpEntryPoint keeps the name as a nul-terminated literal.
      EXPECT_NE(r.object.find(d.symbol + std::string(1, '\0')), std::string::npos) << d.symbol;
      for (int i = 0; i < 3; ++i) {
        EXPECT_GE(d.grid[i], 1);
        EXPECT_GE(d.block[i], 1);
      }
      EXPECT_LE(d.block[0] * d.block[1] * d.block[2], 1024);
      for (const DispatchArg& a : d.args) {
        EXPECT_NE(a.kind, DispatchArg::Kind::Sizes);
        if (a.kind == DispatchArg::Kind::Input) inputs.insert(a.index);
        if (a.kind == DispatchArg::Kind::Output) outputs.insert(a.index);
        if (a.kind == DispatchArg::Kind::Scratch) EXPECT_LT(static_cast<size_t>(a.index), r.scratchBytes);
      }
    }
    EXPECT_EQ(inputs.size(), g.inputs.size());
    EXPECT_EQ(outputs.size(), g.outputs.size());
  }
}

// A graph with a dynamic extent compiles to one module whose launch grid
// the launch program computes from the size (LevelZeroTier1 runs such
// kernels at many sizes against the interpreter).
TEST(SpirvTarget, DynamicExtentsCompileToOneKernelWithALaunchProgram) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  using core::OpKind;
  GraphBuilder b;
  uint32_t x = b.param(DType::f32, {-1, 8});  // extent -1: dynamic size number 0
  const trace::TraceGraph g = b.output(b.op(OpKind::Exp, DType::f32, {-1, 8}, {x}));
  CompileResult r = compiler->compile(g, "dynamic", CompileTarget::spirv({}), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.dynamicSizes, 1);
  EXPECT_EQ(checkLaunchProgram(r.launchProgram, r.dynamicSizes), "");
  auto dynamic = std::find_if(r.dispatches.begin(), r.dispatches.end(),
                              [](const KernelDispatch& d) { return d.dynamicGrid(); });
  ASSERT_NE(dynamic, r.dispatches.end());
  std::vector<int64_t> values;
  for (int64_t rows : {1, 100, 5000}) {
    runLaunchProgram(r.launchProgram, &rows, values);
    const KernelDispatch& d = *dynamic;
    int64_t threads = 1;
    for (int i = 0; i < 3; ++i)
      threads *= (d.gridSteps[i] >= 0 ? values[static_cast<size_t>(d.gridSteps[i])] : d.grid[i]) * d.block[i];
    EXPECT_GE(threads, rows * 8) << rows;  // a thread for every element
  }
}

TEST(SpirvTarget, RefusesWhatItCannotCompile) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  CompileResult r = compiler->compile(gpuTargetCases()[0].graph(), "bad_capability", CompileTarget::spirv({"NoSuchCapability"}), exec::CodegenEffort::Full);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("unknown capability 'NoSuchCapability'"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace kiln::exec
