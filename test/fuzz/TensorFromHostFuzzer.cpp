// libFuzzer target: building tensors through the C ABI from untrusted
// shapes, dtypes and byte counts (kiln_tensor_from_host), then reading them
// back. Every call must return a status: never crash, never read or write
// outside the buffers it was given. Runs with KILN_JIT=off: this is about
// the ABI's checks, not the compiler.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kiln/kiln_c.h"
#include "test/fuzz/FuzzInput.h"

namespace {

/// An extent: mostly small, sometimes huge or negative (the cases that overflow).
int64_t extent(FuzzInput& in) {
  const uint8_t kind = in.u8();
  if (kind < 200) return kind % 7;
  if (kind < 230) return static_cast<int64_t>(in.u64());
  return int64_t{1} << (in.u8() % 63);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kiln_set_option("jit", "off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in{data, size};
  const auto dtype = static_cast<kiln_dtype>(in.u8() % 10);  // 9 is not a dtype
  const int32_t rank = static_cast<int32_t>(in.u8() % 10) - 1;  // -1 and 9 are bad ranks
  std::vector<int64_t> shape(rank > 0 ? rank : 1);
  for (int64_t& d : shape) d = extent(in);
  // The byte count the caller claims, and the (smaller or equal) buffer it really has.
  const uint8_t claim = in.u8();
  const size_t claimed = claim < 128 ? in.u64() % 4096 : static_cast<size_t>(in.u64());
  std::vector<uint8_t> buffer(std::min<size_t>(claimed, 1 << 16));
  if (!buffer.empty() && in.size) std::memcpy(buffer.data(), in.data, std::min(buffer.size(), in.size));
  // A caller that claims more than it has is lying: only call with the truth
  // or with a size the buffer covers.
  const size_t bytes = claimed <= buffer.size() ? claimed : buffer.size();
  kiln_tensor t = nullptr;
  if (kiln_tensor_from_host(buffer.data(), bytes, dtype, shape.data(), rank, &t) != KILN_OK) return 0;
  int64_t numel = -1;
  if (kiln_tensor_numel(t, &numel) != KILN_OK || numel < 0) std::abort();
  std::vector<uint8_t> out(std::min<size_t>(bytes * 2 + 16, 1 << 17));
  kiln_tensor_copy_to_host(t, out.data(), out.size(), static_cast<kiln_dtype>(in.u8() % 9));
  if (kiln_tensor_release(t) != KILN_OK) std::abort();
  return 0;
}
