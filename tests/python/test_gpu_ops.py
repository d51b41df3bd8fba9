"""test_gpu_ops.py — fco.gemv_allreduce, fco.embedding_alltoall and fco.gemm_alltoall on CUDA
tensors: nccl transport, one process per GPU (2 ranks when 2 GPUs are visible, else 1), against
the plain-torch pipelines (tests/python/_refs.py, on NCCL); current-stream ordering; CUDA-graph
capture and replay (with new input values); torch.compile with inductor (and its CUDA graphs);
autograd; and timings: host µs per eager call (direct path and dispatcher) and µs per call
replayed from a CUDA graph, for the shapes of fco-bench (printed; JSON to
$FCO_PY_OPS_BENCH_JSON when set). Skipped without CUDA (conftest.py).
On the GPU machine: pytest tests/python -m gpu -s
"""
import json
import os

import pytest

from _dist import gpu_count

pytestmark = pytest.mark.gpu
DTYPES = ("float32", "bfloat16", "float16")


@pytest.fixture
def gpool(pools):
    return pools(min(2, gpu_count()), "nccl")


def _gemv_data(dtype, M, N, K, seed, bias=True):
    import torch
    import torch.distributed as dist

    r = dist.get_rank()
    g = torch.Generator(device="cuda").manual_seed(seed * 31 + r)
    Kr = K + 8 * r
    x = torch.randn(M, Kr, device="cuda", generator=g).to(dtype)
    w = (torch.randn(N, Kr, device="cuda", generator=g) / Kr ** 0.5).to(dtype)
    b = torch.randn(N, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed)
                    ).to(dtype) if bias else None
    return x, w, b


def _g_gemv():
    import torch

    import _refs
    import fco

    n = 0
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for impl in ("auto", "baseline", "oneshot", "twophase", "cublas_oneshot"):
            for M, N, K in ((1, 4096, 2048), (16, 1000, 1536), (64, 96, 4096), (3, 17, 40)):
                n += 1
                x, w, b = _gemv_data(dtype, M, N, K, n, bias=n % 2 == 0)
                y = fco.gemv_allreduce(x, w, b, impl=impl)
                _refs.close(y, _refs.gemv_allreduce(x, w, b), dtype, 3)
                if impl in ("oneshot", "twophase", "cublas_oneshot"):  # rank-order fp32 sums
                    assert _refs.same_on_all_ranks(y), (dtype, impl, M, N, K)
    x, w, b = _gemv_data(torch.bfloat16, 100, 256, 512, 1)  # M > 64: matmul + fco.allreduce
    _refs.close(fco.gemv_allreduce(x, w, b), _refs.gemv_allreduce(x, w, b), torch.bfloat16, 3)
    # out=: one NaN-poisoned buffer reused by back-to-back calls of every impl (a decode loop)
    buf = torch.full((4, 4096), float("nan"), device="cuda", dtype=torch.bfloat16)
    for n, impl in enumerate(("auto", "baseline", "oneshot", "twophase", "cublas_oneshot")):
        x, w, b = _gemv_data(torch.bfloat16, 4, 4096, 2048, 40 + n)
        y = fco.gemv_allreduce(x, w, b, impl=impl, out=buf)
        assert y.data_ptr() == buf.data_ptr()
        _refs.close(buf, _refs.gemv_allreduce(x, w, b), torch.bfloat16, 3)
    torch.cuda.synchronize()
    fco.init().check_async_error()
    return True


def test_gemv_allreduce_vs_torch(gpool):
    gpool.run(_g_gemv, timeout=300)


def _emb_data(dtype, tpr, bpr, D, seed, L=None, rows=1000, index_dtype=None):
    import torch
    import torch.distributed as dist

    r = dist.get_rank()
    g = torch.Generator().manual_seed(seed * 7 + r)
    B, Tr = sum(bpr), tpr[r]
    table_rows = [rows] * Tr
    gd = torch.Generator(device="cuda").manual_seed(seed * 7 + r)  # tables can be GBs
    weight = torch.randn(rows * Tr, D, device="cuda", generator=gd).to(dtype)
    lens = torch.full((Tr * B,), L) if L else torch.randint(0, 6, (Tr * B,), generator=g)
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
    indices = torch.randint(0, rows, (int(lens.sum()),), generator=g)
    it = index_dtype or torch.int64
    psw = torch.rand(indices.numel(), generator=g).cuda()
    return weight, indices.to("cuda", it), offsets.to("cuda", it), table_rows, psw


