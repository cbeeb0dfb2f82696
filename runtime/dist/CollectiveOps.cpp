// The recorded collectives (include/kiln/dist.h): validated at the call,
// recorded as nodes of the calling thread's trace (no autograd node: their
// results carry no gradient), run by the interpreter through
// runCollective (Collectives.h).
#include "kiln/dist.h"
#include "kiln/error.h"
#include "runtime/core/OpKind.h"
#include "runtime/trace/Recorder.h"

namespace kiln::dist {

namespace {

using core::OpKind;

[[noreturn]] void fail(OpKind op, const std::string& msg) {
  throw Error("dist::" + std::string(core::opName(op)) + ": " + msg);
}

/// Common checks; returns the world size.
int checkInput(OpKind op, const Tensor& x) {
  if (!x.defined()) fail(op, "input is an undefined tensor (default-constructed); pass the result of an op");
  if (!initialized()) fail(op, "no communicator; call kiln::dist::init() first (once, at the start of main)");
  if (x.device().kind != Device::CPU && x.device().kind != Device::CUDA)
    fail(op, "the input lives on " + x.device().str() +
                 "; collectives take CPU tensors (MPI) or CUDA tensors (NCCL): move it with x.to(Device::cpu()) "
                 "first");
  if (!core::acceptsDType(op, x.dtype()))
    fail(op, "not defined for " + std::string(dtype_name(x.dtype())) + " tensors (it takes " +
                 std::string(core::opTypesDescription(op)) + ")");
  return size();
}

void checkReduceOp(OpKind op, ReduceOp r, DType t) {
  if (r != ReduceOp::sum && r != ReduceOp::mean && r != ReduceOp::max)
    fail(op, "unknown ReduceOp " + std::to_string(static_cast<int64_t>(r)) + " (sum, mean or max)");
  if (r == ReduceOp::mean && !is_floating(t))
    fail(op, "mean of " + std::string(dtype_name(t)) +
                 " tensors is not defined (it takes floating dtypes); use sum, or cast to a floating type first");
}

Tensor record(OpKind op, const Tensor& x, const Shape& shape, int64_t attr) {
  trace::NodeSpec spec{op, x.dtype(), shape};
  spec.i0 = attr;
  const Tensor* in[] = {&x};
  return trace::Recorder::current().record(spec, in);
}

}  // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op) {
  checkInput(OpKind::AllReduce, x);
  checkReduceOp(OpKind::AllReduce, op, x.dtype());
  return record(OpKind::AllReduce, x, x.shape(), static_cast<int64_t>(op));
}

Tensor broadcast(const Tensor& x, int root) {
  const int n = checkInput(OpKind::Broadcast, x);
  if (root < 0 || root >= n)
    fail(OpKind::Broadcast, "root " + std::to_string(root) + " is not a rank (0.." + std::to_string(n - 1) + ")");
  return record(OpKind::Broadcast, x, x.shape(), root);
}

Tensor all_gather(const Tensor& x) {
  const int n = checkInput(OpKind::AllGather, x);
  if (x.rank() == 0)
    fail(OpKind::AllGather, "the input is a scalar (shape []); it gathers along axis 0: reshape it to [1] first");
  Shape shape = x.shape();
  shape[0] *= n;
  return record(OpKind::AllGather, x, shape, 0);
}

Tensor reduce_scatter(const Tensor& x, ReduceOp op) {
  const int n = checkInput(OpKind::ReduceScatter, x);
  checkReduceOp(OpKind::ReduceScatter, op, x.dtype());
  if (x.rank() == 0 || x.shape()[0] % n != 0)
    fail(OpKind::ReduceScatter, "axis 0 of " + x.shape().str() + " must split into " + std::to_string(n) +
                                    " equal parts (one per rank); pad it to a multiple of " + std::to_string(n));
  Shape shape = x.shape();
  shape[0] /= n;
  return record(OpKind::ReduceScatter, x, shape, static_cast<int64_t>(op));
}

}  // namespace kiln::dist
