// The kept per-thread scratch of the GEMM and convolution kernels.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>

#include "runtime/backends/Hal.h"
#include "runtime/interp/ScratchBuffer.h"

namespace kiln::interp {
namespace {

/// A slot on the stack (the kernels' are thread_local), given back when the
/// test leaves its scope.
struct LocalSlot : ScratchSlot {
  ~LocalSlot() { releaseScratch(*this); }
};

TEST(ScratchBuffer, KeepsItsMemoryForTheNextCallAndGrowsWhenAsked) {
  LocalSlot slot;
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
  LocalSlot slot;
  ScratchBuffer b(slot, 0, "test");
  EXPECT_NE(b.as<void>(), nullptr);
}

TEST(ScratchBuffer, ANestedCallOnTheSameSlotGetsItsOwnMemory) {
  LocalSlot slot;
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
    LocalSlot slot;
    ScratchBuffer b(slot, 3 << 20, "test");
    const hal::AllocatorStats held = hal::hostAllocator().stats();
    EXPECT_EQ(held.allocations, before.allocations + 1);
    EXPECT_EQ(held.bytes_active, before.bytes_active + (4u << 20)) << "rounded up to whole huge pages";
  }
  EXPECT_EQ(hal::hostAllocator().stats().bytes_active, before.bytes_active) << "the slot gave it back";
}

TEST(ScratchBuffer, AThreadLocalSlotKeepsItsMemoryUntilItsThreadEnds) {
  const hal::AllocatorStats before = hal::hostAllocator().stats();
  std::size_t whileRunning = 0, afterCalls = 0;
  std::thread worker([&] {
    // Two slots, as the GEMM has (A and B blocks); trivially destructible
    // (ScratchBuffer.h), so the thread's end, not a C++ destructor, frees them.
    thread_local ScratchSlot first, second;
    for (int call = 0; call < 3; ++call) {
      ScratchBuffer a(first, 1 << 20, "test");
      ScratchBuffer b(second, 3 << 20, "test");
      std::memset(a.as<char>(), call, 1 << 20);
      whileRunning = hal::hostAllocator().stats().bytes_active;
    }
    afterCalls = hal::hostAllocator().stats().bytes_active;
  });
  worker.join();
  EXPECT_EQ(whileRunning, before.bytes_active + (6u << 20)) << "one block per slot, reused by later calls";
  EXPECT_EQ(afterCalls, whileRunning) << "kept between calls";
  EXPECT_EQ(hal::hostAllocator().stats().bytes_active, before.bytes_active) << "given back when the thread ended";
}

}  // namespace
}  // namespace kiln::interp
