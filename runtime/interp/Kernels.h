// Reference kernels of the tier-0 interpreter. Inputs are strided views
// (broadcast axes have stride 0); outputs are fresh dense row-major buffers.
// f16/bf16 never reach the compute kernels but matmul's (bf16, when the CPU
// has bf16 units): the interpreter converts them to f32 around each op (see
// Interpreter.cpp); castKernel and copyKernel handle every dtype.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/shape.h"
#include "runtime/core/OpKind.h"
#include "runtime/core/ShapeRules.h"
#include "runtime/core/TensorImpl.h"
#include "runtime/core/TensorSize.h"

namespace kiln::interp {

using core::OpKind;

/// A strided input view; strides count elements.
struct Arg {
  const char* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  int64_t strides[Shape::kMaxRank] = {};
};

/// A fresh dense row-major buffer for `shape` elements of `t` from
/// `allocator` (a device's memory); a size past the address space throws
/// kiln::Error naming `what`.
inline core::View allocDense(hal::Allocator& allocator, DType t, const Shape& shape, const char* what = "allocate") {
  core::View v;
  v.storage = core::Storage::allocate(allocator, core::requireDenseBytes(what, shape, t));
  core::contiguousStrides(shape, v.strides);
  return v;
}

/// The kernel argument for a view of `shape` elements of `t`.
inline Arg argOf(const core::View& v, DType t, const Shape& shape) {
  Arg a;
  a.data = v.bytes(t);
  a.dtype = t;
  a.shape = shape;
  // All of them (those past the rank are unused), so that the compiler
  // drops Arg's zero-fill: its `rep stos` and the reload it stalled cost
  // a quarter of a small op's interpretation.
  std::memcpy(a.strides, v.strides, sizeof a.strides);
  return a;
}

/// The view of `a` broadcast to `shape` (stride 0 on stretched axes).
Arg broadcastArg(const Arg& a, const Shape& shape);

/// Elements below this count run on the calling thread.
inline constexpr int64_t kParallelGrain = 32768;

void unaryKernel(OpKind op, const Arg& in, char* out);
/// a and b are already broadcast to `shape`; out has a's dtype.
void binaryKernel(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out);
/// binaryKernel's add, sub, mul and div for two operands of one half type
/// (f16, bf16) and a result of that type: the bits of the f32 op on the
/// widened operands, rounded (the interpreter's widen, compute, cast), in
/// one pass without f32 temporaries. False (nothing done) for other ops
/// and dtypes.
bool binaryHalfKernel(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out);
/// unaryKernel for an operand of a half type (f16, bf16) and a result of
/// that type: the bits of the f32 op on the widened operand, rounded, in
/// one pass without f32 temporaries. False (nothing done) for other dtypes.
bool unaryHalfKernel(OpKind op, const Arg& in, char* out);
/// Comparisons: bool out.
void compareKernel(OpKind op, const Arg& a, const Arg& b, const Shape& shape, char* out);
void whereKernel(const Arg& cond, const Arg& a, const Arg& b, const Shape& shape, char* out);
/// OpLibrary::productThenAdd on the host: f32 and f64 (false for others).
bool productThenAddKernel(OpKind op, const Arg& a, const Arg& b, const Arg& c, bool productFirst, const Shape& shape,
                          char* out);
void castKernel(const Arg& in, DType to, char* out);
/// Dense row-major copy of any view, any dtype.
void copyKernel(const Arg& in, char* out);

void reduceKernel(OpKind op, const Arg& in, core::AxisMask mask, char* out);
/// selectLast: ties give the last index (else the first).
void argReduceKernel(OpKind op, const Arg& in, int axis, bool selectLast, char* out);

/// a: [..., M, K], b: [..., K, N], both already broadcast to the batch dims
/// of `outShape` ([..., M, N]). Two bf16 operands (only when
/// matmulKernelTakesBf16()) give an f32 result.
void matmulKernel(const Arg& a, const Arg& b, const Shape& outShape, char* out);
/// out = bf16(a·b) for two bf16 operands on the CPU's bf16 GEMM, rounded from
/// f32 as the cast kernel rounds, without an f32 result in memory; false
/// (nothing done) where matmulKernelTakesBf16() is false or the operands are
/// not both bf16.
bool matmulBf16RoundedKernel(const Arg& a, const Arg& b, const Shape& outShape, char* out);

/// What a matmul applies to each element of its result before storing it,
/// in this order, each a rounded operation of the result's dtype: `*
/// scale` with `scaled`, `+ bias[j]` (j the output's last index) when `bias`
/// is set, `+ residual[..., i, j]` when `residual` is set, then `x < 0 ? 0 :
/// x` (the relu op: NaN stays NaN) with `relu`.
struct MatmulEpilogue {
  bool scaled = false;
  float scale = 1.0f;
  const char* bias = nullptr;  ///< the result's dtype, N elements biasStride apart (device memory)
  int64_t biasStride = 1;
  /// An operand of the result's shape and dtype (a residual connection's
  /// input), whose strides the library checks; none when empty. (Held by
  /// value: a library that queues the call copies the epilogue.)
  std::optional<Arg> residual;
  bool relu = false;
};

/// out = e(a·b) for f32 operands, in the GEMM's tile store (gemm::Epilogue):
/// the bits of matmulKernel, then the mul, add and relu kernels. For bf16
/// operands on the CPU's bf16 GEMM (matmulKernelTakesBf16), out is bf16 and
/// each op rounds to bf16 as it would on its own, in the GEMM's f32 block
/// before it is stored (gemm::Epilogue::bf16Steps). False (nothing done) for
/// other dtypes, and for a residual not of the operands' dtype or whose
/// elements along the last axis are not contiguous.
bool matmulEpilogueKernel(const Arg& a, const Arg& b, const MatmulEpilogue& e, const Shape& outShape, char* out);
/// Whether matmulKernel multiplies bf16 operands natively (on the CPU's bf16
/// GEMM, gemm/Bf16Gemm.h), so that widening them to f32 first is not needed.
bool matmulKernelTakesBf16();

/// C = A * B, or C += A * B with `accumulate`, for f32 strided matrices
/// (C's rows may be strided; packed GEMM when C's columns are contiguous,
/// split over threads with `parallel`).
void sgemmStrided(int64_t M, int64_t N, int64_t K, const float* a, int64_t rsA, int64_t csA, const float* b,
                  int64_t rsB, int64_t csB, float* c, int64_t rsC, int64_t csC, bool accumulate,
                  bool parallel = true);

/// conv2d over NCHW (runtime/interp/ConvKernels.cpp): x [N, C, H, W] and w
/// [Co, C/groups, kH, kW] strided, f32 or f64; out dense [N, Co, Ho, Wo].
void conv2dKernel(const Arg& x, const Arg& w, const core::Conv2dParams& p, const Shape& outShape, char* out);
/// The same for raw f32 buffers with element strides (the compiled kernels'
/// runtime call); any output strides.
void conv2dF32(const float* x, const int64_t* xShape, const int64_t* xStrides, const float* w, const int64_t* wShape,
               const int64_t* wStrides, const core::Conv2dParams& p, float* out, const int64_t* outShape,
               const int64_t* outStrides);

/// Integer index (i64) ops; throw kiln::Error on an out-of-range index.
void indexSelectKernel(const Arg& x, int axis, const Arg& index, const Shape& outShape, char* out);
void gatherKernel(const Arg& x, int axis, const Arg& index, char* out);
/// out[.., index[i], ..] += source[.., i, ..] for i = 0..n-1 in order, in
/// place: `out` (of `shape`, element strides `outStrides`) already holds x.
/// Each addition rounds in source's dtype (halves through f32, integers
/// wrap). `index` (host memory) is already range-checked. index_add's
/// kernel, the interpreter's and the compiled kernels' runtime call.
void indexAddInto(char* out, const Shape& shape, const int64_t* outStrides, int axis, const int64_t* index,
                  int64_t n, const Arg& source);
/// cumsum as index_add of `out` onto itself one position later along
/// `axis`: the rows 1 .. n-1 as the index and out's rows 0 .. n-2 (with its
/// element strides) as the source, out[.., i, ..] += out[.., i - 1, ..] in
/// order once out holds x.
struct RunningSumRows {
  std::vector<int64_t> next;
  Arg previous;
};
RunningSumRows runningSumRows(char* out, DType t, const Shape& shape, const int64_t* outStrides, int axis);
/// The running sum in place (cumsum once `out` holds x): indexAddInto of
/// runningSumRows, so each addition rounds as index_add's.
void cumsumInto(char* out, const Shape& shape, const int64_t* outStrides, int axis, DType t);
/// index_add into a fresh dense `out`: x copied, then indexAddInto.
void indexAddKernel(const Arg& x, int axis, const std::vector<int64_t>& index, const Arg& source, char* out);
/// Throws the index kernels' kiln::Error when one of `n` index values is
/// outside [0, extent).
void checkIndexRange(const char* op, const int64_t* values, int64_t n, int axis, int64_t extent);

void fullKernel(DType t, int64_t n, double f, int64_t i, char* out);
void arangeKernel(DType t, int64_t n, double start, double step, char* out);
void randomKernel(OpKind op, DType t, int64_t n, uint64_t seed, char* out);

}  // namespace kiln::interp

namespace kiln::interp {
/// Copies `in` into `out` laid out with element strides `outStrides`.
void copyIntoKernel(const Arg& in, char* out, const int64_t* outStrides);
}  // namespace kiln::interp
