// OpLibrary: the tier-0 kernels of one device. The interpreter runs every op
// of a trace through the library of the trace's device. The CPU's library
// calls the reference kernels (Kernels.h) at once; another device's library
// enqueues its kernels on the device's stream, so they run after the work
// enqueued before them and may finish after the call returns.
//
// Pointers are the device's own (not host-accessible unless the device says
// so); Arg keeps the meaning of Kernels.h: strided inputs, dense outputs.
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "runtime/interp/Kernels.h"

namespace kiln::hal {
class DeviceContext;
}  // namespace kiln::hal

namespace kiln::interp {

class OpLibrary {
 public:
  virtual ~OpLibrary() = default;
  /// Does the work finish before each call returns (the CPU's library)?
  virtual bool synchronous() const = 0;

  virtual void unary(OpKind op, const Arg& in, char* out) = 0;
  virtual void binary(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) = 0;
  /// Enqueues binary() for two operands of one half type (f16, bf16) into
  /// a result of that type: the bits of the op on the operands widened to
  /// f32, rounded to the type. Returns false, enqueuing nothing, where the
  /// library has no such kernel (the interpreter then widens them).
  virtual bool binaryHalf(OpKind /*op*/, const Arg& /*a*/, const Arg& /*b*/, const Shape& /*shape*/, char* /*out*/) {
    return false;
  }
  /// unary() for an operand of a half type into a result of that type, as
  /// binaryHalf.
  virtual bool unaryHalf(OpKind /*op*/, const Arg& /*in*/, char* /*out*/) { return false; }
  /// Have binaryHalf() and unaryHalf() kernels for operands of half type
  /// `t` at all, and does where() take branches of type `t` as they are?
  /// (If not, the interpreter does not allocate a half output to offer
  /// them, and widens where's branches.)
  virtual bool hasHalfElementwise(DType /*t*/) const { return false; }
  virtual void compare(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) = 0;
  virtual void where(const Arg& cond, const Arg& a, const Arg& b, const Shape& shape, char* out) = 0;
  /// out = (a * b) op c, or c op (a * b) without `productFirst`, op Add or
  /// Sub, each operation rounded as on its own (no fused multiply-add): a
  /// product only this op reads, in one pass instead of two over memory.
  /// False where the library has no such kernel (f32 and f64 on the CPU);
  /// the interpreter then runs the two ops.
  virtual bool productThenAdd(OpKind op, const Arg& a, const Arg& b, const Arg& c, bool productFirst,
                              const Shape& shape, char* out) {
    return false;
  }
  /// Does productThenAdd() run for operands of type `t`?
  virtual bool hasProductThenAdd(DType t) const { return false; }
  virtual void cast(const Arg& in, DType to, char* out) = 0;
  virtual void copy(const Arg& in, char* out) = 0;
  virtual void copyInto(const Arg& in, char* out, const int64_t* outStrides) = 0;
  virtual void reduce(OpKind op, const Arg& in, core::AxisMask mask, char* out) = 0;
  virtual void argReduce(OpKind op, const Arg& in, int axis, bool selectLast, char* out) = 0;
  virtual void matmul(const Arg& a, const Arg& b, const Shape& outShape, char* out) = 0;
  /// Does matmul() take two bf16 operands as they are (an f32 result)?
  /// Otherwise the interpreter widens them to f32 first.
  virtual bool matmulTakesBf16() const { return false; }
  /// Do matmul() and matmulWithEpilogue() take f16 and bf16 operands of an
  /// f32 product as they are, widening them (exactly) themselves? Then the
  /// interpreter leaves a cast from a half type that feeds a matmul to the
  /// matmul (Interpreter.cpp, castFoldsIntoMatmul).
  virtual bool matmulWidensHalf() const { return false; }
  /// Enqueues out = a·b for two operands of one half type (f16, bf16) and
  /// writes that type, accumulating in f32 (a GPU's tensor-core GEMM, the
  /// CPU's bf16 GEMM rounding each block of C as it finishes it).
  /// Returns false, enqueuing nothing, where the library has no such kernel
  /// for these operands: the interpreter then widens them to f32.
  virtual bool matmulHalf(const Arg& a, const Arg& b, const Shape& outShape, char* out) { return false; }
  /// Has matmulHalf() a kernel for operands of half type `t` at all? (If
  /// not, the interpreter does not allocate a half output to offer it.)
  virtual bool hasMatmulHalf(DType /*t*/) const { return false; }
  /// Enqueues out = epilogue(a·b) for operands of the output's dtype,
  /// taken as they are: the bits of matmul() followed by the mul, add and
  /// relu ops (MatmulEpilogue), in one pass over out instead of up to five.
  /// Returns false, enqueuing nothing, where the library has no such
  /// kernel for these operands: the interpreter then runs the ops one by one.
  virtual bool matmulWithEpilogue(const Arg& a, const Arg& b, const MatmulEpilogue& e, const Shape& outShape,
                                  char* out) {
    return false;
  }
  /// Does matmulWithEpilogue() take a result of type `t` (and a relu, with
  /// `relu`)? The interpreter asks before it fuses; the region planner
  /// keeps such an epilogue with its matmul (Regions.cpp).
  virtual bool fusesMatmulEpilogue(DType t, bool relu) const { return false; }
  /// Does matmulWithEpilogue() also take a scale and a residual
  /// (MatmulEpilogue::scaled, ::residual) for a result of type `t`?
  virtual bool fusesMatmulScaleAndResidual(DType t) const { return false; }
  virtual void conv2d(const Arg& x, const Arg& w, const core::Conv2dParams& p, const Shape& outShape, char* out) = 0;
  /// Indices are range-checked before these are called (the interpreter
  /// reads them on the host first when the device is not host-accessible).
  virtual void indexSelect(const Arg& x, int axis, const Arg& index, const Shape& outShape, char* out) = 0;
  virtual void gather(const Arg& x, int axis, const Arg& index, char* out) = 0;
  /// index_add: `index` holds the index values on the host (range-checked),
  /// which a device's library may need to plan its launches. Rows are added
  /// strictly in index order, after x is copied into out, and `source` may
  /// be `out` itself (cumsum adds each row of out to the next): a library
  /// that scatters in parallel must keep that.
  virtual void indexAdd(const Arg& x, int axis, std::vector<int64_t> index, const Arg& source, char* out) = 0;
  virtual void full(DType t, int64_t n, double f, int64_t i, char* out) = 0;
  virtual void arange(DType t, int64_t n, double start, double step, char* out) = 0;
  virtual void random(OpKind op, DType t, int64_t n, uint64_t seed, char* out) = 0;
};

/// The CPU device's library: the reference kernels, run in the calling thread
/// (and the TBB pool).
OpLibrary& hostOpLibrary();

/// The values of an integer view on `device` as i64 in row-major order, on
/// the host (for index range checks); waits for the device when it is not
/// host-accessible.
std::vector<int64_t> readIndices(hal::DeviceContext& device, const Arg& index);

/// The reference kernels, each call handed to `enqueue` as a task (a
/// callable taking a std::function<void()>): the library of a device whose
/// kernels are host code run elsewhere, e.g. the test device's stream.
template <class Enqueue>
class HostKernelLibrary final : public OpLibrary {
 public:
  explicit HostKernelLibrary(Enqueue enqueue) : enqueue_(std::move(enqueue)) {}
  bool synchronous() const override { return false; }
  void unary(OpKind op, const Arg& in, char* out) override {
    enqueue_([=] { unaryKernel(op, in, out); });
  }
  void binary(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) override {
    enqueue_([=] { binaryKernel(op, a, b, shape, out); });
  }
  void compare(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out) override {
    enqueue_([=] { compareKernel(op, a, b, shape, out); });
  }
  void where(const Arg& cond, const Arg& a, const Arg& b, const Shape& shape, char* out) override {
    enqueue_([=] { whereKernel(cond, a, b, shape, out); });
  }
  void cast(const Arg& in, DType to, char* out) override {
    enqueue_([=] { castKernel(in, to, out); });
  }
  void copy(const Arg& in, char* out) override {
    enqueue_([=] { copyKernel(in, out); });
  }
  void copyInto(const Arg& in, char* out, const int64_t* outStrides) override {
    std::array<int64_t, Shape::kMaxRank> strides{};
    for (int d = 0; d < in.shape.rank(); ++d) strides[d] = outStrides[d];
    enqueue_([=] { copyIntoKernel(in, out, strides.data()); });
  }
  void reduce(OpKind op, const Arg& in, core::AxisMask mask, char* out) override {
    enqueue_([=] { reduceKernel(op, in, mask, out); });
  }
  void argReduce(OpKind op, const Arg& in, int axis, bool selectLast, char* out) override {
    enqueue_([=] { argReduceKernel(op, in, axis, selectLast, out); });
  }
  void matmul(const Arg& a, const Arg& b, const Shape& outShape, char* out) override {
    enqueue_([=] { matmulKernel(a, b, outShape, out); });
  }
  bool matmulTakesBf16() const override { return matmulKernelTakesBf16(); }
  bool matmulWidensHalf() const override { return true; }
  bool matmulHalf(const Arg& a, const Arg& b, const Shape& outShape, char* out) override {
    if (a.dtype != b.dtype || !hasMatmulHalf(a.dtype)) return false;
    enqueue_([=] { matmulBf16RoundedKernel(a, b, outShape, out); });
    return true;
  }
  bool hasMatmulHalf(DType t) const override { return t == DType::bf16 && matmulKernelTakesBf16(); }
  void conv2d(const Arg& x, const Arg& w, const core::Conv2dParams& p, const Shape& outShape, char* out) override {
    enqueue_([=] { conv2dKernel(x, w, p, outShape, out); });
  }
  void indexSelect(const Arg& x, int axis, const Arg& index, const Shape& outShape, char* out) override {
    enqueue_([=] { indexSelectKernel(x, axis, index, outShape, out); });
  }
  void gather(const Arg& x, int axis, const Arg& index, char* out) override {
    enqueue_([=] { gatherKernel(x, axis, index, out); });
  }
  void indexAdd(const Arg& x, int axis, std::vector<int64_t> index, const Arg& source, char* out) override {
    enqueue_([=, index = std::move(index)] { indexAddKernel(x, axis, index, source, out); });
  }
  void full(DType t, int64_t n, double f, int64_t i, char* out) override {
    enqueue_([=] { fullKernel(t, n, f, i, out); });
  }
  void arange(DType t, int64_t n, double start, double step, char* out) override {
    enqueue_([=] { arangeKernel(t, n, start, step, out); });
  }
  void random(OpKind op, DType t, int64_t n, uint64_t seed, char* out) override {
    enqueue_([=] { randomKernel(op, t, n, seed, out); });
  }

 private:
  Enqueue enqueue_;
};

}  // namespace kiln::interp
