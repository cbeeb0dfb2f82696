#include "CApiTestUtil.h"

#include <cstring>

namespace kiln::capitest {

void expectError(kiln_status got, kiln_status want, std::initializer_list<const char*> needles) {
  EXPECT_EQ(got, want) << "got " << kiln_status_string(got) << " (" << kiln_last_error() << "), expected "
                       << kiln_status_string(want);
  std::string msg = kiln_last_error();
  if (want != KILN_OK) {
    EXPECT_FALSE(msg.empty()) << "no message for " << kiln_status_string(want);
  }
  for (const char* n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' missing in: " << msg;
}

namespace {
struct Producer {
  DLManagedTensor managed{};
  std::vector<int64_t> shape, strides;
  std::vector<char> owned;
  std::atomic<int>* deleted = nullptr;
};

void deleteProducer(DLManagedTensor* m) {
  auto* p = static_cast<Producer*>(m->manager_ctx);
  if (p->deleted) p->deleted->fetch_add(1);
  delete p;
}
}  // namespace

DLManagedTensor* makeDL(void* data, DLDataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                        uint64_t byteOffset, std::atomic<int>* deleted, DLDevice device) {
  auto* p = new Producer();
  p->shape = std::move(shape);
  p->strides = std::move(strides);
  p->deleted = deleted;
  DLTensor& t = p->managed.dl_tensor;
  t.data = data;
  t.device = device;
  t.ndim = static_cast<int32_t>(p->shape.size());
  t.dtype = dtype;
  t.shape = p->shape.data();
  t.strides = p->strides.empty() ? nullptr : p->strides.data();
  t.byte_offset = byteOffset;
  p->managed.manager_ctx = p;
  p->managed.deleter = &deleteProducer;
  return &p->managed;
}

DLManagedTensor* makeOwnedDL(const std::vector<float>& values, std::vector<int64_t> shape, std::atomic<int>* deleted) {
  DLManagedTensor* m = makeDL(nullptr, f32(), std::move(shape), {}, 0, deleted);
  auto* p = static_cast<Producer*>(m->manager_ctx);
  p->owned.resize(values.size() * sizeof(float));
  std::memcpy(p->owned.data(), values.data(), p->owned.size());
  m->dl_tensor.data = p->owned.data();
  return m;
}

void freeDL(DLManagedTensor* m) {
  auto* p = static_cast<Producer*>(m->manager_ctx);
  p->deleted = nullptr;
  m->deleter(m);
}

kiln_tensor fromFloats(const std::vector<float>& values, std::vector<int64_t> shape) {
  kiln_tensor t = nullptr;
  kiln_status s = kiln_tensor_from_host(values.data(), values.size() * sizeof(float), KILN_DTYPE_F32, shape.data(),
                                        static_cast<int32_t>(shape.size()), &t);
  EXPECT_EQ(s, KILN_OK) << kiln_last_error();
  return t;
}

std::vector<float> toFloats(kiln_tensor t) {
  int64_t n = 0;
  EXPECT_EQ(kiln_tensor_numel(t, &n), KILN_OK) << kiln_last_error();
  std::vector<float> out(static_cast<size_t>(n));
  EXPECT_EQ(kiln_tensor_copy_to_host(t, out.data(), out.size() * sizeof(float), KILN_DTYPE_F32), KILN_OK)
      << kiln_last_error();
  return out;
}

std::vector<int64_t> shapeOf(kiln_tensor t) {
  int32_t rank = 0;
  EXPECT_EQ(kiln_tensor_rank(t, &rank), KILN_OK);
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  EXPECT_EQ(kiln_tensor_shape(t, dims.data(), rank), KILN_OK);
  return dims;
}

uint64_t liveTensorHandles() {
  kiln_stats s;
  s.struct_size = sizeof(s);
  EXPECT_EQ(kiln_get_stats(&s), KILN_OK);
  return s.live_tensor_handles;
}

}  // namespace kiln::capitest
