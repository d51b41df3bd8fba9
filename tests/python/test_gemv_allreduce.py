"""test_gemv_allreduce.py — fco.gemv_allreduce (fco::gemv_allreduce) on CPU tensors, 2 and 3
ranks over gloo + the cpu transport: forward against matmul + dist.all_reduce for every dtype
and impl, bit-identical results on every rank, shapes ([K], [M, K], [B, S, K], M > 64), the
row-parallel backward against torch's autograd of the unsharded linear, bad input, opcheck.
Run: pytest tests/python/test_gemv_allreduce.py
"""
import pytest

DTYPES = ["float32", "bfloat16", "float16"]


def _data(dtype, M, N, K, seed, bias=True, lead=None):
    import torch
    import torch.distributed as dist

    r = dist.get_rank()
    g = torch.Generator().manual_seed(seed * 101 + r)
    Kr = K + r  # K_r differs per rank
    shape = (M, Kr) if lead is None else tuple(lead) + (Kr,)
    x = torch.randn(shape, generator=g).to(dtype)
    w = (torch.randn(N, Kr, generator=g) / Kr ** 0.5).to(dtype)
    b = torch.randn(N, generator=torch.Generator().manual_seed(seed)).to(dtype) if bias else None
    return x, w, b


def _w_forward(dtype_name):
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    dtype = getattr(torch, dtype_name)
    n = 0
    for impl in ("auto", "baseline", "oneshot", "twophase", "cublas_oneshot", 0, 1, 2, 3):
        for M, N, K in ((1, 1, 1), (1, 96, 64), (5, 17, 33), (64, 40, 24)):
            for bias in (False, True):
                n += 1
                x, w, b = _data(dtype, M, N, K, n, bias)
                y = fco.gemv_allreduce(x, w, b, impl=impl)
                assert y.shape == (M, N) and y.dtype == dtype
                _refs.close(y, _refs.gemv_allreduce(x, w, b), dtype)
                assert _refs.same_on_all_ranks(y), (impl, M, N, K)
    # leading dims: [K] → [N], [B, S, K] → [B, S, N]; M > 64 with auto: matmul + fco.allreduce
    for lead, M in (((), 1), ((2, 3), 6), ((3, 30), 90)):
        x, w, b = _data(dtype, M, 24, 16, 7, True, lead)
        y = fco.gemv_allreduce(x, w, b)
        assert y.shape == tuple(lead) + (24,)
        _refs.close(y, _refs.gemv_allreduce(x, w, b), dtype, 2)
        assert _refs.same_on_all_ranks(y)
    # the plain-torch pipeline users write (f32: the same numbers up to summation order)
    x, w, b = _data(torch.float32, 8, 32, 48, 3)
    yp = x @ w.t()
    dist.all_reduce(yp)
    torch.testing.assert_close(fco.gemv_allreduce(x, w, b), yp + b, rtol=1e-5, atol=1e-5)
    # empty input: nothing to do, empty output
    assert fco.gemv_allreduce(torch.empty(0, 16, dtype=dtype), w.new_empty(4, 16).to(dtype)
                              ).shape == (0, 4)
    # outputs are the caller's: kept across calls
    keep = [fco.gemv_allreduce(*_data(dtype, 2, 8, 8, s)) for s in range(3)]
    for s, y in enumerate(keep):
        _refs.close(y, _refs.gemv_allreduce(*_data(dtype, 2, 8, 8, s)), dtype)
    # out=: a NaN-poisoned buffer written in place and returned — a fused impl, impl 0, AUTO's
    # M > 64 path and leading dims; with a gradient to record, y computed and copied into it
    for impl, lead, M in (("oneshot", None, 5), ("baseline", None, 5), ("auto", None, 90),
                          ("auto", (2, 3), 6)):
        x, w, b = _data(dtype, M, 24, 16, 11, True, lead)
        buf = torch.full(tuple(x.shape[:-1]) + (24,), float("nan"), dtype=dtype)
        y = fco.gemv_allreduce(x, w, b, impl=impl, out=buf)
        assert y.data_ptr() == buf.data_ptr() and y.shape == buf.shape
        _refs.close(buf, _refs.gemv_allreduce(x, w, b), dtype, 2)
    xg = x.clone().requires_grad_()
    buf = torch.full((2, 3, 24), float("nan"), dtype=dtype)
    y = fco.gemv_allreduce(xg, w, b, out=buf)
    assert y.data_ptr() == buf.data_ptr()
    _refs.close(buf, _refs.gemv_allreduce(x, w, b), dtype, 2)
    return True


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_2_ranks(pool2, dtype):
    pool2.run(_w_forward, dtype)


