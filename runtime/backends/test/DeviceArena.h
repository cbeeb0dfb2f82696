// DeviceArena: the test device's memory. One reserved range of address space,
// kept PROT_NONE except while the device's own stream work runs, so a host
// access to device memory faults like a host access to GPU memory would.
// Blocks are size-bucketed and reused; nothing goes back to the system but
// the pages of cached blocks (emptyCache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/backends/Allocator.h"
#include "runtime/backends/WorkerStream.h"

namespace kiln::hal {

class DeviceArena final : public DeviceAccess {
 public:
  /// Reserves `reserveBytes` of address space (no memory is committed).
  DeviceArena(Device device, std::size_t reserveBytes);
  ~DeviceArena() override;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  /// A 64-byte aligned block; throws kiln::Error naming the sizes when the
  /// reservation is used up even after reusing cached blocks.
  void* allocate(std::size_t bytes);
  /// Returns a block at once (callers make this stream-ordered).
  void release(void* ptr, std::size_t bytes);
  /// Gives the pages of cached blocks back to the system.
  void emptyCache();
  AllocatorStats stats() const;
  /// Is `p` inside the reservation?
  bool contains(const void* p) const;

  // DeviceAccess: streams open the memory around their work (counted, so
  // several streams may be open at once).
  void open() override;
  void close() override;

 private:
  void protectLocked(std::size_t from, std::size_t to, bool accessible);

  Device device_;
  char* base_ = nullptr;
  std::size_t reserved_ = 0;
  std::size_t top_ = 0;  ///< bytes handed out from the reservation so far
  int openCount_ = 0;
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

}  // namespace kiln::hal
