#include "bench/resnet_onednn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <dnnl.hpp>

namespace kiln_bench {

using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Dt = memory::data_type;
using Tag = memory::format_tag;

namespace {

constexpr int64_t N = ResnetBlockData::kBatch, C = ResnetBlockData::kChannels, S = ResnetBlockData::kSide;
constexpr float kEps = 1e-5f;
const memory::dims kXDims = {N, C, S, S}, kWDims = {C, C, 3, 3}, kCDims = {C}, kOne = {1, 1};

memory::desc userDesc(const memory::dims& dims, Tag tag) { return memory::desc(dims, Dt::f32, tag); }
memory::desc anyDesc(const memory::dims& dims) { return memory::desc(dims, Dt::f32, Tag::any); }

dnnl::primitive_attr postOps(bool sum, bool relu) {
  dnnl::post_ops ops;
  if (sum) ops.append_sum(1.f);
  if (relu) ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return attr;
}

/// `user` as a memory of layout `desc`: itself where the layouts agree,
/// else a new memory that reorder() fills.
struct Relayout {
  memory user, mem;
  dnnl::reorder prim;
  bool needed = false;
  Relayout() = default;
  Relayout(const memory& from, const memory::desc& desc, const dnnl::engine& eng) : user(from) {
    needed = from.get_desc() != desc;
    mem = needed ? memory(desc, eng) : from;
    if (needed) prim = dnnl::reorder(from, mem);
  }
  void run(dnnl::stream& s) {
    if (needed) prim.execute(s, user, mem);
  }
};

}  // namespace

// ------------------------------------------------------------------ inference
struct OnednnResnetBlock::Inference {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<float> foldedW1, foldedW2, bias1, bias2, out;
  dnnl::convolution_forward::primitive_desc pd1, pd2;
  dnnl::convolution_forward conv1, conv2;
  memory xUser, outUser, w1User, w2User, bias1Mem, bias2Mem, d1, d2;
  Relayout xToSrc, w1, w2;
  dnnl::reorder xToD2, d2ToOut;

  Inference() : foldedW1(C * C * 9), foldedW2(C * C * 9), bias1(C), bias2(C), out(N * C * S * S) {
    const memory::dims strides = kOne, pad = kOne;
    dnnl::convolution_forward::desc desc1(prop_kind::forward_inference, algorithm::convolution_direct,
                                          anyDesc(kXDims), anyDesc(kWDims), userDesc(kCDims, Tag::a),
                                          anyDesc(kXDims), strides, pad, pad);
    pd1 = dnnl::convolution_forward::primitive_desc(desc1, postOps(false, true), eng);
    // The second convolution reads the first's output as it is laid out.
    dnnl::convolution_forward::desc desc2(prop_kind::forward_inference, algorithm::convolution_direct,
                                          pd1.dst_desc(), anyDesc(kWDims), userDesc(kCDims, Tag::a),
                                          anyDesc(kXDims), strides, pad, pad);
    pd2 = dnnl::convolution_forward::primitive_desc(desc2, postOps(true, true), eng);
    conv1 = dnnl::convolution_forward(pd1);
    conv2 = dnnl::convolution_forward(pd2);
    w1User = memory(userDesc(kWDims, Tag::oihw), eng, foldedW1.data());
    w2User = memory(userDesc(kWDims, Tag::oihw), eng, foldedW2.data());
    bias1Mem = memory(userDesc(kCDims, Tag::a), eng, bias1.data());
    bias2Mem = memory(userDesc(kCDims, Tag::a), eng, bias2.data());
    outUser = memory(userDesc(kXDims, Tag::nchw), eng, out.data());
    w1 = Relayout(w1User, pd1.weights_desc(), eng);
    w2 = Relayout(w2User, pd2.weights_desc(), eng);
    d1 = memory(pd1.dst_desc(), eng);
    d2 = memory(pd2.dst_desc(), eng);
    d2ToOut = dnnl::reorder(d2, outUser);
  }

