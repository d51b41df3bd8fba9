#!/usr/bin/env python3
"""gemm_alltoall_torch.py — what users have today for the MoE expert down-projection + combine:
the expert GEMM (torch.bmm, or one torch.matmul per expert) then all_to_all_single with the split
sizes of the routing, timed with torch.distributed on the workloads of `fco-bench gemm_alltoall`.

  python3 bench/gemm_alltoall_torch.py --nproc 2 --json torch-ga.json   (spawns the ranks)
  torchrun --nproc_per_node=2 bench/gemm_alltoall_torch.py --json torch-ga.json

Workloads and routing are fco-bench's (tools/fco-bench/op_gemm_alltoall.c), so the columns sit
beside its table: (tokens per rank, K, N, experts, top-k, skew); every source rank sends
tokens·topk rows: skew × the average (tokens·topk / E) to expert 0, the rest split evenly over
the other E − 1 experts (largest remainder, ties to the lower expert); experts split evenly over
the ranks (expert g on rank g // (E/P)); W is [E/P, N, K] (torch Linear layout). skew 4 =
fco-bench's skewed case: expert 0 gets 4× the average rows (at E = 8: half of them, each other
expert 1/14). skew is in 0..E (1 when E = 1), or "r": random routing, each token's top-k
distinct experts drawn from a seed of the workload (fco-bench's route_random, the same integer
operations: the same rows; the table shows "r", the JSON skew -1). Env FCO_BENCH_GA_SHAPES=
"tokens,K,N,E,topk[,skew];..." replaces the list, as in fco-bench.

Rank r's A_r [rows_r, K] is grouped by local expert, then by source rank (fco_gemm_alltoall's
layout). Columns (median µs, slowest rank per iteration):
  gemm   Y = A_e · W_eᵀ for every local expert: torch.bmm when the rank's experts have equal rows
         (balanced routing), else one torch.matmul per expert (--gemm forces bmm / loop / grouped
         = torch._grouped_mm, torch >= 2.8)
  perm   Y reordered destination-major (one index_select): the send layout of all_to_all_single
  a2a    dist.all_to_all_single of those rows alone, split sizes (rows) from the routing
  total  gemm + perm + a2a: the baseline users run; out [Σ rows from r, N] ordered by source rank,
         then expert — fco_gemm_alltoall's `out`
  floor  max(FLOPs / peak, bytes sent to peers / 364 GB/s), the busiest rank (fco-bench's nccl
         floor); peak = the dense GEMM rate in the dtype measured in this run (torch.matmul, best of
         10 calls at 8192³, 4096×4096×14336 and 16384×4096×4096 — f32: 4096³, 8192×4096×2048 —
         the highest over the shapes and ranks) or --peak-tflops, or the row's gemm column's rate
         where that is higher (JSON: peak_tflops); target = max(gemm, a2a) + 0.2·min(gemm, a2a) (issue 5's overlap target)
  #wrong sampled output elements (first / last / spread rows of every source's block, 64 columns)
         against a float64 reference rebuilt from the source's seed; bound as fco-bench (bf16:
         |d| ≤ 1e-2·|ref| + 4e-3·Σ|a·w|); rows never written (output poisoned with NaN) count too
fco columns, beside them on the same workloads (when `import fco` and fco.init() work; --fco
selects, "none" skips): fco.gemm_alltoall with w_layout "nk", the host hints (counts_host,
recv_rows) and A padded to the largest rank's rows (a_rows is agreed by every rank):
  fco0 / tiles / chunks   the C impls 0 (GEMM + all-to-all), 1, 2
  triton                  impl="triton" (python/fco/triton/gemm_alltoall.py)
  x_c    total / the best C impl timed (speedup of fco's best C variant over the torch baseline)
  x_tri  total / triton;  tri_c = best C / triton (the issue's target: ≥ 0.9 of the best C
         variant's speedup); #wr_fco: #wrong of every fco impl's output, summed
The split sizes are host constants here (a real MoE layer copies them from the router's device
counts: one more sync per layer, not timed). Timing: CUDA graphs of 8 calls when --graph 1
(default; NCCL inside torch.cuda.graph; a replay / 8 is one iteration, as fco-bench's graphs of
≥ 8 calls), else eager; CUDA events around each of --iters replays after --warmup.
Output: a table on rank 0's stdout, JSON (fco-bench's record format: one record per column,
fco ones as impl "fco_<name>") with --json.
Environment as tests/gpu/run.sh: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1 (set here if unset).
"""
import argparse
import json
import os
import sys
import time

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from _torch_bench import init_rank, launch, time_fn  # noqa: E402