def _g_embedding():
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    P, n = dist.get_world_size(), 0
    layouts = [([2] * P, [5] * P), ([1 + q % 2 for q in range(P)], [3 + 4 * q for q in range(P)])]
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for impl in ("auto", "baseline", "fused"):
            for tpr, bpr in layouts:
                for mode, weighted in (("sum", False), ("mean", True)):
                    n += 1
                    it = torch.int32 if n % 2 else torch.int64
                    w, idx, off, rows, psw = _emb_data(dtype, tpr, bpr, 64 + 8 * (n % 3), n,
                                                       index_dtype=it)
                    psw = psw if weighted else None
                    out = fco.embedding_alltoall(w, idx, off, rows, tpr, bpr, psw, mode,
                                                 impl=impl)
                    ref = _refs.embedding_alltoall(w, idx, off, rows, tpr, bpr, psw, mode)
                    _refs.close(out, ref, dtype, 2)
    torch.cuda.synchronize()
    fco.init().check_async_error()
    return True


def test_embedding_alltoall_vs_torch(gpool):
    gpool.run(_g_embedding, timeout=300)


def _g_gemm():
    import torch

    import _refs
    import fco

    n = 0
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for impl in ("auto", "baseline", "tiles", "chunks"):
            for layout in ("kn", "nk"):
                for hints in (False, True):
                    n += 1
                    a, w, counts = _refs.gemm_data(dtype, 1 + n % 3, 256, 384, n, layout)
                    kw = {"counts_host": counts.cpu(), "recv_rows": _refs.recv_rows(counts)} \
                        if hints else {}
                    out = fco.gemm_alltoall(a, w, counts, out_rows=400, w_layout=layout,
                                            impl=impl, **kw)
                    ref = _refs.gemm_alltoall(a, w, counts, 400, layout)
                    _refs.close(out, ref, dtype, 3)
    torch.cuda.synchronize()
    fco.init().check_async_error()
    return True


def test_gemm_alltoall_vs_torch(gpool):
    gpool.run(_g_gemm, timeout=300)


def _g_symmetric():
    """out= in fco.empty_symmetric buffers: the peers store straight into them (nccl, P = 2;
    the C impls and fco.triton's kernel);
    results against the torch pipelines, repeated calls into the same buffers (the next call's
    peers must wait for this rank's start before storing), then the buffers dropped."""
    import gc

    import torch
    import torch.distributed as dist

    import _refs
    import fco

    P, r = dist.get_world_size(), dist.get_rank()
    tpr, bpr = [1 + q % 2 for q in range(P)], [300 + 40 * q for q in range(P)]
    T, D = sum(tpr), 64
    out = fco.empty_symmetric((bpr[r], T, D), torch.bfloat16, nbytes=max(bpr) * T * D * 2 + 512)
    for n in range(4):
        w, idx, off, rows, psw = _emb_data(torch.bfloat16, tpr, bpr, D, 100 + n)
        got = fco.embedding_alltoall(w, idx, off, rows, tpr, bpr, impl="fused", out=out)
        assert got is out
        _refs.close(out, _refs.embedding_alltoall(w, idx, off, rows, tpr, bpr), torch.bfloat16, 2)
    for impl in ("tiles", "chunks", "auto", "triton"):
        a, w, counts = _refs.gemm_data(torch.bfloat16, 2, 256, 384, 7, "nk")
        buf = fco.empty_symmetric((400, 384), torch.bfloat16)
        for n in range(3):
            kw = {"counts_host": counts.cpu(), "recv_rows": _refs.recv_rows(counts)}
            got = fco.gemm_alltoall(a * (n + 1), w, counts, out_rows=400, w_layout="nk",
                                    impl=impl, out=buf, **kw)
            assert got is buf
            if impl == "triton":  # the peers stored into buf: no staging (fco.triton, sym=None)
                from fco.triton import gemm_alltoall as tg
                assert tg.last_launch["sym"] == [True], tg.last_launch["sym"]
            _refs.close(buf, _refs.gemm_alltoall(a * (n + 1), w, counts, 400, "nk"),
                        torch.bfloat16, 3)
        del buf, got
    torch.cuda.synchronize()
    fco.init().check_async_error()
    del out
    gc.collect()
    return True


