#!/usr/bin/env python3
"""embedding_alltoall_torch.py — what users have today for DLRM's embedding exchange: F.embedding_bag
(the lookup of this rank's tables over the global batch) + all_to_all_single (+ the permute into
[b_s, T, D]), timed with torch.distributed on the same workloads as `fco-bench embedding_alltoall`.

  torchrun --nproc_per_node=2 bench/embedding_alltoall_torch.py --json torch.json
  python3 bench/embedding_alltoall_torch.py --nproc 2          (spawns the ranks itself)

Per workload and dtype: `lookup` = F.embedding_bag over one packed weight (the rank's tables one
after another, indices shifted by each table's first row: one kernel, the most favourable form
for torch) and the transpose to the all_to_all_single send layout [B, T_r, D]; `a2a` =
all_to_all_single of those bytes (element splits b_s·T_r·D out, b_me·T_q·D in) alone; `total` =
lookup + a2a + permute (torch.cat of the received [b_me, T_q, D] blocks along the table axis).
Timing: CUDA graphs of 8 calls when --graph 1 (default; NCCL inside torch.cuda.graph; a replay /
8 is one iteration, as fco-bench's graphs of ≥ 8 calls), else eager; CUDA events around each of
--iters replays after --warmup; an iteration's time is the slowest rank's;
the median is reported in µs. Env as fco-bench: FCO_BENCH_EA_WORKLOADS, FCO_BENCH_EA_ROWS,
FCO_BENCH_EA_BATCH_DIV. Output: a table on rank 0's stdout, JSON with --json.
Environment as tests/gpu/run.sh: NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1 (set here if unset).
"""
import argparse
import json
import math
import os
import sys
import time

for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),
               ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_k, _v)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from _torch_bench import hbm_gbps, init_rank, launch, pick_env, positive_env, time_fn  # noqa: E402