  void bindInput(const std::vector<float>& x) {
    xUser = memory(userDesc(kXDims, Tag::nchw), eng, const_cast<float*>(x.data()));
    xToSrc = Relayout(xUser, pd1.src_desc(), eng);
    xToD2 = dnnl::reorder(xUser, d2);  // the shortcut, summed into by conv2
  }

  /// Batch norm (inference) folded into a convolution: w * s and b - m * s
  /// per output channel, s = g / sqrt(v + eps).
  static void fold(const std::vector<float>& w, const std::vector<float>& g, const std::vector<float>& b,
                   const std::vector<float>& m, const std::vector<float>& v, std::vector<float>& foldedW,
                   std::vector<float>& bias) {
    for (int64_t o = 0; o < C; ++o) {
      const float s = g[o] / std::sqrt(v[o] + kEps);
      for (int64_t i = 0; i < C * 9; ++i) foldedW[o * C * 9 + i] = w[o * C * 9 + i] * s;
      bias[o] = b[o] - m[o] * s;
    }
  }

  const float* run(const ResnetBlockData& p) {
    fold(p.w1, p.g1, p.b1, p.m1, p.v1, foldedW1, bias1);
    fold(p.w2, p.g2, p.b2, p.m2, p.v2, foldedW2, bias2);
    w1.run(strm);
    w2.run(strm);
    xToSrc.run(strm);
    xToD2.execute(strm, xUser, d2);
    conv1.execute(strm, {{DNNL_ARG_SRC, xToSrc.mem}, {DNNL_ARG_WEIGHTS, w1.mem}, {DNNL_ARG_BIAS, bias1Mem},
                         {DNNL_ARG_DST, d1}});
    conv2.execute(strm, {{DNNL_ARG_SRC, d1}, {DNNL_ARG_WEIGHTS, w2.mem}, {DNNL_ARG_BIAS, bias2Mem},
                         {DNNL_ARG_DST, d2}});
    d2ToOut.execute(strm, d2, outUser);
    strm.wait();
    return out.data();
  }
};

// ------------------------------------------------------------------- training
struct OnednnResnetBlock::Training {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  float lr;
  // Forward.
  dnnl::convolution_forward::primitive_desc conv1Pd, conv2Pd;
  dnnl::batch_normalization_forward::primitive_desc bn1Pd, bn2Pd;
  dnnl::binary::primitive_desc addPd;
  dnnl::convolution_forward conv1, conv2;
  dnnl::batch_normalization_forward bn1, bn2;
  dnnl::binary add;
  // Backward.
  dnnl::batch_normalization_backward::primitive_desc bn1BwdPd, bn2BwdPd;
  dnnl::convolution_backward_data::primitive_desc conv2DataPd;
  dnnl::convolution_backward_weights::primitive_desc conv1WeightsPd, conv2WeightsPd;
  dnnl::batch_normalization_backward bn1Bwd, bn2Bwd;
  dnnl::convolution_backward_data conv2Data;
  dnnl::convolution_backward_weights conv1Weights, conv2Weights;
  // Parameters in the convolutions' layouts and their gradients.
  memory w1, w2, g1, b1, g2, b2, dw1Raw, dw2Raw, dg1, db1, dg2, db2;
  Relayout dw1, dw2;  // the weight gradients in the weights' layouts
  Relayout w2Data;    // w2 as the backward-data convolution reads it
  // Activations.
  memory xUser, y1, h1, mean1, var1, ws1, y2, z2, mean2, var2, out, dOut, dY2, dH1, dY1;
  Relayout xSrc, xShortcut;

