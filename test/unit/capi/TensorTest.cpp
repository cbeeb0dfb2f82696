// Tensors through the C ABI: host copies, DLPack import/export without
// copies, strided and offset views, dtypes, and who frees what when.
#include <cstring>

#include "CApiTestUtil.h"
#include "runtime/capi/DLPackVersioned.h"

extern "C" int kiln_capi_c99_smoke(void);

namespace kiln::capitest {
namespace {

TEST(CApiVersion, AbiAndVersion) {
  EXPECT_EQ(kiln_abi_version(), KILN_ABI_VERSION);
  int32_t major = -1, minor = -1, patch = -1, abi = -1;
  KILN_ASSERT_OK(kiln_version(&major, &minor, &patch, &abi));
  EXPECT_EQ(abi, KILN_ABI_VERSION);
  EXPECT_EQ(std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch),
            std::string(kiln_version_string()));
  KILN_ASSERT_OK(kiln_version(nullptr, nullptr, nullptr, nullptr));
}

TEST(CApiVersion, HeaderIsC99) { EXPECT_EQ(kiln_capi_c99_smoke(), 1) << kiln_last_error(); }

TEST(CApiTensor, FromHostCopiesAndQueries) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  kiln_tensor t = fromFloats(v, {2, 3});
  v[0] = 100;  // a copy: later changes do not show
  kiln_dtype dt;
  KILN_ASSERT_OK(kiln_tensor_dtype(t, &dt));
  EXPECT_EQ(dt, KILN_DTYPE_F32);
  EXPECT_EQ(shapeOf(t), (std::vector<int64_t>{2, 3}));
  int64_t n;
  KILN_ASSERT_OK(kiln_tensor_numel(t, &n));
  EXPECT_EQ(n, 6);
  kiln_device d{-1, -1};
  KILN_ASSERT_OK(kiln_tensor_device(t, &d));
  EXPECT_EQ(d.kind, KILN_DEVICE_CPU);
  EXPECT_EQ(d.index, 0);
  int32_t m = -1;
  KILN_ASSERT_OK(kiln_tensor_is_materialized(t, &m));
  EXPECT_EQ(m, 1);
  int64_t strides[2];
  KILN_ASSERT_OK(kiln_tensor_strides(t, strides, 2));
  EXPECT_EQ(strides[0], 3);
  EXPECT_EQ(strides[1], 1);
  EXPECT_EQ(toFloats(t), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Copy out converted to another dtype.
  int32_t ints[6];
  KILN_ASSERT_OK(kiln_tensor_copy_to_host(t, ints, sizeof ints, KILN_DTYPE_I32));
  EXPECT_EQ(ints[5], 6);
  KILN_ASSERT_OK(kiln_tensor_release(t));
}

TEST(CApiTensor, RetainRelease) {
  uint64_t before = liveTensorHandles();
  kiln_tensor t = fromFloats({1}, {});
  EXPECT_EQ(liveTensorHandles(), before + 1);
  KILN_ASSERT_OK(kiln_tensor_retain(t));
  KILN_ASSERT_OK(kiln_tensor_release(t));
  EXPECT_EQ(toFloats(t), std::vector<float>{1});  // still one reference
  KILN_ASSERT_OK(kiln_tensor_release(t));
  EXPECT_EQ(liveTensorHandles(), before);
  expectError(kiln_tensor_release(t), KILN_ERROR_INVALID_HANDLE, {"already released"});
  int32_t rank;
  expectError(kiln_tensor_rank(t, &rank), KILN_ERROR_INVALID_HANDLE, {"already released"});
  // A new tensor reusing the slot gets a new generation: the old handle stays dead.
  kiln_tensor u = fromFloats({2}, {});
  expectError(kiln_tensor_rank(t, &rank), KILN_ERROR_INVALID_HANDLE);
  KILN_ASSERT_OK(kiln_tensor_rank(u, &rank));
  KILN_ASSERT_OK(kiln_tensor_release(u));
}

TEST(CApiDLPack, ImportExportIsZeroCopy) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  std::atomic<int> deleted{0};
  DLManagedTensor* in = makeDL(data.data(), f32(), {2, 3}, {}, 0, &deleted);
  kiln_tensor t;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(in, &t));
  const void* p = nullptr;
  KILN_ASSERT_OK(kiln_tensor_data_pointer(t, &p));
  EXPECT_EQ(p, data.data());
  DLManagedTensor* out = nullptr;
  KILN_ASSERT_OK(kiln_tensor_to_dlpack(t, &out));
  EXPECT_EQ(out->dl_tensor.data, data.data());
  EXPECT_EQ(out->dl_tensor.byte_offset, 0u);
  EXPECT_EQ(out->dl_tensor.ndim, 2);
  EXPECT_EQ(out->dl_tensor.shape[0], 2);
  EXPECT_EQ(out->dl_tensor.shape[1], 3);
  EXPECT_EQ(out->dl_tensor.strides[0], 3);
  EXPECT_EQ(out->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(out->dl_tensor.dtype.code, kDLFloat);
  EXPECT_EQ(out->dl_tensor.dtype.bits, 32);
  // Kiln's handle goes first: the exported view keeps the producer's memory.
  KILN_ASSERT_OK(kiln_tensor_release(t));
  EXPECT_EQ(deleted.load(), 0);
  EXPECT_EQ(static_cast<float*>(out->dl_tensor.data)[4], 5.0f);
  out->deleter(out);
  EXPECT_EQ(deleted.load(), 1);  // exactly once, after the last user
}

