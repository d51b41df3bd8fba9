"""test_symmetric.py — fco.empty_symmetric and out= on CPU tensors, 2 and 3 ranks over gloo + the
cpu transport: the tensor is zero-filled, of the asked shape and dtype, writable, freed when
dropped (slots come back: more than FCO_MAX_SYMMETRIC allocations in sequence) or with its
communicator (a tensor outliving fco.shutdown stays valid on the cpu transport and is dropped
safely; the nccl transport's destroy warns), and usable as
out= of fco.gemm_alltoall and fco.embedding_alltoall (results equal to out=None, returned tensor
is out); out= with gradients takes the op and copies; bad out / nbytes raise. The GPU side
(peers storing into the buffer) is tests/python/test_gpu_ops.py and the C tests.
fco.triton's host.mem_find (fco_mem_find) on cpu buffers.
Run: pytest tests/python/test_symmetric.py
"""
import pytest


def _w_alloc():
    import gc

    import torch

    import fco
    from fco import FcoError

    t = fco.empty_symmetric((3, 5), torch.bfloat16, device="cpu")
    assert t.shape == (3, 5) and t.dtype == torch.bfloat16 and t.is_contiguous()
    assert torch.count_nonzero(t) == 0
    d = fco.empty_symmetric(4, device="cpu")  # dtype default: float32
    assert d.shape == (4,) and d.dtype == torch.float32
    del d
    t.fill_(2.5)
    assert float(t.float().sum()) == 2.5 * 15
    for i in range(40):  # > FCO_MAX_SYMMETRIC (16) in sequence: dropped tensors free their slot
        x = fco.empty_symmetric(7 + i, torch.float32, device="cpu", nbytes=4096)
        x[:] = i
        del x
        gc.collect()
    del t
    views = fco.empty_symmetric((4, 4), torch.float32, device="cpu")[1:]  # a view keeps it
    gc.collect()
    views.fill_(1.0)
    assert float(views.sum()) == 12.0
    held = []  # the view's buffer still holds its slot: 15 more fit, the 16th is refused
    with pytest.raises(FcoError, match="FCO_MAX_SYMMETRIC"):
        while len(held) < 20:
            held.append(fco.empty_symmetric(4, torch.float32, device="cpu"))
    assert len(held) == 15
    del held, views
    gc.collect()
    with pytest.raises(FcoError, match="nbytes"):
        fco.empty_symmetric((4, 4), torch.float32, device="cpu", nbytes=10)
    with pytest.raises(FcoError, match=r"nbytes 0 cannot hold \(0,\).*at least 1") as e:
        fco.empty_symmetric(0, torch.float32, device="cpu", nbytes=0)  # no zero-byte buffer
    assert e.value.name == "INVALID_ARGUMENT"
    # a zero-size shape (an embedding out where b_s = 0) by default: a 1-byte buffer
    z = fco.empty_symmetric((0, 4), torch.float32, device="cpu")
    assert z.shape == (0, 4) and z.dtype == torch.float32
    del z
    # shapes, dtypes and sizes that are not ones: FcoError, not a TypeError / ValueError (session
    # 50's test_fuzz_args); a float dimension is not truncated
    for args, kw, msg in [(("x", torch.float32), {}, "must be integers"),
                          (((2.5,), torch.float32), {}, "must be integers"),
                          (((torch.ones((), device="meta"),), None), {}, "must be integers"),
                          (((2, -1), torch.float32), {}, "negative dimension"),
                          (((2,), "float32"), {}, "is not a torch.dtype"),
                          (((2,), torch.float32), {"nbytes": 8.0}, "must be integers")]:
        with pytest.raises(FcoError, match=msg) as e:
            fco.empty_symmetric(*args, device="cpu", **kw)
        assert e.value.name == "INVALID_ARGUMENT"
    # the communicator destroyed first (it frees the buffer): dropping the tensor later is safe,
    # and the next op makes a new communicator
    late = fco.empty_symmetric(64, torch.float32, device="cpu")
    fco.shutdown()
    del late
    gc.collect()
    x = torch.ones(8)
    torch.testing.assert_close(fco.allreduce(x), x * torch.distributed.get_world_size())


