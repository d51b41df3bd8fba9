"""wrapper_cost_probe.py — where the Python wrappers' host time goes on a GPU (one rank,
torchrun --nproc-per-node 1). host_cost_probe.py found fco.gemv_allreduce 25 µs and
fco.gemm_alltoall 32 µs of host above their raw C calls; this times the wrappers' pieces one by
one (µs per call, 20000 calls back to back, the GPU left to drain every 500) and runs cProfile
over 5000 calls of each wrapper. A probe: nothing asserts.

    torchrun --nproc-per-node 1 --standalone bench/probe/wrapper_cost_probe.py
"""
import cProfile
import pstats
import time

import torch
import torch.distributed as dist

import fco
from fco import _comm
from fco.ops import _common
from fco.ops import gemm_alltoall as ga
from fco.ops import gemv_allreduce as gv


def per_call(fn, n=20000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(n):
        fn()
        if i % 500 == 499:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def main():
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    dev = torch.device("cuda", 0)
    fco.init(device=dev)
    bf = torch.bfloat16
    x = torch.randn(1, 4096, device=dev).to(bf)
    w = torch.randn(8192, 4096, device=dev).to(bf)
    E, K, N, rows = 16, 1408, 2048, 256
    a = torch.randn(E * rows, K, device=dev).to(bf)
    we = torch.randn(E, K, N, device=dev).to(bf)
    counts = torch.full((E, 1), rows, dtype=torch.int32, device=dev)
    ch = counts.cpu()
    recv = torch.tensor([E * rows], dtype=torch.int32)
    out = fco.empty_symmetric((E * rows, N), bf, device=dev)
    small = torch.zeros(16, device=dev)
    pieces = {
        "torch small.add_(1)": lambda: small.add_(1),
        "x.new_empty((1, 8192)) (CUDA)": lambda: x.new_empty((1, 8192)),
        "torch.cuda.current_device()": lambda: torch.cuda.current_device(),
        "_common.stream_of(x)": lambda: _common.stream_of(x),
        "_common.direct_ok(x, w)": lambda: _common.direct_ok(x, w),
        "gv._check(x, w, None)": lambda: gv._check(x, w, None),
        "_comm.get('', dev)": lambda: _comm.get("", x.device),
        "_common.rank_size('', dev)": lambda: _common.rank_size("", x.device),
        "int(recv.sum())": lambda: int(recv.sum()),
        "out[4096:].zero_()": lambda: out[4096:].zero_(),
        "ga._host_ints(ch)": lambda: ga._host_ints(ch, "op", "counts_host"),
        "ga._check(...)": lambda: ga._check(a, we, counts, ch, recv, E * rows, 0, 1),
        "fco.gemv_allreduce(x, w)": lambda: fco.gemv_allreduce(x, w),
        "fco.gemm_alltoall tiles (hints, out)": lambda: fco.gemm_alltoall(
            a, we, counts, counts_host=ch, recv_rows=recv, out=out, impl="tiles"),
    }
    print("# wrapper_cost_probe: µs per call, back to back (one H200, one rank, nccl)")
    for k, fn in pieces.items():
        n = 4000 if k.startswith("fco.") else 20000
        print(f"{k:<42}{per_call(fn, n):8.2f}", flush=True)
    for name in ("fco.gemv_allreduce(x, w)", "fco.gemm_alltoall tiles (hints, out)"):
        fn = pieces[name]
        prof = cProfile.Profile()
        prof.enable()
        for i in range(5000):
            fn()
            if i % 500 == 499:
                torch.cuda.synchronize()
        prof.disable()
        torch.cuda.synchronize()
        print(f"\n## cProfile: {name}, 5000 calls, by own time")
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)
    fco.init().check_async_error()
    fco.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
