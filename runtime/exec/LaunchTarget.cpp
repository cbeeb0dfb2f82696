#include "runtime/exec/LaunchTarget.h"

#include <utility>

#include "runtime/interp/Kernels.h"

namespace kiln::exec {

LaunchTarget::LaunchTarget(Device device)
    : device_(hal::deviceContext(device)), ops_(device_.ops()), allocator_(device_.allocator()) {
  const std::optional<CompileTarget> target = device_.compileTarget();
  hostCode_ = target && target->kind == CompileTarget::Kind::HostCpu;
}

core::View LaunchTarget::alloc(DType t, const Shape& shape) { return interp::allocDense(allocator_, t, shape); }

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

void* LaunchTarget::constant(DType t, double f, int64_t i, uint64_t* hostSlot, std::vector<core::View>& keep) {
  if (hostCode_) {
    interp::fullKernel(t, 1, f, i, reinterpret_cast<char*>(hostSlot));
    return hostSlot;
  }
  keep.push_back(alloc(t, Shape{}));
  char* out = keep.back().bytes(t);
  ops_.full(t, 1, f, i, out);
  return out;
}

std::vector<int64_t> LaunchTarget::readIndices(const core::View& v, DType t, const Shape& shape) {
  return interp::readIndices(device_, interp::argOf(v, t, shape));
}

void LaunchTarget::launch(const std::shared_ptr<Executable>& exe, std::vector<void*> args,
                          const std::vector<int64_t>& sizes, std::shared_ptr<const void> keep) {
  if (!hostCode_) {
    // GPU code: the launches go onto the device's stream now, with the
    // argument values copied into them.
    if (!sizes.empty()) args.push_back(const_cast<int64_t*>(sizes.data()));
    exe->launch(args.data());
    return;
  }
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
