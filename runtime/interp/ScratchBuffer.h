// A thread's kept scratch memory for kernels that need megabytes of
// temporary space on every call (the GEMM's packed blocks, convolution's
// unfolded receptive fields): allocating it per call would cost page faults
// and zeroing on every call.
#pragma once

#include <cstddef>

namespace kiln::interp {

/// The memory a thread keeps between calls (one slot per use: a kernel that
/// needs two buffers at once has two slots).
struct ScratchSlot {
  void* p = nullptr;
  std::size_t capacity = 0;  // bytes
  ~ScratchSlot();
};

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
