"""test_allreduce.py — fco.allreduce on CPU tensors (gloo + the cpu transport, 2 and 3 ranks)
against torch.distributed's own all_reduce and against the exact reference.

fco sums in fp32 in rank order 0..P-1 and rounds once to the dtype, so the exact reference is
all_gather → fp32 sum in rank order → cast; fco must match it bit for bit, and match gloo's
dist.all_reduce exactly on integer-valued inputs, within rounding on random ones.
Run: pytest tests/python/test_allreduce.py
"""
import pytest

DTYPES = ["float32", "float16", "bfloat16"]
SHAPES = [(1,), (7,), (1000,), (3, 5, 17), (4097,)]


def _input(shape, dtype, seed, integer):
    import torch
    import torch.distributed as dist

    g = torch.Generator().manual_seed(seed * 1009 + dist.get_rank())
    if integer:  # exact in every dtype and every summation order
        return torch.randint(-8, 9, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def _exact(x):
    import torch
    import torch.distributed as dist

    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    acc = torch.zeros(x.shape, dtype=torch.float32)
    for p in parts:
        acc += p.float()
    return acc.to(x.dtype)


def _w_vs_torch(dtype_name, impl, integer):
    import torch
    import torch.distributed as dist

    import fco

    dtype = getattr(torch, dtype_name)
    for i, shape in enumerate(SHAPES):
        x = _input(shape, dtype, i, integer)
        x0 = x.clone()
        y = fco.allreduce(x, impl=impl)
        assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device
        assert y.data_ptr() != x.data_ptr()
        assert torch.equal(x, x0), "the input was modified"
        ref = x.clone()
        dist.all_reduce(ref)
        exact = _exact(x)
        assert torch.equal(y, exact), f"{shape}: differs from the fp32 rank-order sum"
        if integer:
            assert torch.equal(y, ref), f"{shape}: differs from dist.all_reduce"
        else:
            tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
            torch.testing.assert_close(y.float(), ref.float(), rtol=tol, atol=tol * 4)
    return True


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("impl", ["auto", "baseline", "oneshot", 1])
def test_integer_valued_exact(pools, world, dtype, impl):
    pools(world).run(_w_vs_torch, dtype, impl, True)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
def test_random_values(pools, world, dtype):
    pools(world).run(_w_vs_torch, dtype, "auto", False)


def _w_bit_identical_across_ranks():
    import torch
    import torch.distributed as dist

    import fco

    x = _input((513,), torch.bfloat16, 5, False)
    y = fco.allreduce(x)
    parts = [torch.empty_like(y) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, y)
    return all(torch.equal(p, y) for p in parts)


def test_bit_identical_across_ranks(pool3):
    assert all(pool3.run(_w_bit_identical_across_ranks))


def _w_inplace(dtype_name):
    import torch

    import fco

    x = _input((33, 3), getattr(torch, dtype_name), 9, False)
    exact = _exact(x)
    ptr = x.data_ptr()
    r = fco.allreduce_(x)
    assert r is x and x.data_ptr() == ptr
    assert torch.equal(x, exact)
    z = _input((10,), torch.float32, 10, True)
    exact = _exact(z)
    torch.ops.fco.allreduce_(z, "", -1)  # the registered op itself
    assert torch.equal(z, exact)
    return True


@pytest.mark.parametrize("dtype", DTYPES)
def test_inplace(pool2, dtype):
    pool2.run(_w_inplace, dtype)


def _w_inplace_refuses_grad(direct):
    import pytest
    import torch

    import fco
    from fco.ops import _common

    # allreduce_ has no autograd: on a tensor that requires grad (grad mode on) it raised
    # nothing, and backward gave half the right gradient (y = 2x; allreduce_(y): x.grad was 2,
    # fco.allreduce gives P·2) or a leaf was silently modified. Both wrapper paths refuse it.
    was, _common._DIRECT = _common._DIRECT, direct
    try:
        x = torch.ones(4, requires_grad=True)
        y = x * 2
        leaf = torch.ones(3, requires_grad=True)
        for t in (y, leaf):
            with pytest.raises(fco.FcoError, match="use y = fco.allreduce") as e:
                fco.allreduce_(t)
            assert e.value.name == "INVALID_USAGE"
        assert torch.equal(y.detach(), torch.full((4,), 2.0))
        assert torch.equal(leaf.detach(), torch.ones(3))
        with torch.no_grad():  # no gradient recorded: allowed (e.g. an optimizer step)
            assert fco.allreduce_(leaf) is leaf
        # t's version counter is bumped on both paths, so a backward that saved t raises (the
        # direct path wrote unseen: the backward read the sum, silently wrong gradients)
        a = torch.ones(4, requires_grad=True)
        t = torch.full((4,), 2.0)
        z = (a * t).sum()
        v = t._version
        with torch.no_grad():
            fco.allreduce_(t)
        assert t._version > v
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()
        # an inference tensor outside inference_mode: refused as torch refuses in-place updates
        # to it (was written); inside inference_mode allowed
        with torch.inference_mode():
            ti = torch.ones(3)
        with pytest.raises(fco.FcoError, match="inference tensor") as e:
            fco.allreduce_(ti)
        assert e.value.name == "INVALID_USAGE" and torch.equal(ti, torch.ones(3))
        with torch.inference_mode():
            assert fco.allreduce_(ti) is ti
        assert torch.equal(ti, torch.full((3,), 2.0))
        return leaf.tolist()
    finally:
        _common._DIRECT = was


@pytest.mark.parametrize("direct", [True, False])
def test_inplace_refuses_grad(pool2, direct):
    assert pool2.run(_w_inplace_refuses_grad, direct) == [[2.0] * 3] * 2


def _w_repeated():
    import torch

    import fco

    kept = []
    for i in range(60):  # sizes and impls change every call; the workspace grows on the way
        n = [1, 100, 5000, 3, 70000][i % 5]
        dtype = [torch.float32, torch.bfloat16, torch.float16][i % 3]
        x = _input((n,), dtype, 100 + i, True)
        y = fco.allreduce(x, impl=["auto", "oneshot", "baseline"][i % 3])
        kept.append((y, _exact(x)))
    # outputs are the caller's: still intact after every later call
    for y, exact in kept:
        assert torch.equal(y, exact)
    return True


def test_repeated_calls_and_kept_outputs(pool2):
    pool2.run(_w_repeated)


def _w_dispatcher_and_direct_agree():
    import torch

    import fco
    from fco.ops import _common

    x = _input((777,), torch.float32, 3, False)
    assert _common.direct_ok(x) == _common._DIRECT  # a plain tensor: direct unless turned off
    a = fco.allreduce(x)
    b = torch.ops.fco.allreduce(x, "", -1)  # through the dispatcher
    c = torch.ops.fco.allreduce.default(x, "", 1)
    return torch.equal(a, b) and torch.equal(a, c)


def test_dispatcher_and_direct_agree(pool2):
    assert all(pool2.run(_w_dispatcher_and_direct_agree))


def _w_empty():
    import torch

    import fco

    x = torch.empty(0, 4)
    y = fco.allreduce(x)
    fco.allreduce_(x)
    return tuple(y.shape)


def test_empty_tensor(pool2):
    assert pool2.run(_w_empty) == [(0, 4), (0, 4)]


def _w_subgroup():
    import torch
    import torch.distributed as dist

    import fco

    # every rank creates every group (torch's rule); only members use theirs
    g01 = dist.new_group([0, 1])
    g12 = dist.new_group([1, 2])
    r = dist.get_rank()
    x = torch.full((16,), float(r + 1))
    out = {}
    if r in (0, 1):
        out["g01"] = fco.allreduce(x, group=g01)[0].item()
    if r in (1, 2):
        out["g12"] = fco.allreduce(x, group=g12)[0].item()
    out["world"] = fco.allreduce(x)[0].item()
    return out


def test_subgroups(pool3):
    res = pool3.run(_w_subgroup)
    assert res[0] == {"g01": 3.0, "world": 6.0}
    assert res[1] == {"g01": 3.0, "g12": 5.0, "world": 6.0}
    assert res[2] == {"g12": 5.0, "world": 6.0}
