"""test_gemm_alltoall.py — fco.gemm_alltoall (fco::gemm_alltoall) on CPU tensors, 2 and 3 ranks
over gloo + the cpu transport: forward against per-expert matmul + permute + all_to_all_single
for every dtype, impl and weight layout, random routing (zero counts, experts per rank that
differ, capacity padding), with and without the host hints; the backward against torch's
autograd of that pipeline; bad input; opcheck. Run: pytest tests/python/test_gemm_alltoall.py
"""
import pytest

DTYPES = ["float32", "bfloat16", "float16"]


def _data(dtype, E, K, N, seed, layout="kn", cap=None, max_count=4):
    """This rank's activations (capacity rows, the same on every rank), weights and counts."""
    import torch
    import torch.distributed as dist

    r, P = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(seed * 977 + r)
    counts = torch.randint(0, max_count + 1, (E, P), generator=g, dtype=torch.int32)
    cap = cap or E * P * max_count
    a = torch.randn(cap, K, generator=g).to(dtype)
    shape = (E, K, N) if layout == "kn" else (E, N, K)
    w = (torch.randn(shape, generator=g) / K ** 0.5).to(dtype)
    return a, w, counts


def _w_forward(dtype_name):
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    dtype = getattr(torch, dtype_name)
    r = dist.get_rank()
    n = 0
    for impl in ("auto", "baseline", "tiles", "chunks"):
        for layout in ("kn", "nk"):
            for hints in (False, True):
                n += 1
                E = 1 + (n + r) % 3  # experts per rank differ
                a, w, counts = _data(dtype, E, 8 + n % 3, 5 + n % 4, n, layout, cap=40)
                kw = {}
                if hints:
                    kw = {"counts_host": counts.tolist(), "recv_rows": _refs.recv_rows(counts)}
                out = fco.gemm_alltoall(a, w, counts, out_rows=48, w_layout=layout, impl=impl,
                                        **kw)
                assert out.shape == (48, w.shape[2 if layout == "kn" else 1])
                ref = _refs.gemm_alltoall(a, w, counts, 48, layout)
                _refs.close(out, ref, dtype)
    # out_rows (the same on every rank) exactly filled on one rank; every count zero (nothing
    # moves, the output is all zero)
    a, w, counts = _data(dtype, 2, 16, 8, 77)
    t = _refs.recv_rows(counts).sum()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    total = int(t)
    out = fco.gemm_alltoall(a, w, counts, out_rows=total)
    ref = _refs.gemm_alltoall(a, w, counts, total)
    _refs.close(out, ref, dtype)
    # the same into a NaN-poisoned out= with the host hints: the rows past this rank's received
    # total are zeroed by the wrapper (none on the rank that receives the most); out_rows past
    # the largest total by 0, 1, 2 rows: that rank's tail is exactly as long (a one-row tail
    # was once left unzeroed, unseen)
    mine = int(_refs.recv_rows(counts).sum())
    for tail in (0, 1, 2):
        rows = total + tail
        poisoned = torch.full((rows, w.shape[2]), float("nan"), dtype=dtype)
        got = fco.gemm_alltoall(a, w, counts, out_rows=rows, out=poisoned,
                                counts_host=counts.tolist(), recv_rows=_refs.recv_rows(counts))
        assert got.data_ptr() == poisoned.data_ptr()
        assert torch.equal(got[mine:], torch.zeros_like(got[mine:])), (tail, got[mine:])
        _refs.close(got, _refs.gemm_alltoall(a, w, counts, rows), dtype)
    zero = fco.gemm_alltoall(a, w, torch.zeros_like(counts), out_rows=8)
    assert torch.equal(zero, torch.zeros_like(zero))
    return True


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_2_ranks(pool2, dtype):
    pool2.run(_w_forward, dtype)


def test_forward_3_ranks(pool3):
    pool3.run(_w_forward, "float32")