PEAK_SHAPES = {"16": [(8192, 8192, 8192), (4096, 4096, 14336), (16384, 4096, 4096)],
               "32": [(4096, 4096, 4096), (8192, 4096, 2048)]}  # (m, n, k): as fco-bench
LINK_GBPS = 364.0    # SM stores to a peer, per direction, both busy (DESIGN.md)
# (tokens per rank, K, N, experts, top-k, skew) — the list of op_gemm_alltoall.c
WORKLOADS = [
    (4096, 14336, 4096, 8, 2, 1.0),
    (1024, 14336, 4096, 8, 2, 1.0),
    (512, 2048, 7168, 32, 8, 1.0),
    (1024, 14336, 4096, 8, 2, 4.0),
    (128, 2048, 7168, 32, 8, 1.0),
]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
FCO_IMPLS = ("triton", "fco0", "tiles", "chunks")  # fco column names; order of measurement
FCO_IMPL_ARG = {"fco0": "baseline", "tiles": "tiles", "chunks": "chunks", "triton": "triton"}
_fco = None  # the fco module once fco_setup() made a communicator, else None
_fco_broken = False  # set after an async error: later fco columns are not measured


def _check_broken():
    """Agree on every rank whether the communicator holds an async error (then stop)."""
    global _fco_broken
    bad = 0
    try:
        torch.cuda.synchronize()
        _fco.init().check_async_error()
    except Exception:  # noqa: BLE001
        bad = 1
    t = torch.tensor([bad], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    _fco_broken = _fco_broken or int(t.item()) != 0
TOL = {"f32": (1e-5, 1e-5), "f16": (2e-3, 1e-3), "bf16": (1e-2, 4e-3)}


def workloads():
    env = os.environ.get("FCO_BENCH_GA_SHAPES", "")
    if not env:
        return list(WORKLOADS)
    out = []
    for tok in env.split(";"):
        v = [x.strip() for x in tok.split(",") if x.strip()]
        try:
            sk = 1.0 if len(v) < 6 else -1.0 if v[5] in ("r", "R") else float(v[5])
            w = tuple(int(x) for x in v[:5]) + (sk,) if len(v) in (5, 6) else ()
        except (ValueError, IndexError):
            w = ()
        if len(w) == 6 and min(w[:5]) > 0 and (
                w[4] <= w[3] if w[5] == -1.0 else
                0 <= w[5] <= w[3] and (w[3] > 1 or w[5] == 1)):
            out.append(w)
        else:
            print(f"gemm_alltoall_torch: FCO_BENCH_GA_SHAPES entry '{tok}' ignored (skew must "
                  "be in 0..E, 1 when E = 1, or r with top-k <= E)", file=sys.stderr)
    return out


_M64 = (1 << 64) - 1


def _splitmix64(state):
    """(next state, output): fco-bench's splitmix64 on Python ints masked to 64 bits."""
    state = (state + 0x9E3779B97F4A7C15) & _M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return state, z ^ (z >> 31)


def route_random(tokens, topk, experts):
    """skew "r": fco-bench's route_random — each token's top-k distinct experts by a partial
    Fisher-Yates shuffle of one permutation kept from token to token, splitmix64 seeded by the
    workload; the same integer operations, so the same rows."""
    perm, per = list(range(experts)), [0] * experts
    x = (0x5EED + tokens * 1000003 + experts * 1009 + topk) & _M64
    for _ in range(tokens):
        for j in range(topk):
            x, z = _splitmix64(x)
            i = j + z % (experts - j)
            perm[j], perm[i] = perm[i], perm[j]
            per[perm[j]] += 1
    return per


def route(tokens, topk, experts, skew):
    """Rows every source sends to each global expert: expert 0 skew × the average, the others
    the rest evenly; largest remainder (fco-bench's route(), the same float operations); skew
    -1: random routing (route_random)."""
    if skew < 0:
        return route_random(tokens, topk, experts)
    total = tokens * topk
    x = [total * skew / experts if g == 0 else
         total * (experts - skew) / (experts * (experts - 1)) for g in range(experts)]
    per = [int(v) for v in x]  # floor: every x >= 0
    rem = [v - p for v, p in zip(x, per)]
    for _ in range(total - sum(per)):
        best = max(range(experts), key=lambda g: (rem[g], -g))  # first of the largest
        per[best] += 1
        rem[best] = -1.0
    return per


def make_inputs(r, wid, rows, E, K, N, dt, dev):
    """A_r [rows, K], W_r [E, N, K] of rank r, rebuilt identically by any rank (for the check)."""
    gen = torch.Generator(device=dev)
    gen.manual_seed(1234 + 17 * r + 1009 * wid)
    a = torch.randn(rows, K, device=dev, dtype=torch.float32, generator=gen).to(dt)
    w = (torch.randn(E, N, K, device=dev, dtype=torch.float32, generator=gen) * K ** -0.5).to(dt)
    return a, w


def check(out, per, wid, E, P, K, N, dname, dev, me):
    """#wrong sampled elements of `out` on rank me (see the module doc)."""
    dt = DTYPES[dname]
    rtol, atol = TOL[dname]
    cols = torch.linspace(0, N - 1, min(N, 64), device=dev).long().unique()
    wrong, base = 0, 0
    for r in range(P):
        pr = per[r * E:(r + 1) * E]  # rows r's expert e got from each source
        n_from = sum(pr)
        if n_from:
            rows_r = sum(pr) * P
            a, w = make_inputs(r, wid, rows_r, E, K, N, dt, dev)
            picks = sorted({0, n_from - 1} | {n_from * i // 8 for i in range(8)})
            for j in picks:
                e, jj = 0, j
                while jj >= pr[e]:
                    jj -= pr[e]
                    e += 1
                arow = sum(pr[:e]) * P + me * pr[e] + jj  # expert e's block, source me, row jj
                x = a[arow].double()
                wc = w[e].index_select(0, cols).double()  # [c, K]
                ref = wc @ x
                mag = wc.abs() @ x.abs()
                got = out[base + j].index_select(0, cols).double()
                bad = ~((got - ref).abs() <= rtol * ref.abs() + atol * mag)  # NaN counts as bad
                wrong += int(bad.sum().item())
            del a, w
        base += n_from
    unwritten = int((~torch.isfinite(out[:base].float())).any(dim=1).sum().item())
    return wrong + unwritten * N


def fco_setup(args):
    """Import fco and make its communicator on the default group (collective). Returns the
    fco column names to measure ([] when fco is unavailable: the script still runs)."""
    global _fco
    names = [] if args.fco in ("", "none") else [n for n in args.fco.split(",") if n]
    if not names:
        return []
    ok, why = 1, ""
    try:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(
            __file__))), "python"))
        import fco
        fco.init()
        _fco = fco
    except Exception as e:  # noqa: BLE001 — no libfco / no GPU transport: torch columns only
        ok, why = 0, f"{type(e).__name__}: {e}"
    t = torch.tensor([ok], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MIN)  # every rank measures the same columns
    if int(t.item()) == 0:
        if dist.get_rank() == 0:
            print(f"# fco columns skipped: {why or 'fco unavailable on another rank'}", flush=True)
        _fco = None
        return []
    return names