def test_symmetric_outputs(gpool):
    gpool.run(_g_symmetric, timeout=300)


def _g_stream_order():
    import torch

    import _refs
    import fco

    s = torch.cuda.Stream()
    x0, w, b = _gemv_data(torch.bfloat16, 8, 4096, 4096, 3)
    with torch.cuda.stream(s):
        # the input is produced on s right before the op: correct only if fco runs on s
        x = torch.zeros_like(x0)
        for _ in range(20):
            x = x * 1.0001
        x.copy_(x0)
        y = fco.gemv_allreduce(x, w, b)
        e = torch.cuda.Event()
        e.record(s)
    e.synchronize()
    _refs.close(y, _refs.gemv_allreduce(x0, w, b), torch.bfloat16, 3)
    return True


def test_runs_on_current_stream(gpool):
    gpool.run(_g_stream_order)


def _capture(fn):
    """fn() once eagerly on a side stream, then captured into a CUDA graph on that same stream:
    per-stream state (gemv impl 0's cuBLAS workspace) is made by the eager call. Returns the
    graph and the captured call's result."""
    import torch

    cs = torch.cuda.Stream()
    cs.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(cs):
        fn()
    cs.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=cs):
        out = fn()
    return g, out


def _g_cuda_graph():
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    P = dist.get_world_size()
    res = {}
    replays = {}  # name -> replay(seed): new inputs, one replay, output right? (kept for later)
    # gemv: capture after one eager call per impl; replay with new x

    def gemv_replay(g, y, x, w, b):
        def f(seed):
            x.copy_(_gemv_data(torch.bfloat16, 4, 2048, 1024, seed)[0])
            y.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            return torch.allclose(y.float(), _refs.gemv_allreduce(x, w, b).float(), rtol=5e-2,
                                  atol=5e-2)
        return f

    for impl in ("oneshot", "twophase", "baseline"):
        x, w, b = _gemv_data(torch.bfloat16, 4, 2048, 1024, 5)
        g, y = _capture(lambda: fco.gemv_allreduce(x, w, b, impl=impl))
        replays[f"gemv {impl}"] = gemv_replay(g, y, x, w, b)
    # embedding: replay with new index values (same bags)
    tpr, bpr = [2] * P, [8] * P

    def emb_replay(g, out, w, idx, off, rows):
        def f(seed):
            idx.copy_(_emb_data(torch.bfloat16, tpr, bpr, 128, seed, L=4)[1])
            out.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            return torch.allclose(out.float(), _refs.embedding_alltoall(
                w, idx, off, rows, tpr, bpr).float(), rtol=2e-2, atol=2e-2)
        return f

    for impl in ("fused", "baseline"):
        w, idx, off, rows, _ = _emb_data(torch.bfloat16, tpr, bpr, 128, 1, L=4)
        g, out = _capture(lambda: fco.embedding_alltoall(w, idx, off, rows, tpr, bpr, impl=impl))
        replays[f"embedding {impl}"] = emb_replay(g, out, w, idx, off, rows)
    # gemm, impl tiles (no host hints): replay with new counts
    # (each replay function binds its own tensors: the names are reused below)
    def gemm_replay(g, out, a, w, counts):
        def f(seed):
            counts.copy_(_refs.gemm_data(torch.bfloat16, 2, 256, 256, seed)[2])
            g.replay()
            torch.cuda.synchronize()
            return torch.allclose(out.float(), _refs.gemm_alltoall(a, w, counts, 300).float(),
                                  rtol=5e-2, atol=5e-2)
        return f

    a, w, counts = _refs.gemm_data(torch.bfloat16, 2, 256, 256, 1)
    g, out = _capture(lambda: fco.gemm_alltoall(a, w, counts, out_rows=300, impl="tiles"))
    replays["gemm tiles"] = gemm_replay(g, out, a, w, counts)
    for name, f in replays.items():
        res[name] = all(f(10 + k) for k in range(3))
    # a shape first seen inside capture needs the workspace reserved before
    c = fco.init()
    x, w, b = _gemv_data(torch.bfloat16, 64, 8192, 2048, 9)
    c.reserve(fco.gemv_allreduce_workspace_bytes(x, w, impl="oneshot"))
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = fco.gemv_allreduce(x, w, b, impl="oneshot")
    g.replay()
    torch.cuda.synchronize()
    res["gemv reserved"] = torch.allclose(y.float(), _refs.gemv_allreduce(x, w, b).float(),
                                          rtol=5e-2, atol=5e-2)
    # the graphs captured first, replayed after the workspace grew (twice): still right
    # (include/fco.h, fco_comm_reserve: a captured call's workspace is kept until destroy)
    for k in range(2):
        ws = c.workspace_bytes()
        c.reserve(ws + 1)
        res[f"growth {k} grew"] = c.workspace_bytes() > ws
        for name, f in replays.items():
            res[f"{name} after growth {k}"] = f(40 + k)
    c.check_async_error()
    return res


