"""moe_example_probe.py — where examples/moe_layer.py's eager time goes (one GPU, torchrun
--nproc-per-node 1). For the down projection + combine of each path (torch, fco per impl) and for
the whole layer: wall µs per call (back-to-back, one sync at the end), host µs to issue one call
(perf_counter around the call after a sync: includes any wait inside it), GPU µs (CUDA events
around one call issued on an idle GPU), in interleaved rounds (median). Then torch.profiler's
CPU-side table for fco's AUTO call and for the whole fco layer. A probe: nothing asserts.

    torchrun --nproc-per-node 1 --standalone bench/probe/moe_example_probe.py
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import _util  # noqa: E402
import moe_layer  # noqa: E402
import fco  # noqa: E402


def wall(fn, n):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def host(fn, n):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(ts)


def gpu(fn, n):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3)
    return statistics.median(ts)


def main():
    a = argparse.Namespace(device="cuda", tokens=2048, hidden=2048, ffn=1408, experts=16, topk=2,
                           iters=20, symmetric=True)
    rank, world, dev = _util.setup("cuda")
    layer = moe_layer.Layer(a, rank, world, dev, torch.bfloat16)
    x = torch.randn(a.tokens, a.hidden, generator=torch.Generator().manual_seed(rank)).to(
        dev, torch.bfloat16)
    with torch.no_grad():
        d = layer.dispatch(x)
        cases = {"torch down": lambda: layer.down_torch(d)}
        for impl in ("auto", "baseline", "tiles", "chunks"):
            cases[f"fco down {impl}"] = (lambda i: lambda: fco.gemm_alltoall(
                d["h"], layer.w2, d["counts"], out_rows=d["T"] * layer.k, counts_host=d["ch"],
                recv_rows=d["send_rows"], out=layer.out, impl=i))(impl)
        cases["fco down auto, no hints"] = lambda: fco.gemm_alltoall(
            d["h"], layer.w2, d["counts"], out_rows=d["T"] * layer.k, out=layer.out)
        cases["fco down auto, no out"] = lambda: fco.gemm_alltoall(
            d["h"], layer.w2, d["counts"], out_rows=d["T"] * layer.k, counts_host=d["ch"],
            recv_rows=d["send_rows"])
        cases["dispatch"] = lambda: layer.dispatch(x)
        cases["layer torch"] = lambda: (lambda dd: layer.combine(layer.down_torch(dd), dd))(
            layer.dispatch(x))
        cases["layer fco"] = lambda: (lambda dd: layer.combine(layer.down_fco(dd), dd))(
            layer.dispatch(x))
        for fn in cases.values():
            for _ in range(5):
                fn()
        res = {k: ([], [], []) for k in cases}
        for r in range(5):
            keys = list(cases) if r % 2 == 0 else list(reversed(cases))
            for k in keys:
                res[k][0].append(wall(cases[k], 20))
                res[k][1].append(host(cases[k], 10))
                res[k][2].append(gpu(cases[k], 10))
        print(f"# moe_example_probe: {world} rank(s), tokens/rank {a.tokens} H {a.hidden} "
              f"F {a.ffn} E {a.experts} top{a.topk}; median of 5 interleaved rounds, µs")
        print(f"{'case':<26}{'wall':>9}{'host':>9}{'gpu':>9}   wall per round")
        for k, (w, h, g) in res.items():
            print(f"{k:<26}{statistics.median(w):9.1f}{statistics.median(h):9.1f}"
                  f"{statistics.median(g):9.1f}   " + " ".join(f"{v:.0f}" for v in w))
        from torch.profiler import ProfilerActivity, profile
        for name in ("fco down auto", "torch down", "layer fco", "layer torch"):
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
                for _ in range(10):
                    cases[name]()
                torch.cuda.synchronize()
            print(f"\n## torch.profiler: {name}, 10 calls, by self CPU time")
            print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=22,
                                         max_name_column_width=60))
            print(f"## {name}: by device time")
            print(p.key_averages().table(sort_by="self_cuda_time_total", row_limit=12,
                                         max_name_column_width=60))
    fco.init().check_async_error()
    _util.teardown()


if __name__ == "__main__":
    main()
