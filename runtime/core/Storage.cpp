#include "runtime/core/Storage.h"

#include "runtime/backends/Hal.h"

namespace kiln::core {

std::shared_ptr<Storage> Storage::allocate(hal::Allocator& allocator, std::size_t bytes) {
  auto s = std::make_shared<Storage>(Key{});
  s->data_ = allocator.allocate(bytes);
  s->bytes_ = bytes;
  s->device_ = allocator.device();
  s->allocator_ = &allocator;
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, std::size_t bytes, Device device,
                                       std::function<void(void*)> deleter) {
  auto s = std::make_shared<Storage>(Key{});
  s->data_ = data;
  s->bytes_ = bytes;
  s->device_ = device;
  s->deleter_ = std::move(deleter);
  return s;
}

std::shared_ptr<Storage> Storage::allocateHost(std::size_t bytes) {
  return allocate(hal::hostAllocator(), bytes);
}

std::shared_ptr<Storage> Storage::allocateOn(Device device, std::size_t bytes) {
  if (device.kind == Device::CPU) return allocateHost(bytes);
  return allocate(hal::deviceContext(device).allocator(), bytes);
}

Storage::~Storage() {
  if (allocator_) {
    allocator_->deallocate(data_, bytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace kiln::core