def test_cuda_graph_capture_and_replay(gpool):
    for per_rank in gpool.run(_g_cuda_graph, timeout=300):
        assert all(per_rank.values()), per_rank


def _g_autograd():
    import torch
    import torch.distributed as dist

    import _refs
    import fco

    r, P = dist.get_rank(), dist.get_world_size()
    out = {}
    # gemv: against the unsharded linear
    g = torch.Generator(device="cuda").manual_seed(5)
    x_full = torch.randn(4, 64 * P, device="cuda", generator=g, requires_grad=True)
    w_full = torch.randn(96, 64 * P, device="cuda", generator=g, requires_grad=True)
    c = torch.randn(4, 96, device="cuda", generator=g)
    sl = slice(64 * r, 64 * (r + 1))
    x = x_full.detach()[:, sl].clone().requires_grad_()
    w = w_full.detach()[:, sl].clone().requires_grad_()
    ((x_full @ w_full.t()) * c).sum().backward()
    (fco.gemv_allreduce(x, w) * c).sum().backward()
    out["gemv"] = torch.allclose(x.grad, x_full.grad[:, sl], rtol=1e-4, atol=1e-4) and \
        torch.allclose(w.grad, w_full.grad[:, sl], rtol=1e-4, atol=1e-4)
    # embedding and gemm: against torch's autograd of the plain pipelines
    tpr, bpr = [2] * P, [6] * P
    w0, idx, off, rows, psw0 = _emb_data(torch.float32, tpr, bpr, 32, 3)
    cc = torch.randn(6, 2 * P, 32, device="cuda")
    grads = []
    for fn in (fco.embedding_alltoall, _refs.embedding_alltoall):
        wt, pt = w0.clone().requires_grad_(), psw0.clone().requires_grad_()
        (fn(wt, idx, off, rows, tpr, bpr, pt, "mean") * cc).sum().backward()
        grads.append((wt.grad, pt.grad))
    out["embedding"] = all(torch.allclose(a, b, rtol=1e-4, atol=1e-4)
                           for a, b in zip(*grads))
    a0, w0, counts = _refs.gemm_data(torch.float32, 2, 64, 48, 4)
    cc = torch.randn(300, 48, device="cuda")
    grads = []
    for use_fco in (True, False):
        at, wt = a0.clone().requires_grad_(), w0.clone().requires_grad_()
        y = fco.gemm_alltoall(at, wt, counts, out_rows=300) if use_fco else \
            _refs.gemm_alltoall(at, wt, counts, 300)
        (y * cc).sum().backward()
        grads.append((at.grad, wt.grad))
    out["gemm"] = all(torch.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(*grads))
    return out


def test_autograd(gpool):
    for per_rank in gpool.run(_g_autograd, timeout=300):
        assert all(per_rank.values()), per_rank


def _g_compile(mode):
    import torch

    import fco

    fco.init()
    x, w, b = _gemv_data(torch.bfloat16, 8, 1024, 512, 2)

    def f(x):  # oneshot: no per-stream cuBLAS state, whatever stream inductor captures on
        return fco.gemv_allreduce(torch.relu(x), w, b, impl="oneshot").float().sin() + 1

    cf = torch.compile(f, fullgraph=True, mode=mode)
    ok = []
    for k in range(4):  # reduce-overhead records, then replays its CUDA graph
        xk = x + k
        ok.append(torch.allclose(cf(xk).clone(), f(xk), rtol=2e-2, atol=2e-2))
    return ok


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compile_inductor(gpool, mode):
    for per_rank in gpool.run(_g_compile, mode, timeout=600):
        assert all(per_rank), per_rank