def _w_outlives_communicator():
    import gc
    import warnings

    import pytest
    import torch

    import fco

    # cpu transport: a tensor of empty_symmetric that outlives its communicator stays valid:
    # destroy leaves the C communicator to the last such buffer (it freed the buffer, and
    # writing the tensor then corrupted the heap: ordinary tensors got its address)
    c = fco.init()
    late = fco.empty_symmetric(1024, torch.float32, device="cpu")  # 4 KiB
    late.fill_(5.0)
    lo, hi = late.data_ptr(), late.data_ptr() + 4096
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # safe here: no warning
        fco.shutdown()
    fresh = [torch.zeros(1024) for _ in range(64)]  # allocations of the same size
    assert not any(lo < v.data_ptr() + 4096 and v.data_ptr() < hi for v in fresh)
    assert bool((late == 5.0).all())
    late.fill_(123.0)
    assert all(not v.any() for v in fresh) and bool((late == 123.0).all())
    assert c.handle is None and c._deferred is not None
    view = late[512:]  # a view keeps the buffer (and the C communicator) too
    del late
    gc.collect()
    assert c._deferred is not None and float(view.sum()) == 123.0 * 512
    del view
    gc.collect()
    assert c._deferred is None and c._nsym == 0  # the last one destroyed the C communicator
    # the nccl transport frees the buffers with the communicator, so destroy warns, naming
    # how many are still viewed (simulated on a cpu communicator: the tensor is not touched)
    c2 = fco.init()
    kept = [fco.empty_symmetric(8, torch.float32, device="cpu") for _ in range(2)]
    c2.transport = "nccl"
    with pytest.warns(RuntimeWarning, match="2 symmetric buffer.* must not be used"):
        fco.shutdown()
    assert c2._deferred is None
    del kept
    gc.collect()
    x = torch.ones(8)
    torch.testing.assert_close(fco.allreduce(x), x * torch.distributed.get_world_size())
    return True


def test_outlives_communicator(pool2):
    assert pool2.run(_w_outlives_communicator) == [True, True]


def _w_gemm_out():
    import torch
    import torch.distributed as dist

    import _refs
    import fco
    from fco import FcoError

    r = dist.get_rank()
    g = torch.Generator().manual_seed(11 + r)
    P = dist.get_world_size()
    E, K, N = 2, 8, 6
    counts = torch.randint(0, 4, (E, P), generator=g, dtype=torch.int32)
    a = torch.randn(E * P * 4, K, generator=g)
    w = torch.randn(E, K, N, generator=g) / K ** 0.5
    out_rows = 40
    buf = fco.empty_symmetric((out_rows, N), torch.float32, device="cpu")
    buf.fill_(float("nan"))  # rows past the received total must come back zero
    for impl in ("auto", "tiles", "chunks", "baseline"):
        got = fco.gemm_alltoall(a, w, counts, out_rows=out_rows, impl=impl, out=buf)
        assert got is buf
        _refs.close(buf, _refs.gemm_alltoall(a, w, counts, out_rows, "kn"), torch.float32)
    # with gradients: the op runs as usual, then its result is copied into out
    a2 = a.clone().requires_grad_(True)
    o2 = fco.empty_symmetric((out_rows, N), torch.float32, device="cpu")
    got = fco.gemm_alltoall(a2, w, counts, out_rows=out_rows, out=o2)
    assert got is o2 and got.requires_grad
    _refs.close(o2.detach(), _refs.gemm_alltoall(a, w, counts, out_rows, "kn"), torch.float32)
    with pytest.raises(FcoError, match="out is"):
        fco.gemm_alltoall(a, w, counts, out_rows=out_rows, out=buf[:-1])
    with pytest.raises(FcoError, match="out is"):
        fco.gemm_alltoall(a, w, counts, out_rows=out_rows, out=buf.to(torch.bfloat16))