def fco_columns(names, args, a, w, per, mine, E, P, K, N, dname, wid, rows, stream, rank, dev):
    """Time fco.gemm_alltoall per impl on this workload; {name: µs or None}, #wrong summed."""
    dt = DTYPES[dname]
    recv = [sum(per[r * E:(r + 1) * E]) for r in range(P)]
    cap = max(recv) * P  # rows of the busiest rank: a_rows is agreed by every rank
    a_pad = torch.zeros(cap, K, device=dev, dtype=dt)
    a_pad[:rows].copy_(a)
    ch = torch.tensor([[mine[e]] * P for e in range(E)], dtype=torch.int32)
    counts = ch.to(dev)
    rr = torch.tensor(recv, dtype=torch.int32)
    out_rows = sum(recv)
    times, wrong = {}, 0
    for name in names:
        impl = FCO_IMPL_ARG[name]
        times[name] = None
        if _fco_broken:  # an async error (e.g. a timeout) poisons the communicator: stop
            continue

        def fn():
            return _fco.gemm_alltoall(a_pad, w, counts, out_rows=out_rows, counts_host=ch,
                                      recv_rows=rr, w_layout="nk", impl=impl)
        try:
            us = time_fn(fn, args.iters, args.warmup, args.graph, stream)
            with torch.cuda.stream(stream):
                out = fn()
            torch.cuda.synchronize()
            _fco.init().check_async_error()  # a timed-out wait: no number
            wrong += check(out, per, wid, E, P, K, N, dname, dev, rank)
            times[name] = us
            del out
        except Exception as e:  # noqa: BLE001 — report, keep the torch columns
            print(f"# rank {rank}: fco {name}: {type(e).__name__}: {str(e)[:300]}",
                  file=sys.stderr, flush=True)
        _check_broken()
    del a_pad
    return times, wrong


