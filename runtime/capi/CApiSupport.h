// Shared machinery of the C ABI: status errors, the exception barrier, the
// thread-local last error, and handle tables that detect stale handles.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kiln/error.h"
#include "kiln/kiln_c.h"
#include "kiln/tensor.h"

namespace kiln::capi {

static_assert(sizeof(void*) == 8, "handles encode 64 bits");

/// An error detected by the C layer itself, with the status it maps to.
class StatusError : public std::runtime_error {
 public:
  StatusError(kiln_status status, const std::string& what) : std::runtime_error(what), status_(status) {}
  kiln_status status() const { return status_; }

 private:
  kiln_status status_;
};

[[noreturn]] inline void fail(kiln_status status, const std::string& what) { throw StatusError(status, what); }

/// Sets this thread's last error and returns `status`.
kiln_status setError(kiln_status status, const char* function, const char* message) noexcept;
void clearError() noexcept;

/// The exception barrier around every fallible C function: clears the last
/// error, runs `body` and turns anything it throws into a status + message.
template <class F>
kiln_status guarded(const char* function, F&& body) noexcept {
  clearError();
  try {
    body();
    return KILN_OK;
  } catch (const StatusError& e) {
    return setError(e.status(), function, e.what());
  } catch (const kiln::Error& e) {
    return setError(KILN_ERROR_OP, function, e.what());
  } catch (const std::bad_alloc&) {
    return setError(KILN_ERROR_OUT_OF_MEMORY, function, "out of memory");
  } catch (const std::exception& e) {
    return setError(KILN_ERROR_INTERNAL, function, e.what());
  } catch (...) {
    return setError(KILN_ERROR_INTERNAL, function, "unknown exception");
  }
}

template <class T>
T* required(T* p, const char* what) {
  if (!p) fail(KILN_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  return p;
}

/// Kinds of handle, encoded in the handle value so that a handle of one kind
/// passed as another is reported as such.
enum class HandleKind : uint8_t { Tensor = 0x4b, Function = 0x46 };

/// Handles are tokens (kind, generation, slot index), never pointers: a
/// released, stale or forged handle is detected without touching freed
/// memory. Slots are reused with a new generation; a slot whose generation
/// is spent is retired (never reused), so no released handle ever matches a
/// live one again. The handle encodes GenerationBits (at most 24) bits of
/// generation; tests narrow it to reach retirement quickly.
template <class T, unsigned GenerationBits = 24>
class HandleTable {
  static_assert(GenerationBits >= 1 && GenerationBits <= 24, "kind 8 bits | generation | 32-bit index");

 public:
  /// The last generation a slot is handed out with; released then, the slot
  /// is retired.
  static constexpr uint32_t kLastGeneration = (uint32_t{1} << GenerationBits) - 1;

  HandleTable(HandleKind kind, const char* typeName) : kind_(kind), typeName_(typeName) {}

  /// A new handle holding `value` with one reference.
  uint64_t insert(T value) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      if (slots_.size() >= kMaxSlots) fail(KILN_ERROR_OUT_OF_MEMORY, std::string("too many live ") + typeName_ + " handles");
      free_.reserve(slots_.size() + 1);  // so that erase() never allocates
      slots_.emplace_back();
      index = static_cast<uint32_t>(slots_.size() - 1);
    }
    Slot& s = slots_[index];
    s.value = std::move(value);
    s.refs = 1;
    ++live_;
    return encode(index, s.generation);
  }

  /// A copy of the value behind `handle`; throws INVALID_HANDLE when the
  /// handle is null, of another kind, released or forged.
  T get(uint64_t handle, const char* what) {
    std::lock_guard<std::mutex> lock(mutex_);
    return slotOf(handle, what).value;
  }

  /// Replaces the value behind a live handle.
  void set(uint64_t handle, T value) {
    T old;
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& s = slotOf(handle, "handle");
    old = std::move(s.value);
    s.value = std::move(value);
  }

  void retain(uint64_t handle, const char* what) {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& s = slotOf(handle, what);
    if (s.refs == UINT32_MAX) fail(KILN_ERROR_STATE, std::string(what) + ": reference count overflow");
    ++s.refs;
  }

