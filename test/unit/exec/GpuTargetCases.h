// Trace graphs of each op family for the GPU pipeline tests (NVPTX, SPIR-V):
// built node by node as the recorder and extractGraph would, compiled
// without a GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/trace/TraceGraph.h"

namespace kiln::exec {

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


struct Case {
  const char* name;
  std::function<trace::TraceGraph()> graph;
};

/// Elements of the large element-wise case: 1024 blocks of 1024 (256 threads
/// of 4 elements) and 3 more.
inline constexpr int64_t kLargeElementwise = (int64_t{1} << 20) + 3;

inline std::vector<Case> gpuTargetCases() {
  using core::OpKind;
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
      {"scalar_loss_feeds_later_kernels",  // a full reduction read by the next kernel, not by the host
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(f, {64});
         uint32_t s = b.op(OpKind::ReduceSum, f, {}, {x}, {0});
         uint32_t e = b.op(OpKind::Exp, f, {}, {s});
         uint32_t bs = b.op(OpKind::BroadcastTo, f, {64}, {e});
         return b.output(b.op(OpKind::Mul, f, {64}, {x, bs}));
       }},
      {"large_elementwise_chain",  // several elements a thread; the last block part full
       [=] {
         GraphBuilder b;
         const Shape s{kLargeElementwise};
         uint32_t x = b.param(f, s);
         uint32_t e = b.op(OpKind::Tanh, f, s, {x});
         uint32_t m = b.op(OpKind::Mul, f, s, {e, x});
         return b.output(b.op(OpKind::Exp, f, s, {m}));
       }},
      {"large_broadcast_add_2d",  // several columns a thread, with edges in both dimensions
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(f, {1100, 1027});
         uint32_t bias = b.param(f, {1027});
         uint32_t bb = b.op(OpKind::BroadcastTo, f, {1100, 1027}, {bias});
         return b.output(b.op(OpKind::Add, f, {1100, 1027}, {x, bb}));
       }},
      {"softmax_rows",  // one row kernel: max, exp, sum and division
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(f, {64, 1000});
         uint32_t m = b.op(OpKind::ReduceMax, f, {64, 1}, {x}, {1}, 0, true);
         uint32_t d = b.op(OpKind::Sub, f, {64, 1000}, {x, b.op(OpKind::BroadcastTo, f, {64, 1000}, {m})});
         uint32_t e = b.op(OpKind::Exp, f, {64, 1000}, {d});
         uint32_t s = b.op(OpKind::ReduceSum, f, {64, 1}, {e}, {1}, 0, true);
         return b.output(b.op(OpKind::Div, f, {64, 1000}, {e, b.op(OpKind::BroadcastTo, f, {64, 1000}, {s})}));
       }},
      {"row_sums_read_across_rows",  // y[i, j] + sum(x[j, :]): no row kernel may take both
       [=] {
         GraphBuilder b;
         uint32_t x = b.param(f, {64, 300});
         uint32_t y = b.param(f, {64, 64});
         uint32_t s = b.op(OpKind::ReduceSum, f, {64}, {x}, {1});
         return b.output(b.op(OpKind::Add, f, {64, 64}, {y, b.op(OpKind::BroadcastTo, f, {64, 64}, {s})}));
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

}  // namespace kiln::exec