# (global batch B, tables per GPU, D, L, rows per table, dist) — the list of op_embedding_alltoall.c;
# dist "uniform", "zipf" (Zipf indices) or "ragged" (each bag's length uniform in 0..2L, indices
# uniform: fco-bench draws the same law from its own hash, so the bags are alike, not equal)
WORKLOADS = [
    (16384, 8, 128, 32, 1000000, "uniform"),
    (65536, 8, 64, 8, 1000000, "uniform"),
    (4096, 16, 128, 64, 500000, "uniform"),
    (16384, 8, 128, 32, 1000000, "zipf"),
    (65536, 8, 64, 1, 1000000, "uniform"),
    (131072, 8, 32, 4, 1000000, "uniform"),
    (262144, 4, 16, 2, 1000000, "uniform"),
    (16384, 8, 128, 32, 1000000, "ragged"),
    (65536, 8, 64, 8, 1000000, "ragged"),
]
DIST_COL = {"uniform": "unif", "zipf": "zipf", "ragged": "rag"}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def workloads(world):
    rows = positive_env("FCO_BENCH_EA_ROWS", 0)
    div = positive_env("FCO_BENCH_EA_BATCH_DIV", 1)
    out = []
    for i in pick_env("FCO_BENCH_EA_WORKLOADS", len(WORKLOADS)):
        B, tpg, D, L, R, law = WORKLOADS[i]
        out.append((i, max(B // div, world), tpg, D, L, rows if rows > 0 else R, law))
    return out


def draw(n, rows, zipf, gen, device):
    u = torch.rand(n, generator=gen, device=device, dtype=torch.float64)
    if not zipf:
        return torch.clamp((u * rows).long(), max=rows - 1)
    # Zipf(1): inverse of the continuous law ∝ 1/(x+1), hot rows scattered by a bijection.
    x = torch.clamp(torch.floor(torch.exp(u * math.log(rows + 1.0))).long() - 1, 0, rows - 1)
    m = 1000003
    return (x * m) % rows if rows % m else x


def run(args):
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", torch.cuda.current_device())
    stream = torch.cuda.Stream()
    results = []
    for wid, B, tpg, D, L, R, law in workloads(world):
        bpr = [B // world + (1 if r < B % world else 0) for r in range(world)]
        bme = bpr[rank]
        T = tpg * world
        for dname in args.dtypes.split(","):
            dt = DTYPES[dname]
            gen = torch.Generator(device=dev)
            gen.manual_seed(1234 + 17 * rank + wid)
            weight = torch.randn(tpg * R, D, device=dev, dtype=dt, generator=gen)
            if law == "ragged":
                lens = torch.randint(0, 2 * L + 1, (tpg * B,), generator=gen, device=dev)
            else:
                lens = torch.full((tpg * B,), L, device=dev, dtype=torch.long)
            offsets = torch.cat([lens.new_zeros(1), lens.cumsum(0)])
            n = int(offsets[-1])
            idx = draw(n, R, law == "zipf", gen, dev)
            # shift table t's indices by its first row: one packed embedding_bag
            table = torch.repeat_interleave(
                torch.arange(tpg, device=dev),
                offsets[B::B] - offsets[:-1:B], output_size=n)
            idx = idx + table * R
            send = torch.empty(B, tpg, D, device=dev, dtype=dt)
            recv = torch.empty(bme * T * D, device=dev, dtype=dt)
            out = torch.empty(bme, T, D, device=dev, dtype=dt)
            in_splits = [b * tpg * D for b in bpr]
            out_splits = [bme * tpg * D for _ in range(world)]

            def lookup():
                pooled = F.embedding_bag(idx, weight, offsets, mode="sum", include_last_offset=True)
                send.copy_(pooled.view(tpg, B, D).transpose(0, 1))

            def a2a():
                dist.all_to_all_single(recv, send.view(-1), out_splits, in_splits)

            def permute():
                blocks = recv.split(out_splits)
                torch.cat([b.view(bme, tpg, D) for b in blocks], dim=1, out=out)

            def total():
                lookup()
                a2a()
                permute()

            t_lookup = time_fn(lookup, args.iters, args.warmup, args.graph, stream)
            t_a2a = time_fn(a2a, args.iters, args.warmup, args.graph, stream)
            t_total = time_fn(total, args.iters, args.warmup, args.graph, stream)
            gathered = n * D * weight.element_size()
            results.append({
                "op": "embedding_alltoall_torch",
                "shape": {"B": B, "tables_per_gpu": tpg, "D": D, "L": L, "rows": R,
                          "dist": law},
                "dtype": dname, "lookup_us": t_lookup, "a2a_us": t_a2a, "total_us": t_total,
                "lookup_hbm_pct": 100.0 * gathered / (t_lookup * 1e-6) / (args.hbm_gbps * 1e9),
            })
            if rank == 0:
                print(f"{B:8d} {tpg:4d} {D:4d} {L:3d} {R:8d} {DIST_COL[law]:>4s} "
                      f"{dname:>5s} {t_lookup:10.1f} {t_a2a:10.1f} {t_total:10.1f} "
                      f"{results[-1]['lookup_hbm_pct']:5.0f}", flush=True)
            del weight, idx, offsets, send, recv, out
            torch.cuda.empty_cache()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--graph", type=int, default=1)
    ap.add_argument("--json", default="")
    ap.add_argument("--nproc", type=int, default=2, help="ranks to spawn when not under torchrun")
    args = ap.parse_args()
    return launch(_worker, args, args.nproc)


def _worker(idx, args):
    init_rank(idx, args.nproc)
    # hbm%: of rank 0's HBM rate, measured as fco-bench measures it (until session 62: 4300 GB/s
    # on every card, which read an H100's lookups ~32 % low)
    rate = torch.tensor([hbm_gbps(torch.device("cuda", torch.cuda.current_device()))],
                        dtype=torch.float64, device="cuda")
    dist.broadcast(rate, 0)
    args.hbm_gbps = float(rate.item())
    if dist.get_rank() == 0:
        print(f"# embedding_alltoall_torch: torch {torch.__version__}, {dist.get_world_size()} ranks, "
              f"graph {args.graph} (8 calls a graph), iters {args.iters}, "
              f"median us (slowest rank); hbm% of {args.hbm_gbps:.0f} GB/s")
        print(f"#{'B':>7s} {'T/g':>4s} {'D':>4s} {'L':>3s} {'rows':>8s} {'dist':>4s} {'dtype':>5s} "
              f"{'lookup':>10s} {'a2a':>10s} {'total':>10s} {'hbm%':>5s}", flush=True)
    t0 = time.time()
    res = run(args)
    if dist.get_rank() == 0:
        print(f"# done in {time.time() - t0:.0f} s", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"tool": "embedding_alltoall_torch", "torch": torch.__version__,
                           "ranks": dist.get_world_size(), "graph": args.graph,
                           "hbm_gbps": round(args.hbm_gbps, 1), "results": res},
                          f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
