// The NVPTX pipeline, checked without a GPU: trace graphs of each op family
// compile to PTX for sm_80 and sm_90, ptxas accepts every module, and each
// kernel launch the result lists names a kernel the PTX defines, with a
// launch shape and arguments that cover the graph's buffers.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <unistd.h>

#include "kiln/kiln.h"
#include "runtime/exec/CompileTarget.h"
#include "runtime/exec/Executable.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::exec {
namespace {

/// Builds a TraceGraph node by node (what the recorder and extractGraph do).
class GraphBuilder {
 public:
  uint32_t param(DType t, const Shape& s) {
    trace::Node n;
    n.op = core::OpKind::Param;
    n.dtype = t;
    n.shape = s;
    n.i0 = static_cast<int64_t>(g_.inputs.size());
    g_.inputs.push_back(add(n));
    return g_.inputs.back();
  }
  uint32_t op(core::OpKind k, DType t, const Shape& s, std::vector<uint32_t> ins, std::vector<int64_t> attrs = {},
              int64_t i0 = 0, bool keepdim = false) {
    trace::Node n;
    n.op = k;
    n.dtype = t;
    n.shape = s;
    n.i0 = i0;
    n.keepdim = keepdim;
    n.numInputs = static_cast<uint16_t>(ins.size());
    n.inputs = static_cast<uint32_t>(g_.operands.size());
    g_.operands.insert(g_.operands.end(), ins.begin(), ins.end());
    n.numAttrs = static_cast<uint16_t>(attrs.size());
    n.attrs = static_cast<uint32_t>(g_.attrs.size());
    g_.attrs.insert(g_.attrs.end(), attrs.begin(), attrs.end());
    return add(n);
  }
  trace::TraceGraph output(uint32_t id) {
    g_.outputs.push_back(id);
    return g_;
  }

 private:
  uint32_t add(const trace::Node& n) {
    g_.nodes.push_back(n);
    return static_cast<uint32_t>(g_.nodes.size() - 1);
  }
  trace::TraceGraph g_;
};

using core::OpKind;

struct Case {
  const char* name;
  std::function<trace::TraceGraph()> graph;
};

std::vector<Case> cases() {
  const DType f = DType::f32;
  return {
      {"elementwise_chain",
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(f, {1000});
         uint32_t e = b.op(OpKind::Tanh, f, {1000}, {x});
         uint32_t m = b.op(OpKind::Mul, f, {1000}, {e, x});
         return b.output(b.op(OpKind::Exp, f, {1000}, {m}));
       }},
      {"broadcast_add_2d",
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(f, {33, 70});
         uint32_t bias = b.param(f, {70});
         uint32_t bb = b.op(OpKind::BroadcastTo, f, {33, 70}, {bias});
         return b.output(b.op(OpKind::Add, f, {33, 70}, {x, bb}));
       }},
      {"row_sum_keepdim",
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(f, {16, 300});
         return b.output(b.op(OpKind::ReduceSum, f, {16, 1}, {x}, {1}, 0, true));
       }},
      {"full_max_reduction",
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(f, {40, 50});
         return b.output(b.op(OpKind::ReduceMax, f, {}, {x}, {0, 1}));
       }},
      {"matmul_relu",
       [=] {
         GraphBuilder b;
         uint32_t a = b.param(f, {24, 40});
         uint32_t w = b.param(f, {40, 56});
         uint32_t mm = b.op(OpKind::Matmul, f, {24, 56}, {a, w});
         return b.output(b.op(OpKind::Relu, f, {24, 56}, {mm}));
       }},
      {"cast_and_compare",
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(DType::i32, {7, 9, 11});
         uint32_t c = b.op(OpKind::Cast, f, {7, 9, 11}, {x});
         uint32_t y = b.param(f, {7, 9, 11});
         return b.output(b.op(OpKind::Lt, DType::boolean, {7, 9, 11}, {c, y}));
       }},
  };
}

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
    for (const Case& c : cases()) {
      SCOPED_TRACE(std::string(c.name) + " sm_" + std::to_string(sm));
      const trace::TraceGraph g = c.graph();
      CompileResult r = compiler->compile(g, std::string(c.name) + "_sm" + std::to_string(sm), CompileTarget::nvptx(sm));
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

TEST(NvptxTarget, RefusesWhatItCannotCompile) {
  TraceCompiler* compiler = loadCompiler();
  ASSERT_NE(compiler, nullptr);
  GraphBuilder b;
  uint32_t x = b.param(DType::f32, {-1 - 0, 8});  // extent -1: dynamic size number 0
  const trace::TraceGraph g = b.output(b.op(OpKind::Exp, DType::f32, {-1, 8}, {x}));
  CompileResult r = compiler->compile(g, "dynamic", CompileTarget::nvptx(90));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("dynamic-shape"), std::string::npos) << r.error;
  CompileTarget noSm = CompileTarget::nvptx(0);
  r = compiler->compile(cases()[0].graph(), "no_sm", noSm);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("SM and PTX versions"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace kiln::exec