def _w_backward(dtype_name, layout, hints):
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    dtype = getattr(torch, dtype_name)
    r = dist.get_rank()
    tol = _refs.GRAD_TOL[dtype]
    for seed in range(3):
        E = 1 + (seed + r) % 3
        a0, w0, counts = _data(dtype, E, 12, 10, 50 + seed, layout, cap=36)
        kw = {"counts_host": counts, "recv_rows": _refs.recv_rows(counts)} if hints else {}
        c = torch.randn(40, 10, generator=torch.Generator().manual_seed(seed + 9 * r))
        grads = []
        for fco_path in (True, False):
            a, w = a0.clone().requires_grad_(), w0.clone().requires_grad_()
            if fco_path:
                out = fco.gemm_alltoall(a, w, counts, out_rows=40, w_layout=layout, **kw)
            else:
                out = _refs.gemm_alltoall(a, w, counts, 40, layout)
            (out.float() * c).sum().backward()
            grads.append((a.grad, w.grad))
        (ga, gw), (ra, rw) = grads
        used = int(counts.sum())
        ra = ra if ra is not None else torch.zeros_like(a0)
        torch.testing.assert_close(ga.float(), ra.float(), rtol=tol, atol=tol)
        assert torch.equal(ga[used:], torch.zeros_like(ga[used:]))  # capacity rows
        torch.testing.assert_close(gw.float(), rw.float(), rtol=tol, atol=tol)
    # only w needs a gradient
    a, w, counts = _data(torch.float32, 2, 6, 4, 5)
    w.requires_grad_()
    fco.gemm_alltoall(a, w, counts).sum().backward()
    assert w.grad is not None and a.grad is None
    return True


@pytest.mark.parametrize("layout,hints", [("kn", False), ("nk", True), ("kn", True)])
def test_backward_2_ranks(pool2, layout, hints):
    pool2.run(_w_backward, "float32", layout, hints)


def test_backward_3_ranks(pool3):
    pool3.run(_w_backward, "float32", "nk", False)


def test_backward_bfloat16(pool2):
    pool2.run(_w_backward, "bfloat16", "kn", False)


