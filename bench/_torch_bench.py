"""_torch_bench.py — what the torch comparison scripts under bench/ share: starting the ranks
(spawned, or under torchrun), joining the NCCL process group, and timing a function eagerly or as
a CUDA graph on a side stream, the slowest rank per iteration. Not a script itself."""
import os
import socket
import statistics
import sys

import torch
import torch.distributed as dist


def positive_env(name, dflt):
    """A positive integer knob (as fco-bench reads it): unset, empty or not a positive integer
    (said on stderr) gives dflt."""
    v = os.environ.get(name, "").strip()
    if not v:
        return dflt
    try:
        x = int(v, 0)
    except ValueError:
        x = 0
    if x > 0:
        return x
    print(f"{os.path.basename(sys.argv[0])}: {name}={v!r} is not a positive integer: ignored",
          file=sys.stderr)
    return dflt


def pick_env(name, count):
    """Indices 0..count-1 chosen by a comma list in env var `name` (all when unset or empty);
    a token that names no index is said on stderr and ignored (as fco-bench does)."""
    v = os.environ.get(name, "")
    if not v.strip():
        return list(range(count))
    out = []
    for tok in v.split(","):
        try:
            i = int(tok)
        except ValueError:
            i = -1
        if 0 <= i < count:
            out.append(i)
        else:
            print(f"{os.path.basename(sys.argv[0])}: {name}: {tok.strip()!r} is not a workload "
                  f"number 0..{count - 1}, ignored", file=sys.stderr)
    return out


def hbm_gbps(dev):
    """The floors' HBM rate in GB/s on device dev, as fco-bench's (tools/fco-bench/bench_dev.c):
    FCO_BENCH_HBM_GBPS when a positive number, else measured — the median of 9 device-to-device
    copies of max(256 MiB, 4 × L2) after 2 warm-ups, bytes read and written over the time
    (~4300 on an H200, ~2930 on an H100; until session 62 the peers took 4300 everywhere)."""
    v = os.environ.get("FCO_BENCH_HBM_GBPS", "").strip()
    if v:
        try:
            x = float(v)
        except ValueError:
            x = 0.0
        if 0 < x < float("inf"):
            return x
        print(f"{os.path.basename(sys.argv[0])}: FCO_BENCH_HBM_GBPS={v!r} is not a positive "
              "number of GB/s: measuring the HBM rate instead", file=sys.stderr)
    n = max(256 << 20, 4 * torch.cuda.get_device_properties(dev).L2_cache_size)
    a = torch.zeros(n, dtype=torch.uint8, device=dev)
    b = torch.empty_like(a)
    ms = []
    for i in range(11):
        e = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        e[0].record()
        b.copy_(a)
        e[1].record()
        e[1].synchronize()
        if i >= 2:
            ms.append(e[0].elapsed_time(e[1]))
    del a, b
    return 2.0 * n / (statistics.median(ms) * 1e-3) / 1e9


def free_port():
    """A free TCP port on localhost for the spawned ranks' rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(worker, args, nproc):
    """Run worker(idx, args) on every rank: in this process under torchrun (idx None), else
    spawn nproc ranks on localhost. Returns the exit status: 77 (skip) when fewer than nproc
    GPUs are visible."""
    if "RANK" in os.environ:
        worker(None, args)
        return 0
    if torch.cuda.device_count() < nproc:
        print(f"SKIP: {nproc} ranks need {nproc} GPUs, {torch.cuda.device_count()} visible",
              file=sys.stderr)
        return 77
    import torch.multiprocessing as mp
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    mp.spawn(worker, args=(args,), nprocs=nproc, join=True)
    return 0


def init_rank(idx, nproc):
    """Join the process group: idx is the spawned rank (None under torchrun)."""
    if idx is not None:
        os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(idx)
        os.environ["WORLD_SIZE"] = str(nproc)
    local = int(os.environ.get("LOCAL_RANK", os.environ["RANK"]))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))


def time_fn(fn, iters, warmup, graph, stream, calls=8):
    """Median µs of fn() (slowest rank per iteration), replayed from a CUDA graph when graph:
    each graph holds `calls` calls of fn and a replay's time / calls is one iteration's, as
    fco-bench's graphs hold at least 8 calls and bench/gemv_allreduce_torch.py's --graph-iters
    (until session 62 one call a graph: every torch time carried a replay's launch gap, ~1-3 µs,
    that fco's did not). fn's buffers are the same in every call (fco-bench rotates input sets):
    small workloads may find them in L2, in torch's favour."""
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        for _ in range(warmup):  # eager first: lazy init (NCCL, cuBLAS) cannot be captured
            fn()
    torch.cuda.synchronize()
    g = None
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    with torch.cuda.stream(stream):
        dist.barrier()
        torch.cuda.synchronize()
        ev[0].record(stream)
        for i in range(iters):
            if g is not None:
                g.replay()
            else:
                fn()
            ev[i + 1].record(stream)
    torch.cuda.synchronize()
    per = calls if g is not None else 1
    t = torch.tensor([ev[i].elapsed_time(ev[i + 1]) * 1e3 / per for i in range(iters)],
                     device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    del g
    return statistics.median(t.tolist())
