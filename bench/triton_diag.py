#!/usr/bin/env python3
"""triton_diag.py — times fco.triton's two operators alone on the shapes where they misbehaved
(issue 8), prints the config each shape gets and a per-program timeline of one call, and checks
the outputs against fco's C impl 0. Runs in well under 90 s on 2×H200.

    python3 bench/triton_diag.py --nproc 2            (spawns the ranks; one GPU each)
    torchrun --nproc_per_node=2 bench/triton_diag.py

GEMM + All-to-All: the five workloads of bench/gemm_alltoall_torch.py (same routing and
inputs), bf16, w "nk". Per workload: impl 0 and chunks (the C references, µs), then the Triton
kernel with the config fco.triton picks ("auto") and variants that isolate one choice each:
  spin     the waits without their backoff (wait_ns 0: every thread spins, as before the fix)
  split / merged   the other tile order
  sk on / sk off   the stream-K tail the other way round from auto (FCO_TRITON_GA_STREAMK; on
           by default on GPUs since 86be7db): the last partial wave's tiles cut along K over
           the idle programs; `sk` in the config column: split tiles × slices the device did on each
           rank (read back from its counters), "-" when it split nothing
  sk<n>    stream-K with at most n slices a tile (--streamk-slices n,...)
Then one call of "auto" with per-program timestamps (prof=): per rank, the programs (B), the
SMs they ran on, and medians / maxima in µs of each phase, counted from the rank's first
program start: start (when a program began: a late one was not co-resident), hdr (header
wait), tiles (tile loop, with its flags), land (wait for the peers' flags), copy (landing).
GEMV + AllReduce: the three shapes with ~700 µs outliers in run f922e95 and two normal ones,
K split over the ranks, a CUDA graph of 8 calls over 2 input sets (W not L2-hot, as
bench/gemv_allreduce_torch.py); "auto" and "spin" as above, then a profiled call (start,
push = tile + puts + flags, wait, reduce).
Every Triton output is checked against impl 0's (#wrong: elements off by more than
2e-2·|ref| + 2e-2·max|ref| for the gemm, 2e-2·max|ref| for the gemv, summed over ranks).
Times: median µs over --iters CUDA-graph replays, slowest rank per replay (_torch_bench).
Environment as tests/gpu/run.sh (NCCL_NVLS_ENABLE=0 ... set here if unset); --quick skips the
variants.

Sweep (--variants, gemm only): the Triton GEMM + All-to-All under a list of env settings on
chosen workloads (--workloads, indices into WORKLOADS; default 3,0,2: the skewed one, 4096
tokens at K 14336, 512 tokens at K 2048), one table at the end:

    python3 bench/triton_diag.py --nproc 2 --part gemm \
        --variants 'tma=0,tile=128,256,64,8,3;tma=1,tile=128,256,64,8,3;tma=1,tile=128,256,64,8,4'

A variant is key=value pairs split by ',' (a tile's own commas stay with it): tma (0/1,
FCO_TRITON_GA_TMA), tile (bm,bn,bk,warps,stages, FCO_TRITON_GA_TILE), sk (0/1/n,
FCO_TRITON_GA_STREAMK), order (split/merged, FCO_TRITON_GA_ORDER), wait (ns,
FCO_TRITON_WAIT_NS); what it leaves out keeps the process's env. Per workload the C impl 0 and
chunks are timed once (best C = the faster), then every variant: Triton µs, tri_c = best C /
Triton (issue 8's target: >= 0.90), #wrong against impl 0, whether TMA ran (and why not),
registers / spills / shared bytes of the compiled kernel, B, and the stream-K split (split
tiles x slices per rank). No profiled calls: about 60-100 s on 2×H200 for 5 variants × 3
workloads (a Triton compile per variant and expert count dominates).
"""
import argparse
import os
import sys
import time

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from _torch_bench import init_rank, launch, time_fn  # noqa: E402
from gemm_alltoall_torch import WORKLOADS, make_inputs, route  # noqa: E402

