"""_util.py — what the examples share: process-group setup for torchrun (nccl on GPUs, gloo +
fco's cpu transport with --device cpu), timing of eager calls and of CUDA-graph replays, the
report line. Not an example itself.

Timing: the two paths of a line are timed side by side (`compare`): 5 rounds of `iters` calls,
torch first in even rounds and fco first in odd ones, each path's median round reported, so
drift of the host or the GPU during a run reaches both alike (timed one after the other, the
eager layer of moe_layer.py read 0.91× in one run and 1.29× in another).

Hangs: FCO_EXAMPLE_TRACE_AFTER=<seconds> makes every rank (setup() arms it, before joining the
process group) print the Python stack of each of its threads to stderr after that many seconds
and exit (faulthandler.dump_traceback_later(seconds, exit=True)), so a stuck run shows where
each worker waits instead of nothing, e.g.
    FCO_EXAMPLE_TRACE_AFTER=60 torchrun --nproc-per-node 2 examples/moe_layer.py
Each rank first prints "rank R (pid P): stack dump in S s" to stderr. Pick S above the run's
normal length: the dump ends the process whether or not it is stuck.
"""
import faulthandler
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import fco


def _arm_trace():
    """FCO_EXAMPLE_TRACE_AFTER (file header): dump every thread's stack and exit after S s."""
    after = os.environ.get("FCO_EXAMPLE_TRACE_AFTER", "").strip()
    if not after:
        return
    try:
        seconds = float(after)
    except ValueError:
        raise SystemExit(f"FCO_EXAMPLE_TRACE_AFTER={after!r} is not a number of seconds")
    if seconds <= 0:
        return
    print(f"rank {os.environ.get('RANK', '?')} (pid {os.getpid()}): stack dump in {seconds:g} s "
          "(FCO_EXAMPLE_TRACE_AFTER)", file=sys.stderr, flush=True)
    faulthandler.dump_traceback_later(seconds, exit=True)


def setup(device):
    """Join the torchrun process group; returns (rank, world, torch.device)."""
    _arm_trace()
    cuda = device == "cuda"
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    fco.init(device=dev)  # before any graph capture: bootstraps over the process group
    return dist.get_rank(), dist.get_world_size(), dev


def teardown():
    fco.shutdown()
    dist.destroy_process_group()


def timed(fn, iters, cuda, warmup=5):
    """µs per call of fn(), after `warmup` calls, every rank starting together."""
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def compare(fn_torch, fn_fco, iters, cuda, rounds=5):
    """(µs per call of fn_torch, of fn_fco): `rounds` rounds of `iters` calls each, the order
    alternating between rounds; each path's median round (5 warm-up calls each first)."""
    for _ in range(5):
        fn_torch()
        fn_fco()
    t = ([], [])
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            t[i].append(timed((fn_torch, fn_fco)[i], iters, cuda, warmup=1))
    return statistics.median(t[0]), statistics.median(t[1])


def _capture(fn):
    """fn() captured in a CUDA graph (warm-up outside capture first: it grows fco's workspace and
    makes cuBLAS handles); returns the graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    s.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):  # the warm-up's stream: per-stream state is made there
        fn()
    return g


def graphed(fn_torch, fn_fco, iters):
    """compare() of the replays of fn_torch and fn_fco, each captured in a CUDA graph."""
    return compare(_capture(fn_torch).replay, _capture(fn_fco).replay, iters, True)


def check_line(name, got, ref, tol):
    diff = (got.float() - ref.float()).abs().max().item() if got.numel() else 0.0
    ok = torch.allclose(got.float(), ref.float(), rtol=tol, atol=tol)
    return ok, f"check: {name} max |diff| {diff:.3g} -> {'OK' if ok else 'MISMATCH'}"


def time_line(what, times):
    """times: (µs torch, µs fco), as compare() and graphed() return them."""
    t_torch, t_fco = times
    return (f"{what:<7} torch {t_torch:9.1f} us/step   fco {t_fco:9.1f} us/step   "
            f"speedup {t_torch / t_fco:5.2f}x")
