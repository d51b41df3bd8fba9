"""test_gpu.py — fco.allreduce on CUDA tensors: nccl transport, one process per GPU (2 ranks when
2 GPUs are visible, else 1), against torch's NCCL all_reduce; current-stream ordering, CUDA-graph
capture and replay, torch.compile with inductor (and its CUDA graphs), autograd, and the eager
and graph-replay timings (printed; written as JSON to $FCO_PY_BENCH_JSON when set).
Skipped without CUDA (conftest.py). On the GPU machine: pytest tests/python -m gpu -s
"""
import json
import os

import pytest

from _dist import gpu_count

pytestmark = pytest.mark.gpu


@pytest.fixture
def gpool(pools):
    return pools(min(2, gpu_count()), "nccl")


def _exact(x):
    import torch
    import torch.distributed as dist

    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    acc = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for p in parts:
        acc += p.float()
    return acc.to(x.dtype)


def _g_correctness():
    import torch
    import torch.distributed as dist

    import fco

    r = dist.get_rank()
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for n in (1, 7, 1000, 4097, 1 << 20, (1 << 20) + 3):
            for impl in ("auto", "baseline", "oneshot"):
                g = torch.Generator(device="cuda").manual_seed(n * 7 + r)
                xi = torch.randint(-8, 9, (n,), device="cuda", generator=g).to(dtype)
                y = fco.allreduce(xi, impl=impl)
                ref = xi.clone()
                dist.all_reduce(ref)
                assert torch.equal(y, ref), (dtype, n, impl)
                xr = torch.randn(n, device="cuda", generator=g).to(dtype)
                assert torch.equal(fco.allreduce(xr, impl=impl), _exact(xr)), (dtype, n, impl)
    x = torch.full((64, 3), float(r + 1), device="cuda")
    fco.allreduce_(x)
    assert torch.equal(x, torch.full_like(x, sum(range(1, dist.get_world_size() + 1))))
    c = fco.init()
    assert c.transport == "nccl" and c.device == torch.device("cuda", torch.cuda.current_device())
    torch.cuda.synchronize()
    c.check_async_error()
    return True


def test_correctness_vs_nccl(gpool):
    gpool.run(_g_correctness, timeout=300)


def _g_stream_order():
    import torch
    import torch.distributed as dist

    import fco

    s = torch.cuda.Stream()
    n = 1 << 22
    with torch.cuda.stream(s):
        # the input is produced on s right before the op: correct only if fco runs on s
        x = torch.ones(n, device="cuda")
        for _ in range(20):
            x = x * 1.0001 + 0.0  # keep s busy
        x.fill_(dist.get_rank() + 1.0)
        y = fco.allreduce(x)
        done = torch.cuda.Event()
        done.record(s)
    done.synchronize()
    w = dist.get_world_size()
    return bool((y == w * (w + 1) / 2).all().item())


def test_runs_on_current_stream(gpool):
    assert all(gpool.run(_g_stream_order))


def _g_cuda_graph():
    import torch
    import torch.distributed as dist

    import fco

    r = dist.get_rank()
    w = dist.get_world_size()
    results = []
    for dtype, n, impl in ((torch.bfloat16, 4096, "oneshot"), (torch.float32, 100003, "auto"),
                           (torch.float16, 1 << 18, "baseline")):
        x = torch.zeros(n, device="cuda", dtype=dtype)
        fco.allreduce(x, impl=impl)  # first call of the shape outside capture: grows the workspace
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = fco.allreduce(x, impl=impl)
            z = torch.ops.fco.allreduce(y, "", 0)  # the dispatcher path captures too
        for k in range(5):
            x.copy_(torch.arange(n, device="cuda", dtype=torch.float32).remainder(7).to(dtype)
                    + r + k)
            g.replay()
            torch.cuda.synchronize()
            expect = _exact(x)
            results.append(torch.equal(y, expect) and torch.equal(z, (expect.float() * w).to(dtype)))
    # a shape first seen inside capture needs the workspace reserved before
    c = fco.init()
    x = torch.ones(3 << 20, device="cuda", dtype=torch.bfloat16)
    c.reserve(fco.allreduce_workspace_bytes(x, impl="oneshot"))
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = fco.allreduce(x, impl="oneshot")
    g.replay()
    torch.cuda.synchronize()
    results.append(bool((y == w).all().item()))
    # setup steps inside a capture (session 62): refused on every rank alike, the capture valid
    # and nothing sticky (torch captures on a non-blocking stream libfco cannot see: fco's
    # Python layer asks torch)
    refused = []
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        for step in (lambda: c.reserve(c.workspace_bytes() + (64 << 20)),
                     lambda: c.empty_symmetric((1024,), torch.float32)):
            try:
                step()
                refused.append("no error")
            except fco.FcoError as e:
                refused.append(e.name if "being captured" in e.message else e.message)
        y2 = fco.allreduce(x, impl="oneshot")
    g2.replay()
    torch.cuda.synchronize()
    print("setup steps inside a capture:", refused)
    results.append(refused == ["INVALID_USAGE", "INVALID_USAGE"])
    results.append(bool((y2 == w).all().item()))
    c.check_async_error()
    return results