/// A DLPack 1.x tensor around makeDL's (which it frees with itself).
DLManagedTensorVersioned* makeVersionedDL(DLManagedTensor* inner, uint32_t major, uint64_t flags) {
  auto* m = new DLManagedTensorVersioned{};
  m->version = DLPackVersion{major, 0};
  m->manager_ctx = inner;
  m->flags = flags;
  m->dl_tensor = inner->dl_tensor;
  m->deleter = [](DLManagedTensorVersioned* self) {
    auto* in = static_cast<DLManagedTensor*>(self->manager_ctx);
    in->deleter(in);
    delete self;
  };
  return m;
}

TEST(CApiDLPack, VersionedImportExportIsZeroCopyAndReadOnly) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  std::atomic<int> deleted{0};
  // A read-only producer is fine: Kiln never writes its memory.
  DLManagedTensorVersioned* in =
      makeVersionedDL(makeDL(data.data(), f32(), {3, 2}, {1, 3}, 0, &deleted), 1, DLPACK_FLAG_BITMASK_READ_ONLY);
  kiln_tensor t;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack_versioned(in, &t));
  EXPECT_EQ(toFloats(t), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  DLManagedTensorVersioned* out = nullptr;
  KILN_ASSERT_OK(kiln_tensor_to_dlpack_versioned(t, &out));
  EXPECT_EQ(out->version.major, 1u);
  EXPECT_EQ(out->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
  EXPECT_EQ(out->dl_tensor.data, data.data());
  EXPECT_EQ(out->dl_tensor.strides[0], 1);
  EXPECT_EQ(out->dl_tensor.strides[1], 3);
  KILN_ASSERT_OK(kiln_tensor_release(t));
  EXPECT_EQ(deleted.load(), 0);
  out->deleter(out);
  EXPECT_EQ(deleted.load(), 1);
}

TEST(CApiDLPack, VersionedImportRefusesAnotherMajorVersion) {
  std::vector<float> data = {1, 2};
  std::atomic<int> deleted{0};
  DLManagedTensorVersioned* in = makeVersionedDL(makeDL(data.data(), f32(), {2}, {}, 0, &deleted), 2, 0);
  kiln_tensor t;
  EXPECT_EQ(kiln_tensor_from_dlpack_versioned(in, &t), KILN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kiln_last_error()).find("DLPack 2.0"), std::string::npos) << kiln_last_error();
  in->deleter(in);  // still the caller's
  EXPECT_EQ(deleted.load(), 1);
}

