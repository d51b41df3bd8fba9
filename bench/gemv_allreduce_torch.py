#!/usr/bin/env python3
"""gemv_allreduce_torch.py — what users have today for the row-parallel linear of TP decode,
timed beside fco-bench gemv_allreduce on the same shapes: torch.matmul then NCCL all_reduce, and
torch.matmul then torch's symmetric-memory one-shot all-reduce (the strongest unfused peer).

    python3 bench/gemv_allreduce_torch.py [--nprocs 2] [--dtype bf16] [--json out.json] [--fco 0]
    (or under torchrun: torchrun --nproc-per-node 2 bench/gemv_allreduce_torch.py)

Per shape N×K (K before the split; rank r holds x_r [M, K/P] and W_r [N, K/P]) and M, with
CUDA graphs (each graph holds `graph_iters` iterations over rotating input sets so W is not
L2-hot; a replay's time is the slowest rank's; time = median replay time / iterations). Warm-up,
capture, replays and the CUDA events around them all run on one side stream (g.replay() launches
on the *current* stream, so replays outside `torch.cuda.stream(stream)` would escape the events):
  matmul        torch.matmul(x_r, W_r.T) alone (no communication)
  nccl_ar       dist.all_reduce of the [M, N] output alone (NCCL)
  symm_ar       torch.ops.symm_mem.one_shot_all_reduce_out alone (symmetric-memory input)
  mm+nccl       matmul, then dist.all_reduce: the baseline users run
  mm+symm       matmul written straight into a symmetric buffer, then one_shot_all_reduce_out
  floor         max(W_r bytes / HBM, 2(P-1)/P · M·N·esize / 364 GB/s), as fco-bench (HBM: its
                rate, measured as fco-bench measures it, or FCO_BENCH_HBM_GBPS)
fco's op on the same inputs, timed by the same time_graph (appended at the right; --fco 0 leaves
them out and prints exactly the torch table; when `import fco` / fco.init() fails, or a column
fails, it prints '-' and a `# note:` line, and the torch columns still run):
  fco           fco.gemv_allreduce(x_r, W_r, impl="auto")
  fco_fused     impl="oneshot" (the fused one-shot C kernel, impl 1; M ≤ 64)
  fco_triton    impl="triton" (python/fco/triton/gemv_allreduce.py; M ≤ 64)
  torch/fco     mm+symm / fco        tri/fused   fco_fused / fco_triton
  fco.init() runs once after the process group; before each fco column's graph, one eager call
  after a barrier (workspace growth, cuBLAS handle, the Triton compile: never captured or
  timed), then time_graph's own eager warm-up. An async error (e.g. FCO_ERR_TIMEOUT) stops the
  later fco columns. Each fco column's output (set 0, into a block the allocator just had
  NaN-filled) must match mm+nccl's within the tolerance below: mismatches go to the JSON's
  "wrong" (records impl "fco_auto", "fco_oneshot", "fco_triton") and print an ERROR line.
Check (rank 0 prints it): the same inputs go through mm+nccl and mm+symm into NaN-poisoned outputs;
both must match an fp32 sum of the partials and each other (maxdiff = max |mm+symm − mm+nccl| over
ranks; tolerance 2e-2·Σ_r|partial_r| + 1e-3·max Σ_r|partial_r|, per element). A matmul-carrying
time below half of W_r / HBM prints a WARNING (timing is broken).
Needs torch >= 2.8 with torch.distributed._symmetric_memory, P GPUs on one NVLink host.
Environment as tests/gpu/run.sh: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1 (set here if unset).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from _torch_bench import free_port, hbm_gbps  # noqa: E402

HBM_GBPS = 4300.0   # H200 HBM copy (DESIGN.md); run() sets rank 0's measured rate
LINK_GBPS = 364.0   # SM stores to a peer, per direction, both busy (DESIGN.md)
L2_BYTES = 60 << 20
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
DEFAULT_SHAPES = "8192x8192,8192x28672,4096x14336,16384x16384"
DEFAULT_MS = "1,4,16,64"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, default=2, help="ranks (GPUs) when not under torchrun")
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="N x K list, K before the split")
    p.add_argument("--ms", default=DEFAULT_MS, help="M list")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--replays", type=int, default=50, help="timed graph replays")
    p.add_argument("--graph-iters", type=int, default=8, help="iterations captured per graph")
    p.add_argument("--json", default="", help="write results here (rank 0)")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (0: pick a free one)")
    p.add_argument("--fco", type=int, default=1, choices=(0, 1),
                   help="1: fco columns fco / fco_fused / fco_triton beside torch's; 0: torch only")
    return p.parse_args(argv)



def enable_symm_mem(symm_mem, gname):
    """Older torch needs enable_symm_mem_for_group before rendezvous and the symm_mem ops; newer
    releases (2.11) mark it @deprecated (FutureWarning, nothing to do): call it only when it is
    there and not deprecated. True when called."""
    fn = getattr(symm_mem, "enable_symm_mem_for_group", None)
    if fn is None or getattr(fn, "__deprecated__", None) is not None:
        return False
    fn(gname)
    return True


def floors(n, kr, m, world, es):
    """(HBM floor of streaming W_r, the column floor) in µs, as fco-bench."""
    hbm = n * kr * es / (HBM_GBPS * 1e3)
    link = 2 * (world - 1) / world * m * n * es / (LINK_GBPS * 1e3) if world > 1 else 0.0
    return hbm, max(hbm, link)


MM_COLS = ("matmul", "mm+nccl", "mm+symm")  # the columns that stream W_r from HBM
# fco columns: (name, impl of fco.gemv_allreduce); all stream W_r
FCO_COLS = (("fco", "auto"), ("fco_fused", "oneshot"), ("fco_triton", "triton"))
FCO_MAX_M = 64  # FCO_GEMV_ALLREDUCE_MAX_M: the explicit fused impls take M ≤ 64


def below_floor(results, frac=0.5):
    """(row, column) of every matmul-carrying time below frac × W_r / HBM: physically impossible.
    fco columns count too where they were measured."""
    out = [(r, c) for r in results for c in MM_COLS if r["t"][c] < frac * r["hbm_floor"]]
    return out + [(r, c) for r in results for c, _ in FCO_COLS
                  if r.get("fco", {}).get(c) is not None and r["fco"][c] < frac * r["hbm_floor"]]


def ratio(a, b):
    """a / b, or None when either is missing (a failed or skipped column) or b is not > 0."""
    return a / b if a is not None and b is not None and b > 0 else None


def fmt(v, width, spec=".2f"):
    """A number in `width` columns, '-' for None."""
    return f" {'-':>{width}}" if v is None else f" {v:{width}{spec}}"


def _agree(bad, dev):
    """Collective: max over ranks of each flag in `bad` (a list of 0/1) — every rank takes the
    same decision (a failed column is '-' everywhere; one rank's async error stops all)."""
    t = torch.tensor(bad, dtype=torch.int32, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [int(v) for v in t.tolist()]


def fco_setup(args, dev):
    """Import fco (the repository's python/ first, as bench/gemm_alltoall_torch.py) and make its
    communicator on the default group (collective; after init_process_group, before any
    capture). (module or None, note); every rank agrees."""
    if not args.fco:
        return None, ""
    mod, note = None, ""
    try:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
            __file__))), "python"))
        import fco
        fco.init(device=dev)
        mod = fco
    except Exception as e:  # noqa: BLE001 — no libfco / no transport: torch columns only
        note = f"{type(e).__name__}: {str(e)[:300]}"
    if _agree([int(mod is None)], dev)[0]:
        return None, note or "fco unavailable on another rank"
    return mod, ""