def measure_peak(dt, dev, given):
    """The floor's GEMM rate in TFLOP/s: given (> 0), else the best of 10 timed torch.matmul
    calls per PEAK_SHAPES shape (no TF32 for f32), the highest over the shapes and the ranks."""
    if given > 0:
        return given
    best = 0.0
    g = torch.Generator(device=dev).manual_seed(1)
    for m, n, k in PEAK_SHAPES["32" if dt == torch.float32 else "16"]:
        a = (torch.rand(m, k, device=dev, generator=g) * 2 - 1).to(dt)
        b = (torch.rand(n, k, device=dev, generator=g) * 2 - 1).to(dt)
        c = torch.empty(m, n, device=dev, dtype=dt)
        ms = []
        for i in range(13):  # 3 untimed
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            torch.matmul(a, b.t(), out=c)
            e1.record()
            e1.synchronize()
            if i >= 3:
                ms.append(e0.elapsed_time(e1))
        best = max(best, 2.0 * m * n * k / (min(ms) * 1e-3) / 1e12)
        del a, b, c
    t = torch.tensor([best], device=dev, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def print_header(names):
    """The table's column line (rank 0), after the floor's GEMM rate lines."""
    print(f"# {'tokens,K,N,E,topk,skew':26s} {'dtype':>5s} {'mode':>7s}"
          + "".join(f" {c:>9s}" for c in ("gemm", "perm", "a2a", "total", "floor", "target"))
          + f" {'TFLOP/s':>8s} {'#wrong':>7s}"
          + ("".join(f" {c:>9s}" for c in names)
             + "".join(f" {c:>6s}" for c in ("x_c", "x_tri", "tri_c")) + f" {'#wr_fco':>7s}"
             if names else ""), flush=True)


def run(args, names=()):
    rank, P = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    stream = torch.cuda.Stream()
    results = []
    peaks = {}
    prev_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    for dname in args.dtypes.split(","):
        peaks[dname] = measure_peak(DTYPES[dname], dev, args.peak_tflops)
        if rank == 0:
            print(f"# floor's GEMM rate: {peaks[dname]:.1f} TFLOP/s {dname} ("
                  + ("given by --peak-tflops" if args.peak_tflops > 0 else
                     "measured in this run: torch.matmul, best of 10 calls, highest over "
                     "shapes and ranks") + "), or the row's gemm column's where higher", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = prev_tf32
    if rank == 0:
        print_header(names)
    for wid, (tokens, K, N, Eg, topk, skew) in enumerate(workloads()):
        if Eg % P:
            if rank == 0:
                print(f"# skip {tokens},{K},{N},{Eg},{topk}: {Eg} experts do not split over {P} ranks")
            continue
        E = Eg // P
        per = route(tokens, topk, Eg, skew)
        mine = per[rank * E:(rank + 1) * E]
        rows = sum(mine) * P
        send_splits = [sum(mine)] * P  # every source routes alike: the same rows back to each
        recv_splits = [sum(per[r * E:(r + 1) * E]) for r in range(P)]
        # y row of (expert e, source s, j) → send row: destination-major, then expert
        perm = []
        for s in range(P):
            off = 0
            for e in range(E):
                perm.extend(range(off + s * mine[e], off + (s + 1) * mine[e]))
                off += mine[e] * P
        perm = torch.tensor(perm, device=dev, dtype=torch.long)
        offs = torch.tensor([0] + mine, device=dev).mul(P).cumsum(0)[1:].to(torch.int32)
        mode = args.gemm
        if mode == "auto":
            mode = "bmm" if len(set(mine)) == 1 else "loop"
        flops = [2.0 * sum(per[r * E:(r + 1) * E]) * P * K * N for r in range(P)]
        for dname in args.dtypes.split(","):
            dt = DTYPES[dname]
            es = torch.tensor([], dtype=dt).element_size()
            a, w = make_inputs(rank, wid, rows, E, K, N, dt, dev)
            y = torch.empty(rows, N, device=dev, dtype=dt)
            send = torch.empty(rows, N, device=dev, dtype=dt)
            out = torch.empty(sum(recv_splits), N, device=dev, dtype=dt)
            ybox = [y]

            def gemm():
                if mode == "bmm":
                    torch.bmm(a.view(E, rows // E, K), w.transpose(1, 2), out=y.view(E, rows // E, N))
                elif mode == "grouped":
                    ybox[0] = torch._grouped_mm(a, w.transpose(1, 2), offs=offs)
                else:
                    r0 = 0
                    for e in range(E):
                        r1 = r0 + mine[e] * P
                        if r1 > r0:
                            torch.matmul(a[r0:r1], w[e].t(), out=y[r0:r1])
                        r0 = r1

            def permute():
                torch.index_select(ybox[0], 0, perm, out=send)

            def a2a():
                dist.all_to_all_single(out, send, recv_splits, send_splits)

            def total():
                gemm()
                permute()
                a2a()

            t = {}
            for name, fn in (("gemm", gemm), ("perm", permute), ("a2a", a2a), ("total", total)):
                t[name] = time_fn(fn, args.iters, args.warmup, args.graph, stream)
            out.fill_(float("nan"))
            with torch.cuda.stream(stream):
                total()
            torch.cuda.synchronize()
            wrong = check(out, per, wid, E, P, K, N, dname, dev, rank)
            wt = torch.tensor([wrong], device=dev, dtype=torch.int64)
            dist.all_reduce(wt)
            wrong = int(wt.item())
            ft, fwrong = {}, 0
            if names:
                ft, fwrong = fco_columns(names, args, a, w, per, mine, E, P, K, N, dname, wid,
                                         rows, stream, rank, dev)
                wt = torch.tensor([fwrong], device=dev, dtype=torch.int64)
                dist.all_reduce(wt)
                fwrong = int(wt.item())
            sent = [sum(per[r * E:(r + 1) * E]) * (P - 1) * N * es for r in range(P)]
            # the probe's rate, or this row's gemm column's where higher (run 472e5cd-peak:
            # torch.matmul's probe 751 TFLOP/s, the 4096-token bmm row 800)
            peak = max(peaks[dname], max(flops) / (t["gemm"] * 1e6))
            floor = max(max(flops) / (peak * 1e6), max(sent) / (LINK_GBPS * 1e3))
            target = max(t["gemm"], t["a2a"]) + 0.2 * min(t["gemm"], t["a2a"])
            tflops = max(flops) / (t["gemm"] * 1e6)
            results.append({"tokens": tokens, "k": K, "n": N, "experts": Eg, "topk": topk,
                            "skew": skew, "ranks": P, "rows": rows, "out_rows": tokens * topk,
                            "dtype": dname, "gemm_mode": mode, "t": t, "floor": floor,
                            "peak_tflops": peak,
                            "target": target, "gemm_tflops": tflops, "wrong": wrong,
                            "fco": ft, "fco_wrong": fwrong})
            if rank == 0:
                label = f"{tokens},{K},{N},{Eg},{topk}," + ("r" if skew < 0 else f"{skew:g}")
                print(f"  {label:26s} {dname:>5s} {mode:>7s}"
                      + "".join(f" {t[c]:9.1f}" for c in ("gemm", "perm", "a2a", "total"))
                      + f" {floor:9.1f} {target:9.1f} {tflops:8.1f} {wrong:7d}"
                      + (fco_row(names, ft, t["total"], fwrong) if names else ""), flush=True)
            del a, w, y, send, out, ybox
            torch.cuda.empty_cache()
    return results


def _fmt(v, width=9, prec=1):
    return f" {v:{width}.{prec}f}" if v is not None else f" {'-':>{width}s}"


def fco_row(names, ft, total, fwrong):
    """The fco columns of one row: every impl's µs, x_c, x_tri, tri_c, #wr_fco."""
    cs = [ft[n] for n in names if n != "triton" and ft.get(n) is not None]
    best_c = min(cs) if cs else None
    tri = ft.get("triton")
    return ("".join(_fmt(ft.get(n)) for n in names)
            + _fmt(total / best_c if best_c else None, 6, 2)
            + _fmt(total / tri if tri else None, 6, 2)
            + _fmt(best_c / tri if best_c and tri else None, 6, 2) + f" {fwrong:7d}")


def to_json(res):
    """fco-bench's record format, one record per column."""
    recs = []
    for r in res:
        shape = {k: r[k] for k in ("tokens", "k", "n", "experts", "topk", "skew", "ranks")}
        shape.update({"a_rows": r["rows"], "out_rows": r["out_rows"]})
        for c in ("gemm", "perm", "a2a", "total"):
            recs.append({"op": "gemm_alltoall", "shape": shape, "dtype": r["dtype"],
                         "impl": "torch_" + c, "impl_id": None, "gemm_mode": r["gemm_mode"],
                         "time_us": round(r["t"][c], 3),
                         "baseline_us": round(r["t"]["total"], 3),
                         "speedup": round(r["t"]["total"] / r["t"][c], 4),
                         "floor_us": round(r["floor"], 3), "target_us": round(r["target"], 3),
                         "peak_tflops": round(r["peak_tflops"], 1),
                         "compute_us": round(r["t"]["gemm"], 3), "comm_us": round(r["t"]["a2a"], 3),
                         "wrong": r["wrong"]})
        for name, us in r.get("fco", {}).items():
            if us is None:
                continue
            recs.append({"op": "gemm_alltoall", "shape": shape, "dtype": r["dtype"],
                         "impl": "fco_" + name, "impl_id": FCO_IMPL_ARG[name],
                         "time_us": round(us, 3), "baseline_us": round(r["t"]["total"], 3),
                         "speedup": round(r["t"]["total"] / us, 4),
                         "floor_us": round(r["floor"], 3), "target_us": round(r["target"], 3),
                         "peak_tflops": round(r["peak_tflops"], 1),
                         "compute_us": round(r["t"]["gemm"], 3), "comm_us": round(r["t"]["a2a"], 3),
                         "wrong": r["fco_wrong"]})
    return recs



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", default="bf16", help="comma list of f32, bf16, f16")
    ap.add_argument("--gemm", default="auto", choices=("auto", "bmm", "loop", "grouped"),
                    help="auto: bmm when the rank's experts have equal rows, else loop")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--graph", type=int, default=1)
    ap.add_argument("--json", default="")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="the floor's GEMM rate; default (0): measured in this run")
    ap.add_argument("--nproc", "--nprocs", dest="nproc", type=int, default=2,
                    help="ranks to spawn when not under torchrun")
    ap.add_argument("--fco", default=",".join(FCO_IMPLS),
                    help="fco columns to measure, in this order (comma list of "
                         f"{', '.join(FCO_IMPLS)}; 'none': torch columns only)")
    args = ap.parse_args()
    for n in [] if args.fco in ("", "none") else args.fco.split(","):
        if n and n not in FCO_IMPLS:
            ap.error(f"--fco: {n} is not one of {', '.join(FCO_IMPLS)} or none")
    for d in args.dtypes.split(","):
        if d not in DTYPES:
            ap.error(f"--dtypes: {d} is not one of {', '.join(DTYPES)}")
    return launch(_worker, args, args.nproc)


def _worker(idx, args):
    init_rank(idx, args.nproc)
    names = fco_setup(args)
    if dist.get_rank() == 0:
        print(f"# gemm_alltoall_torch: torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
              f"{dist.get_world_size()} ranks, graph {args.graph} (8 calls a graph), "
              f"iters {args.iters}, median us (slowest rank)")
        print("# floor = max(FLOPs / peak, bytes to peers / 364 GB/s) (busiest rank); "
              "target = max(gemm, a2a) + 0.2 min(gemm, a2a); TFLOP/s of gemm")
        if names:
            print(f"# fco: {_fco.lib_path()}; columns {', '.join(names)} (µs), x_c = total / best "
                  "C, x_tri = total / triton, tri_c = best C / triton", flush=True)
    t0 = time.time()
    res = run(args, names)
    if dist.get_rank() == 0:
        print(f"# done in {time.time() - t0:.0f} s", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"tool": "gemm_alltoall_torch", "torch": torch.__version__,
                           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "gpu": torch.cuda.get_device_name(0), "ranks": dist.get_world_size(),
                           "graph": args.graph, "results": to_json(res)}, f, indent=1)
            print(f"# wrote {args.json}")
    dist.barrier()
    if _fco is not None:
        _fco.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
