// Sizes past 64 bits through the C ABI (issue 21, defect 1): a status and
// kiln_last_error(), never an out-of-bounds read or a crash.
#include <cstdint>

#include "CApiTestUtil.h"

namespace kiln::capitest {
namespace {

constexpr int64_t k2(int n) { return int64_t{1} << n; }

TEST(CApiSizes, HostDataWhoseByteSizeOverflowsIsRejected) {
  kiln_tensor out = nullptr;
  // Was KILN_OK: 2^61 f64 is 2^64 bytes, 0 after wrapping, then read out of bounds.
  const int64_t wraps[1] = {k2(61)};
  expectError(kiln_tensor_from_host(nullptr, 0, KILN_DTYPE_F64, wraps, 1, &out), KILN_ERROR_SHAPE,
              {"[2305843009213693952]", "f64", "18446744073709551616 bytes", "address space"});
  const int64_t justPast[1] = {k2(60)};  // 2^63 bytes: one past int64
  expectError(kiln_tensor_from_host(nullptr, 0, KILN_DTYPE_F64, justPast, 1, &out), KILN_ERROR_SHAPE,
              {"address space"});
  // Representable: the byte length given must match it.
  const int64_t representable[1] = {k2(59)};
  expectError(kiln_tensor_from_host(nullptr, 0, KILN_DTYPE_F64, representable, 1, &out), KILN_ERROR_SHAPE,
              {"0 bytes given", "needs 4611686018427387904"});
  const int64_t emptyButHuge[3] = {0, k2(40), k2(40)};
  expectError(kiln_tensor_from_host(nullptr, 0, KILN_DTYPE_F32, emptyButHuge, 3, &out), KILN_ERROR_SHAPE,
              {"too many elements"});
  EXPECT_EQ(out, nullptr);
}

TEST(CApiSizes, CopyingAHugeBroadcastToTheHostIsRejected) {
  const double one = 1;
  const int64_t shape1[1] = {1};
  kiln_tensor x = nullptr, view = nullptr;
  KILN_ASSERT_OK(kiln_tensor_from_host(&one, sizeof one, KILN_DTYPE_F64, shape1, 1, &x));
  const int64_t target[1] = {k2(61)};
  kiln_attr shape = kiln_attr_ints("shape", target, 1);
  kiln_value in = kiln_value_of_tensor(x);
  KILN_ASSERT_OK(kiln_call(KILN_OP_BROADCAST_TO, &in, 1, &shape, 1, &view));  // a view: fine
  double dst[4] = {};
  // Was SIGSEGV: the needed size wrapped to 0 bytes.
  expectError(kiln_tensor_copy_to_host(view, dst, sizeof dst, KILN_DTYPE_F64), KILN_ERROR_SHAPE,
              {"address space"});
  expectError(kiln_tensor_copy_to_host(view, dst, sizeof dst, KILN_DTYPE_U8), KILN_ERROR_BUFFER_TOO_SMALL,
              {"needs 2305843009213693952"});
  int64_t numel = 0;
  KILN_EXPECT_OK(kiln_tensor_numel(view, &numel));
  EXPECT_EQ(numel, k2(61));
  kiln_tensor_release(view);
  kiln_tensor_release(x);
}

TEST(CApiSizes, OpsRefuseShapesPastInt64) {
  kiln_tensor out = nullptr;
  const int64_t huge[2] = {k2(40), k2(40)};
  kiln_attr shape = kiln_attr_ints("shape", huge, 2);
  expectError(kiln_call(KILN_OP_ZEROS, nullptr, 0, &shape, 1, &out), KILN_ERROR_SHAPE, {"too many elements"});
  const int64_t tallShape[2] = {k2(40), 1}, wideShape[2] = {1, k2(40)};
  kiln_tensor tall = nullptr, wide = nullptr;
  kiln_attr t = kiln_attr_ints("shape", tallShape, 2), w = kiln_attr_ints("shape", wideShape, 2);
  KILN_ASSERT_OK(kiln_call(KILN_OP_ZEROS, nullptr, 0, &t, 1, &tall));
  KILN_ASSERT_OK(kiln_call(KILN_OP_ZEROS, nullptr, 0, &w, 1, &wide));
  kiln_value both[2] = {kiln_value_of_tensor(tall), kiln_value_of_tensor(wide)};
  expectError(kiln_call(KILN_OP_ADD, both, 2, nullptr, 0, &out), KILN_ERROR_OP, {"add", "too many elements"});
  EXPECT_EQ(out, nullptr);
  kiln_tensor_release(tall);
  kiln_tensor_release(wide);
}

TEST(CApiSizes, DLPackSizesAndStridesAreChecked) {
  std::atomic<int> deleted{0};
  alignas(8) float data[8] = {};
  kiln_tensor out = nullptr;
  auto expectRejected = [&](DLManagedTensor* m, std::initializer_list<const char*> needles) {
    expectError(kiln_tensor_from_dlpack(m, &out), KILN_ERROR_SHAPE, needles);
    freeDL(m);  // rejected: the caller still owns it
  };
  expectRejected(makeDL(data, f32(), {k2(40), k2(40)}, {}, 0, &deleted), {"too many elements"});
  // Each axis' span fits; their distance does not.
  expectRejected(makeDL(data, f32(), {2, 2}, {k2(62), -k2(62)}, 0, &deleted), {"strides", "address space"});
  // 2^61 elements apart is 2^64 bytes of f32.
  expectRejected(makeDL(data, f32(), {2}, {k2(61)}, 0, &deleted), {"address space"});
  // The byte offset runs past the top of the address space.
  expectRejected(makeDL(data, f32(), {2}, {}, UINT64_MAX - 3, &deleted), {"byte_offset", "address space"});
  EXPECT_EQ(deleted.load(), 0);
  EXPECT_EQ(out, nullptr);
}

}  // namespace
}  // namespace kiln::capitest
