// HugePageSlabs: medium host blocks (16 KiB up to 2 MiB) carved from 2 MiB
// chunks that the kernel backs with transparent huge pages. A process's
// first step touches all of its working set for the first time; on these
// VMs a 4 KiB page fault costs about 2.5 us (8 MiB touched page by page:
// 5-7 ms; as huge pages: 1.2-1.5 ms), which made a replaying process's first
// step 5 ms slower than its next. Small blocks stay with malloc; blocks of
// 2 MiB and more get huge pages of their own (CachingHostAllocator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace kiln::hal {

/// A block of `bytes` (a multiple of 2 MiB) aligned to and backed by
/// transparent huge pages where the kernel allows them; free it with
/// std::free. nullptr when the system has no memory.
void* allocateHugePageBlock(std::size_t bytes);

/// Not thread-safe: its owner serialises the calls (CachingHostAllocator
/// holds its mutex).
class HugePageSlabs {
 public:
  static constexpr std::size_t kChunkBytes = std::size_t{2} << 20;
  static constexpr std::size_t kMinBlock = std::size_t{16} << 10;
  static constexpr std::size_t kAlignment = 64;

  HugePageSlabs() = default;
  HugePageSlabs(const HugePageSlabs&) = delete;
  HugePageSlabs& operator=(const HugePageSlabs&) = delete;
  /// Unmaps the chunks with no block in use; a chunk whose blocks outlive
  /// the allocator (tensors destroyed after it at exit) is left mapped.
  ~HugePageSlabs();

  /// Whether blocks of `size` bytes come from here.
  static bool serves(std::size_t size) { return size >= kMinBlock && size < kChunkBytes; }

  /// A 64-byte aligned block of `size` bytes (serves(size) must hold), or
  /// nullptr when the system has no memory for a new chunk.
  void* allocate(std::size_t size);
  /// Gives a block back. A chunk is unmapped when its last block comes back
  /// (the chunk being carved is kept and carved again from its start).
  void release(void* block);

  /// Chunks mapped now.
  std::size_t chunkCount() const { return chunks_.size(); }

 private:
  struct Chunk {
    char* base = nullptr;
    std::size_t used = 0;  ///< bytes carved from its start
    std::size_t live = 0;  ///< blocks handed out and not released
  };
  static std::uintptr_t chunkOf(const void* block) {
    return reinterpret_cast<std::uintptr_t>(block) & ~(kChunkBytes - 1);
  }
  static char* mapChunk();

  std::unordered_map<std::uintptr_t, Chunk> chunks_;
  std::uintptr_t current_ = 0;  ///< the chunk being carved (0: none)
};

}  // namespace kiln::hal
