// The NVPTX pipeline, checked without a GPU: trace graphs of each op family
// compile to PTX for sm_80 and sm_90, ptxas accepts every module, and each
// kernel launch the result lists names a kernel the PTX defines, with a
// launch shape and arguments that cover the graph's buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "kiln/kiln.h"
#include "runtime/exec/CompileTarget.h"
#include "runtime/exec/Executable.h"
#include "runtime/trace/TraceGraph.h"
#include "test/unit/exec/GpuTargetCases.h"

namespace kiln::exec {
namespace {

/// Writes `text` to a temporary file and runs ptxas on it for `sm`.
bool ptxasAccepts(const std::string& text, int sm, std::string* log) {
  char path[] = "/tmp/kiln-nvptx-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return false;
  close(fd);
  const std::string ptx = std::string(path) + ".ptx";
  std::rename(path, ptx.c_str());
  { std::ofstream(ptx) << text; }
  const std::string out = ptx + ".log";
  const std::string cmd = std::string(KILN_PTXAS) + " -arch=sm_" + std::to_string(sm) + " " + ptx +
                          " -o /dev/null > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(out);
  log->assign(std::istreambuf_iterator<char>(in), {});
  std::remove(ptx.c_str());
  std::remove(out.c_str());
  return rc == 0;
}

TEST(NvptxTarget, EveryFamilyCompilesToPtxThatPtxasAccepts) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  for (int sm : {80, 90}) {
    for (const Case& c : gpuTargetCases()) {
      SCOPED_TRACE(std::string(c.name) + " sm_" + std::to_string(sm));
      const trace::TraceGraph g = c.graph();
      CompileResult r = compiler->compile(g, std::string(c.name) + "_sm" + std::to_string(sm), CompileTarget::nvptx(sm), exec::CodegenEffort::Full);
      ASSERT_TRUE(r.ok()) << r.error;
      EXPECT_EQ(r.format, BinaryFormat::Ptx);
      EXPECT_NE(r.object.find(".target sm_" + std::to_string(sm)), std::string::npos);
      EXPECT_EQ(r.fingerprint, CompileTarget::nvptx(sm).fingerprint());
      std::string log;
      EXPECT_TRUE(ptxasAccepts(r.object, sm, &log)) << log;
      // Every dispatch names an entry of the module, launches at least one
      // thread, and together they read every input and write every output.
      ASSERT_FALSE(r.dispatches.empty());
      std::set<int64_t> inputs, outputs;
      for (const KernelDispatch& d : r.dispatches) {
        EXPECT_NE(r.object.find(".entry " + d.symbol + "("), std::string::npos) << d.symbol;
        for (int i = 0; i < 3; ++i) {
          EXPECT_GE(d.grid[i], 1);
          EXPECT_GE(d.block[i], 1);
        }
        EXPECT_LE(d.block[0] * d.block[1] * d.block[2], 1024) << "more threads than a block may have";
        for (const DispatchArg& a : d.args) {
          if (a.kind == DispatchArg::Kind::Input) inputs.insert(a.index);
          if (a.kind == DispatchArg::Kind::Output) outputs.insert(a.index);
          if (a.kind == DispatchArg::Kind::Scratch) EXPECT_LT(static_cast<size_t>(a.index), r.scratchBytes);
        }
      }
      EXPECT_EQ(inputs.size(), g.inputs.size());
      EXPECT_EQ(outputs.size(), g.outputs.size());
    }
  }
}

/// The graph of the GPU target case `name`.
trace::TraceGraph caseGraph(const std::string& name) {
  for (const Case& c : gpuTargetCases())
    if (name == c.name) return c.graph();
  ADD_FAILURE() << "no GPU target case " << name;
  return {};
}

// A large element-wise nest gives each thread 4 elements, 256 apart (1024
// elements a block), and a full block issues the 4 loads before any
// arithmetic: one element a thread kept one load in flight under chain8's
// long arithmetic.
TEST(NvptxTarget, LargeElementwiseNestsGiveEachThreadFourElementsLoadedTogether) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  CompileResult r = compiler->compile(caseGraph("large_elementwise_chain"), "coarse", CompileTarget::nvptx(90),
                                      exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.dispatches.size(), 1u);
  const KernelDispatch& d = r.dispatches[0];
  EXPECT_EQ(d.grid[0], (kLargeElementwise + 1023) / 1024);
  EXPECT_EQ(d.block[0], 256);
  // Among the kernel's loads, stores and arithmetic, four loads in a row
  // (the full block's; each guarded copy at the edge loads and computes).
  int loadsInARow = 0, longest = 0;
  std::istringstream ptx(r.object);
  for (std::string line; std::getline(ptx, line);) {
    if (line.find("ld.global") != std::string::npos)
      longest = std::max(longest, ++loadsInARow);
    else if (line.find("st.global") != std::string::npos || line.find("fma") != std::string::npos ||
             line.find("ex2") != std::string::npos)
      loadsInARow = 0;
  }
  EXPECT_EQ(longest, 4) << r.object;
  // A small nest keeps one element a thread.
  r = compiler->compile(caseGraph("elementwise_chain"), "fine", CompileTarget::nvptx(90), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.dispatches.size(), 1u);
  EXPECT_EQ(r.dispatches[0].grid[0], (1000 + 255) / 256);
}