def _w_bad_input():
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    r = dist.get_rank()
    a, w, counts = _data(torch.float32, 2, 8, 4, 1, cap=20)
    cases = [
        ((a.half(), w, counts), {}, "w has dtype torch.float32 but a has torch.float16"),
        ((a, w[:, :7].contiguous(), counts), {},
         r"w has shape \(2, 7, 4\); expected \[E, K, N\] with K"),
        ((a, w, counts), {"w_layout": "nk"}, r"expected \[E, N, K\]"),
        ((a, w, counts), {"w_layout": "tn"}, "w_layout 'tn' is not 'kn' or 'nk'"),
        ((a, w[:0], counts[:0]), {}, r"w has 0 experts; expected 1\.\.256"),
        ((a, w, counts.long()), {}, "counts is torch.int64"),
        ((a, w, counts[:1]), {}, r"expected torch.int32 \[E, P\] = \[2, 2\]"),
        ((a, w, counts.float()), {}, "counts has dtype torch.float32"),
        ((a, w, counts), {"counts_host": [[1, 2]]}, "counts_host is torch.int32 \\(1, 2\\)"),
        ((a, w, counts), {"recv_rows": [1, 2, 3]}, "recv_rows is torch.int32 \\(3,\\)"),
        ((a, w, counts), {"recv_rows": [1, None]}, "recv_rows is not a list of ints"),
        ((a, w, counts), {"counts_host": [[1, "2"], [0, 1]]}, "counts_host is not a list of ints"),
        ((a.reshape(-1), w, counts), {}, r"a has shape \(\d+,\); expected \[a_rows, K\]"),
        # (session 50's test_fuzz_args: IndexError / TypeError before)
        ((a[0, 0], w, counts), {}, r"a has shape \(\); expected \[a_rows, K\]"),
        ((a, w, counts), {"counts_host": 3}, "counts_host 3 is not a list of ints"),
        ((a, w, counts), {"recv_rows": 2.0}, "recv_rows 2.0 is not a list of ints"),
        ((a, w, counts), {"counts_host": counts.to("meta")},
         r"counts_host is torch.int32 \(2, 2\) on meta; expected a contiguous CPU"),
        ((a, w, counts), {"out_rows": -1}, "out_rows -1 is negative"),
        # libfco's limit, before new_zeros tried to allocate it (a torch RuntimeError/TypeError)
        ((a, w, counts), {"out_rows": 2 ** 62},
         r"out_rows 4611686018427387904 is more than 2\^31-1"),
        ((a, w, counts), {"out_rows": 2 ** 64}, r"out_rows 18446744073709551616 is more than"),
        ((a.clone().requires_grad_(), w, counts), {"out_rows": 2 ** 64}, "is more than 2"),
        ((a, w, counts), {"w_layout": ["kn"]}, r"w_layout \['kn'\] is not"),  # a TypeError
        ((a, w, counts), {"impl": 2 ** 32 + 2}, "impl 4294967298 is not -1"),  # ran impl 2
        ((a[:, :3].contiguous().t(), w, counts), {}, "a is not contiguous"),
        ((a, w, counts), {"impl": "bogus"}, "impl 'bogus'"),
        # K or N of 0: refused by Python, so the fake kernel refuses it too (libfco did)
        ((a[:, :0].contiguous(), w[:, :0].contiguous(), counts), {}, "K = 0, N = 4: both"),
        ((a, w[:, :, :0].contiguous(), counts), {}, "K = 8, N = 0: both must be at least 1"),
    ]
    for args, kw, msg in cases:
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.gemm_alltoall(*args, **kw)
        assert e.value.name == "INVALID_ARGUMENT", e.value
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True):
        with pytest.raises(fco.FcoError, match="K = 8, N = 0: both must be at least 1"):
            torch.ops.fco.gemm_alltoall(a, w[:, :, :0].contiguous(), counts, None, None,
                                        a.shape[0], 0, "", -1)
    # the workspace query checks its arguments as the op does (KeyError, IndexError,
    # AttributeError, a ctypes error, or a number for mismatched K / dtypes before)
    for args, kw, msg in (((a, w), {"w_layout": "tn"}, "w_layout 'tn' is not 'kn' or 'nk'"),
                          ((a, w[0]), {}, r"w has shape \(8, 4\); expected \[E, K, N\]"),
                          ((a, [1]), {}, "w is a list, not a Tensor"),
                          ((a, w), {"out_rows": 2.5}, "out_rows 2.5 is not an int"),
                          ((a, w), {"out_rows": 2 ** 62}, "is more than 2"),
                          ((a, w[:, :7].contiguous()), {}, r"w has shape \(2, 7, 4\)"),
                          ((a, w.half()), {}, "w has dtype torch.float16 but a has")):
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.gemm_alltoall_workspace_bytes(*args, **kw)
        assert e.value.name == "INVALID_ARGUMENT", e.value
    assert fco.gemm_alltoall_workspace_bytes(a, w) == \
        fco.gemm_alltoall_workspace_bytes(a, w, out_rows=a.shape[0])
    # negative counts on one rank: every rank raises, nothing is written
    bad = counts.clone()
    if r == 0:
        bad[0, 1] = -3
    with pytest.raises(fco.FcoError, match="rank 0's counts are invalid"):
        fco.gemm_alltoall(a, w, bad)
    # recv_rows with a negative entry, or over out_rows (every rank alike): refused, and the
    # caller's out keeps its values (it once came back zeroed: a negative total cut the tail)
    out = torch.full((20, 4), 7.0)
    for rr, msg in (([-7, 1], "recv_rows_host\\[0\\] = -7 is negative"),
                    # -1, the edge (the cpu backend's own "no hint"): a check of < -1 took it
                    ([-1, 1], "recv_rows_host\\[0\\] = -1 is negative"),
                    ([15, 6], "more than out_rows 20")):
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.gemm_alltoall(a, w, counts, recv_rows=rr, out=out)
        assert e.value.name == "INVALID_ARGUMENT" and bool((out == 7.0).all())
    # "triton" runs on CUDA only
    with pytest.raises(fco.FcoError, match="impl 'triton' runs on CUDA tensors") as e:
        fco.gemm_alltoall(a, w, counts, impl="triton")
    assert e.value.name == "UNSUPPORTED"
    # ints below -1 are not impls (the Python-only "triton" is taken by name only)
    with pytest.raises(fco.FcoError, match="impl -2 is not -1") as e:
        fco.gemm_alltoall(a, w, counts, impl=-2)
    assert e.value.name == "INVALID_ARGUMENT"
    # a rank would receive more rows than out_rows
    with pytest.raises(fco.FcoError, match="more than out_rows 1"):
        fco.gemm_alltoall(a, w, torch.full_like(counts, 2), out_rows=1)
    # capacities that differ across ranks: libfco names the ranks
    with pytest.raises(fco.FcoError, match="rank") as e:
        fco.gemm_alltoall(a[:20 - r], w, counts)
    assert e.value.name == "INVALID_ARGUMENT"
    return fco.gemm_alltoall(a, w, torch.zeros_like(counts), out_rows=3).tolist()