def fco_column(fco, fn, impl, m, args, stream, dev, state):
    """µs per iteration of fn(i) (an fco.gemv_allreduce call) by time_graph, exactly as the torch
    columns, or None; (µs, note). Collective; every rank returns the same None / not None.
    Before time_graph: a barrier, then one eager call on `stream` — the first call of a shape
    grows the workspace (collective), makes impl 0's cuBLAS handle and compiles the Triton
    kernel (seconds), so none of that is captured or timed; the barrier starts the ranks'
    compiles together (a rank's kernel waits for its peers' at most FCO_TIMEOUT_MS)."""
    if state["broken"]:
        return None, "skipped: an earlier fco call left an async error on the communicator"
    if impl != "auto" and m > FCO_MAX_M:
        return None, f"skipped: M = {m} > {FCO_MAX_M} (impl {impl!r} is the fused GEMV)"
    note, async_bad, us = "", 0, None

    def check_async():
        nonlocal note, async_bad
        try:
            torch.cuda.synchronize()
            fco.init().check_async_error()
        except Exception as e:  # noqa: BLE001
            async_bad = 1
            note = note or f"async error: {type(e).__name__}: {str(e)[:300]}"

    try:
        torch.cuda.synchronize()
        dist.barrier()
        with torch.cuda.stream(stream):
            fn(0)  # eager: workspace, cuBLAS handle, Triton compile
    except Exception as e:  # noqa: BLE001
        note = f"first call: {type(e).__name__}: {str(e)[:300]}"
    check_async()
    failed, brk = _agree([int(bool(note)), async_bad], dev)
    if not failed:
        try:
            us = time_graph(fn, args.replays, args.graph_iters, stream)
        except Exception as e:  # noqa: BLE001
            note = f"graph: {type(e).__name__}: {str(e)[:300]}"
        check_async()
        failed, brk = _agree([int(bool(note)), async_bad], dev)
    state["broken"] = state["broken"] or bool(brk)
    if failed:
        return None, note or "failed on another rank"
    return us, ""


