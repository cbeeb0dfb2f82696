#include "runtime/core/Storage.h"

#include "runtime/backends/Allocator.h"

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

Storage::~Storage() {
  if (allocator_) {
    allocator_->deallocate(data_, bytes_);
  } else if (deleter_) {
    deleter_(data_);
  }
}

}  // namespace kiln::core
