"""host_cost_probe.py — the host time of one eager fco call (one GPU, torchrun --nproc-per-node 1).

In eager mode a call costs max(host, GPU) at best: a decode step's GEMV + all-reduce is ~20 µs on
the GPU, so a host path of tens of µs decides the step. For each op: the public wrapper's host µs
(perf_counter around one call issued on an idle GPU, median of 200), the raw C call through ctypes
(the wrapper's Python removed), a bare kernel launch for scale (torch's x.add_(1) on a small
tensor), then torch.profiler's CPU-side table of what runs inside each op (CUDA API calls and their
counts). A probe: nothing asserts.

    torchrun --nproc-per-node 1 --standalone bench/probe/host_cost_probe.py
"""
import statistics
import time

import torch
import torch.distributed as dist

import fco
from fco import _comm, _lib
from fco.ops import _common
from fco.ops import gemm_alltoall as ga
from fco.ops import gemv_allreduce as gv


def host_us(fn, n=200):
    for _ in range(10):
        fn()
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(ts), min(ts)


def main():
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    dev = torch.device("cuda", 0)
    fco.init(device=dev)
    bf = torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(1)
    cases = {}
    small = torch.zeros(16, device=dev)
    cases["torch x.add_(1) (one launch)"] = lambda: small.add_(1)
    # gemv_allreduce: M 1 and 16, 8192 x 4096 (a P = 2 slice of 8192^2)
    x1 = torch.randn(1, 4096, device=dev, generator=g).to(bf)
    x16 = torch.randn(16, 4096, device=dev, generator=g).to(bf)
    wv = torch.randn(8192, 4096, device=dev, generator=g).to(bf)
    cases["torch matmul M1 8192x4096"] = lambda: torch.matmul(x1, wv.t())
    cases["fco.gemv_allreduce M1"] = lambda: fco.gemv_allreduce(x1, wv)
    cases["fco.gemv_allreduce M16"] = lambda: fco.gemv_allreduce(x16, wv)
    y1 = torch.empty(1, 8192, device=dev, dtype=bf)
    comm_h = _comm.get("", dev).handle
    st = _common.stream_of(x1)
    cfn = gv._fn()
    cases["raw C fco_gemv_allreduce M1"] = lambda: cfn(
        comm_h, x1.data_ptr(), wv.data_ptr(), None,
        y1.data_ptr(), 1, 8192, 4096, _lib.BF16, -1, st)
    # allreduce 64 KiB bf16
    t = torch.randn(32768, device=dev, generator=g).to(bf)
    cases["fco.allreduce 64 KiB"] = lambda: fco.allreduce(t)
    # gemm_alltoall tiles: examples/moe_layer.py's shape at one rank (balanced, hints)
    E, K, N, rows = 16, 1408, 2048, 256
    a = torch.randn(E * rows, K, device=dev, generator=g).to(bf)
    w = torch.randn(E, K, N, device=dev, generator=g).to(bf)
    counts = torch.full((E, 1), rows, dtype=torch.int32, device=dev)
    ch = counts.cpu()
    recv = torch.tensor([E * rows], dtype=torch.int32)
    out = fco.empty_symmetric((E * rows, N), bf, device=dev)
    cases["fco.gemm_alltoall tiles"] = lambda: fco.gemm_alltoall(
        a, w, counts, counts_host=ch, recv_rows=recv, out=out, impl="tiles")
    cases["fco.gemm_alltoall tiles, no hints"] = lambda: fco.gemm_alltoall(
        a, w, counts, out=out, impl="tiles")
    gfn = ga._fn()
    cases["raw C fco_gemm_alltoall tiles"] = lambda: gfn(
        comm_h, a.data_ptr(), E * rows, w.data_ptr(), 0, E, counts.data_ptr(), ch.data_ptr(),
        recv.data_ptr(), out.data_ptr(), E * rows, K, N, _lib.BF16, 1, st)
    cases["raw C fco_gemm_alltoall tiles, no hints"] = lambda: gfn(
        comm_h, a.data_ptr(), E * rows, w.data_ptr(), 0, E, counts.data_ptr(), None, None,
        out.data_ptr(), E * rows, K, N, _lib.BF16, 1, st)
    cases["fco.gemm_alltoall impl 0"] = lambda: fco.gemm_alltoall(
        a, w, counts, counts_host=ch, recv_rows=recv, out=out, impl="baseline")
    # embedding_alltoall: 8 tables x 100k rows, D 128, B 4096, L 8
    T, R, D, B, L = 8, 100000, 128, 4096, 8
    emb = torch.randn(T * R, D, device=dev, generator=g).to(bf)
    idx = torch.randint(0, R, (T * B * L,), device=dev, generator=g)
    off = torch.arange(0, T * B * L + 1, L, device=dev)
    cases["fco.embedding_alltoall"] = lambda: fco.embedding_alltoall(emb, idx, off, [R] * T, [T],
                                                                     [B])
    print("# host_cost_probe: one H200, one rank (nccl); host µs of one call issued on an idle GPU")
    print(f"{'case':<44}{'median':>9}{'min':>9}")
    for k, fn in cases.items():
        med, mn = host_us(fn)
        print(f"{k:<44}{med:9.1f}{mn:9.1f}", flush=True)
    from torch.profiler import ProfilerActivity, profile
    for k in ("fco.gemv_allreduce M1", "fco.gemm_alltoall tiles", "fco.allreduce 64 KiB",
              "fco.embedding_alltoall"):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            for _ in range(20):
                cases[k]()
            torch.cuda.synchronize()
        print(f"\n## {k}: 20 calls, by self CPU time")
        print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=16,
                                     max_name_column_width=50))
    fco.init().check_async_error()
    fco.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