  Training(const ResnetBlockData& p, float learningRate) : lr(learningRate) {
    const memory::dims strides = kOne, pad = kOne;
    using dnnl::normalization_flags;
    const auto affine = normalization_flags::use_scale | normalization_flags::use_shift;
    dnnl::convolution_forward::desc c1(prop_kind::forward_training, algorithm::convolution_direct, anyDesc(kXDims),
                                       anyDesc(kWDims), anyDesc(kXDims), strides, pad, pad);
    conv1Pd = dnnl::convolution_forward::primitive_desc(c1, eng);
    const memory::desc act = conv1Pd.dst_desc();  // every activation's layout
    bn1Pd = dnnl::batch_normalization_forward::primitive_desc(
        {prop_kind::forward_training, act, kEps, affine | normalization_flags::fuse_norm_relu}, eng);
    dnnl::convolution_forward::desc c2(prop_kind::forward_training, algorithm::convolution_direct, act,
                                       anyDesc(kWDims), act, strides, pad, pad);
    conv2Pd = dnnl::convolution_forward::primitive_desc(c2, eng);
    bn2Pd = dnnl::batch_normalization_forward::primitive_desc({prop_kind::forward_training, act, kEps, affine}, eng);
    addPd = dnnl::binary::primitive_desc({algorithm::binary_add, act, act, act}, postOps(false, true), eng);
    bn2BwdPd = dnnl::batch_normalization_backward::primitive_desc({prop_kind::backward, act, act, kEps, affine}, eng,
                                                                   bn2Pd);
    conv2DataPd = dnnl::convolution_backward_data::primitive_desc(
        {algorithm::convolution_direct, act, anyDesc(kWDims), act, strides, pad, pad}, eng, conv2Pd);
    conv2WeightsPd = dnnl::convolution_backward_weights::primitive_desc(
        {algorithm::convolution_direct, act, anyDesc(kWDims), act, strides, pad, pad}, eng, conv2Pd);
    bn1BwdPd = dnnl::batch_normalization_backward::primitive_desc(
        {prop_kind::backward, act, act, kEps, affine | normalization_flags::fuse_norm_relu}, eng, bn1Pd);
    conv1WeightsPd = dnnl::convolution_backward_weights::primitive_desc(
        {algorithm::convolution_direct, conv1Pd.src_desc(), anyDesc(kWDims), act, strides, pad, pad}, eng,
        conv1Pd);

    conv1 = dnnl::convolution_forward(conv1Pd);
    conv2 = dnnl::convolution_forward(conv2Pd);
    bn1 = dnnl::batch_normalization_forward(bn1Pd);
    bn2 = dnnl::batch_normalization_forward(bn2Pd);
    add = dnnl::binary(addPd);
    bn1Bwd = dnnl::batch_normalization_backward(bn1BwdPd);
    bn2Bwd = dnnl::batch_normalization_backward(bn2BwdPd);
    conv2Data = dnnl::convolution_backward_data(conv2DataPd);
    conv1Weights = dnnl::convolution_backward_weights(conv1WeightsPd);
    conv2Weights = dnnl::convolution_backward_weights(conv2WeightsPd);

    // Parameters, moved into the layouts the convolutions want once.
    auto param = [&](const std::vector<float>& host, const memory::desc& user, const memory::desc& want) {
      memory from(user, eng, const_cast<float*>(host.data()));
      memory to(want, eng);
      dnnl::reorder(from, to).execute(strm, from, to);
      return to;
    };
    const memory::desc oihw = userDesc(kWDims, Tag::oihw), vec = userDesc(kCDims, Tag::a);
    w1 = param(p.w1, oihw, conv1Pd.weights_desc());
    w2 = param(p.w2, oihw, conv2Pd.weights_desc());
    g1 = param(p.g1, vec, vec);
    b1 = param(p.b1, vec, vec);
    g2 = param(p.g2, vec, vec);
    b2 = param(p.b2, vec, vec);
    strm.wait();
    dw1Raw = memory(conv1WeightsPd.diff_weights_desc(), eng);
    dw2Raw = memory(conv2WeightsPd.diff_weights_desc(), eng);
    dw1 = Relayout(dw1Raw, conv1Pd.weights_desc(), eng);
    dw2 = Relayout(dw2Raw, conv2Pd.weights_desc(), eng);
    w2Data = Relayout(w2, conv2DataPd.weights_desc(), eng);
    for (memory* m : {&dg1, &db1, &dg2, &db2}) *m = memory(vec, eng);

    xUser = memory(userDesc(kXDims, Tag::nchw), eng, const_cast<float*>(p.x.data()));
    xSrc = Relayout(xUser, conv1Pd.src_desc(), eng);
    xShortcut = Relayout(xUser, act, eng);
    for (memory* m : {&y1, &h1, &y2, &z2, &out, &dOut, &dY2, &dH1, &dY1}) *m = memory(act, eng);
    mean1 = memory(bn1Pd.mean_desc(), eng);
    var1 = memory(bn1Pd.variance_desc(), eng);
    ws1 = memory(bn1Pd.workspace_desc(), eng);
    mean2 = memory(bn2Pd.mean_desc(), eng);
    var2 = memory(bn2Pd.variance_desc(), eng);
  }

