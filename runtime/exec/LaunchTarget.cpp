#include "runtime/exec/LaunchTarget.h"

#include <utility>

#include "runtime/core/TensorSize.h"
#include "runtime/interp/Kernels.h"

namespace kiln::exec {

LaunchTarget::LaunchTarget(Device device)
    : device_(hal::deviceContext(device)), ops_(device_.ops()), allocator_(device_.allocator()) {}

core::View LaunchTarget::alloc(DType t, const Shape& shape) {
  core::View v;
  v.storage = core::Storage::allocate(allocator_, core::requireDenseBytes("allocate", shape, t));
  core::contiguousStrides(shape, v.strides);
  return v;
}

std::shared_ptr<core::Storage> LaunchTarget::scratch(std::size_t bytes) {
  return core::Storage::allocate(allocator_, bytes);
}

core::View LaunchTarget::dense(const core::View& v, DType t, const Shape& shape) {
  if (core::isContiguous(shape, v.strides)) {
    core::View d = v;
    core::contiguousStrides(shape, d.strides);
    return d;
  }
  core::View d = alloc(t, shape);
  ops_.copy(interp::argOf(v, t, shape), d.bytes(t));
  return d;
}

std::vector<int64_t> LaunchTarget::readIndices(const core::View& v, DType t, const Shape& shape) {
  std::vector<int64_t> values(static_cast<size_t>(shape.numel()));
  if (values.empty()) return values;
  const interp::Arg arg = interp::argOf(v, t, shape);
  if (device_.hostAccessible()) {
    interp::castKernel(arg, DType::i64, reinterpret_cast<char*>(values.data()));
    return values;
  }
  core::View dense = alloc(DType::i64, shape);
  ops_.cast(arg, DType::i64, dense.bytes(DType::i64));
  hal::Stream& stream = device_.defaultStream();
  stream.copy(values.data(), dense.bytes(DType::i64), values.size() * sizeof(int64_t));
  stream.synchronize();
  return values;
}

void LaunchTarget::launch(const std::shared_ptr<Executable>& exe, std::vector<void*> args,
                          const std::vector<int64_t>& sizes, std::shared_ptr<const void> keep) {
  if (ops_.synchronous()) {
    if (!sizes.empty()) args.push_back(const_cast<int64_t*>(sizes.data()));
    exe->launch(args.data());
    return;
  }
  // The task owns what it reads: the kernel, its arguments and sizes.
  auto owned = std::make_shared<std::pair<std::vector<void*>, std::vector<int64_t>>>(std::move(args), sizes);
  if (!sizes.empty()) owned->first.push_back(owned->second.data());
  device_.defaultStream().hostCall([exe, owned, keep] { exe->launch(owned->first.data()); });
}

}  // namespace kiln::exec