def test_cuda_graph_capture_and_replay(gpool):
    for per_rank in gpool.run(_g_cuda_graph, timeout=300):
        assert all(per_rank), per_rank


def _g_compile(mode):
    import torch
    import torch.distributed as dist

    import fco

    fco.init()

    def f(a):
        return fco.allreduce(a * 2).float().sin() + 1

    r = dist.get_rank()
    cf = torch.compile(f, fullgraph=True, mode=mode)
    outs = []
    for k in range(4):  # reduce-overhead records, then replays its CUDA graph
        a = torch.arange(4096, device="cuda", dtype=torch.float32).bfloat16() * 0 + (r + k)
        # inductor's fused sin may round differently from eager's: close, not equal
        outs.append(torch.allclose(cf(a).clone(), f(a), rtol=1e-5, atol=1e-5))
    return outs


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compile_inductor(gpool, mode):
    for per_rank in gpool.run(_g_compile, mode, timeout=600):
        assert all(per_rank), per_rank


def _g_autograd():
    import torch
    import torch.distributed as dist

    import fco

    r = dist.get_rank()
    x = torch.randn(8, 16, device="cuda", requires_grad=True)
    c = torch.full((8, 16), float(r + 1), device="cuda")
    (fco.allreduce(x) * c).sum().backward()
    expect = c.clone()
    dist.all_reduce(expect)
    return torch.equal(x.grad, expect)


def test_autograd(gpool):
    assert all(gpool.run(_g_autograd))


def _g_cpu_tensors_beside_nccl():
    import torch

    import fco

    # CPU tensors in an nccl process group: the cpu transport, bootstrapped over nccl
    y = fco.allreduce(torch.ones(5))
    return y.tolist(), fco.init(device="cpu").transport


def test_cpu_tensors_in_nccl_group(gpool):
    w = gpool.world_size
    assert gpool.run(_g_cpu_tensors_beside_nccl) == [([float(w)] * 5, "cpu")] * w


def _g_wrong_device():
    import pytest
    import torch

    import fco

    other = (torch.cuda.current_device() + 1) % torch.cuda.device_count()
    with pytest.raises(fco.FcoError, match="current CUDA device"):
        fco.allreduce(torch.ones(4, device=f"cuda:{other}"))
    return True


@pytest.mark.skipif(gpu_count() < 2, reason="needs 2 GPUs")
def test_wrong_device(gpool):
    gpool.run(_g_wrong_device)


def _g_timing(sizes, iters):
    import time

    import torch
    import torch.distributed as dist

    import fco

    rows = []
    for nbytes in sizes:
        x = torch.randn(nbytes // 2, device="cuda").bfloat16()
        xn = x.clone()
        fco.allreduce(x)
        torch.cuda.synchronize()
        dist.barrier()

        def per_call(fn, n=iters):
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            return (t1 - t0) / n * 1e6, (t2 - t0) / n * 1e6  # host µs per call, wall µs per call

        row = {"bytes": nbytes}
        row["fco_host_us"], row["fco_wall_us"] = per_call(lambda: fco.allreduce(x))
        row["fco_dispatch_host_us"], row["fco_dispatch_wall_us"] = per_call(
            lambda: torch.ops.fco.allreduce(x, "", -1))
        row["nccl_host_us"], row["nccl_wall_us"] = per_call(lambda: dist.all_reduce(xn))
        # CUDA graph: 20 calls per graph, replayed, timed with events
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(20):
                fco.allreduce(x)
        g.replay()
        torch.cuda.synchronize()
        dist.barrier()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        reps = max(iters // 20, 5)
        e0.record()
        for _ in range(reps):
            g.replay()
        e1.record()
        e1.synchronize()
        row["fco_graph_us"] = e0.elapsed_time(e1) * 1e3 / (reps * 20)
        rows.append({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})
        del g
    return rows


def test_timing_eager_and_graph(gpool):
    sizes = [8 << 10, 64 << 10, 256 << 10, 1 << 20]
    res = gpool.run(_g_timing, sizes, 200, timeout=300)
    hdr = f"{'bytes':>9} {'fco host':>9} {'fco wall':>9} {'disp host':>9} {'nccl wall':>9} " \
          f"{'fco graph':>9}   (µs per call, rank 0, world {gpool.world_size})"
    print("\n" + hdr)
    for row in res[0]:
        print(f"{row['bytes']:>9} {row['fco_host_us']:>9} {row['fco_wall_us']:>9} "
              f"{row['fco_dispatch_host_us']:>9} {row['nccl_wall_us']:>9} {row['fco_graph_us']:>9}")
    out = os.environ.get("FCO_PY_BENCH_JSON")
    if out:
        with open(out, "w") as f:
            json.dump({"tool": "pytest tests/python/test_gpu.py::test_timing_eager_and_graph",
                       "world": gpool.world_size, "dtype": "bf16", "ranks": res}, f, indent=1)