def _w_embedding_out():
    import torch
    import torch.distributed as dist

    import fco

    r, P = dist.get_rank(), dist.get_world_size()
    g = torch.Generator().manual_seed(5 + r)
    tpr = [2 + (q % 2) for q in range(P)]
    bpr = [3 + q for q in range(P)]
    B, T, D = sum(bpr), sum(tpr), 4
    rows = [10 + 3 * t for t in range(tpr[r])]
    weight = torch.randn(sum(rows), D, generator=g)
    lens = torch.randint(0, 4, (tpr[r] * B,), generator=g)
    offsets = torch.zeros(tpr[r] * B + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(lens, 0)
    idx = torch.cat([torch.randint(0, rows[t], (int(lens[t * B:(t + 1) * B].sum()),), generator=g)
                     for t in range(tpr[r])])
    ref = fco.embedding_alltoall(weight, idx, offsets, rows, tpr, bpr)
    most = max(bpr) * T * D * 4
    out = fco.empty_symmetric((bpr[r], T, D), torch.float32, device="cpu", nbytes=most)
    got = fco.embedding_alltoall(weight, idx, offsets, rows, tpr, bpr, out=out)
    assert got is out
    torch.testing.assert_close(out, ref)


def _w_find():
    """fco.triton's host.mem_find (fco_mem_find) on the cpu transport: the slot and offset of a
    range inside a buffer of fco.empty_symmetric, none outside it or past its end, no peer
    table (cpu buffers are not stored into by peers), and fco.triton's sym_args therefore
    announcing nothing."""
    import torch

    import fco
    from fco.triton import gemm_alltoall as GA
    from fco.triton import host

    comm = fco.init()
    t = fco.empty_symmetric((8, 16), torch.float32, device="cpu")
    k, off, table = host.mem_find(comm.handle, t.data_ptr(), t.numel() * 4)
    assert k >= 0 and off == 0 and table == 0
    k2, off2, _ = host.mem_find(comm.handle, t[2:].data_ptr(), t[2:].numel() * 4)
    assert (k2, off2) == (k, 2 * 16 * 4)
    assert host.mem_find(comm.handle, t[2:].data_ptr(), t.numel() * 4)[0] == -1  # past its end
    plain = torch.zeros(8, 16)
    assert host.mem_find(comm.handle, plain.data_ptr(), plain.numel() * 4)[0] == -1
    class S:  # what _sym_args reads of a DeviceState
        handle = comm.handle

    assert GA._sym_args([S()], [t], t.numel() * 4, None) == [(0, 0, 0)]
    return True


def test_mem_find_2_ranks(pool2):
    pool2.run(_w_find)


def test_alloc_2_ranks(pool2):
    pool2.run(_w_alloc)


def test_gemm_out_2_ranks(pool2):
    pool2.run(_w_gemm_out)


def test_gemm_out_3_ranks(pool3):
    pool3.run(_w_gemm_out)


def test_embedding_out_2_ranks(pool2):
    pool2.run(_w_embedding_out)


def test_embedding_out_3_ranks(pool3):
    pool3.run(_w_embedding_out)


def test_setup_steps_refused_inside_a_capture(monkeypatch):
    """A GPU communicator's empty_symmetric while torch captures a CUDA graph raises
    INVALID_USAGE before any libfco call (torch captures on non-blocking streams, which libfco's
    own check cannot see; on nccl the allocation failed past the gate, its peers waiting in NCCL:
    session 62). A fake nccl communicator: nothing reaches the C library."""
    import torch

    import fco
    from fco._comm import Communicator

    c = Communicator(1, "fake", torch.device("cuda", 0), 0, 2, "nccl")
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(fco.FcoError) as e:
        c.empty_symmetric((4,), torch.float32)
    assert e.value.name == "INVALID_USAGE" and "being captured" in e.value.message
    cpu = Communicator(1, "fake", torch.device("cpu"), 0, 2, "cpu")
    cpu._not_capturing("fco_mem_alloc")  # the cpu transport captures nothing: never refused