  void release(uint64_t handle, const char* what) {
    [[maybe_unused]] T dropped;  // destroyed after the lock is released (it may take other locks)
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Slot& s = slotOf(handle, what);
      if (--s.refs > 0) return;
      dropped = std::move(s.value);
      s.value = T();
      --live_;
      // A wrapped generation would make old handles of this slot valid again.
      if (s.generation == kLastGeneration) {
        ++retired_;
        return;
      }
      ++s.generation;
      free_.push_back(indexOf(handle));  // capacity reserved by insert()
    }
  }

  uint64_t live() {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_;
  }

  /// Slots whose generations are spent (one per kLastGeneration handles).
  uint64_t retired() {
    std::lock_guard<std::mutex> lock(mutex_);
    return retired_;
  }

 private:
  static constexpr uint64_t kGenerationMask = kLastGeneration;
  static constexpr size_t kMaxSlots = size_t(1) << 31;
  struct Slot {
    T value{};
    uint32_t refs = 0;
    uint32_t generation = 1;
  };

  uint64_t encode(uint32_t index, uint32_t generation) const {
    return (static_cast<uint64_t>(kind_) << 56) | (static_cast<uint64_t>(generation) << 32) |
           (static_cast<uint64_t>(index) + 1);
  }
  static uint32_t indexOf(uint64_t handle) { return static_cast<uint32_t>(handle & 0xffffffffu) - 1; }

  Slot& slotOf(uint64_t handle, const char* what) {
    if (handle == 0) fail(KILN_ERROR_INVALID_HANDLE, std::string(what) + " is a NULL " + typeName_);
    const auto kind = static_cast<uint8_t>(handle >> 56);
    if (kind != static_cast<uint8_t>(kind_)) {
      const char* other = kind == static_cast<uint8_t>(HandleKind::Tensor)     ? "a kiln_tensor"
                          : kind == static_cast<uint8_t>(HandleKind::Function) ? "a kiln_function"
                                                                               : "not a Kiln handle";
      fail(KILN_ERROR_INVALID_HANDLE, std::string(what) + " is " + other + ", expected a " + typeName_);
    }
    const uint64_t low = handle & 0xffffffffu;
    const auto generation = static_cast<uint32_t>((handle >> 32) & kGenerationMask);
    if (low == 0 || low > slots_.size())
      fail(KILN_ERROR_INVALID_HANDLE, std::string(what) + " is not a valid " + typeName_);
    Slot& s = slots_[low - 1];
    if (s.generation != generation || s.refs == 0)
      fail(KILN_ERROR_INVALID_HANDLE,
           std::string(what) + " is a " + typeName_ + " that was already released (use after release)");
    return s;
  }

  HandleKind kind_;
  const char* typeName_;
  std::mutex mutex_;
  std::deque<Slot> slots_;
  std::vector<uint32_t> free_;
  uint64_t live_ = 0;
  uint64_t retired_ = 0;
};

struct Function;

HandleTable<kiln::Tensor>& tensorHandles();
HandleTable<std::shared_ptr<const Function>>& functionHandles();

inline uint64_t bits(kiln_tensor t) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t)); }
inline uint64_t bits(kiln_function f) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(f)); }

inline kiln::Tensor tensorOf(kiln_tensor t, const char* what) { return tensorHandles().get(bits(t), what); }
inline kiln_tensor newTensorHandle(kiln::Tensor t) {
  return reinterpret_cast<kiln_tensor>(static_cast<uintptr_t>(tensorHandles().insert(std::move(t))));
}

/// kiln_dtype <-> kiln::DType.
DType dtypeOf(int64_t dtype, const char* what);
inline kiln_dtype cDType(DType t) { return static_cast<kiln_dtype>(static_cast<int>(t)); }

/// Validated extents (rank <= Shape::kMaxRank, extents >= 0 unless
/// allowInferred permits -1).
Shape shapeOf(const int64_t* dims, int64_t rank, const char* what, bool allowInferred = false);
/// Bytes of a dense `shape` of `dtype`; KILN_ERROR_SHAPE when they are more
/// than fits in the address space.
size_t denseBytes(const Shape& shape, DType dtype, const char* what);

/// Writes `text` NUL-terminated into a caller buffer (see kiln_stats_json).
void writeText(const std::string& text, char* buffer, size_t capacity, size_t* length);

}  // namespace kiln::capi
