"""test_autograd.py — the backward of fco.allreduce, against the analytic gradient.

y_s = Σ_r x_r on every rank s, and the loss is global, L = Σ_s <c_s, y_s>, so
dL/dx_r = Σ_s c_s: the backward allreduces the output gradient (torch.distributed.nn's
convention). torch.autograd.gradcheck does not apply: it perturbs one rank's input and sees only
that rank's output (the local Jacobian, I), while the distributed gradient is P · I; and fco has
no float64 dtype. So the gradients are checked against Σ_s c_s computed with dist.all_reduce,
and torch.library.opcheck checks the registration (schema, fake impl, autograd) on every rank.
Run: pytest tests/python/test_autograd.py
"""
import pytest


def _coeffs(shape, dtype, seed):
    import torch
    import torch.distributed as dist

    g = torch.Generator().manual_seed(seed * 31 + dist.get_rank())
    return torch.randint(-4, 5, shape, generator=g).to(dtype)


def _w_grad(dtype_name):
    import torch
    import torch.distributed as dist

    import fco

    dtype = getattr(torch, dtype_name)
    x = torch.randn(6, 5).to(dtype).requires_grad_()
    c = _coeffs((6, 5), dtype, 1)
    y = fco.allreduce(x)
    assert y.requires_grad and y.grad_fn is not None
    (y * c).sum().backward()
    expect = c.clone()
    dist.all_reduce(expect)
    assert torch.equal(x.grad, expect), (x.grad, expect)
    return True


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_grad_is_allreduce_of_grad(pools, world, dtype):
    pools(world).run(_w_grad, dtype)


def _w_chain():
    import torch
    import torch.distributed as dist

    import fco

    # a row-parallel linear written by hand: y = allreduce(x_r @ w_r^T); w_r differs per rank
    r = dist.get_rank()
    g = torch.Generator().manual_seed(7 + r)
    x = torch.randn(3, 8, generator=g, requires_grad=True)
    w = torch.randn(4, 8, generator=g, requires_grad=True)
    y = fco.allreduce(x @ w.t())
    loss = (y ** 2).sum() / 2  # same y on every rank: dL/dy_s = y, Σ_s = P · y
    loss.backward()
    gy = y.detach() * dist.get_world_size()
    torch.testing.assert_close(x.grad, gy @ w.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w.grad, gy.t() @ x.detach(), rtol=1e-5, atol=1e-5)
    # expanded (stride-0) output gradients reach the op non-contiguous: backward copes
    x2 = torch.randn(5, requires_grad=True)
    fco.allreduce(x2).sum().backward()
    assert torch.equal(x2.grad, torch.full((5,), float(dist.get_world_size())))
    # grad of grad: the backward is the op again, so it is differentiable too
    x3 = torch.randn(4, requires_grad=True)
    y3 = fco.allreduce(x3)
    (gx,) = torch.autograd.grad(y3, x3, torch.ones(4, requires_grad=True), create_graph=True)
    assert gx.requires_grad
    return True


def test_chain_rule_and_noncontiguous_grad(pool2):
    pool2.run(_w_chain)


def _w_opcheck():
    import torch

    import fco  # noqa: F401

    g = torch.Generator().manual_seed(0)
    samples = [
        (torch.randn(8, generator=g), "", -1),
        (torch.randn(3, 4, generator=g, requires_grad=True), "", 1),
        (torch.randn(5, generator=g).bfloat16(), "", 0),
    ]
    for args in samples:
        torch.library.opcheck(torch.ops.fco.allreduce.default, args)
    torch.library.opcheck(torch.ops.fco.allreduce_.default, (torch.randn(6, generator=g), "", -1))
    return True


def test_opcheck(pool2):
    pool2.run(_w_opcheck, timeout=300)