def time_graph(fn, replays, graph_iters, stream):
    """Median µs per iteration of fn(i) captured graph_iters times into one CUDA graph (a replay's
    time is the slowest rank's). As bench/gemm_alltoall_torch.py: everything on `stream` — replay()
    launches on the current stream, so it must run inside torch.cuda.stream(stream) for the events
    recorded on `stream` to bracket it."""
    torch.cuda.synchronize()  # the inputs were written on the default stream
    with torch.cuda.stream(stream):
        for i in range(3):  # eager warm-up: lazy init (NCCL, cuBLAS) cannot be captured
            fn(i)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for i in range(graph_iters):
            fn(i)
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
    with torch.cuda.stream(stream):
        g.replay()  # untimed
        dist.barrier()
        torch.cuda.synchronize()
        ev[0].record(stream)
        for i in range(replays):  # back to back: ranks stay in step, no host gaps timed
            g.replay()
            ev[i + 1].record(stream)
    torch.cuda.synchronize()
    t = torch.tensor([ev[i].elapsed_time(ev[i + 1]) * 1e3 / graph_iters for i in range(replays)],
                     dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # per replay, the slowest rank
    del g
    return statistics.median(t.tolist())


def fco_check(fco, fn, yf, tol, dtype, stream, dev):
    """Collective: fn(0)'s output against yf (mm+nccl's output, as float) within tol, per
    element. → (mismatches, max |diff|, each the max over ranks; this rank's note). The op
    allocates its output: a NaN-filled block of its size is freed just before on the same
    stream, so the allocator hands that block over and an element the op never writes reads
    NaN (a mismatch). An exception or async error counts every element."""
    bad, d, note = yf.numel(), float("inf"), ""
    try:
        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            junk = torch.full(tuple(yf.shape), float("nan"), device=dev, dtype=dtype)
            del junk
            out = fn(0)
        torch.cuda.synchronize()
        fco.init().check_async_error()
        of = out.float()
        bad = int((~((of - yf).abs() <= tol)).sum().item())
        d = float((of - yf).abs().nan_to_num(float("inf")).max().item())
    except Exception as e:  # noqa: BLE001 — counted as all wrong
        note = f"check: {type(e).__name__}: {str(e)[:300]}"
    chk = torch.tensor([float(bad), d], dtype=torch.float64, device=dev)
    dist.all_reduce(chk, op=dist.ReduceOp.MAX)
    return int(chk[0].item()), float(chk[1].item()), note


def run(rank, world, args, port):
    if "RANK" not in os.environ or port:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    global HBM_GBPS
    rate = torch.tensor([hbm_gbps(dev)], dtype=torch.float64, device=dev)
    dist.broadcast(rate, 0)  # rank 0's rate for every rank's floors (fco-bench: device 0's)
    HBM_GBPS = float(rate.item())
    import torch.distributed._symmetric_memory as symm_mem

    group = dist.group.WORLD
    gname = group.group_name
    enable_symm_mem(symm_mem, gname)
    dtype = DTYPES[args.dtype]
    es = torch.tensor([], dtype=dtype).element_size()
    shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",") if s]
    ms = [int(m) for m in args.ms.split(",") if m]
    max_numel = max(m for m in ms) * max(n for n, _ in shapes)
    # One symmetric buffer for every shape: the matmul writes its partial y_r into a view of it.
    symm_buf = symm_mem.empty(max_numel, dtype=dtype, device=dev)
    symm_mem.rendezvous(symm_buf, gname)
    fco, fco_note = fco_setup(args, dev)
    fco_state = {"broken": False}
    stream = torch.cuda.Stream()
    results = []
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234 + rank)
    for n, k in shapes:
        kr = k // world
        w_bytes = n * kr * es
        nsets = max(1, min(8, math.ceil(2 * L2_BYTES / w_bytes)))
        ws = [torch.randn(n, kr, device=dev, dtype=dtype, generator=gen) * 0.02 for _ in range(nsets)]
        for m in ms:
            xs = [torch.randn(m, kr, device=dev, dtype=dtype, generator=gen) for _ in range(nsets)]
            y = torch.empty(m, n, device=dev, dtype=dtype)
            y2 = torch.empty(m, n, device=dev, dtype=dtype)
            sv = symm_buf[: m * n].view(m, n)

            def mm(i):
                torch.matmul(xs[i % nsets], ws[i % nsets].t(), out=y)

            def nccl_ar(i):
                dist.all_reduce(y)

            def symm_ar(i):
                torch.ops.symm_mem.one_shot_all_reduce_out(sv, "sum", gname, y2)

            def mm_nccl(i):
                torch.matmul(xs[i % nsets], ws[i % nsets].t(), out=y)
                dist.all_reduce(y)

            def mm_symm(i):
                torch.matmul(xs[i % nsets], ws[i % nsets].t(), out=sv)
                torch.ops.symm_mem.one_shot_all_reduce_out(sv, "sum", gname, y2)

            t = {}
            for name, fn in (("matmul", mm), ("nccl_ar", nccl_ar), ("symm_ar", symm_ar),
                             ("mm+nccl", mm_nccl), ("mm+symm", mm_symm)):
                t[name] = time_graph(fn, args.replays, args.graph_iters, stream)
            ft, notes, fco_fns = {}, {}, {}
            for col, impl in FCO_COLS if args.fco else ():
                ft[col] = None
                if fco is None:
                    continue

                def fco_fn(i, impl=impl):
                    return fco.gemv_allreduce(xs[i % nsets], ws[i % nsets], impl=impl)

                fco_fns[col] = fco_fn
                ft[col], note = fco_column(fco, fco_fn, impl, m, args, stream, dev, fco_state)
                if note:
                    notes[col] = note
                    if rank:
                        print(f"# rank {rank}: {col} at N={n} K={k} M={m}: {note}",
                              file=sys.stderr, flush=True)
            # Same inputs (set 0) through both paths into NaN-poisoned outputs; both must equal an
            # fp32 sum of the partials up to bf16/f16 rounding, and each other.
            y.fill_(float("nan"))
            y2.fill_(float("nan"))
            torch.cuda.synchronize()
            with torch.cuda.stream(stream):
                mm_nccl(0)
                mm_symm(0)  # leaves this rank's partial in sv
            torch.cuda.synchronize()
            ref = torch.matmul(xs[0].float(), ws[0].float().t())
            mag = sv.float().abs()
            dist.all_reduce(ref)
            dist.all_reduce(mag)
            tol = 2e-2 * mag + 1e-3 * float(mag.max().item())
            yf, y2f = y.float(), y2.float()
            # fco columns: set 0 again; each output must match mm+nccl's (y) within tol
            fwrong, fdiff = {}, {}
            for col, _ in FCO_COLS:
                if ft.get(col) is None or fco_state["broken"]:
                    continue
                fwrong[col], fdiff[col], note = fco_check(fco, fco_fns[col], yf, tol, dtype,
                                                         stream, dev)
                if note:
                    notes[col] = notes.get(col) or note
                    print(f"# rank {rank}: {col} at N={n} K={k} M={m}: {note}", file=sys.stderr,
                          flush=True)
            chk = torch.tensor([
                float((~((yf - ref).abs() <= tol)).sum().item()),    # mm+nccl off the reference
                float((~((y2f - ref).abs() <= tol)).sum().item()),   # mm+symm off the reference
                float((~((y2f - yf).abs() <= tol)).sum().item()),    # mm+symm != mm+nccl (NaN: !=)
                float((y2f - yf).abs().nan_to_num(float("inf")).max().item()),
                float(ref.abs().max().item())], dtype=torch.float64, device=dev)
            dist.all_reduce(chk, op=dist.ReduceOp.MAX)
            bad_nccl, bad_symm, neq, diff, ref_max = chk.tolist()
            hbm_floor, floor = floors(n, kr, m, world, es)
            results.append({"N": n, "K": k, "K_r": kr, "M": m, "P": world, "t": t, "floor": floor,
                            "hbm_floor": hbm_floor, "max_abs_diff": diff, "max_abs": ref_max,
                            "wrong_nccl": int(bad_nccl), "wrong_symm": int(bad_symm),
                            "neq": int(neq)})
            if args.fco:
                results[-1].update({"fco": ft, "fco_wrong": fwrong, "fco_diff": fdiff,
                                    "fco_notes": notes})
            del xs, y, y2, ref, mag, tol, yf, y2f
            torch.cuda.empty_cache()
        del ws
    if rank == 0:
        report(results, args, {"lib": fco.lib_path() if fco is not None else None,
                               "note": fco_note, "broken": fco_state["broken"]})
    dist.barrier()
    if fco is not None:
        try:
            fco.shutdown()
        except Exception as e:  # noqa: BLE001
            print(f"# rank {rank}: fco.shutdown: {type(e).__name__}: {e}", file=sys.stderr)
    dist.destroy_process_group()