def test_forward_3_ranks(pool3):
    pool3.run(_w_forward, "bfloat16")


def _w_grad_vs_unsharded(dtype_name, bias):
    import torch
    import torch.distributed as dist

    import fco

    dtype = getattr(torch, dtype_name)
    r, P = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(5)  # the same full model and input on every rank
    M, N, K = 4, 12, 6 * P
    x_full = torch.randn(M, K, generator=g).to(dtype).requires_grad_()
    w_full = torch.randn(N, K, generator=g).to(dtype).requires_grad_()
    b_full = torch.randn(N, generator=g).to(dtype).requires_grad_() if bias else None
    c = torch.randn(M, N, generator=g).to(dtype)
    sl = slice(r * 6, (r + 1) * 6)
    x = x_full.detach()[:, sl].clone().requires_grad_()
    w = w_full.detach()[:, sl].clone().requires_grad_()
    b = b_full.detach().clone().requires_grad_() if bias else None
    # reference: the unsharded linear, replicated loss
    ref = x_full @ w_full.t() + (b_full if bias else 0)
    (torch.tanh(ref.float()) * c.float()).sum().backward()
    y = fco.gemv_allreduce(x, w, b)
    (torch.tanh(y.float()) * c.float()).sum().backward()
    tol = {torch.float32: 1e-5, torch.bfloat16: 5e-2, torch.float16: 1e-2}[dtype]
    torch.testing.assert_close(x.grad.float(), x_full.grad[:, sl].float(), rtol=tol, atol=tol)
    torch.testing.assert_close(w.grad.float(), w_full.grad[:, sl].float(), rtol=tol, atol=tol)
    if bias:
        torch.testing.assert_close(b.grad.float(), b_full.grad.float(), rtol=tol, atol=tol)
    # analytic: dx = dy·W_r, dW_r = dyᵀ·x_r, dbias = Σ_M dy (float32 only: exact formulas)
    if dtype == torch.float32:
        dy = (1 - torch.tanh(y.detach()) ** 2) * c
        torch.testing.assert_close(x.grad, dy @ w.detach(), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(w.grad, dy.t() @ x.detach(), rtol=1e-6, atol=1e-6)
        if bias:
            torch.testing.assert_close(b.grad, dy.sum(0), rtol=1e-6, atol=1e-6)
    # only what needs a gradient gets one; a 3-d input's gradient keeps its shape
    x3 = torch.randn(2, 3, 6, dtype=dtype, requires_grad=True)
    w3 = torch.randn(5, 6, dtype=dtype)
    fco.gemv_allreduce(x3, w3).sum().backward()
    assert x3.grad.shape == x3.shape and w3.grad is None
    return True


@pytest.mark.parametrize("world,dtype,bias", [
    (2, "float32", True), (2, "float32", False), (2, "bfloat16", True), (2, "float16", True),
    (3, "float32", True), (3, "float32", False)])
def test_grad_matches_unsharded_linear(pools, world, dtype, bias):
    pools(world).run(_w_grad_vs_unsharded, dtype, bias)


def _w_bad_input():
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    x, w, b = torch.ones(2, 8), torch.ones(4, 8), torch.ones(4)
    cases = [
        ((x.double(), w.double()), "x has dtype torch.float64"),
        ((x, w.bfloat16()), "w has dtype torch.bfloat16 but x has torch.float32"),
        ((x, torch.ones(4, 7)),
         r"w has shape \(4, 7\); expected \[N, K\] with K = x.shape\[-1\] = 8"),
        ((x, torch.ones(8, 4).t()), "w is not contiguous"),
        ((x, w, torch.ones(5)), r"bias has shape \(5,\); expected \[N\] = \[4\]"),
        ((x, w, b.half()), "bias has dtype torch.float16"),
        ((x, w, torch.ones(1, 4)), r"bias has shape \(1, 4\); expected \[N\] = \[4\]"),
        ((torch.ones(()), w), "x is a 0-d tensor"),
        (([1.0], w), "x is a list, not a Tensor"),
    ]
    for args, msg in cases:
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.gemv_allreduce(*args)
        assert e.value.name == "INVALID_ARGUMENT"
        if all(isinstance(a, torch.Tensor) for a in args):  # the dispatcher path too
            full = tuple(args) + (None,) * (3 - len(args))
            with pytest.raises(fco.FcoError, match=msg):
                torch.ops.fco.gemv_allreduce(*full, "", -1)
    with pytest.raises(fco.FcoError, match="impl 'bogus'"):
        fco.gemv_allreduce(x, w, impl="bogus")
    # ints past int32 (ctypes wrapped 2^32 + 1 to impl 1) and unhashable impls (a TypeError)
    for impl, msg in ((2 ** 32 + 1, "impl 4294967297 is not -1"), ([1], r"impl \[1\] is not")):
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.gemv_allreduce(x, w, impl=impl)
        assert e.value.name == "INVALID_ARGUMENT"
    # libfco's own checks, identical on every rank: M > 64 for an explicit impl, impl range
    with pytest.raises(fco.FcoError, match="M = 65 rows is more than a GEMV") as e:
        fco.gemv_allreduce(torch.ones(65, 8), w, impl="oneshot")
    assert e.value.name == "UNSUPPORTED"
    with pytest.raises(fco.FcoError, match="impl 5"):
        fco.gemv_allreduce(x, w, impl=5)
    # out= of the wrong shape or dtype: refused on every rank before anything runs; one that
    # overlaps x: libfco refuses it (the same on every rank)
    for out, msg in ((torch.empty(2, 5), r"out is torch.float32 \(2, 5\)"),
                     (torch.empty(2, 4, dtype=torch.float16), "out is torch.float16"),
                     (torch.empty(4, 2).t(), r"out is torch.float32 \(2, 4\).*contiguous: False")):
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.gemv_allreduce(x, w, out=out)
        assert e.value.name == "INVALID_ARGUMENT"
    # the same check where autograd records (the op, then a copy into out)
    with pytest.raises(fco.FcoError, match=r"out is .*\(contiguous: False\)") as e:
        fco.gemv_allreduce(x.clone().requires_grad_(), w, out=torch.empty(4, 2).t())
    assert e.value.name == "INVALID_ARGUMENT"
    xx = torch.ones(2, 4)
    with pytest.raises(fco.FcoError, match="y overlaps x") as e:
        fco.gemv_allreduce(xx, torch.ones(4, 4), out=xx)
    assert e.value.name == "INVALID_ARGUMENT"
    # the same where autograd records (the op, then a copy into out): refused before the op, the
    # input intact (the copy once went over w, which the backward then found modified)
    wbuf = torch.ones(4, 4)
    with pytest.raises(fco.FcoError, match="out overlaps w") as e:
        fco.gemv_allreduce(torch.ones(2, 4, requires_grad=True), wbuf, out=wbuf[:2])
    assert e.value.name == "INVALID_ARGUMENT" and torch.equal(wbuf, torch.ones(4, 4))
    # M > 64 under "auto" runs matmul + fco.allreduce in Python: the same overlaps refused there
    # (x, w, and bias; a view into x too), nothing written into out
    buf, ww, bb = torch.randn(72, 4), torch.randn(4, 4), torch.randn(4)
    for xin, out in ((buf[:70], buf[:70]), (buf[:70], buf[2:])):  # out is x; out shifted into x
        keep = buf.clone()
        with pytest.raises(fco.FcoError, match="out overlaps x") as e:
            fco.gemv_allreduce(xin, ww, bb, out=out)
        assert e.value.name == "INVALID_ARGUMENT" and torch.equal(buf, keep)
    wide = torch.randn(70, 6)  # out [70, 6] whose bytes hold w [6, 6] and bias [6]
    wsl, bsl = wide.view(-1)[:36].view(6, 6), wide.view(-1)[36:42]
    for args, name in (((torch.randn(70, 6), wsl, None), "w"),
                       ((torch.randn(70, 6), torch.randn(6, 6), bsl), "bias")):
        keep = wide.clone()
        with pytest.raises(fco.FcoError, match=f"out overlaps {name}") as e:
            fco.gemv_allreduce(*args, out=wide)
        assert e.value.name == "INVALID_ARGUMENT" and torch.equal(wide, keep)
    # out right before x in one buffer shares no byte with it: accepted (M > 64, "auto")
    buf = torch.randn(140, 4)
    ref = fco.gemv_allreduce(buf[70:].clone(), ww, bb)
    y = fco.gemv_allreduce(buf[70:], ww, bb, out=buf[:70])
    assert y.data_ptr() == buf.data_ptr() and torch.equal(y, ref)
    # ints below -1 are not impls (the Python-only "triton" id is taken by name only)
    with pytest.raises(fco.FcoError, match="impl -2 is not -1") as e:
        fco.gemv_allreduce(x, w, impl=-2)
    assert e.value.name == "INVALID_ARGUMENT"
    # "triton" runs on CUDA only (as fco.gemm_alltoall's): said before any communicator work
    with pytest.raises(fco.FcoError, match="impl 'triton' runs on CUDA tensors") as e:
        fco.gemv_allreduce(x, w, impl="triton")
    assert e.value.name == "UNSUPPORTED"
    # N differs across ranks: only the ranks together see it; every rank raises, naming it
    r = dist.get_rank()
    with pytest.raises(fco.FcoError, match="rank") as e:
        fco.gemv_allreduce(torch.ones(2, 8), torch.ones(4 + r, 8))
    assert e.value.name == "INVALID_ARGUMENT"
    # "auto" runs the fused GEMV up to M = 64 rows, matmul + fco.allreduce above
    fco.gemv_allreduce(torch.ones(64, 8), w)
    assert fco.last_plan().startswith("gemv_allreduce impl "), fco.last_plan()
    fco.gemv_allreduce(torch.ones(65, 8), w)
    assert fco.last_plan().startswith("allreduce impl "), fco.last_plan()
    # the communicator keeps working
    return fco.gemv_allreduce(x, w, b).tolist()


def test_bad_input(pool2):
    res = pool2.run(_w_bad_input)
    assert res == [[[17.0] * 4] * 2] * 2


def _w_k_zero_on_one_rank():
    import torch
    import torch.distributed as dist

    import fco

    # K_r = 0 on rank 1 (docs: K_r may differ per rank): that rank adds nothing, and every rank
    # joins the collective (rank 1's C call once failed on "K is 0" and rank 0 timed out)
    r = dist.get_rank()
    K = 0 if r == 1 else 3
    res = []
    for M, impl in ((2, "auto"), (2, "baseline"), (2, "oneshot"), (70, "auto")):
        g = torch.Generator().manual_seed(M)
        x0, w0, b = torch.randn(M, 3, generator=g), torch.randn(5, 3, generator=g), torch.randn(5)
        x, w = (x0, w0) if r == 0 else (torch.empty(M, 0), torch.empty(5, 0))
        y = fco.gemv_allreduce(x, w, impl=impl)
        torch.testing.assert_close(y, x0 @ w0.t())
        res.append(y.shape == (M, 5))
    # its workspace query gives the M rows' need (M was x.numel() // K: 0 on rank 1, and a
    # reserve of that was not enough), the same as with K = 8; a fresh communicator reserved
    # with it does not grow in the call
    g = dist.new_group(list(range(dist.get_world_size())))
    xk, wk = (torch.ones(40, 3), torch.ones(512, 3)) if r == 0 else \
        (torch.empty(40, 0), torch.empty(512, 0))
    need = fco.gemv_allreduce_workspace_bytes(xk, wk, group=g)
    ref = fco.gemv_allreduce_workspace_bytes(torch.ones(40, 8), torch.ones(512, 8), group=g)
    needs = [None] * dist.get_world_size()
    dist.all_gather_object(needs, need)  # every rank fails alike (no reserve left waiting)
    assert needs == [ref] * len(needs), (needs, ref)
    c = fco.init(g)
    c.reserve(need)
    before = c.workspace_bytes()
    fco.gemv_allreduce(xk, wk, group=g)
    assert c.workspace_bytes() == before, (need, before, c.workspace_bytes())
    fco.shutdown(g)
    # with autograd (the op path): rank 1's gradients are empty, rank 0's the usual ones
    x = (torch.randn(2, K) if r == 0 else torch.empty(2, 0)).requires_grad_()
    w = torch.randn(5, K, requires_grad=True)
    fco.gemv_allreduce(x, w).sum().backward()
    assert x.grad.shape == (2, K) and w.grad.shape == (5, K)
    return res


def test_k_zero_on_one_rank(pool2):
    assert pool2.run(_w_k_zero_on_one_rank) == [[True] * 4] * 2


def _w_out_requires_grad():
    import pytest
    import torch

    import fco

    # an out= that requires grad takes the op + copy_, as autograd sees it: a non-leaf gets
    # the right gradient (none flows through the overwritten values: the direct path wrote
    # into it unseen, so p.grad was all ones), a leaf is refused by torch (was written)
    for M in (2, 70):  # the fused op, and matmul + fco.allreduce
        x, w = torch.ones(M, 3), torch.ones(5, 3)
        p = torch.zeros(M, 5, requires_grad=True)
        out = p * 1
        y = fco.gemv_allreduce(x, w, out=out)
        assert y is out and torch.equal(out.detach(), torch.full((M, 5), 6.0))
        out.sum().backward()
        assert torch.equal(p.grad, torch.zeros(M, 5)), p.grad
        leaf = torch.zeros(M, 5, requires_grad=True)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            fco.gemv_allreduce(x, w, out=leaf)
        assert torch.equal(leaf.detach(), torch.zeros(M, 5))
        # an out= saved by another op for its backward: written in place, its version counter
        # bumped, so that backward raises (the direct path wrote unseen: a silently wrong grad)
        a, o = torch.ones(M, 5, requires_grad=True), torch.ones(M, 5)
        z = (a * o).sum()
        v = o._version
        fco.gemv_allreduce(x, w, out=o)
        assert o._version > v and torch.equal(o, torch.full((M, 5), 6.0))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.backward()
        # an inference tensor outside inference_mode: torch's error, as its in-place ops raise
        with torch.inference_mode():
            oi = torch.zeros(M, 5)
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
            fco.gemv_allreduce(x, w, out=oi)
        with torch.inference_mode():
            assert fco.gemv_allreduce(x, w, out=oi) is oi
        assert torch.equal(oi, torch.full((M, 5), 6.0))
    return True


def test_out_requires_grad(pool2):
    assert pool2.run(_w_out_requires_grad) == [True, True]


def _w_bias_on_one_rank():
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    # a bias on rank 0 only: the fused op (M <= 64) raises on every rank, naming both calls;
    # M > 64 under "auto" (addmm / matmul + fco.allreduce) does not detect it (documented):
    # group rank 0's bias is added (as impls 0 and 3 add rank 0's), another rank's not read
    r, P = dist.get_rank(), dist.get_world_size()
    b = torch.full((1,), 100.0) if r == 0 else None
    with pytest.raises(fco.FcoError, match="bias=1") as e:
        fco.gemv_allreduce(torch.ones(2, 3), torch.ones(1, 3), b)
    assert e.value.name == "INVALID_ARGUMENT"
    res = [fco.gemv_allreduce(torch.ones(70, 3), torch.ones(1, 3), b)[0].item()]
    b = torch.full((1,), 100.0) if r == 1 else None
    res.append(fco.gemv_allreduce(torch.ones(70, 3), torch.ones(1, 3), b)[0].item())
    # the bias is rounded once with rank 0's product (addmm), not added after the sum (bf16:
    # rounded twice, y += bias): on a group of one rank, exactly torch.addmm
    groups = [dist.new_group([q]) for q in range(P)]  # every rank creates every group
    g = torch.Generator().manual_seed(3)
    x = torch.randn(65, 4096, generator=g).bfloat16()
    w = torch.randn(256, 4096, generator=g).bfloat16()
    bias = torch.randn(256, generator=g).bfloat16()
    y = fco.gemv_allreduce(x, w, bias, group=groups[r])
    assert torch.equal(y, torch.addmm(bias, x, w.t()))
    fco.shutdown(groups[r])
    # and on the whole group: rank 0's addmm and the others' matmul, summed in fp32
    x, w = x[:, r::P].contiguous(), w[:, r::P].contiguous()
    y = fco.gemv_allreduce(x, w, bias)
    part = torch.addmm(bias, x, w.t()) if r == 0 else x @ w.t()
    parts = [torch.empty_like(part) for _ in range(P)]
    dist.all_gather(parts, part)
    assert torch.equal(y, sum(p.float() for p in parts).bfloat16())
    return res


def test_bias_on_one_rank(pool2):
    assert pool2.run(_w_bias_on_one_rank) == [[106.0, 6.0]] * 2


def _w_opcheck():
    import torch

    import fco  # noqa: F401

    g = torch.Generator().manual_seed(0)
    samples = [
        (torch.randn(3, 8, generator=g), torch.randn(5, 8, generator=g), None, "", -1),
        (torch.randn(2, 8, generator=g, requires_grad=True),
         torch.randn(5, 8, generator=g, requires_grad=True),
         torch.randn(5, generator=g, requires_grad=True), "", 1),
        (torch.randn(4, 8, generator=g).bfloat16(), torch.randn(3, 8, generator=g).bfloat16(),
         torch.randn(3, generator=g).bfloat16(), "", 0),
    ]
    for args in samples:
        torch.library.opcheck(torch.ops.fco.gemv_allreduce.default, args)
    return True


def test_opcheck(pool2):
    pool2.run(_w_opcheck, timeout=300)
