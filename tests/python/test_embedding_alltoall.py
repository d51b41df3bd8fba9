"""test_embedding_alltoall.py — fco.embedding_alltoall (fco::embedding_alltoall) on CPU tensors,
2 and 3 ranks over gloo + the cpu transport: forward against F.embedding_bag +
all_to_all_single + permute for every dtype, impl, pooling, index type, with and without
per-sample weights, uneven tables and batches (ranks with no table / no sample, empty bags);
the backward (table and per-sample-weight gradients) against torch's autograd of that pipeline,
and the backward op alone with indices outside their table (no gradient for them); bad input,
opcheck. Run: pytest tests/python/test_embedding_alltoall.py
"""
import pytest

DTYPES = ["float32", "bfloat16", "float16"]


def _data(dtype, tpr, bpr, D, seed, index_dtype="int64", max_bag=4):
    """This rank's packed tables, CSR indices/offsets over the global batch, psw, table_rows."""
    import torch
    import torch.distributed as dist

    r = dist.get_rank()
    g = torch.Generator().manual_seed(seed * 1009 + r)
    B, Tr = sum(bpr), tpr[r]
    rows = [3 + (7 * t + r) % 11 for t in range(Tr)]
    weight = torch.randn(sum(rows), D, generator=g).to(dtype)
    lens = torch.randint(0, max_bag + 1, (Tr * B,), generator=g)
    idx = [torch.randint(0, rows[t], (int(lens[t * B:(t + 1) * B].sum()),), generator=g)
           for t in range(Tr)]
    indices = torch.cat(idx) if idx else torch.zeros(0, dtype=torch.int64)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
    it = getattr(torch, index_dtype)
    psw = torch.rand(indices.numel(), generator=g) + 0.5
    return weight, indices.to(it), offsets.to(it), rows, psw


LAYOUTS = {  # world → [(tables_per_rank, batch_per_rank)]
    2: [([2, 3], [4, 3]), ([1, 0], [2, 5]), ([0, 2], [0, 3])],
    3: [([2, 1, 3], [2, 3, 1]), ([0, 2, 1], [3, 0, 2])],
}


def _w_forward(dtype_name):
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    dtype = getattr(torch, dtype_name)
    P, n = dist.get_world_size(), 0
    for tpr, bpr in LAYOUTS[P]:
        for impl in ("auto", "baseline", "fused"):
            for mode in ("sum", "mean"):
                for weighted in (False, True):
                    n += 1
                    it = "int32" if n % 2 else "int64"
                    w, idx, off, rows, psw = _data(dtype, tpr, bpr, 8 + n % 3 * 4, n, it)
                    psw = psw if weighted else None
                    out = fco.embedding_alltoall(w, idx, off, rows, tpr, bpr, psw, mode,
                                                 impl=impl)
                    assert out.shape == (bpr[dist.get_rank()], sum(tpr), w.shape[1])
                    assert out.dtype == dtype
                    ref = _refs.embedding_alltoall(w, idx, off, rows, tpr, bpr, psw, mode)
                    _refs.close(out, ref, dtype)
    # bf16 per-sample weights are converted to float32
    w, idx, off, rows, psw = _data(dtype, *LAYOUTS[P][0], 16, 99)
    out = fco.embedding_alltoall(w, idx, off, rows, *LAYOUTS[P][0], psw.to(dtype))
    _refs.close(out, _refs.embedding_alltoall(w, idx, off, rows, *LAYOUTS[P][0],
                                              psw.to(dtype).float()), dtype)
    return True


@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_2_ranks(pool2, dtype):
    pool2.run(_w_forward, dtype)


def test_forward_3_ranks(pool3):
    pool3.run(_w_forward, "float32")


def _w_backward(dtype_name, mode, weighted):
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    dtype = getattr(torch, dtype_name)
    r, P = dist.get_rank(), dist.get_world_size()
    tol = _refs.GRAD_TOL[dtype]
    for k, (tpr, bpr) in enumerate(LAYOUTS[P]):
        w0, idx, off, rows, psw0 = _data(dtype, tpr, bpr, 8, 40 + k, max_bag=5)
        c = torch.randn(bpr[r], sum(tpr), 8, generator=torch.Generator().manual_seed(k + r))
        grads = []
        for fn in (fco.embedding_alltoall, _refs.embedding_alltoall):
            w = w0.clone().requires_grad_()
            psw = psw0.clone().requires_grad_() if weighted else None
            out = fn(w, idx, off, rows, tpr, bpr, psw, mode)
            (out.float() * c).sum().backward()
            grads.append((w.grad, psw.grad if weighted else None))
        (gw, gp), (rw, rp) = grads
        assert gw is not None and gw.shape == w0.shape and gw.dtype == dtype
        torch.testing.assert_close(gw.float(), rw.float(), rtol=tol, atol=tol)
        if weighted and tpr[r] > 0:
            torch.testing.assert_close(gp, rp, rtol=tol * 10, atol=tol * 10)
    return True


