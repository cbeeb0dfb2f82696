#include "runtime/backends/test/DeviceArena.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "kiln/error.h"
#include "runtime/backends/cpu/CachingHostAllocator.h"

namespace kiln::hal {

namespace {
constexpr std::size_t kPage = 4096;
std::size_t pageRound(std::size_t n) { return (n + kPage - 1) / kPage * kPage; }
}  // namespace

DeviceArena::DeviceArena(Device device, std::size_t reserveBytes) : device_(device), reserved_(reserveBytes) {
  void* p = mmap(nullptr, reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error("device " + device.str() + ": cannot reserve " + std::to_string(reserved_ >> 20) +
                " MiB of address space for its memory: " + std::strerror(errno));
  base_ = static_cast<char*>(p);
}

DeviceArena::~DeviceArena() { munmap(base_, reserved_); }

void DeviceArena::protectLocked(std::size_t from, std::size_t to, bool accessible) {
  if (to <= from) return;
  if (mprotect(base_ + from, to - from, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
    throw Error("device " + device_.str() + ": mprotect failed: " + std::strerror(errno));
}

void* DeviceArena::allocate(std::size_t bytes) {
  const std::size_t size = CachingHostAllocator::bucketSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.allocations;
  stats_.bytes_requested += bytes;
  void* p = nullptr;
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    ++stats_.cache_hits;
  } else {
    // Blocks start page-aligned when they are a page or more, so that the
    // pages of a cached block can be given back on their own.
    std::size_t start = size >= kPage ? pageRound(top_) : top_;
    if (start + size > reserved_)
      throw Error("device " + device_.str() + ": out of memory allocating " + std::to_string(bytes) + " bytes (" +
                  std::to_string(stats_.bytes_active) + " bytes in use of " + std::to_string(reserved_) +
                  "); free tensors or call kiln::empty_cache()");
    const std::size_t oldTop = pageRound(top_), newTop = pageRound(start + size);
    // Memory is opened to streams page by page as it is first handed out.
    if (openCount_ > 0) protectLocked(oldTop, newTop, true);
    top_ = start + size;
    p = base_ + start;
    ++stats_.system_allocs;
    stats_.bytes_reserved += size;
  }
  stats_.bytes_active += size;
  if (stats_.bytes_active > stats_.bytes_peak_active) stats_.bytes_peak_active = stats_.bytes_active;
  return p;
}

void DeviceArena::release(void* ptr, std::size_t bytes) {
  if (!ptr) return;
  const std::size_t size = CachingHostAllocator::bucketSize(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.bytes_active -= size;
  free_[size].push_back(ptr);
}

void DeviceArena::emptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, blocks] : free_) {
    if (size < kPage) continue;
    for (void* b : blocks) madvise(b, size, MADV_DONTNEED);
  }
}

AllocatorStats DeviceArena::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

bool DeviceArena::contains(const void* p) const {
  const char* c = static_cast<const char*>(p);
  return c >= base_ && c < base_ + reserved_;
}

void DeviceArena::open() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (openCount_++ == 0) protectLocked(0, pageRound(top_), true);
}

void DeviceArena::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--openCount_ == 0) protectLocked(0, pageRound(top_), false);
}

}  // namespace kiln::hal