def test_bad_input(pool2):
    assert pool2.run(_w_bad_input) == [[[0.0] * 4] * 3] * 2


def _w_bad_out_and_hints():
    import numpy as np
    import pytest
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    P = dist.get_world_size()
    K = N = 4
    counts = torch.ones(1, P, dtype=torch.int32)  # one row from every rank
    # out= overlapping a, w or counts, without recv_rows: refused before out's zero-fill, so
    # the caller's tensors keep their values (out=a once zeroed a, then libfco refused it; an
    # out over w was not refused at all: an all-zero result)
    a = torch.arange(1.0, P * K + 1).view(P, K)
    keep_a = a.clone()
    with pytest.raises(fco.FcoError, match="out overlaps a") as e:
        fco.gemm_alltoall(a, torch.eye(K).view(1, K, N), counts, out=a)
    assert e.value.name == "INVALID_ARGUMENT" and torch.equal(a, keep_a)
    wbuf = torch.eye(K).repeat(P, 1)  # [P·K, N]: its first K rows are the weight
    w = wbuf[:K].view(1, K, N)
    keep_w = wbuf.clone()
    with pytest.raises(fco.FcoError, match="out overlaps w") as e:
        fco.gemm_alltoall(torch.ones(P, K), w, counts, out_rows=P * K, out=wbuf)
    assert e.value.name == "INVALID_ARGUMENT" and torch.equal(wbuf, keep_w)
    # the same where autograd records (the op, then a copy into out): refused before the op
    with pytest.raises(fco.FcoError, match="out overlaps w") as e:
        fco.gemm_alltoall(torch.ones(P, K, requires_grad=True), w, counts, out_rows=P * K,
                          out=wbuf)
    assert e.value.name == "INVALID_ARGUMENT" and torch.equal(wbuf, keep_w)
    cbuf = torch.zeros(P, N)  # counts [1, P] int32 in the bytes of out
    cnt = cbuf.view(-1).view(torch.int32)[:P].view(1, P)
    cnt.fill_(1)
    keep_c = cbuf.clone()
    with pytest.raises(fco.FcoError, match="out overlaps counts") as e:
        fco.gemm_alltoall(torch.ones(P, K), torch.eye(K).view(1, K, N), cnt, out=cbuf)
    assert e.value.name == "INVALID_ARGUMENT" and torch.equal(cbuf, keep_c)
    # host hints and out_rows that are not ints: refused, never truncated (2.7 was taken as 2)
    a, w = torch.ones(P, K), torch.ones(1, K, N)
    for kw, msg in (({"counts_host": [[2.7] * P]}, r"counts_host \[\[2.7"),
                    ({"counts_host": [1.0] * P}, r"counts_host \[1.0"),
                    ({"recv_rows": [2.5] + [1] * (P - 1)}, r"recv_rows \[2.5"),
                    ({"out_rows": 4.0}, "out_rows 4.0 is not an int"),
                    ({"out_rows": "4"}, "out_rows '4' is not an int"),
                    # int64 tensors: values outside int32 refused as in a list (were wrapped)
                    ({"recv_rows": torch.tensor([2 ** 32 + 1] + [0] * (P - 1))},
                     "recv_rows holds 4294967297, outside int32"),
                    ({"counts_host": torch.tensor([[-2 ** 32 + 1] * P])},
                     "counts_host holds -4294967295, outside int32")):
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.gemm_alltoall(a, w, counts, **kw)
        assert e.value.name == "INVALID_ARGUMENT", e.value
    # ints of other types still work: a 0-d integer tensor, tuples, an int64 tensor
    ref = fco.gemm_alltoall(a, w, counts, out_rows=P)
    got = fco.gemm_alltoall(a, w, counts, out_rows=torch.tensor(P), counts_host=((1,) * P,),
                            recv_rows=_refs.recv_rows(counts).long())
    flat = fco.gemm_alltoall(a, w, counts, out_rows=P, counts_host=[1] * P)  # flat, e-major
    same = torch.equal(ref, got) and torch.equal(ref, flat)
    # every integer CPU dtype the docstring names (int8 and uint16 / uint32 were refused), a
    # uint32 value past int32 refused as an int64's; numpy ints and a 0-d tensor as impl
    for dt in (torch.int8, torch.int16, torch.int64, torch.uint8, torch.uint16, torch.uint32):
        hint = torch.ones(1, P, dtype=dt)
        same = same and torch.equal(ref, fco.gemm_alltoall(a, w, counts, out_rows=P,
                                                           counts_host=hint))
    with pytest.raises(fco.FcoError, match="counts_host holds 4294967295, outside int32"):
        fco.gemm_alltoall(a, w, counts, counts_host=torch.full((1, P), 2 ** 32 - 1,
                                                               dtype=torch.uint32))
    for impl in (np.int64(0), np.int32(1), torch.tensor(2)):
        same = same and torch.equal(ref, fco.gemm_alltoall(a, w, counts, out_rows=P, impl=impl))
    return same


