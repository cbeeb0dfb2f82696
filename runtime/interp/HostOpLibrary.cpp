#include "runtime/interp/OpLibrary.h"

#include "runtime/backends/Hal.h"

namespace kiln::interp {

namespace {

class HostOpLibrary final : public OpLibrary {
 public:
  bool synchronous() const override { return true; }
  void unary(OpKind op, const Arg& in, char* out) override { unaryKernel(op, in, out); }
  void binary(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) override {
    binaryKernel(op, a, b, shape, out);
  }
  void compare(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) override {
    compareKernel(op, a, b, shape, out);
  }
  void where(const Arg& cond, const Arg& a, const Arg& b, const Shape& shape, char* out) override {
    whereKernel(cond, a, b, shape, out);
  }
  bool productThenAdd(OpKind op, const Arg& a, const Arg& b, const Arg& c, bool productFirst, const Shape& shape,
                      char* out) override {
    return productThenAddKernel(op, a, b, c, productFirst, shape, out);
  }
  bool hasProductThenAdd(DType t) const override { return t == DType::f32 || t == DType::f64; }
  void cast(const Arg& in, DType to, char* out) override { castKernel(in, to, out); }
  void copy(const Arg& in, char* out) override { copyKernel(in, out); }
  void copyInto(const Arg& in, char* out, const int64_t* outStrides) override { copyIntoKernel(in, out, outStrides); }
  void reduce(OpKind op, const Arg& in, core::AxisMask mask, char* out) override { reduceKernel(op, in, mask, out); }
  void argReduce(OpKind op, const Arg& in, int axis, bool selectLast, char* out) override {
    argReduceKernel(op, in, axis, selectLast, out);
  }
  void matmul(const Arg& a, const Arg& b, const Shape& outShape, char* out) override {
    matmulKernel(a, b, outShape, out);
  }
  bool binaryHalf(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) override {
    return binaryHalfKernel(op, a, b, shape, out);
  }
  bool unaryHalf(OpKind op, const Arg& in, char* out) override { return unaryHalfKernel(op, in, out); }
  bool hasHalfElementwise(DType t) const override { return t == DType::bf16 || t == DType::f16; }
  bool matmulTakesBf16() const override { return matmulKernelTakesBf16(); }
  bool matmulWidensHalf() const override { return true; }
  bool matmulHalf(const Arg& a, const Arg& b, const Shape& outShape, char* out) override {
    return matmulBf16RoundedKernel(a, b, outShape, out);
  }
  bool hasMatmulHalf(DType t) const override { return t == DType::bf16 && matmulKernelTakesBf16(); }
  bool matmulWithEpilogue(const Arg& a, const Arg& b, const MatmulEpilogue& e, const Shape& outShape,
                          char* out) override {
    return matmulEpilogueKernel(a, b, e, outShape, out);
  }
  bool fusesMatmulEpilogue(DType t, bool) const override {
    return t == DType::f32 || (t == DType::bf16 && matmulKernelTakesBf16());
  }
  bool fusesMatmulScaleAndResidual(DType t) const override { return fusesMatmulEpilogue(t, false); }
  void conv2d(const Arg& x, const Arg& w, const core::Conv2dParams& p, const Shape& outShape, char* out) override {
    conv2dKernel(x, w, p, outShape, out);
  }
  void indexSelect(const Arg& x, int axis, const Arg& index, const Shape& outShape, char* out) override {
    indexSelectKernel(x, axis, index, outShape, out);
  }
  void gather(const Arg& x, int axis, const Arg& index, char* out) override { gatherKernel(x, axis, index, out); }
  void indexAdd(const Arg& x, int axis, std::vector<int64_t> index, const Arg& source, char* out) override {
    indexAddKernel(x, axis, index, source, out);
  }
  void full(DType t, int64_t n, double f, int64_t i, char* out) override { fullKernel(t, n, f, i, out); }
  void arange(DType t, int64_t n, double start, double step, char* out) override {
    arangeKernel(t, n, start, step, out);
  }
  void random(OpKind op, DType t, int64_t n, uint64_t seed, char* out) override {
    randomKernel(op, t, n, seed, out);
  }
};

}  // namespace

OpLibrary& hostOpLibrary() {
  static HostOpLibrary library;
  return library;
}

std::vector<int64_t> readIndices(hal::DeviceContext& device, const Arg& index) {
  std::vector<int64_t> values(static_cast<size_t>(index.shape.numel()));
  if (values.empty()) return values;
  if (device.hostAccessible()) {
    castKernel(index, DType::i64, reinterpret_cast<char*>(values.data()));
    return values;
  }
  hal::Stream& stream = device.defaultStream();
  const std::size_t bytes = values.size() * sizeof(int64_t);
  core::View dense;  // lives until the copy is done
  if (index.dtype == DType::i64 && core::isContiguous(index.shape, index.strides)) {
    // Already what the host wants (tokens uploaded as i64): copied as they are.
    stream.copy(values.data(), index.data, bytes);
  } else {
    dense = allocDense(device.allocator(), DType::i64, index.shape);
    device.ops().cast(index, DType::i64, dense.bytes(DType::i64));
    stream.copy(values.data(), dense.bytes(DType::i64), bytes);
  }
  stream.synchronize();
  return values;
}

}  // namespace kiln::interp