FCO_RATIOS = ("torch/fco", "tri/fused")


def fco_ratios(r):
    """(torch/fco = mm+symm / fco, tri/fused = fco_fused / fco_triton), None where missing."""
    f = r.get("fco", {})
    return ratio(r["t"]["mm+symm"], f.get("fco")), ratio(f.get("fco_fused"), f.get("fco_triton"))


def report(results, args, fco_info=None):
    cols = ("matmul", "nccl_ar", "symm_ar", "mm+nccl", "mm+symm")
    fcols = [c for c, _ in FCO_COLS] if args.fco else []
    fco_info = fco_info or {}
    print(f"# gemv_allreduce_torch  torch {torch.__version__}  {torch.cuda.get_device_name(0)}  "
          f"ranks {results[0]['P'] if results else '?'}  dtype {args.dtype}")
    print(f"# CUDA graphs of {args.graph_iters} iterations, median of {args.replays} replays / "
          f"iterations, slowest rank per replay; floor = max(W_r / {HBM_GBPS:.0f} GB/s, "
          "2(P-1)/P·M·N·esize / 364 GB/s)")
    if fcols:
        if fco_info.get("lib"):
            print(f"# fco {fco_info['lib']}: fco = fco.gemv_allreduce impl auto, fco_fused = "
                  "oneshot, fco_triton = triton (same graphs); torch/fco = mm+symm / fco, "
                  "tri/fused = fco_fused / fco_triton")
        else:
            print(f"# note: fco columns not measured: {fco_info.get('note') or 'fco unavailable'}")
    print("#     N      K   M" + "".join(f" {c:>9}" for c in cols) + "     floor  sym/nccl   maxdiff"
          + "".join(f" {c:>10}" for c in fcols)
          + "".join(f" {c:>9}" for c in (FCO_RATIOS if fcols else ())))
    print("#                 " + "".join(f" {'(us)':>9}" for _ in cols) + "      (us)       (x)"
          + (" " * 10 + "".join(f" {'(us)':>10}" for _ in fcols)
             + "".join(f" {'(x)':>9}" for _ in FCO_RATIOS) if fcols else ""))
    for r in results:
        t = r["t"]
        print(f"  {r['N']:6d} {r['K']:6d} {r['M']:3d}" + "".join(f" {t[c]:9.2f}" for c in cols) +
              f" {r['floor']:9.2f} {t['mm+nccl'] / t['mm+symm']:9.2f} {r['max_abs_diff']:9.3g}"
              + ("".join(fmt(r.get("fco", {}).get(c), 10) for c in fcols)
                 + "".join(fmt(v, 9) for v in fco_ratios(r)) if fcols else ""))
    for r, c in below_floor(results):
        us = r["t"][c] if c in r["t"] else r["fco"][c]
        print(f"# WARNING: timing below the physical floor: {c} {us:.2f} us < 0.5 x "
              f"W_r / {HBM_GBPS:.0f} GB/s = {0.5 * r['hbm_floor']:.2f} us at N={r['N']} K={r['K']} "
              f"M={r['M']}: the timing measures nothing, do not use these numbers", flush=True)
    fails = [r for r in results if r["neq"] or r["wrong_nccl"] or r["wrong_symm"]
             or not r["max_abs"] > 0]
    for r in fails:
        print(f"# ERROR: N={r['N']} K={r['K']} M={r['M']}: mm+symm != mm+nccl at {r['neq']} "
              f"elements (max |diff| {r['max_abs_diff']:.3g}); off the fp32 sum: mm+nccl "
              f"{r['wrong_nccl']}, mm+symm {r['wrong_symm']}; max |y| {r['max_abs']:.3g}")
    if results and not fails:
        print(f"# check: mm+symm output == mm+nccl output on all {len(results)} shapes (same "
              f"inputs; max |diff| {max(r['max_abs_diff'] for r in results):.3g}; max |y| "
              f"{min(r['max_abs'] for r in results):.3g}..{max(r['max_abs'] for r in results):.3g};"
              " both within 2e-2·Σ|partial| of the fp32 sum)")
    if fcols:
        fco_check_lines(results, fcols, fco_info)
    if args.json:
        out = {"tool": "gemv_allreduce_torch.py", "torch": torch.__version__,
               "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "gpu": torch.cuda.get_device_name(0), "hbm_gbps": round(HBM_GBPS, 1),
               "results": []}
        for r in results:
            for c in cols:
                t_us = r["t"][c]
                out["results"].append({
                    "op": "gemv_allreduce",
                    "shape": {"M": r["M"], "N": r["N"], "K": r["K"], "K_r": r["K_r"], "P": r["P"],
                              "bias": False},
                    "dtype": args.dtype, "impl": "torch_" + c, "impl_id": None,
                    "time_us": round(t_us, 3),
                    "baseline_us": round(r["t"]["mm+nccl"], 3),
                    "speedup": round(r["t"]["mm+nccl"] / t_us, 4),
                    "floor_us": round(r["floor"], 3),
                    "compute_us": round(r["t"]["matmul"], 3),
                    "comm_us": round(r["t"]["nccl_ar"], 3),
                    "wrong": {"mm+nccl": r["wrong_nccl"],
                              "mm+symm": max(r["wrong_symm"], r["neq"])}.get(c)})
        out["results"] += fco_records(results, fcols, args)
        if fcols:
            out["fco"] = {"lib": fco_info.get("lib"), "note": fco_info.get("note") or None,
                          "broken": bool(fco_info.get("broken"))}
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
        print(f"# wrote {args.json}")


