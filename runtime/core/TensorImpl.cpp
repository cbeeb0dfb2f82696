#include "runtime/core/TensorImpl.h"

#include <vector>

#include "runtime/trace/Recorder.h"

namespace kiln::core {

void contiguousStrides(const Shape& shape, int64_t* strides) {
  int64_t s = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    strides[i] = s;
    s *= shape[i];
  }
}

bool isContiguous(const Shape& shape, const int64_t* strides) {
  int64_t s = 1;
  for (int i = shape.rank() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != s) return false;
    s *= shape[i];
  }
  return true;
}

}  // namespace kiln::core

namespace kiln::detail {

namespace {
/// Per-thread free list of TensorImpl-sized blocks. A block freed on another
/// thread joins that thread's list; all blocks have the same size.
struct ImplPool {
  std::vector<void*> free;
  ~ImplPool();
};
thread_local ImplPool tPool;
/// Trivially destructible, so still readable while the thread's other
/// thread_locals (and a late flush at thread exit) are torn down.
thread_local bool tPoolGone = false;
ImplPool::~ImplPool() {
  tPoolGone = true;
  for (void* p : free) ::operator delete(p);
  free.clear();
}
constexpr std::size_t kPoolCap = 4096;
}  // namespace

void* TensorImpl::operator new(std::size_t size) {
  if (size == sizeof(TensorImpl) && !tPoolGone && !tPool.free.empty()) {
    void* p = tPool.free.back();
    tPool.free.pop_back();
    return p;
  }
  return ::operator new(size);
}

void TensorImpl::operator delete(void* p) {
  if (!tPoolGone && tPool.free.size() < kPoolCap) {
    if (tPool.free.capacity() == 0) tPool.free.reserve(kPoolCap);
    tPool.free.push_back(p);
    return;
  }
  ::operator delete(p);
}

TensorImpl* TensorImpl::create(DType dtype, const Shape& shape, Device device) {
  return new TensorImpl(dtype, shape, device);
}

void TensorImpl::release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (trace::Recorder* r = owner.load(std::memory_order_acquire)) r->forget(this);
  delete this;
}

}  // namespace kiln::detail