GEMV_SHAPES = [  # (N, K before the split, M, why)
    (8192, 8192, 4, "outlier"), (8192, 28672, 1, "outlier"), (16384, 16384, 64, "outlier"),
    (8192, 8192, 1, "normal"), (4096, 14336, 16, "normal")]


def log(msg):
    if dist.get_rank() == 0:
        print(msg, flush=True)


def all_sum(x):
    t = torch.tensor([float(x)], device="cuda", dtype=torch.float64)
    dist.all_reduce(t)
    return t.item()


def timed(fn, args, stream):
    """Median µs (slowest rank) or None, and the error text, agreed by every rank."""
    err = ""
    try:
        us = time_fn(fn, args.iters, args.warmup, True, stream, calls=1)
    except Exception as e:  # noqa: BLE001 — a failed variant must not stop the others
        us, err = None, f"{type(e).__name__}: {str(e)[:200]}"
    bad = torch.tensor([1.0 if us is None else 0.0], device="cuda")
    dist.all_reduce(bad)
    return (us if bad.item() == 0 else None), err


def fmt(v, w=9):
    return f"{v:{w}.1f}" if v is not None else f"{'-':>{w}s}"


def wrong_count(got, ref, rel, absfrac):
    g, r = got.float(), ref.float()
    tol = rel * r.abs() + absfrac * r.abs().max()
    return int((~((g - r).abs() <= tol)).sum().item())


def prof_summary(p, fields):
    """p [programs, 8] int64 timestamps of one rank → one line (µs from its first start)."""
    p = p.double()
    t0 = p[:, 0].min()
    sms = p[:, 5].long()
    per_sm = int(torch.bincount(sms).max().item()) if sms.numel() else 0
    out = [f"B {p.shape[0]:4d} SMs {int(sms.unique().numel()):3d} (max {per_sm}/SM)"]
    cols = [("start", (p[:, 0] - t0))] + [
        (name, p[:, b] - p[:, a]) for name, a, b in fields]
    for name, v in cols:
        v = v / 1e3
        out.append(f"{name} {v.median().item():7.1f}/{v.max().item():7.1f}")
    out.append(f"end {(p[:, fields[-1][2]].max() - t0).item() / 1e3:7.1f}")
    if p[:, 6].max() > 0:
        out.append(f"tiles {int(p[:, 6].min())}..{int(p[:, 6].max())}")
    return "  ".join(out)


