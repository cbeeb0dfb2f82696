#include "runtime/interp/ScratchBuffer.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <pthread.h>

#include "kiln/error.h"
#include "runtime/backends/Hal.h"
#include "runtime/backends/cpu/HugePageSlabs.h"

namespace kiln::interp {

namespace {
/// The host allocator (never destroyed: threads may exit after main):
/// blocks of 2 MiB and more are whole transparent huge pages, and a warm
/// start (runtime/exec/WarmStart.h) sees a process's scratch in its record
/// and faults it in ahead of the next process's first call.
void release(void* p, std::size_t bytes) {
  if (p) hal::hostAllocator().deallocate(p, bytes);
}

/// The calling thread's slots that hold memory, in a list through
/// ScratchSlot::nextHeld (trivially destructible, see ScratchSlot).
thread_local ScratchSlot* tHeldSlots = nullptr;

/// Gives back the memory of an ending thread's slots (`heldSlots`: the
/// address of its tHeldSlots, still valid while its keys' destructors run).
void releaseThreadSlots(void* heldSlots) {
  auto* head = static_cast<ScratchSlot**>(heldSlots);
  for (ScratchSlot* slot = *head; slot;) {
    ScratchSlot* next = slot->nextHeld;
    release(slot->p, slot->capacity);
    *slot = ScratchSlot{};
    slot = next;
  }
  *head = nullptr;
}

pthread_key_t threadEndKey() {
  static const pthread_key_t key = [] {
    pthread_key_t k{};
    if (pthread_key_create(&k, releaseThreadSlots) != 0) throw Error("scratch memory: no pthread key left");
    return k;
  }();
  return key;
}

/// Releases `slot`'s memory at its thread's end; false when the thread
/// cannot be told to (then the caller gives the memory back now).
bool holdUntilThreadEnd(ScratchSlot& slot) {
  if (slot.held) return true;
  if (pthread_setspecific(threadEndKey(), &tHeldSlots) != 0) return false;
  slot.held = true;
  slot.nextHeld = tHeldSlots;
  tHeldSlots = &slot;
  return true;
}
}  // namespace

void releaseScratch(ScratchSlot& slot) {
  for (ScratchSlot** link = &tHeldSlots; *link; link = &(*link)->nextHeld)
    if (*link == &slot) {
      *link = slot.nextHeld;
      break;
    }
  release(slot.p, slot.capacity);
  slot = ScratchSlot{};
}

/// Whole huge pages: a process's first calls touch the buffer fresh, and a
/// 1.6 MB block faulted 4 KiB at a time cost about 400 page faults (1 ms on
/// these VMs); rounding up also lets the buffer serve later, larger calls
/// without growing.
ScratchBuffer::ScratchBuffer(ScratchSlot& slot, std::size_t bytes, const char* what)
    : slot_(slot), p_(slot.p), capacity_(slot.capacity) {
  (void)threadEndKey();  // created here, where it may throw, not in the destructor
  slot.p = nullptr;
  slot.capacity = 0;
  if (capacity_ >= bytes && p_) return;
  release(p_, capacity_);
  p_ = nullptr;
  capacity_ = 0;
  constexpr std::size_t kPage = hal::HugePageSlabs::kChunkBytes;
  // At least one page: an empty request still gets a buffer (never null).
  const std::size_t rounded = std::max<std::size_t>(1, (bytes + kPage - 1) / kPage) * kPage;
  try {
    p_ = hal::hostAllocator().allocate(rounded);
  } catch (const Error&) {
    throw Error(std::string(what) + ": out of memory for " + std::to_string(bytes) + " bytes of scratch");
  }
  capacity_ = rounded;
}

ScratchBuffer::~ScratchBuffer() {
  if (slot_.p) {  // a nested call refilled the slot meanwhile: keep that one
    release(p_, capacity_);
    return;
  }
  slot_.p = p_;
  slot_.capacity = capacity_;
  if (!holdUntilThreadEnd(slot_)) releaseScratch(slot_);
}

}  // namespace kiln::interp
