// dist::DataParallel: parameters from rank 0 at the start, gradients
// averaged over the ranks in buckets, all recorded into the step's trace.
#include <cstring>

#include "kiln/autograd.h"
#include "kiln/dist.h"
#include "kiln/error.h"
#include "kiln/ops.h"
#include "kiln/runtime.h"

namespace kiln::dist {

DataParallel::DataParallel(std::vector<Tensor*> params, DataParallelOptions options)
    : params_(std::move(params)), options_(options) {
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor* p = params_[i];
    if (!p || !p->defined())
      throw Error("dist::DataParallel: parameter " + std::to_string(i) + " is null or undefined");
    if (!is_floating(p->dtype()))
      throw Error("dist::DataParallel: parameter " + std::to_string(i) + " is " + std::string(dtype_name(p->dtype())) +
                  "; parameters must be floating tensors");
  }
  // Every rank starts from rank 0's values (one trace of broadcasts).
  std::vector<Tensor> fromRoot;
  fromRoot.reserve(params_.size());
  for (Tensor* p : params_) fromRoot.push_back(broadcast(*p, 0));
  sync();
  for (size_t i = 0; i < params_.size(); ++i) {
    const bool grad = params_[i]->requires_grad_enabled();
    *params_[i] = fromRoot[i];
    if (grad) params_[i]->requires_grad();
  }
}

std::vector<Tensor> DataParallel::gradients(const Tensor& loss) {
  std::vector<Tensor> wrt;
  wrt.reserve(params_.size());
  for (Tensor* p : params_) wrt.push_back(*p);
  if (size() == 1) return grad(loss, wrt);
  // Buckets fill in the order backward produces the gradients (the last
  // layers' first), one dtype each, about bucket_bytes each. A full bucket's
  // all_reduce is recorded at once, between the backward ops still to come:
  // the interpreter starts it on the communication thread and goes on with
  // the rest of backward, which does not read it.
  buckets_.clear();
  std::vector<Tensor> averaged(wrt.size()), ready(wrt.size());
  std::vector<size_t> open;
  size_t openBytes = 0;
  auto reduceBucket = [&] {
    if (open.empty()) return;
    std::vector<Tensor> flat;
    flat.reserve(open.size());
    for (size_t k : open) flat.push_back(reshape(ready[k], {ready[k].numel()}));
    Tensor reduced = all_reduce(flat.size() == 1 ? flat[0] : concat(flat, 0), ReduceOp::mean);
    int64_t offset = 0;
    for (size_t k : open) {
      const int64_t n = ready[k].numel();
      averaged[k] = reshape(slice(reduced, 0, offset, offset + n), ready[k].shape());
      offset += n;
    }
    buckets_.push_back(std::move(open));
    open.clear();
    openBytes = 0;
  };
  grad(loss, wrt, [&](size_t k, const Tensor& g) {
    const size_t bytes = static_cast<size_t>(g.numel()) * dtype_size(g.dtype());
    if (!open.empty() && ready[open.front()].dtype() != g.dtype()) reduceBucket();
    ready[k] = g;
    open.push_back(k);
    openBytes += bytes;
    if (openBytes >= options_.bucket_bytes) reduceBucket();
  });
  NoGradGuard noGrad;
  reduceBucket();
  return averaged;
}

bool DataParallel::parameters_identical() const {
  int32_t differs = 0;
  for (Tensor* p : params_) {
    Tensor mine = reshape(*p, {p->numel()});
    Tensor root = broadcast(mine, 0);
    // Compared on the host, bytewise (a device tensor is copied over).
    Tensor mineHost = mine.to(Device::cpu()), rootHost = root.to(Device::cpu());
    const size_t bytes = static_cast<size_t>(p->numel()) * dtype_size(p->dtype());
    if (bytes && std::memcmp(mineHost.data(), rootHost.data(), bytes) != 0) differs = 1;
  }
  Tensor any = all_reduce(from_vector<int32_t>({differs}, {1}), ReduceOp::max);
  return any.item<int32_t>() == 0;
}

}  // namespace kiln::dist