@pytest.mark.parametrize("mode,weighted", [("sum", False), ("sum", True), ("mean", False),
                                           ("mean", True)])
def test_backward_2_ranks(pool2, mode, weighted):
    pool2.run(_w_backward, "float32", mode, weighted)


def test_backward_3_ranks(pool3):
    pool3.run(_w_backward, "float32", "sum", True)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_backward_half_dtypes(pool2, dtype):
    pool2.run(_w_backward, dtype, "mean", True)


def _w_backward_skips_bad_indices(mode, weighted):
    """fco::embedding_alltoall_backward called directly with indices outside their table (on CPU
    the forward raises, so autograd never runs the backward with one; on CUDA the error is
    asynchronous and it does): such an entry adds nothing to any row (not to row 0, the
    backward's stand-in row for it, nor to the next table's row) and its per-sample-weight
    gradient is 0; a mean bag still divides by its whole length. Against a loop over the
    entries, in float64."""
    import torch
    import torch.distributed as dist

    import fco  # noqa: F401  (registers the ops)
    from fco.ops import embedding_alltoall as emb

    r = dist.get_rank()
    assert dist.get_world_size() == 2
    tpr, bpr, D, rows, base = [2, 2], [1, 2], 4, [3, 2], [0, 3]
    B, T, toff, bs = 3, 4, 2 * r, [0, 1][r]
    # bags (t, b), table-major over the global batch; bad: 3 (table 0's size: it would be table
    # 1's row 0), -1, and 2 (table 1's size: past the weight)
    bags = [[1, 3], [2], [3, 0, 0], [-1, 0], [], [1, 2, 1]]
    off = torch.tensor([0] + [len(x) for x in bags]).cumsum(0)
    idx = torch.tensor([i for x in bags for i in x])
    g = torch.Generator().manual_seed(5 + r)
    weight = torch.randn(sum(rows), D, generator=g)
    psw = torch.rand(idx.numel(), generator=g) + 0.5 if weighted else None
    G = torch.randn(B, T, D, generator=torch.Generator().manual_seed(9))  # every rank's grad
    gw, gp = torch.ops.fco.embedding_alltoall_backward(
        G[bs:bs + bpr[r]].contiguous(), weight, idx, off, psw, rows, tpr, bpr,
        emb.POOLING[mode], "", weighted)
    rw = torch.zeros(sum(rows), D, dtype=torch.float64)
    rp = torch.zeros(idx.numel(), dtype=torch.float64)
    for t in range(2):
        for b in range(B):
            lo, hi = int(off[t * B + b]), int(off[t * B + b + 1])
            div = hi - lo if mode == "mean" else 1
            for j in range(lo, hi):
                i = int(idx[j])
                if not 0 <= i < rows[t]:
                    continue
                gb = G[b, toff + t].double()
                rw[base[t] + i] += (float(psw[j]) if weighted else 1.0) / div * gb
                rp[j] = (gb * weight[base[t] + i].double()).sum() / div
    torch.testing.assert_close(gw.double(), rw, rtol=1e-5, atol=1e-5)
    assert gp.numel() == (idx.numel() if weighted else 0)
    if weighted:
        torch.testing.assert_close(gp.double(), rp, rtol=1e-5, atol=1e-5)
    return True


@pytest.mark.parametrize("mode,weighted", [("sum", False), ("sum", True), ("mean", False),
                                           ("mean", True)])
def test_backward_skips_bad_indices(pool2, mode, weighted):
    assert pool2.run(_w_backward_skips_bad_indices, mode, weighted) == [True, True]


