// The kept per-thread scratch of the GEMM and convolution kernels.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "runtime/backends/Hal.h"
#include "runtime/interp/ScratchBuffer.h"

namespace kiln::interp {
namespace {

TEST(ScratchBuffer, KeepsItsMemoryForTheNextCallAndGrowsWhenAsked) {
  ScratchSlot slot;
  void* first = nullptr;
  {
    ScratchBuffer b(slot, 1000, "test");
    first = b.as<void>();
    ASSERT_NE(first, nullptr);
    std::memset(first, 1, 1000);  // writable
    EXPECT_EQ(slot.p, nullptr) << "the slot is taken while the buffer lives";
  }
  EXPECT_EQ(slot.p, first) << "given back after the call";
  {
    ScratchBuffer b(slot, 2000, "test");  // within the whole huge page it was rounded up to
    EXPECT_EQ(b.as<void>(), first);
  }
  const std::size_t kept = slot.capacity;
  EXPECT_GE(kept, std::size_t{2000});
  {
    ScratchBuffer b(slot, kept + 1, "test");  // larger than kept: a new, larger block
    std::memset(b.as<char>(), 2, kept + 1);
  }
  EXPECT_GT(slot.capacity, kept);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(slot.p) % 64, 0u);
}

TEST(ScratchBuffer, AnEmptyRequestStillGetsABuffer) {
  ScratchSlot slot;
  ScratchBuffer b(slot, 0, "test");
  EXPECT_NE(b.as<void>(), nullptr);
}

TEST(ScratchBuffer, ANestedCallOnTheSameSlotGetsItsOwnMemory) {
  ScratchSlot slot;
  {
    ScratchBuffer outer(slot, 4096, "test");
    std::memset(outer.as<char>(), 7, 4096);
    {
      // What TBB work stealing does: the same thread re-enters the kernel.
      ScratchBuffer inner(slot, 4096, "test");
      EXPECT_NE(inner.as<void>(), outer.as<void>());
      std::memset(inner.as<char>(), 9, 4096);
    }
    // The inner buffer went back to the empty slot; the outer's memory is intact.
    EXPECT_NE(slot.p, nullptr);
    EXPECT_EQ(outer.as<char>()[4095], 7);
  }
  // The slot keeps one of the two blocks (the other is freed), never both or neither.
  EXPECT_NE(slot.p, nullptr);
}

TEST(ScratchBuffer, ComesFromTheHostAllocatorAndGoesBackToIt) {
  // So that a warm start's record sees it (runtime/exec/WarmStart.h).
  const hal::AllocatorStats before = hal::hostAllocator().stats();
  {
    ScratchSlot slot;
    ScratchBuffer b(slot, 3 << 20, "test");
    const hal::AllocatorStats held = hal::hostAllocator().stats();
    EXPECT_EQ(held.allocations, before.allocations + 1);
    EXPECT_EQ(held.bytes_active, before.bytes_active + (4u << 20)) << "rounded up to whole huge pages";
  }
  EXPECT_EQ(hal::hostAllocator().stats().bytes_active, before.bytes_active) << "the slot gave it back";
}

}  // namespace
}  // namespace kiln::interp
