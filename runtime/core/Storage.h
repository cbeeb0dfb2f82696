// Storage: one device buffer shared by all tensor views of it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "kiln/device.h"

namespace kiln::hal {
class Allocator;
}  // namespace kiln::hal

namespace kiln::core {

/// A buffer that is returned to its allocator (or passed to a user deleter)
/// when the last view of it is gone. Whoever creates one gives it its
/// allocator (a device context's, hal::hostAllocator() for the host): the
/// core does not look devices up.
class Storage {
 public:
  /// `bytes` from `allocator`; returned to it on destruction.
  static std::shared_ptr<Storage> allocate(hal::Allocator& allocator, std::size_t bytes);
  /// Caller-owned memory; `deleter(data)` runs once at destruction.
  static std::shared_ptr<Storage> wrap(void* data, std::size_t bytes, Device device,
                                       std::function<void(void*)> deleter);

  /// Use the factories above; public only for std::make_shared.
  struct Key {};
  explicit Storage(Key) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  /// Allocated by Kiln (not caller-owned memory from wrap()): Kiln may reuse
  /// it for another value once no view of it is left but the one reusing it.
  bool ownedByKiln() const { return allocator_ != nullptr; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
  hal::Allocator* allocator_ = nullptr;
  std::function<void(void*)> deleter_;
};

}  // namespace kiln::core