TEST(CApiDLPack, DeleterRunsOnceAfterTheLastTraceUse) {
  std::vector<float> data = {1, 2, 3, 4};
  std::atomic<int> deleted{0};
  kiln_tensor x;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(data.data(), f32(), {4}, {}, 0, &deleted), &x));
  kiln_value in[2] = {kiln_value_of_tensor(x), kiln_value_of_float(10.0)};
  kiln_tensor y;
  KILN_ASSERT_OK(kiln_call(KILN_OP_ADD, in, 2, nullptr, 0, &y));
  int32_t m = 1;
  KILN_ASSERT_OK(kiln_tensor_is_materialized(y, &m));
  EXPECT_EQ(m, 0);
  KILN_ASSERT_OK(kiln_tensor_release(x));
  EXPECT_EQ(deleted.load(), 0) << "the pending trace still reads the memory";
  EXPECT_EQ(toFloats(y), (std::vector<float>{11, 12, 13, 14}));
  EXPECT_EQ(deleted.load(), 1) << "the trace ran; nobody uses the memory any more";
  KILN_ASSERT_OK(kiln_tensor_release(y));
  EXPECT_EQ(deleted.load(), 1);
}

TEST(CApiDLPack, ViewsOfAnImportKeepItAlive) {
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  std::atomic<int> deleted{0};
  kiln_tensor x;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(data.data(), f32(), {2, 3}, {}, 0, &deleted), &x));
  int64_t shape[2] = {3, 2};
  kiln_attr a = kiln_attr_ints("shape", shape, 2);
  kiln_value in = kiln_value_of_tensor(x);
  kiln_tensor r;
  KILN_ASSERT_OK(kiln_call(KILN_OP_RESHAPE, &in, 1, &a, 1, &r));
  KILN_ASSERT_OK(kiln_tensor_release(x));
  EXPECT_EQ(toFloats(r), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const void* p;
  KILN_ASSERT_OK(kiln_tensor_data_pointer(r, &p));
  if (p == data.data()) {
    EXPECT_EQ(deleted.load(), 0) << "the reshape is a view of the producer's memory";
  }
  KILN_ASSERT_OK(kiln_tensor_release(r));
  EXPECT_EQ(deleted.load(), 1);
}

TEST(CApiDLPack, StridedAndOffsetInputs) {
  // A 4x5 buffer; import the transposed 3x2 window starting at row 1, col 2.
  std::vector<float> buf(20);
  for (int i = 0; i < 20; ++i) buf[i] = static_cast<float>(i);
  std::atomic<int> deleted{0};
  // element [i][j] = buf[(1 + j) * 5 + 2 + i]: shape [3, 2], strides [1, 5]
  DLManagedTensor* m = makeDL(buf.data(), f32(), {3, 2}, {1, 5}, (1 * 5 + 2) * sizeof(float), &deleted);
  kiln_tensor t;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(m, &t));
  EXPECT_EQ(toFloats(t), (std::vector<float>{7, 12, 8, 13, 9, 14}));
  int64_t strides[2];
  KILN_ASSERT_OK(kiln_tensor_strides(t, strides, 2));
  EXPECT_EQ(strides[0], 1);
  EXPECT_EQ(strides[1], 5);
  const void* p;
  KILN_ASSERT_OK(kiln_tensor_data_pointer(t, &p));
  EXPECT_EQ(p, buf.data() + 7);
  // Ops read the strided view in place.
  kiln_value in[2] = {kiln_value_of_tensor(t), kiln_value_of_tensor(t)};
  kiln_tensor s;
  KILN_ASSERT_OK(kiln_call(KILN_OP_MUL, in, 2, nullptr, 0, &s));
  EXPECT_EQ(toFloats(s), (std::vector<float>{49, 144, 64, 169, 81, 196}));
  // Export keeps the strides and the address.
  DLManagedTensor* out;
  KILN_ASSERT_OK(kiln_tensor_to_dlpack(t, &out));
  EXPECT_EQ(out->dl_tensor.data, buf.data() + 7);
  EXPECT_EQ(out->dl_tensor.strides[0], 1);
  EXPECT_EQ(out->dl_tensor.strides[1], 5);
  KILN_ASSERT_OK(kiln_tensor_release(t));
  KILN_ASSERT_OK(kiln_tensor_release(s));
  EXPECT_EQ(deleted.load(), 0);
  out->deleter(out);
  EXPECT_EQ(deleted.load(), 1);
}