def _w_bad_input():
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    r = dist.get_rank()
    tpr, bpr = [1, 1], [2, 2]
    w, idx, off, rows, psw = _data(torch.float32, tpr, bpr, 4, 1)
    ok = (w, idx, off, rows, tpr, bpr)
    cases = [
        ((w.double(),) + ok[1:], {}, "weight has dtype torch.float64"),
        ((w, idx.float()) + ok[2:], {}, "indices has dtype torch.float32"),
        ((w, idx.int()) + ok[2:], {}, "offsets has dtype torch.int64 but indices has"),
        ((w, idx, off[:-1]) + ok[3:], {}, r"offsets has 4 elements; expected T_r·B \+ 1"),
        ((w, idx, off, rows + [2]) + ok[4:], {}, "table_rows has 2 entries"),
        ((w, idx, off, [rows[0] + 1]) + ok[4:], {},
         r"table_rows \[\d+\] sum to \d+ but weight has"),
        ((w, idx, off, rows, [1, 1, 0], bpr), {}, "one entry per rank of the group"),
        ((w, idx, off, rows, tpr, [2, -1]), {}, "negative entry"),
        ((w, idx, off, rows, [0, 0], bpr), {}, r"tables_per_rank sums to 0; expected 1\.\.1024"),
        ((w, idx, off, rows, tpr, [0, 0]), {}, r"batch_per_rank sums to 0; expected 1\.\.2\^31-1"),
        ((w, idx, off, [-1]) + ok[4:], {}, r"table_rows \[-1\] has a negative entry"),
        ((w[:, :0],) + ok[1:], {}, r"dim D = 0 is not in 1\.\.65536"),
        (ok, {"mode": "max"}, "mode 'max' is not 'sum' or 'mean'"),
        (ok, {"mode": ["sum"]}, r"mode \['sum'\] is not 'sum' or 'mean'"),  # was a TypeError
        (ok, {"impl": 2 ** 64}, "impl 18446744073709551616 is not -1"),  # ctypes wrapped it
        (ok, {"per_sample_weights": psw[:-1]}, "per_sample_weights has shape"),
        ((w.t(),) + ok[1:], {}, "weight is not contiguous"),
        ((w.reshape(-1),) + ok[1:], {}, r"weight has shape \(\d+,\); expected \[rows, D\]"),
        # lists that are no lists (session 50's test_fuzz_args: TypeError / NotImplementedError)
        ((w, idx, off, None, tpr, bpr), {}, "table_rows None is not a list of ints"),
        ((w, idx, off, rows, 2, bpr), {}, "tables_per_rank 2 is not a list of ints"),
        ((w, idx, off, rows, tpr, torch.tensor(bpr, device="meta")), {},
         "batch_per_rank is a tensor on meta; expected a list of ints or a CPU tensor"),
        # indices / offsets: strided, on weight's device, contiguous, 1-d
        ((w, idx.to_sparse()) + ok[2:], {}, "indices has layout torch.sparse_coo, not strided"),
        ((w, idx.to("meta")) + ok[2:], {}, "indices is on meta but the data is on cpu"),
        ((w, idx, torch.stack([off, off], 1)[:, 0]) + ok[3:], {}, "offsets is not contiguous"),
        ((w, idx.view(-1, 1)) + ok[2:], {}, r"indices \(\d+, 1\) and offsets \(5,\) must be 1-d"),
        # per_sample_weights on another device than weight
        (ok, {"per_sample_weights": psw.to("meta")},
         "per_sample_weights is on meta, weight on cpu"),
    ]
    for args, kw, msg in cases:
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.embedding_alltoall(*args, **kw)
        assert e.value.name == "INVALID_ARGUMENT", e.value
    # the workspace query checks its arguments as the op does (TypeError, a 1-d weight taken,
    # a batch of 2^64 wrapped to 0 by ctypes before)
    for args, msg in (((w, [2], [4]), r"need one entry per rank of the group \(2\)"),
                      ((w, [1.5, 1], bpr), r"tables_per_rank \[1.5, 1\] holds 1.5"),
                      ((w, None, bpr), "tables_per_rank None is not a list of ints"),
                      ((w.reshape(-1), tpr, bpr), r"weight has shape \(\d+,\); expected"),
                      ((w, tpr, [2 ** 64, 0]), r"batch_per_rank sums to \d+; expected"),
                      ((w, tpr, [2, -1]), "negative entry")):
        with pytest.raises(fco.FcoError, match=msg) as e:
            fco.embedding_alltoall_workspace_bytes(*args)
        assert e.value.name == "INVALID_ARGUMENT", e.value
    assert fco.embedding_alltoall_workspace_bytes(w, torch.tensor(tpr), tuple(bpr)) == \
        fco.embedding_alltoall_workspace_bytes(w, tpr, bpr)
    # the op itself takes float32 per_sample_weights only (the wrapper converts)
    with pytest.raises(fco.FcoError, match="per_sample_weights has dtype torch.float16; the op "
                       "takes torch.float32") as e:
        torch.ops.fco.embedding_alltoall(w, idx, off, psw.half(), rows, tpr, bpr, 0, "", -1)
    assert e.value.name == "INVALID_ARGUMENT"
    # an index outside its table: the rank that has it raises, naming the table and position;
    # the other ranks' results are complete and the communicator keeps working
    bad = idx.clone()
    if r == 1 and bad.numel():
        bad[0] = 1000
    if r == 1 and bad.numel():
        with pytest.raises(fco.FcoError, match=r"indices\[0\] = 1000 is outside table 1"):
            fco.embedding_alltoall(w, bad, off, rows, tpr, bpr)
    else:
        fco.embedding_alltoall(w, bad, off, rows, tpr, bpr)
    # lists that differ across ranks: every rank raises, libfco names the field
    with pytest.raises(fco.FcoError, match="rank") as e:
        fco.embedding_alltoall(w, idx, off, rows, tpr, [2, 2] if r == 0 else [3, 1])
    assert e.value.name == "INVALID_ARGUMENT"
    # float64 per_sample_weights are converted to float32 by the wrapper
    torch.testing.assert_close(
        fco.embedding_alltoall(w, idx, off, rows, tpr, bpr, per_sample_weights=psw.double()),
        fco.embedding_alltoall(w, idx, off, rows, tpr, bpr, per_sample_weights=psw))
    out = fco.embedding_alltoall(w, idx, off, rows, tpr, bpr)
    return out.shape == (2, 2, 4)