def fco_check_lines(results, fcols, fco_info):
    """Notes ('-' cells), ERROR lines (fco output != mm+nccl's) and the fco check summary."""
    for r in results:
        for c, note in r.get("fco_notes", {}).items():
            print(f"# note: {c} at N={r['N']} K={r['K']} M={r['M']}: {note}")
    if fco_info.get("broken"):
        print("# note: an fco call left an async error (e.g. FCO_ERR_TIMEOUT): later fco columns "
              "were not measured")
    checked, bad = 0, 0
    for r in results:
        for c in fcols:
            if r.get("fco", {}).get(c) is None:
                continue
            w = r.get("fco_wrong", {}).get(c)
            if w is None:
                print(f"# ERROR: N={r['N']} K={r['K']} M={r['M']}: {c} timed but its output was "
                      "not checked (the communicator broke first)")
                bad += 1
                continue
            checked += 1
            if w:
                bad += 1
                print(f"# ERROR: N={r['N']} K={r['K']} M={r['M']}: {c} != mm+nccl at {w} of "
                      f"{r['M'] * r['N']} elements (max |diff| {r['fco_diff'][c]:.3g}; max |y| "
                      f"{r['max_abs']:.3g})")
    if checked and not bad:
        print(f"# check: fco output == mm+nccl output on all {checked} measured (shape, fco "
              "column) pairs (same inputs; max |diff| "
              f"{max(d for r in results for d in r.get('fco_diff', {}).values()):.3g}; within "
              "2e-2·Σ|partial| + 1e-3·max Σ|partial|)")