TEST(CApiDLPack, NegativeAndZeroStrides) {
  std::vector<float> buf = {0, 1, 2, 3, 4};
  kiln_tensor rev, bcast;
  // Reversed view: element i = buf[4 - i].
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(buf.data(), f32(), {5}, {-1}, 4 * sizeof(float)), &rev));
  EXPECT_EQ(toFloats(rev), (std::vector<float>{4, 3, 2, 1, 0}));
  // Broadcast view: stride 0.
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(buf.data() + 2, f32(), {2, 3}, {0, 1}), &bcast));
  EXPECT_EQ(toFloats(bcast), (std::vector<float>{2, 3, 4, 2, 3, 4}));
  KILN_ASSERT_OK(kiln_tensor_release(rev));
  KILN_ASSERT_OK(kiln_tensor_release(bcast));
}

TEST(CApiDLPack, DTypes) {
  struct Case {
    DLDataType dl;
    kiln_dtype kiln;
  } cases[] = {
      {dl(kDLFloat, 32), KILN_DTYPE_F32}, {dl(kDLFloat, 64), KILN_DTYPE_F64}, {dl(kDLFloat, 16), KILN_DTYPE_F16},
      {dl(kDLBfloat, 16), KILN_DTYPE_BF16}, {dl(kDLInt, 64), KILN_DTYPE_I64}, {dl(kDLInt, 32), KILN_DTYPE_I32},
      {dl(kDLInt, 8), KILN_DTYPE_I8},       {dl(kDLUInt, 8), KILN_DTYPE_U8},  {dl(6, 8), KILN_DTYPE_BOOL},
  };
  alignas(8) uint8_t bytes[16] = {};
  for (const Case& c : cases) {
    kiln_tensor t;
    KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(bytes, c.dl, {2}), &t));
    kiln_dtype d;
    KILN_ASSERT_OK(kiln_tensor_dtype(t, &d));
    EXPECT_EQ(d, c.kiln);
    DLManagedTensor* out;
    KILN_ASSERT_OK(kiln_tensor_to_dlpack(t, &out));
    EXPECT_EQ(out->dl_tensor.dtype.code, c.dl.code);
    EXPECT_EQ(out->dl_tensor.dtype.bits, c.dl.bits);
    EXPECT_EQ(out->dl_tensor.dtype.lanes, 1);
    out->deleter(out);
    KILN_ASSERT_OK(kiln_tensor_release(t));
  }
  // f16 1.0 = 0x3c00, bf16 1.0 = 0x3f80: values convert on copy-out.
  uint16_t h[2] = {0x3c00, 0x4000}, b[2] = {0x3f80, 0x4000};
  kiln_tensor th, tb;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(h, dl(kDLFloat, 16), {2}), &th));
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(b, dl(kDLBfloat, 16), {2}), &tb));
  EXPECT_EQ(toFloats(th), (std::vector<float>{1, 2}));
  EXPECT_EQ(toFloats(tb), (std::vector<float>{1, 2}));
  KILN_ASSERT_OK(kiln_tensor_release(th));
  KILN_ASSERT_OK(kiln_tensor_release(tb));
  // bool: logical_not through the ABI.
  uint8_t flags[3] = {1, 0, 1};
  kiln_tensor tf, nf;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(flags, dl(6, 8), {3}), &tf));
  kiln_value in = kiln_value_of_tensor(tf);
  KILN_ASSERT_OK(kiln_call(KILN_OP_LOGICAL_NOT, &in, 1, nullptr, 0, &nf));
  uint8_t got[3];
  KILN_ASSERT_OK(kiln_tensor_copy_to_host(nf, got, 3, KILN_DTYPE_BOOL));
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[1], 1);
  KILN_ASSERT_OK(kiln_tensor_release(tf));
  KILN_ASSERT_OK(kiln_tensor_release(nf));
}

