#include "runtime/backends/gpu/CachingAllocator.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "kiln/error.h"
#include "runtime/support/Log.h"

namespace kiln::hal {

namespace {
std::size_t roundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }
std::string mib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}
}  // namespace

void CachingAllocator::releaseAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Fence f : fences_) destroyFence(f);
  fences_.clear();
  for (Block* b : pending_)
    if (b->pending) destroyFence(b->pending);
  pending_.clear();
  for (Segment* seg : segments_) {
    freeSegment(seg->ptr);
    delete seg;
  }
  segments_.clear();
}

CachingAllocator::Block* CachingAllocator::takeFreeLocked(std::size_t size, bool small) {
  FreeSet& pool = poolFor(small);
  Block key;
  key.size = size;
  key.ptr = 0;
  auto it = pool.lower_bound(&key);
  if (it == pool.end()) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::newSegmentLocked(std::size_t size, bool small, std::size_t requested) {
  const std::size_t segmentSize =
      small ? kSmallSegment : (size < kLargeSegment / 2 ? kLargeSegment : roundUp(size, kSmallSegment));
  uintptr_t ptr = 0;
  bool ok = allocateSegment(segmentSize, &ptr);
  if (!ok) {
    // Out of memory: everything cached goes back to the driver, then once more.
    processPendingLocked(/*wait=*/true);
    if (Block* b = takeFreeLocked(size, small)) return b;
    releaseSegmentsLocked();
    ++stats_.retries;
    ok = allocateSegment(segmentSize, &ptr);
  }
  if (!ok) {
    const std::string info = memoryInfo();
    throw Error(device_.str() + ": out of memory allocating " + std::to_string(requested) + " bytes (" +
                mib(requested) + "): " + mib(stats_.bytes_active) + " active in Kiln's tensors, " +
                mib(stats_.bytes_reserved) + " reserved by its caching allocator" +
                (info.empty() ? std::string() : ", " + info) +
                "; free tensors you no longer need, call kiln::empty_cache(), or use smaller batches");
  }
  auto* segment = new Segment{ptr, segmentSize, small};
  segments_.push_back(segment);
  ++stats_.system_allocs;
  stats_.bytes_reserved += segmentSize;
  auto* b = new Block;
  b->ptr = ptr;
  b->size = segmentSize;
  b->segment = segment;
  return b;
}

void CachingAllocator::splitLocked(Block* b, std::size_t size, bool small) {
  const std::size_t rest = b->size - size;
  if (rest < (small ? kRound : kSmallLimit)) return;  // too little left to be worth a block
  auto* tail = new Block;
  tail->ptr = b->ptr + size;
  tail->size = rest;
  tail->segment = b->segment;
  tail->prev = b;
  tail->next = b->next;
  if (b->next) b->next->prev = tail;
  b->next = tail;
  b->size = size;
  poolFor(small).insert(tail);
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = roundUp(std::max<std::size_t>(bytes, 1), kRound);
  const bool small = size <= kSmallLimit;
  std::lock_guard<std::mutex> lock(mutex_);
  enterDriver();
  drainDeferredLocked();
  processPendingLocked(/*wait=*/false);
  ++stats_.allocations;
  stats_.bytes_requested += bytes;
  Block* b = takeFreeLocked(size, small);
  if (b) ++stats_.cache_hits;
  else b = newSegmentLocked(size, small, bytes);
  splitLocked(b, size, small);
  b->allocated = true;
  active_[b->ptr] = b;
  stats_.bytes_active += b->size;
  stats_.bytes_peak_active = std::max(stats_.bytes_peak_active, stats_.bytes_active);
  return reinterpret_cast<void*>(b->ptr);
}

void CachingAllocator::deallocate(void* ptr, std::size_t /*bytes*/) {
  if (!ptr) return;
  const auto dptr = reinterpret_cast<uintptr_t>(ptr);
  if (insideHostTask()) {
    // The driver must not be called from a stream's host task: the free is
    // recorded by the next allocator call on an ordinary thread.
    std::lock_guard<std::mutex> lock(deferredMutex_);
    deferred_.push_back(dptr);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  drainDeferredLocked();
  auto it = active_.find(dptr);
  if (it == active_.end()) {
    // A programmer error; deallocate runs in destructors, so it is logged, not thrown.
    exec::log().error("{}: deallocate of a pointer its allocator did not hand out", device_.str());
    return;
  }
  Block* b = it->second;
  active_.erase(it);
  freeLocked(b);
}

void CachingAllocator::freeLocked(Block* b) {
  // Runs in destructors (a Storage's): never throws.
  b->allocated = false;
  stats_.bytes_active -= b->size;
  Fence e = nullptr;
  if (!fences_.empty()) {
    e = fences_.back();
    fences_.pop_back();
  } else if (!(e = createFence())) {
    return;  // the device failed: the block stays out of the pools (see below)
  }
  if (!recordFence(e)) {
    // The stream cannot be marked (the device failed): the block is kept out
    // of the pools rather than risk handing out memory still in use.
    fences_.push_back(e);
    return;
  }
  b->pending = e;
  pending_.push_back(b);
}

void CachingAllocator::drainDeferredLocked() {
  std::vector<uintptr_t> deferred;
  {
    std::lock_guard<std::mutex> lock(deferredMutex_);
    deferred.swap(deferred_);
  }
  for (uintptr_t p : deferred) {
    auto it = active_.find(p);
    if (it == active_.end()) continue;
    Block* b = it->second;
    active_.erase(it);
    freeLocked(b);
  }
}

void CachingAllocator::processPendingLocked(bool wait) {
  auto done = std::stable_partition(pending_.begin(), pending_.end(), [&](Block* b) {
    return !fenceDone(b->pending, wait);  // still pending: keep in front
  });
  for (auto it = done; it != pending_.end(); ++it) {
    Block* b = *it;
    fences_.push_back(b->pending);
    b->pending = nullptr;
    releaseToPoolLocked(b);
  }
  pending_.erase(done, pending_.end());
}

void CachingAllocator::releaseToPoolLocked(Block* b) {
  FreeSet& pool = poolFor(b->segment->small);
  auto isFree = [](Block* n) { return n && !n->allocated && !n->pending; };
  if (isFree(b->prev)) {
    Block* p = b->prev;
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  if (isFree(b->next)) {
    Block* n = b->next;
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  pool.insert(b);
}

void CachingAllocator::releaseSegmentsLocked() {
  for (auto it = segments_.begin(); it != segments_.end();) {
    Segment* s = *it;
    FreeSet& pool = poolFor(s->small);
    // A segment is unused when one free block spans all of it.
    Block key;
    key.size = s->size;
    key.ptr = s->ptr;
    auto found = pool.find(&key);
    if (found == pool.end() || (*found)->segment != s) {
      ++it;
      continue;
    }
    Block* b = *found;
    pool.erase(found);
    delete b;
    freeSegment(s->ptr);
    stats_.bytes_reserved -= s->size;
    delete s;
    it = segments_.erase(it);
  }
}

void CachingAllocator::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  enterDriver();
  drainDeferredLocked();
  processPendingLocked(/*wait=*/true);
  releaseSegmentsLocked();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::size_t CachingAllocator::segmentCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return segments_.size();
}

}  // namespace kiln::hal