/// The number of times `what` occurs in `text`.
int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A reduction along rows of 32 or more runs a block per row (256 threads for
// rows of 300), combining the threads' partial sums in shared memory between
// barriers; the accumulator's fill and the f64 sum's conversion join it in
// one row kernel.
TEST(NvptxTarget, RowReductionsRunABlockPerRow) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  CompileResult r =
      compiler->compile(caseGraph("row_sum_keepdim"), "rows", CompileTarget::nvptx(90), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.dispatches.size(), 1u);
  EXPECT_EQ(r.dispatches[0].grid[0], 16);  // [16, 300]: a block per row
  EXPECT_EQ(r.dispatches[0].block[0], 256);
  EXPECT_NE(r.object.find(".shared"), std::string::npos);
  // One barrier after each nest but the last (fill, sum, conversion), one
  // after the threads' partial results and one after each of the tree's 8
  // halvings.
  EXPECT_EQ(occurrences(r.object, "bar.sync"), 11);
}

// Softmax over rows is one kernel of a block per row; a row sum that a
// later nest reads across rows (y[i, j] + s[j]) is not fused with it.
TEST(NvptxTarget, RowKernelsTakeSoftmaxButNotReadsAcrossRows) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  CompileResult r =
      compiler->compile(caseGraph("softmax_rows"), "softmax", CompileTarget::nvptx(90), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(r.dispatches.size(), 1u);
  EXPECT_EQ(r.dispatches[0].grid[0], 64);
  EXPECT_EQ(r.dispatches[0].block[0], 256);
  r = compiler->compile(caseGraph("row_sums_read_across_rows"), "across", CompileTarget::nvptx(90),
                        exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_GE(r.dispatches.size(), 2u);
}

/// `tanh(x * b) + x` over x [rows, 300] and b [300] (rows < 0: dynamic
/// size number -1 - rows), and the row sums of `exp(x)`.
trace::TraceGraph rowsGraph(int64_t rows) {
  using core::OpKind;
  GraphBuilder b;
  const DType f = DType::f32;
  uint32_t x = b.param(f, {rows, 300}), w = b.param(f, {300});
  uint32_t m = b.op(OpKind::Mul, f, {rows, 300}, {x, w});
  uint32_t y = b.op(OpKind::Add, f, {rows, 300}, {b.op(OpKind::Tanh, f, {rows, 300}, {m}), x});
  uint32_t s = b.op(OpKind::ReduceSum, f, {rows}, {b.op(OpKind::Exp, f, {rows, 300}, {x})}, {1});
  b.output(y);
  return b.output(s);
}

// A graph with a dynamic extent compiles once; ptxas accepts it; its grids
// come from its launch program, which gives, at each size, a grid that
// covers that many rows (the row sums: a block per row), and its kernels
// take the size.
TEST(NvptxTarget, DynamicShapeKernelsComputeTheirGridsFromTheirSizes) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  const CompileResult r =
      compiler->compile(rowsGraph(-1), "dynamic_rows", CompileTarget::nvptx(90), exec::CodegenEffort::Full);
  ASSERT_TRUE(r.ok()) << r.error;
  std::string log;
  EXPECT_TRUE(ptxasAccepts(r.object, 90, &log)) << log;
  EXPECT_EQ(r.dynamicSizes, 1);
  EXPECT_EQ(checkLaunchProgram(r.launchProgram, r.dynamicSizes), "");
  int dynamicGrids = 0, sizeArgs = 0;
  for (const KernelDispatch& d : r.dispatches) {
    dynamicGrids += d.dynamicGrid();
    for (const DispatchArg& a : d.args) sizeArgs += a.kind == DispatchArg::Kind::Value;
  }
  EXPECT_GT(dynamicGrids, 0);
  EXPECT_GT(sizeArgs, 0);
  EXPECT_GT(occurrences(r.object, "bar.sync"), 0) << "the row sums' tree of halvings";
  for (int64_t rows : {1, 7, 8, 9, 1000, 70000}) {
    SCOPED_TRACE(rows);
    std::vector<int64_t> values;
    const int64_t sizes[1] = {rows};
    runLaunchProgram(r.launchProgram, sizes, values);
    auto gridOf = [&](const KernelDispatch& d) {
      std::array<int64_t, 3> g = d.grid;
      for (int i = 0; i < 3; ++i)
        if (d.gridSteps[i] >= 0) g[i] = values[static_cast<size_t>(d.gridSteps[i])];
      return g;
    };
    // The element-wise nest [rows, 300] in tiles of 32 x 8 threads.
    const KernelDispatch& elementwise = r.dispatches.front();
    EXPECT_EQ(elementwise.block, (std::array<int64_t, 3>{32, 8, 1}));
    EXPECT_EQ(gridOf(elementwise), (std::array<int64_t, 3>{(300 + 31) / 32, (rows + 7) / 8, 1}));
    // The row sums of 300 in a block of 256 threads per row.
    EXPECT_TRUE(std::any_of(r.dispatches.begin(), r.dispatches.end(), [&](const KernelDispatch& d) {
      return d.block[0] == 256 && gridOf(d) == std::array<int64_t, 3>{rows, 1, 1};
    }));
    // Every launch has work at every size.
    for (const KernelDispatch& d : r.dispatches)
      for (int64_t g : gridOf(d)) EXPECT_GE(g, 1) << d.symbol;
  }
}

TEST(NvptxTarget, RefusesWhatItCannotCompile) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  CompileTarget noSm = CompileTarget::nvptx(0);
  CompileResult r = compiler->compile(gpuTargetCases()[0].graph(), "no_sm", noSm, exec::CodegenEffort::Full);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("SM and PTX versions"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace kiln::exec