def _per_call(fn, iters):
    """(host µs per call, wall µs per call) of fn() in a loop."""
    import time

    import torch

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return round((t1 - t0) / iters * 1e6, 2), round((t2 - t0) / iters * 1e6, 2)


def _graph_us(fn, calls=20, reps=10):
    """µs per call of fn() replayed from a CUDA graph of `calls` calls (median of reps)."""
    import torch
    import torch.distributed as dist

    def many():
        for _ in range(calls):
            fn()

    g, _ = _capture(many)  # the eager pass grows the workspace, makes handles
    g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / calls)
    del g
    return round(sorted(times)[len(times) // 2], 2)


def _g_timing(iters):
    import torch
    import torch.distributed as dist

    import fco

    P, rows = dist.get_world_size(), []
    for N, K in ((8192, 8192), (4096, 14336), (8192, 28672), (16384, 16384)):
        for M in (1, 16):
            x = torch.randn(M, K // P, device="cuda").bfloat16()  # the bench's K_r = K/P
            w = (torch.randn(N, K // P, device="cuda") / K ** 0.5).bfloat16()
            row = {"op": "gemv_allreduce", "M": M, "N": N, "K": K, "P": P}
            row["fco_host_us"], row["fco_wall_us"] = _per_call(
                lambda: fco.gemv_allreduce(x, w), iters)
            row["dispatch_host_us"], _ = _per_call(
                lambda: torch.ops.fco.gemv_allreduce(x, w, None, "", -1), iters)
            row["fco_graph_us"] = _graph_us(lambda: fco.gemv_allreduce(x, w))

            def plain():
                y = x @ w.t()
                dist.all_reduce(y)
                return y
            try:  # the baseline: capturing torch's NCCL all_reduce needs a recent torch
                row["torch_graph_us"] = _graph_us(plain)
            except RuntimeError as e:
                row["torch_graph_us"], row["torch_graph_error"] = None, str(e)[:200]
            rows.append(row)
    # the bench's first embedding workload: B=16384, 8 tables per GPU, D=128, L=32, 1M rows
    B, tpr = 16384, [8] * P
    bpr = [B // P + (q < B % P) for q in range(P)]
    w, idx, off, trows, _ = _emb_data(torch.bfloat16, tpr, bpr, 128, 1, L=32, rows=1000000)
    row = {"op": "embedding_alltoall", "B": B, "T_per_rank": 8, "D": 128, "L": 32,
           "rows": 1000000, "P": P}
    row["fco_host_us"], row["fco_wall_us"] = _per_call(
        lambda: fco.embedding_alltoall(w, idx, off, trows, tpr, bpr), max(iters // 10, 10))
    row["fco_graph_us"] = _graph_us(lambda: fco.embedding_alltoall(w, idx, off, trows, tpr, bpr),
                                    calls=5, reps=5)
    rows.append(row)
    torch.cuda.synchronize()
    fco.init().check_async_error()
    return rows


def test_timing_eager_and_graph(gpool):
    res = gpool.run(_g_timing, 200, timeout=600)
    print(f"\n{'op':<20} {'shape':<28} {'host':>7} {'disp':>7} {'wall':>8} {'graph':>8} "
          f"{'torch gr':>8}   (µs per call, rank 0, world {gpool.world_size})")
    for r in res[0]:
        shape = f"M={r['M']} N={r['N']} K={r['K']}" if "M" in r else \
            f"B={r['B']} T/g={r['T_per_rank']} D={r['D']} L={r['L']}"
        cells = [str(r.get(k, "")) for k in ("fco_host_us", "dispatch_host_us", "fco_wall_us",
                                             "fco_graph_us", "torch_graph_us")]
        print(f"{r['op']:<20} {shape:<28} {cells[0]:>7} {cells[1]:>7} {cells[2]:>8} "
              f"{cells[3]:>8} {cells[4]:>8}")
    out = os.environ.get("FCO_PY_OPS_BENCH_JSON")
    if out:
        with open(out, "w") as f:
            json.dump({"tool": "pytest tests/python/test_gpu_ops.py::test_timing_eager_and_graph",
                       "world": gpool.world_size, "dtype": "bf16", "ranks": res}, f, indent=1)