def test_bad_out_and_hints(pool2):
    assert pool2.run(_w_bad_out_and_hints) == [True, True]


def _w_out_requires_grad():
    import pytest
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    P = dist.get_world_size()
    a, w, counts = torch.ones(P, 3), torch.ones(1, 3, 5), torch.ones(1, P, dtype=torch.int32)
    hints = {"counts_host": counts.tolist(), "recv_rows": _refs.recv_rows(counts)}
    # an out= that requires grad takes the op + copy_, as autograd sees it: a non-leaf gets
    # the right gradient (none flows through the overwritten values; the direct path wrote
    # into it unseen, so p.grad was all ones), a leaf is refused by torch (was written)
    p = torch.zeros(P, 5, requires_grad=True)
    out = p * 1
    y = fco.gemm_alltoall(a, w, counts, out=out, **hints)
    assert y is out and torch.equal(out.detach(), torch.full((P, 5), 3.0))
    out.sum().backward()
    assert torch.equal(p.grad, torch.zeros(P, 5)), p.grad
    leaf = torch.zeros(P, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fco.gemm_alltoall(a, w, counts, out=leaf, **hints)
    assert torch.equal(leaf.detach(), torch.zeros(P, 5))
    # an out= saved by another op for its backward: its version counter bumped by the direct
    # path's write (it wrote unseen: a silently wrong gradient), so that backward raises
    q, o = torch.ones(P, 5, requires_grad=True), torch.ones(P, 5)
    z = (q * o).sum()
    v = o._version
    fco.gemm_alltoall(a, w, counts, out=o, **hints)
    assert o._version > v and torch.equal(o, torch.full((P, 5), 3.0))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
    # an inference tensor outside inference_mode: torch's error, as its in-place ops raise
    with torch.inference_mode():
        oi = torch.zeros(P, 5)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        fco.gemm_alltoall(a, w, counts, out=oi, **hints)
    return True


def test_out_requires_grad(pool2):
    assert pool2.run(_w_out_requires_grad) == [True, True]


def _w_opcheck():
    import torch

    import fco  # noqa: F401

    samples = []
    for k, (dtype, layout) in enumerate(((torch.float32, 0), (torch.bfloat16, 1))):
        a, w, counts = _data(dtype, 2, 8, 4, 11 + k, "kn" if layout == 0 else "nk")
        samples.append((a.requires_grad_(k == 0), w.requires_grad_(k == 0), counts, None, None,
                        a.shape[0], layout, "", -1))
    for args in samples:
        torch.library.opcheck(torch.ops.fco.gemm_alltoall.default, args)
    return True


def test_opcheck(pool2):
    pool2.run(_w_opcheck, timeout=300)