def fco_records(results, fcols, args):
    """fco-bench's record format for every measured fco column (impl "fco_<impl>")."""
    recs = []
    impls = dict(FCO_COLS)
    for r in results:
        for c in fcols:
            t_us = r.get("fco", {}).get(c)
            if t_us is None:
                continue
            recs.append({
                "op": "gemv_allreduce",
                "shape": {"M": r["M"], "N": r["N"], "K": r["K"], "K_r": r["K_r"], "P": r["P"],
                          "bias": False},
                "dtype": args.dtype, "impl": "fco_" + impls[c], "impl_id": impls[c],
                "column": c, "time_us": round(t_us, 3),
                "baseline_us": round(r["t"]["mm+nccl"], 3),
                "speedup": round(r["t"]["mm+nccl"] / t_us, 4),
                "floor_us": round(r["floor"], 3),
                "compute_us": round(r["t"]["matmul"], 3),
                "comm_us": round(r["t"]["nccl_ar"], 3),
                "wrong": r.get("fco_wrong", {}).get(c)})
    return recs


def main():
    args = parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        run(int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"]), args, 0)
        return
    n = args.nprocs
    if torch.cuda.device_count() < n:
        print(f"SKIP: {n} ranks need {n} GPUs, {torch.cuda.device_count()} visible", file=sys.stderr)
        sys.exit(77)
    mp.spawn(run, args=(n, args, args.port or free_port()), nprocs=n, join=True)


if __name__ == "__main__":
    main()