  /// loss = mean(out) and d loss / d (z2 + x) = [out > 0] / numel, in one
  /// pass over out on 2 threads: oneDNN 2.6's reduction and comparison
  /// primitives have only reference implementations for these shapes (37
  /// and 92 ms), so the glue is a loop, as a oneDNN user would write it.
  float lossAndGradient() {
    const auto* o = static_cast<const float*>(out.get_data_handle());
    auto* d = static_cast<float*>(dOut.get_data_handle());
    const int64_t n = N * C * S * S;
    const float g = 1.f / static_cast<float>(n);
    double sums[2] = {0, 0};
    auto half = [&](int part) {
      const int64_t b = n / 2 * part, e = part ? n : n / 2;
      for (int64_t blk = b; blk < e; blk += 4096) {
        float s = 0;
        const int64_t end = std::min(e, blk + 4096);
#pragma omp simd reduction(+ : s)
        for (int64_t i = blk; i < end; ++i) {
          s += o[i];
          d[i] = o[i] > 0.f ? g : 0.f;
        }
        sums[part] += s;
      }
    };
    std::thread other(half, 1);
    half(0);
    other.join();
    return static_cast<float>((sums[0] + sums[1]) / static_cast<double>(n));
  }

  float step() {
    // Forward with batch statistics.
    xSrc.run(strm);
    xShortcut.run(strm);
    conv1.execute(strm, {{DNNL_ARG_SRC, xSrc.mem}, {DNNL_ARG_WEIGHTS, w1}, {DNNL_ARG_DST, y1}});
    bn1.execute(strm, {{DNNL_ARG_SRC, y1}, {DNNL_ARG_DST, h1}, {DNNL_ARG_MEAN, mean1}, {DNNL_ARG_VARIANCE, var1},
                       {DNNL_ARG_SCALE, g1}, {DNNL_ARG_SHIFT, b1}, {DNNL_ARG_WORKSPACE, ws1}});
    conv2.execute(strm, {{DNNL_ARG_SRC, h1}, {DNNL_ARG_WEIGHTS, w2}, {DNNL_ARG_DST, y2}});
    bn2.execute(strm, {{DNNL_ARG_SRC, y2}, {DNNL_ARG_DST, z2}, {DNNL_ARG_MEAN, mean2}, {DNNL_ARG_VARIANCE, var2},
                       {DNNL_ARG_SCALE, g2}, {DNNL_ARG_SHIFT, b2}});
    add.execute(strm, {{DNNL_ARG_SRC_0, z2}, {DNNL_ARG_SRC_1, xShortcut.mem}, {DNNL_ARG_DST, out}});
    strm.wait();
    const float loss = lossAndGradient();
    // Backward.
    bn2Bwd.execute(strm, {{DNNL_ARG_SRC, y2}, {DNNL_ARG_MEAN, mean2}, {DNNL_ARG_VARIANCE, var2},
                          {DNNL_ARG_DIFF_DST, dOut}, {DNNL_ARG_SCALE, g2}, {DNNL_ARG_SHIFT, b2},
                          {DNNL_ARG_DIFF_SRC, dY2}, {DNNL_ARG_DIFF_SCALE, dg2}, {DNNL_ARG_DIFF_SHIFT, db2}});
    conv2Weights.execute(strm, {{DNNL_ARG_SRC, h1}, {DNNL_ARG_DIFF_DST, dY2}, {DNNL_ARG_DIFF_WEIGHTS, dw2Raw}});
    w2Data.run(strm);
    conv2Data.execute(strm, {{DNNL_ARG_DIFF_DST, dY2}, {DNNL_ARG_WEIGHTS, w2Data.mem}, {DNNL_ARG_DIFF_SRC, dH1}});
    bn1Bwd.execute(strm, {{DNNL_ARG_SRC, y1}, {DNNL_ARG_MEAN, mean1}, {DNNL_ARG_VARIANCE, var1},
                          {DNNL_ARG_DIFF_DST, dH1}, {DNNL_ARG_SCALE, g1}, {DNNL_ARG_SHIFT, b1},
                          {DNNL_ARG_WORKSPACE, ws1}, {DNNL_ARG_DIFF_SRC, dY1}, {DNNL_ARG_DIFF_SCALE, dg1},
                          {DNNL_ARG_DIFF_SHIFT, db1}});
    conv1Weights.execute(strm, {{DNNL_ARG_SRC, xSrc.mem}, {DNNL_ARG_DIFF_DST, dY1}, {DNNL_ARG_DIFF_WEIGHTS, dw1Raw}});
    dw1.run(strm);
    dw2.run(strm);
    strm.wait();
    // SGD, each parameter and its gradient in the same layout (so one loop
    // over their bytes: 64 channels fill the blocked layouts' 16-lane blocks,
    // no padding).
    auto sgd = [&](memory& param, const memory& grad) {
      if (param.get_desc() != grad.get_desc()) throw std::runtime_error("oneDNN block: SGD on unlike layouts");
      float* p = static_cast<float*>(param.get_data_handle());
      const float* g = static_cast<const float*>(grad.get_data_handle());
      const size_t n = param.get_desc().get_size() / sizeof(float);
      for (size_t i = 0; i < n; ++i) p[i] -= lr * g[i];
    };
    sgd(w1, dw1.mem);
    sgd(w2, dw2.mem);
    sgd(g1, dg1);
    sgd(b1, db1);
    sgd(g2, dg2);
    sgd(b2, db2);
    return loss;
  }

