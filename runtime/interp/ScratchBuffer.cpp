#include "runtime/interp/ScratchBuffer.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kiln/error.h"
#include "runtime/backends/cpu/HugePageSlabs.h"

namespace kiln::interp {

ScratchSlot::~ScratchSlot() { std::free(p); }

/// Whole transparent huge pages: a process's first calls touch the buffer
/// fresh, and a 1.6 MB block faulted 4 KiB at a time cost about 400 page
/// faults (1 ms on these VMs, most of a replaying process's first-step
/// overhead); rounding up also lets the buffer serve later, larger calls
/// without growing.
ScratchBuffer::ScratchBuffer(ScratchSlot& slot, std::size_t bytes, const char* what)
    : slot_(slot), p_(slot.p), capacity_(slot.capacity) {
  slot.p = nullptr;
  slot.capacity = 0;
  if (capacity_ >= bytes && p_) return;
  std::free(p_);
  constexpr std::size_t kPage = hal::HugePageSlabs::kChunkBytes;
  // At least one page: an empty request still gets a buffer (never null).
  const std::size_t rounded = std::max<std::size_t>(1, (bytes + kPage - 1) / kPage) * kPage;
  p_ = hal::allocateHugePageBlock(rounded);
  capacity_ = p_ ? rounded : 0;
  if (!p_) throw Error(std::string(what) + ": out of memory for " + std::to_string(bytes) + " bytes of scratch");
}

ScratchBuffer::~ScratchBuffer() {
  if (slot_.p) {  // a nested call refilled the slot meanwhile: keep that one
    std::free(p_);
    return;
  }
  slot_.p = p_;
  slot_.capacity = capacity_;
}

}  // namespace kiln::interp