// A producer's bool bytes other than 0 and 1 are true, like 1 (Kiln reads
// bools as C++ bool: not 2 was 3, still true; as i32 2 stayed 2). Bytes
// that are all 0 or 1 stay zero-copy.
TEST(CApiDLPack, BoolBytesOtherThanOneAreTrue) {
  alignas(8) uint8_t odd[4] = {2, 0, 1, 255};
  std::atomic<int> deleted{0};
  kiln_tensor t;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(odd, dl(6, 8), {4}, {}, 0, &deleted), &t));
  kiln_value v = kiln_value_of_tensor(t);
  kiln_tensor n;
  KILN_ASSERT_OK(kiln_call(KILN_OP_LOGICAL_NOT, &v, 1, nullptr, 0, &n));
  uint8_t negated[4];
  KILN_ASSERT_OK(kiln_tensor_copy_to_host(n, negated, sizeof negated, KILN_DTYPE_BOOL));
  EXPECT_EQ(std::vector<uint8_t>(negated, negated + 4), (std::vector<uint8_t>{0, 1, 0, 0}));
  int32_t ints[4];
  KILN_ASSERT_OK(kiln_tensor_copy_to_host(t, ints, sizeof ints, KILN_DTYPE_I32));
  EXPECT_EQ(std::vector<int32_t>(ints, ints + 4), (std::vector<int32_t>{1, 0, 1, 1}));
  KILN_ASSERT_OK(kiln_tensor_release(n));
  KILN_ASSERT_OK(kiln_tensor_release(t));
  EXPECT_EQ(deleted.load(), 1);

  alignas(8) uint8_t plain[4] = {1, 0, 0, 1};
  kiln_tensor p;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(plain, dl(6, 8), {4}), &p));
  DLManagedTensor* out;
  KILN_ASSERT_OK(kiln_tensor_to_dlpack(p, &out));
  EXPECT_EQ(out->dl_tensor.data, static_cast<void*>(plain)) << "0/1 bytes are not copied";
  out->deleter(out);
  KILN_ASSERT_OK(kiln_tensor_release(p));
}

TEST(CApiDLPack, ExportFlushesAPendingTensor) {
  kiln_tensor x = fromFloats({1, 2, 3}, {3});
  kiln_value in = kiln_value_of_tensor(x);
  kiln_tensor y;
  KILN_ASSERT_OK(kiln_call(KILN_OP_SQUARE, &in, 1, nullptr, 0, &y));
  int32_t m;
  KILN_ASSERT_OK(kiln_tensor_is_materialized(y, &m));
  EXPECT_EQ(m, 0);
  DLManagedTensor* out;
  KILN_ASSERT_OK(kiln_tensor_to_dlpack(y, &out));
  const void* p;
  KILN_ASSERT_OK(kiln_tensor_data_pointer(y, &p));
  EXPECT_EQ(out->dl_tensor.data, p);
  KILN_ASSERT_OK(kiln_tensor_release(y));
  KILN_ASSERT_OK(kiln_tensor_release(x));
  const float* f = static_cast<const float*>(out->dl_tensor.data);
  EXPECT_EQ(f[0], 1);
  EXPECT_EQ(f[2], 9);
  out->deleter(out);
}

TEST(CApiDLPack, EmptyAndRankZero) {
  kiln_tensor e;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(nullptr, f32(), {0, 3}), &e));
  EXPECT_EQ(shapeOf(e), (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(toFloats(e).empty());
  float v = 7;
  kiln_tensor s;
  KILN_ASSERT_OK(kiln_tensor_from_dlpack(makeDL(&v, f32(), {}), &s));
  EXPECT_EQ(toFloats(s), std::vector<float>{7});
  DLManagedTensor* out;
  KILN_ASSERT_OK(kiln_tensor_to_dlpack(s, &out));
  EXPECT_EQ(out->dl_tensor.ndim, 0);
  EXPECT_EQ(out->dl_tensor.data, &v);
  out->deleter(out);
  KILN_ASSERT_OK(kiln_tensor_release(e));
  KILN_ASSERT_OK(kiln_tensor_release(s));
}

}  // namespace
}  // namespace kiln::capitest
