#include "runtime/backends/cpu/HugePageSlabs.h"

#include <sys/mman.h>

#include <cstdlib>

namespace kiln::hal {

void* allocateHugePageBlock(std::size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, HugePageSlabs::kChunkBytes, bytes) != 0) return nullptr;
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure changes nothing
  return p;
}

HugePageSlabs::~HugePageSlabs() {
  for (auto& [base, chunk] : chunks_)
    if (chunk.live == 0) munmap(chunk.base, kChunkBytes);
}

char* HugePageSlabs::mapChunk() {
  // Twice the size, then trimmed to one aligned chunk: mmap aligns to pages only.
  const std::size_t span = 2 * kChunkBytes;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t aligned = (start + kChunkBytes - 1) & ~(kChunkBytes - 1);
  if (aligned > start) munmap(p, aligned - start);
  const std::uintptr_t end = start + span, chunkEnd = aligned + kChunkBytes;
  if (end > chunkEnd) munmap(reinterpret_cast<void*>(chunkEnd), end - chunkEnd);
  madvise(reinterpret_cast<void*>(aligned), kChunkBytes, MADV_HUGEPAGE);  // advice only
  return reinterpret_cast<char*>(aligned);
}

void* HugePageSlabs::allocate(std::size_t size) {
  size = (size + kAlignment - 1) / kAlignment * kAlignment;
  auto it = chunks_.find(current_);
  if (it == chunks_.end() || it->second.used + size > kChunkBytes) {
    char* base = mapChunk();
    if (!base) return nullptr;
    // The chunk left behind stays until its last block comes back.
    if (it != chunks_.end() && it->second.live == 0) {
      munmap(it->second.base, kChunkBytes);
      chunks_.erase(it);
    }
    current_ = reinterpret_cast<std::uintptr_t>(base);
    it = chunks_.emplace(current_, Chunk{base, 0, 0}).first;
  }
  Chunk& chunk = it->second;
  void* block = chunk.base + chunk.used;
  chunk.used += size;
  ++chunk.live;
  return block;
}

void HugePageSlabs::release(void* block) {
  auto it = chunks_.find(chunkOf(block));
  if (it == chunks_.end()) return;
  Chunk& chunk = it->second;
  if (--chunk.live > 0) return;
  if (it->first == current_) {
    chunk.used = 0;  // carved again from its start; its pages stay warm
    return;
  }
  munmap(chunk.base, kChunkBytes);
  chunks_.erase(it);
}

}  // namespace kiln::hal
