"""Kiln ops as PyTorch custom ops (torch.library), for one fused Kiln
computation inside an otherwise eager model.

``torch.ops.kiln.mlp(x, w1, b1, w2, b2)`` computes
``relu(x @ w1.T + b1) @ w2.T + b2`` (nn.Linear weights) as one Kiln trace;
its backward, ``torch.ops.kiln.mlp_backward``, recomputes the forward in Kiln
and takes the gradients with Kiln's autograd (another trace), so both
directions tier up to compiled kernels. A fake (meta) kernel gives shapes to torch.compile and FakeTensor
tracing. Tensors cross through DLPack without copies.

Import this module (``import kiln.torch_ops``) to register the ops.
"""
import torch

import kiln
from kiln.torch_backend import to_kiln, to_torch


def _mlp_kiln(x, w1, b1, w2, b2):
    h = kiln.relu(kiln.add(kiln.matmul(x, kiln.transpose(w1)), b1))
    return kiln.add(kiln.matmul(h, kiln.transpose(w2)), b2)


@torch.library.custom_op("kiln::mlp", mutates_args=())
def mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """relu(x @ w1.T + b1) @ w2.T + b2 on Kiln (one trace)."""
    y = _mlp_kiln(*(to_kiln(t) for t in (x, w1, b1, w2, b2)))
    kiln.step()
    return to_torch(y)


@mlp.register_fake
def _mlp_fake(x, w1, b1, w2, b2):
    torch._check(x.shape[-1] == w1.shape[1], lambda: "kiln::mlp: x and w1 do not match")
    torch._check(w1.shape[0] == w2.shape[1], lambda: "kiln::mlp: w1 and w2 do not match")
    return x.new_empty((*x.shape[:-1], w2.shape[0]))


@torch.library.custom_op("kiln::mlp_backward", mutates_args=())
def mlp_backward(grad: torch.Tensor, x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                 b2: torch.Tensor) -> list[torch.Tensor]:
    """The gradients of kiln::mlp with respect to (x, w1, b1, w2, b2), given
    the output's gradient: the forward recomputed and differentiated on Kiln."""
    inputs = [to_kiln(t).detach() for t in (x, w1, b1, w2, b2)]
    for t in inputs:
        t.requires_grad_()
    y = _mlp_kiln(*inputs)
    grads = kiln.grad(y, inputs, grad_output=to_kiln(grad))
    kiln.step()
    return [to_torch(g) for g in grads]


@mlp_backward.register_fake
def _mlp_backward_fake(grad, x, w1, b1, w2, b2):
    return [torch.empty_like(t) for t in (x, w1, b1, w2, b2)]


def _mlp_setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _mlp_backward(ctx, grad):
    return tuple(mlp_backward(grad, *ctx.saved_tensors))


mlp.register_autograd(_mlp_backward, setup_context=_mlp_setup_context)
