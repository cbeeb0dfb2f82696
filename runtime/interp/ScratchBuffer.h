// A thread's kept scratch memory for kernels that need megabytes of
// temporary space on every call (the GEMM's packed blocks, convolution's
// unfolded receptive fields): allocating it per call would cost page faults
// and zeroing on every call.
#pragma once

#include <cstddef>
#include <type_traits>

namespace kiln::interp {

/// The memory a thread keeps between calls (one slot per use: a kernel that
/// needs two buffers at once has two slots), declared `thread_local`.
///
/// Trivially destructible on purpose. glibc registers the destructor of a
/// thread_local object at the thread's first use of it under the dynamic
/// loader's lock, which a dlopen holds for its whole load: while the
/// compiler loaded beside a training loop's first step (100+ ms), that
/// step's first GEMM on each thread waited for it (the transformer bench's
/// first step 70-130 ms instead of 30). A slot's memory goes back when its
/// thread ends through a pthread key instead, which takes no such lock (the
/// main thread's at the process's exit, with the rest of its memory).
struct ScratchSlot {
  void* p = nullptr;
  std::size_t capacity = 0;  // bytes
  /// The thread's next slot with memory to give back at its end.
  ScratchSlot* nextHeld = nullptr;
  bool held = false;
};
static_assert(std::is_trivially_destructible_v<ScratchSlot>);

/// Gives `slot`'s memory back now, on the thread that used it: for a slot
/// that is not thread_local (tests), before it goes out of scope.
void releaseScratch(ScratchSlot& slot);

/// Takes the slot's memory for a call's duration, grown to at least `bytes`
/// (uninitialised, in whole transparent huge pages), and gives it back
/// after. A call nested on the same thread (TBB work stealing while this one
/// waits) finds the slot empty and allocates its own.
class ScratchBuffer {
 public:
  /// Throws a kiln::Error naming `what` when the memory cannot be had.
  ScratchBuffer(ScratchSlot& slot, std::size_t bytes, const char* what);
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  ScratchSlot& slot_;
  void* p_;
  std::size_t capacity_;
};

}  // namespace kiln::interp