def profile(call, nprog, fields, stream, calls=3):
    """A CUDA graph of `calls` back-to-back profiled calls, replayed twice; the last replay's
    middle call, summarised per rank (rank 0 prints every rank's line)."""
    bufs = [torch.zeros(8 * nprog, dtype=torch.int64, device="cuda") for _ in range(calls)]
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        call(bufs[0])  # eager: compile, workspace
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        for b in bufs:
            call(b)
    with torch.cuda.stream(stream):
        dist.barrier()
        for _ in range(2):
            g.replay()
    torch.cuda.synchronize()
    del g
    line = prof_summary(bufs[calls // 2].view(-1, 8).cpu(), fields)
    lines = [None] * dist.get_world_size()
    dist.all_gather_object(lines, line)
    for r, s in enumerate(lines):
        log(f"#   prof rank {r}: {s}")


def sk_summary(GA, comm, info, out_rows, N):
    """'split tiles x slices' the device did in this rank's last call (its counters), per rank."""
    sk = info.get("streamk") or {}
    mine = "-"
    if sk.get("on"):
        got = GA.streamk_counters(comm, out_rows, N, 2, sk["items"])
        nsp = sum(1 for x in got if x)
        mine = f"{nsp}x{max(got)}" if nsp else "-"
    lines = [None] * dist.get_world_size()
    dist.all_gather_object(lines, mine)
    return "/".join(lines)


def ga_workload(wid, rank, P, dt, dev):
    """Workload wid on this rank (Eg % P == 0): its experts E, name, A padded to the largest
    rank's rows (cap: a_rows is agreed), W, counts (host ch, device counts), rows received from
    each rank (rr) and their total (out_rows)."""
    tokens, K, N, Eg, topk, skew = WORKLOADS[wid]
    E = Eg // P
    name = f"{tokens},{K},{N},{Eg},{topk},{skew:g}"
    per = route(tokens, topk, Eg, skew)
    mine = per[rank * E:(rank + 1) * E]
    rows = sum(mine) * P
    a, w = make_inputs(rank, wid, rows, E, K, N, dt, dev)
    recv = [sum(per[r * E:(r + 1) * E]) for r in range(P)]
    cap = max(recv) * P
    a_pad = torch.zeros(cap, K, device=dev, dtype=dt)
    a_pad[:rows].copy_(a)
    del a
    ch = torch.tensor([[mine[e]] * P for e in range(E)], dtype=torch.int32)
    rr = torch.tensor(recv, dtype=torch.int32)
    return E, name, cap, a_pad, w, ch, ch.to(dev), rr, sum(recv)


def gemm_part(args, fco, GA, comm, stream):
    rank, P = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    dt = torch.bfloat16
    log("# ---- GEMM + All-to-All (bf16, w nk), median us; #wrong vs impl 0 -------------------")
    log(f"# {'tokens,K,N,E,topk,skew':24s} {'variant':>8s} {'us':>9s} {'#wrong':>7s}  config "
        "(tile bm,bn,bk,warps,stages; order; wait_ns; B; per_sm; regs/spills/shared; sk: split "
        "tiles x slices per rank)")
    fields = [("hdr", 0, 1), ("tiles", 1, 2), ("land", 2, 3), ("copy", 3, 4)]
    ab = []  # stream-K A/B summary rows
    for wid, (tokens, K, N, Eg, topk, skew) in enumerate(WORKLOADS):
        if Eg % P:
            continue
        E, name, cap, a_pad, w, ch, counts, rr, out_rows = ga_workload(wid, rank, P, dt, dev)
        n_out = out_rows

        def c_impl(impl):
            return fco.gemm_alltoall(a_pad, w, counts, out_rows=out_rows, counts_host=ch,
                                     recv_rows=rr, w_layout="nk", impl=impl)

        with torch.cuda.stream(stream):
            ref = c_impl("baseline").clone()
        torch.cuda.synchronize()
        c_us = {}
        for impl in ("baseline", "chunks"):
            us, err = timed(lambda: c_impl(impl), args, stream)
            c_us[impl] = us
            log(f"  {name:24s} {'C ' + ('impl0' if impl == 'baseline' else impl):>8s} "
                f"{fmt(us)} {'':>7s}  {err}")
        auto = GA.config(2, N, cap, E, P)
        other = "merged" if auto["split"] else "split"
        sk_auto = GA.streamk_config(None, -(-K // auto["tile"][2]))["on"]
        variants = [("auto", {})]
        if not args.quick:
            variants += [("spin", dict(wait_ns=0)), (other, dict(order=other))]
        # stream-K the other way round (a column of its own even with --quick)
        variants += [("sk off" if sk_auto else "sk on", dict(streamk=0 if sk_auto else 1))]
        variants += [(f"sk{n}", dict(streamk=n)) for n in args.streamk_slices]
        t_us = {}
        for vname, kw in variants:
            def tri(prof=None, kw=kw):
                return GA.gemm_alltoall([comm], [a_pad], [w], [counts], out_rows,
                                        w_layout="nk", prof=prof, **kw)[0]
            us, err = timed(tri, args, stream)
            info = dict(GA.last_launch)
            wrong = -1
            sks = "?"
            if us is not None:
                with torch.cuda.stream(stream):
                    out = tri()
                torch.cuda.synchronize()
                comm.check_async_error()
                wrong = wrong_count(out[:n_out], ref[:n_out], 2e-2, 2e-2)
                del out
                with torch.cuda.stream(stream):
                    sks = sk_summary(GA, comm, info, out_rows, N)
            wrong = int(all_sum(wrong))
            cfg = (f"{','.join(map(str, info.get('tile', ())))}; {info.get('order')}; "
                   f"{info.get('wait_ns')}; B {info.get('blocks_per_rank')}; "
                   f"{info.get('per_sm')}/SM; {info.get('n_regs')}/{info.get('n_spills')}/"
                   f"{info.get('shared')}; sk {sks}")
            log(f"  {name:24s} {vname:>8s} {fmt(us)} {wrong:7d}  {cfg} {err}")
            t_us[vname] = us
            if (vname == "auto" or vname.startswith("sk")) and us is not None:
                nprog = info["blocks_per_rank"]
                profile(lambda b: tri(prof=b), nprog, fields, stream)
        best_c = min((v for v in c_us.values() if v is not None), default=None)
        off, on = (t_us.get("sk off"), t_us.get("auto")) if sk_auto else \
            (t_us.get("auto"), t_us.get("sk on"))
        ab.append((name, best_c, off, on))
        del a_pad, w, ref
        torch.cuda.empty_cache()

    def ratio(a, b):
        return f"{a / b:8.2f}" if a is not None and b else f"{'-':>8s}"

    log("# stream-K A/B (us; tri_c = best C / Triton: the issue's >= 0.90 target)")
    log(f"# {'tokens,K,N,E,topk,skew':24s} {'best C':>9s} {'sk off':>9s} {'sk on':>9s} "
        f"{'on/off':>8s} {'tri_c off':>9s} {'tri_c on':>9s}")
    for name, best_c, off, on in ab:
        log(f"  {name:24s} {fmt(best_c)} {fmt(off)} {fmt(on)} {ratio(on, off)} "
            f"{ratio(best_c, off):>9s} {ratio(best_c, on):>9s}")


VARIANT_ENV = {"tma": "FCO_TRITON_GA_TMA", "tile": "FCO_TRITON_GA_TILE",
               "sk": "FCO_TRITON_GA_STREAMK", "order": "FCO_TRITON_GA_ORDER",
               "wait": "FCO_TRITON_WAIT_NS"}


def parse_variants(text):
    """'tma=1,tile=128,256,64,8,4;tma=0' → [(name, {ENV: value})]: ';' between variants, ','
    between pairs; a token without '=' continues the previous value (a tile's commas)."""
    out = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        kv = []
        for tok in (t.strip() for t in part.split(",")):
            if "=" in tok:
                k, v = tok.split("=", 1)
                if k.strip() not in VARIANT_ENV:
                    raise SystemExit(f"triton_diag: unknown variant key {k!r} in {part!r}; "
                                     f"expected some of {sorted(VARIANT_ENV)}")
                kv.append([k.strip(), v.strip()])
            elif kv and tok:
                kv[-1][1] += "," + tok
            elif tok:
                raise SystemExit(f"triton_diag: {tok!r} in {part!r} is not key=value")
        out.append((part.replace(" ", ""), {VARIANT_ENV[k]: v for k, v in kv}))
    return out


def sweep_part(args, fco, GA, comm, stream):
    """--variants: every variant (env settings) on every chosen workload; one table."""
    rank, P = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    dt = torch.bfloat16
    variants = parse_variants(args.variants)
    log(f"# ---- sweep: GEMM + All-to-All (bf16, w nk), {len(variants)} variants, median us ----")
    rows = []
    for wid in args.workloads:
        tokens, K, N, Eg, topk, skew = WORKLOADS[wid]
        if Eg % P:
            continue
        E, name, cap, a_pad, w, ch, counts, rr, out_rows = ga_workload(wid, rank, P, dt, dev)
        n_out = out_rows

        def c_impl(impl):
            return fco.gemm_alltoall(a_pad, w, counts, out_rows=out_rows, counts_host=ch,
                                     recv_rows=rr, w_layout="nk", impl=impl)

        with torch.cuda.stream(stream):
            ref = c_impl("baseline").clone()
        torch.cuda.synchronize()
        c_us = [timed(lambda impl=impl: c_impl(impl), args, stream)[0]
                for impl in ("baseline", "chunks")]
        best_c = min((v for v in c_us if v is not None), default=None)
        log(f"  {name:24s} C impl0 {fmt(c_us[0])}  chunks {fmt(c_us[1])}")
        for vname, env in variants:
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                def tri():
                    return GA.gemm_alltoall([comm], [a_pad], [w], [counts], out_rows,
                                            w_layout="nk")[0]
                us, err = timed(tri, args, stream)
                info = dict(GA.last_launch)
                wrong, sks = -1, "?"
                if us is not None:
                    with torch.cuda.stream(stream):
                        out = tri()
                    torch.cuda.synchronize()
                    comm.check_async_error()
                    wrong = wrong_count(out[:n_out], ref[:n_out], 2e-2, 2e-2)
                    del out
                    with torch.cuda.stream(stream):
                        sks = sk_summary(GA, comm, info, out_rows, N)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            wrong = int(all_sum(wrong))
            tri_c = f"{best_c / us:6.2f}" if us and best_c else f"{'-':>6s}"
            tma = "on" if info.get("tma") else f"off ({info.get('tma_why', '?')})"
            res = (f"{info.get('n_regs')}/{info.get('n_spills')}/{info.get('shared')}")
            row = (f"  {vname:34s} {name:24s} {fmt(us)} {fmt(best_c)} {tri_c} {wrong:7d}  "
                   f"{res:16s} B {info.get('blocks_per_rank')}; "
                   f"{','.join(map(str, info.get('tile', ())))}; {info.get('order')}; "
                   f"tma {tma}; sk {sks} {err}")
            log(row)
            rows.append(row)
        del a_pad, w, ref
        torch.cuda.empty_cache()
    log("# sweep (us; tri_c = best C / Triton, issue 8's target >= 0.90; regs/spills/shared "
        "bytes of the compiled kernel; B programs per rank)")
    log(f"# {'variant':34s} {'tokens,K,N,E,topk,skew':24s} {'Triton':>9s} {'best C':>9s} "
        f"{'tri_c':>6s} {'#wrong':>7s}  {'regs/spill/smem':16s} config")
    for row in rows:  # grouped by workload (the outer loop)
        log(row)


def gemv_part(args, fco, G, comm, stream):
    rank, P = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    dt = torch.bfloat16
    log("# ---- GEMV + AllReduce (bf16), graph of 8 calls over 2 input sets, median us per call --")
    log(f"# {'N x K, M':24s} {'variant':>8s} {'us':>9s} {'#wrong':>7s}  config "
        "(block m,n,k; tiles; B; per_sm (fits); warps; regs/spills/shared; wait_ns)")
    fields = [("push", 0, 1), ("wait", 1, 2), ("reduce", 2, 3)]
    for N, Kf, M, why in GEMV_SHAPES:
        Kr = Kf // P
        name = f"{N}x{Kf}, M={M} ({why})"
        gen = torch.Generator(device=dev)
        gen.manual_seed(77 + rank)
        xs = [torch.randn(M, Kr, device=dev, generator=gen).to(dt) for _ in range(2)]
        ws = [(torch.randn(N, Kr, device=dev, generator=gen) * Kr ** -0.5).to(dt)
              for _ in range(2)]
        with torch.cuda.stream(stream):
            ref = fco.gemv_allreduce(xs[0], ws[0], impl="baseline").clone()
        torch.cuda.synchronize()

        def c8():
            for i in range(8):
                fco.gemv_allreduce(xs[i % 2], ws[i % 2], impl="oneshot")
        us, err = timed(c8, args, stream)
        log(f"  {name:24s} {'C fused':>8s} {fmt(None if us is None else us / 8)} {'':>7s}  {err}")
        variants = [("auto", {})] + ([] if args.quick else [("spin", dict(wait_ns=0))])
        for vname, kw in variants:
            def tri8(kw=kw):
                for i in range(8):
                    G.gemv_allreduce([comm], [xs[i % 2]], [ws[i % 2]], **kw)
            us, err = timed(tri8, args, stream)
            info = dict(G.last_launch)
            wrong = -1
            if us is not None:
                with torch.cuda.stream(stream):
                    y = G.gemv_allreduce([comm], [xs[0]], [ws[0]], **kw)[0]
                torch.cuda.synchronize()
                comm.check_async_error()
                wrong = wrong_count(y, ref, 0.0, 2e-2)
            wrong = int(all_sum(wrong))
            cfg = (f"{','.join(map(str, info.get('block', ())))}; T {info.get('tiles')}; "
                   f"B {info.get('blocks_per_rank')}; {info.get('per_sm')} "
                   f"({info.get('per_sm_fit')})/SM; {info.get('num_warps')}w; "
                   f"{info.get('n_regs')}/{info.get('n_spills')}/{info.get('shared')}; "
                   f"{info.get('wait_ns')}")
            log(f"  {name:24s} {vname:>8s} {fmt(None if us is None else us / 8)} {wrong:7d}  "
                f"{cfg} {err}")
            if vname == "auto" and us is not None:
                profile(lambda b: G.gemv_allreduce([comm], [xs[0]], [ws[0]], prof=b),
                        info["blocks_per_rank"], fields, stream, calls=5)
        del xs, ws, ref
        torch.cuda.empty_cache()


def _worker(idx, args):
    init_rank(idx, args.nproc)
    import fco
    from fco.triton import gemm_alltoall as GA
    from fco.triton import gemv_allreduce as G

    comm = fco.init()
    stream = torch.cuda.Stream()
    t0 = time.time()
    log(f"# triton_diag: torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
        f"{dist.get_world_size()} ranks, iters {args.iters}, fco {fco.lib_path()}")
    log(f"# FCO_TRITON_WAIT_NS={os.environ.get('FCO_TRITON_WAIT_NS', '')!r} "
        f"FCO_TRITON_GA_ORDER={os.environ.get('FCO_TRITON_GA_ORDER', '')!r} "
        f"FCO_TRITON_GA_TILE={os.environ.get('FCO_TRITON_GA_TILE', '')!r} "
        f"FCO_TRITON_GA_STREAMK={os.environ.get('FCO_TRITON_GA_STREAMK', '')!r} "
        f"FCO_TRITON_GA_TMA={os.environ.get('FCO_TRITON_GA_TMA', '')!r}; triton "
        f"{GA.triton.__version__}")
    if args.variants:
        sweep_part(args, fco, GA, comm, stream)
    elif args.part in ("all", "gemm"):
        gemm_part(args, fco, GA, comm, stream)
    if args.part in ("all", "gemv") and not args.variants:
        gemv_part(args, fco, G, comm, stream)
    log(f"# done in {time.time() - t0:.0f} s")
    dist.barrier()
    fco.shutdown()
    dist.destroy_process_group()



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", "--nprocs", dest="nproc", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--part", default="all", choices=("all", "gemm", "gemv"))
    ap.add_argument("--quick", action="store_true",
                    help="the auto config and stream-K the other way round only")
    ap.add_argument("--streamk-slices", type=lambda v: [int(x) for x in v.split(",") if x],
                    default=[], help="also stream-K with at most n slices a tile, e.g. 4,16")
    ap.add_argument("--variants", default="",
                    help="gemm sweep: env settings per variant, e.g. "
                    "'tma=0,tile=128,256,64,8,3;tma=1,tile=128,256,64,8,4' (keys tma, tile, sk, "
                    "order, wait); runs only the sweep")
    ap.add_argument("--workloads", type=lambda v: [int(x) for x in v.split(",") if x],
                    default=[3, 0, 2], help="with --variants: indices into WORKLOADS "
                    "(default 3,0,2: skewed, 4096 tokens K 14336, 512 tokens K 2048)")
    args = ap.parse_args()
    if args.variants:
        parse_variants(args.variants)  # a typo fails here, before the ranks start
        if any(not 0 <= i < len(WORKLOADS) for i in args.workloads):
            ap.error(f"--workloads: indices 0..{len(WORKLOADS) - 1}")
    return launch(_worker, args, args.nproc)


if __name__ == "__main__":
    sys.exit(main())