  ResnetBlockGrads grads() {
    auto toUser = [&](const memory& grad, const memory::desc& user) {
      std::vector<float> host(user.get_size() / sizeof(float));
      memory to(user, eng, host.data());
      dnnl::reorder(grad, to).execute(strm, const_cast<memory&>(grad), to);
      strm.wait();
      return host;
    };
    const memory::desc oihw = userDesc(kWDims, Tag::oihw), vec = userDesc(kCDims, Tag::a);
    return {toUser(dw1.mem, oihw), toUser(dw2.mem, oihw), toUser(dg1, vec),
            toUser(db1, vec),      toUser(dg2, vec),      toUser(db2, vec)};
  }
};

OnednnResnetBlock::OnednnResnetBlock(const ResnetBlockData& data, float lr) : data_(data), lr_(lr) {}
OnednnResnetBlock::~OnednnResnetBlock() = default;

const float* OnednnResnetBlock::forward() {
  if (!inference_) {
    inference_ = std::make_unique<Inference>();
    inference_->bindInput(data_.x);
  }
  return inference_->run(data_);
}

float OnednnResnetBlock::trainStep() {
  if (!training_) training_ = std::make_unique<Training>(data_, lr_);
  return training_->step();
}

ResnetBlockGrads OnednnResnetBlock::lastGrads() { return training_ ? training_->grads() : ResnetBlockGrads{}; }

}  // namespace kiln_bench