def test_bad_input(pool2):
    assert pool2.run(_w_bad_input) == [True, True]


def _w_out_requires_grad():
    import pytest
    import torch
    import torch.distributed as dist

    import fco

    P = dist.get_world_size()
    weight = torch.ones(4, 2)
    idx, off = torch.tensor([0, 1] * P), torch.arange(0, 2 * P + 1, 2)
    args = (weight, idx, off, [4], [1] * P, [1] * P)
    # an out= that requires grad takes the op + copy_, as autograd sees it: a non-leaf gets
    # the right gradient (none flows through the overwritten values: the direct path wrote
    # into it unseen, so p.grad was all ones), a leaf is refused by torch (was written)
    p = torch.zeros(1, P, 2, requires_grad=True)
    out = p * 1
    y = fco.embedding_alltoall(*args, out=out)
    assert y is out and torch.equal(out.detach(), torch.full((1, P, 2), 2.0))
    out.sum().backward()
    assert torch.equal(p.grad, torch.zeros(1, P, 2)), p.grad
    leaf = torch.zeros(1, P, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fco.embedding_alltoall(*args, out=leaf)
    assert torch.equal(leaf.detach(), torch.zeros(1, P, 2))
    # an out= saved by another op for its backward: its version counter bumped by the direct
    # path's write (it wrote unseen: a silently wrong gradient), so that backward raises
    q, o = torch.ones(1, P, 2, requires_grad=True), torch.ones(1, P, 2)
    z = (q * o).sum()
    v = o._version
    fco.embedding_alltoall(*args, out=o)
    assert o._version > v and torch.equal(o, torch.full((1, P, 2), 2.0))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
    # an inference tensor outside inference_mode: torch's error, as its in-place ops raise
    with torch.inference_mode():
        oi = torch.zeros(1, P, 2)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        fco.embedding_alltoall(*args, out=oi)
    # an out= sharing bytes with an input where autograd records (per_sample_weights that
    # require grad): refused before the op, the input intact (the copy once went over it)
    wbuf = torch.ones(8, 2)
    psw = torch.ones(2 * P, requires_grad=True)
    with pytest.raises(fco.FcoError, match="out overlaps weight") as e:
        fco.embedding_alltoall(wbuf[:4], *args[1:], per_sample_weights=psw,
                               out=wbuf.view(-1)[:2 * P].view(1, P, 2))
    assert e.value.name == "INVALID_ARGUMENT" and torch.equal(wbuf, torch.ones(8, 2))
    # split lists holding floats: INVALID_ARGUMENT naming the list (was a TypeError from
    # new_empty, or the dispatcher's RuntimeError)
    for i, name in ((3, "table_rows"), (4, "tables_per_rank"), (5, "batch_per_rank")):
        bad = list(args)
        bad[i] = [float(v) for v in bad[i]]
        with pytest.raises(fco.FcoError, match=f"{name} .* holds 1.0|{name} .* holds 4.0") as e:
            fco.embedding_alltoall(*bad)
        assert e.value.name == "INVALID_ARGUMENT"
    return True


def test_out_requires_grad_and_float_lists(pool2):
    assert pool2.run(_w_out_requires_grad) == [True, True]


def _w_opcheck():
    import torch

    import fco  # noqa: F401

    tpr, bpr = [1, 2], [2, 3]
    samples = []
    for k, (dtype, pooling) in enumerate(((torch.float32, 0), (torch.bfloat16, 1))):
        w, idx, off, rows, psw = _data(dtype, tpr, bpr, 4, 3 + k)
        samples.append((w.requires_grad_(k == 0), idx, off,
                        psw.requires_grad_(k == 0) if k == 0 else None, rows, tpr, bpr, pooling,
                        "", -1))
    for args in samples:
        torch.library.opcheck(torch.ops.fco.embedding_alltoall.default, args)
    return True


def test_opcheck(pool2):
    pool2.run(_w_opcheck, timeout=300)
