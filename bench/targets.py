#!/usr/bin/env python3
"""targets.py — the operator issues' benchmark targets, checked from fco-bench JSON files (-J).

    python3 bench/targets.py OUT/bench-gemm_alltoall-nccl-graph.json [more.json ...] [--all]
                             [--hbm-gbps R]

One line per (shape, dtype, target) with the measured value, the bound, met / MISSED and the
slack (how far from the bound, positive = met with that much room, negative = missed by that
much, relative to the bound); --all also lists the targets that do not apply to a row. Only
results of GPU runs count (machine other than "cpu", transport other than "cpu", gpus ≥ 1:
fco-bench -t cpu on a GPU host or with -M names the GPU machine but measured the CPU); the nccl
transport is what the targets speak of (2×H200 in the issues); on local rows (virtual ranks
sharing one GPU) the overlap bound and the lookup's HBM share are n/a (they assume a GPU per
rank), the rest is checked. What each target means (the issues' texts; "fco" = the fastest fco
impl of the row, impl ≥ 1 or auto, named in the line):
  every op   auto ≥ impl 0 (AUTO never slower than the baseline), 1 % tolerance for timing noise;
             a row with wrong elements gets a "0 wrong" target, missed, and an impl with wrong
             elements is never the row's fco impl (nor a met AUTO); missing data is missed, not
             skipped: a row whose impl 0 has no time ("impl 0 timed"), an AUTO that ran without
             a time, fco impls that ran but none with a time and no wrong element ("fco impl
             timed": the targets that need one are not judged, the lookup's still is)
  overlap    fco ≤ max(compute alone, comm alone) + 0.2 · min(the two) (compute_us / comm_us of
             the same run)
  gemv       M ≤ 16: fco ≤ 1.2 · floor + 3 µs; 1.3× over impl 0 where the all-reduce ≥ 20 % of
             compute — the larger of fco's all-reduce (comm_us, AUTO) and NCCL's share of impl 0
             (impl 0 − compute_us), the all-reduce users have
  embedding  1.3× over impl 0 where comm ≥ 30 % of compute; the lookup alone reads the gathered
             rows at ≥ 75 % of the HBM rate (B · tables · L · D · element size per rank): the
             JSON's hbm_gbps (fco-bench measures the card's copy rate since session 49), in
             older files the machine's measured copy rate (MACHINE_HBM: 4300 GB/s on an H200,
             the issues' machine, 2930 on an H100), 4300 for a machine not listed
  gemm       1.3× over impl 0 where comm ≥ 30 % of compute
One rank (a nccl run with gpus = 1: no communication) gets the issues' fallbacks for a machine
without two GPUs instead: gemv the fused GEMV phase at ≥ 80 % of HBM bandwidth (floor / the
fastest of impls 1 and 2 — not AUTO, which is cuBLAS (impl 0) on one rank; at
M ≤ 16, where issue 3 states its floor target; larger M listed as n/a with --all),
embedding the lookup's ≥ 75 %, gemm variant A's tiles at ≥ 70 % of cuBLAS (compute / tiles),
and auto ≥ impl 0 as everywhere.
--hbm-gbps R judges the two targets stated as a share of HBM bandwidth — the lookup's ≥ 75 % and
one rank's GEMV phase ≥ 80 % (whose floor is W's bytes over the file's rate) — against R GB/s
instead of the file's rate (e.g. the datasheet's 4800 for an H200, 3350 for an H100: fco-bench's
measured copy rate is 0.87-0.90 of it, docs/results.md); the floors of runs with communication
(1.2 · floor + 3) stay fco-bench's, whose link share the file does not hold apart.
Targets against torch (the bench/*_torch.py scripts) are not checked here.
Exit status 0 (a report, not a test), 2 for unreadable input (not JSON, not fco-bench's layout,
a time that is not positive: the message names the file). Pure standard library.
"""
import json
import sys

HBM_GBPS = 4300.0  # the H200's copy rate (DESIGN.md): files written before hbm_gbps existed
# Those files' machines (fco-bench's -M names, matched as prefixes: "nvidia-h200-x2") and their
# measured copy rates: an H100's is 2925-2953 GB/s in every H100 file that has one
# (bench/results/*nvidia-h100-x1*); judged at the H200's rate its lookups read 0.6-0.7 too low.
MACHINE_HBM = {"nvidia-h100": 2930.0, "nvidia-h200": HBM_GBPS}
ESIZE = {"f32": 4, "f16": 2, "bf16": 2}


def _shape_str(op, s):
    if op == "gemv_allreduce":
        return f"{s['N']}x{s['K']} M={s['M']}"
    if op == "embedding_alltoall":
        return f"{s['B']}/{s['tables_per_gpu']}/{s['D']}/{s['L']} {s.get('dist', '')}".strip()
    if op == "gemm_alltoall":
        skew = s.get("skew", 1)
        return (f"{s['tokens']},{s['k']},{s['n']},{s['experts']},{s['topk']},"
                + ("r" if skew == -1 else f"{skew}"))  # -1: random routing
    return json.dumps(s, sort_keys=True)


def machine_hbm(machine):
    """The copy rate (GB/s) of a file without hbm_gbps, from its machine name; None: unknown."""
    for name, rate in MACHINE_HBM.items():
        if isinstance(machine, str) and machine.startswith(name):
            return rate
    return None


def rows_of(doc):
    """Group a fco-bench JSON document's results into rows: (op, shape, dtype) → results.
    ValueError for a document not in fco-bench's layout (no results list, a result without op /
    shape / dtype / impl_id, a time that is not a positive number)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results", []), list):
        raise ValueError("not an fco-bench document (an object with a results list)")
    rows = {}
    for r in doc.get("results", []):
        if not isinstance(r, dict) or any(k not in r for k in ("op", "shape", "dtype", "impl_id")):
            raise ValueError(f"result {r!r:.80} lacks op, shape, dtype or impl_id")
        for k in ("time_us", "compute_us", "comm_us", "floor_us"):
            v = r.get(k)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not v > 0):
                raise ValueError(f"{r['op']} impl {r['impl_id']}: {k} {v!r} is not a positive "
                                 "number")
        key = (r["op"], json.dumps(r["shape"], sort_keys=True), r["dtype"])
        rows.setdefault(key, []).append(r)
    return rows


def lookup_hbm(shape, dtype, c, hbm=HBM_GBPS):
    """The embedding lookup's gathered bytes over compute_us, as a fraction of hbm GB/s (ragged
    bags, dist "ragged": L is their mean length, the bytes within a fraction of a percent)."""
    gathered = shape["B"] * shape["tables_per_gpu"] * shape["L"] * shape["D"] * ESIZE.get(dtype, 4)
    return gathered / (c * 1e-6) / (hbm * 1e9)


def lookup_note(shape, dtype):
    """The lookup target's note: where the gathered-bytes measure is physically out of reach
    (docs/embedding_alltoall.md, bench/probe/ea_gather_probe.cu: a random read of every row once
    reaches 52 % of 4300 GB/s for 32-byte rows, 64 % for 64-byte rows; at L = 1 out is as many
    bytes as the rows, which the measure does not count). Ragged bags are named too: not a
    ceiling, an open inefficiency (the row split of session 38 took bf16 65536/8/64/8 from 51 to
    62 % of HBM, session 39's trimmed copy issue to 67 %, session 40's claimed tiles to 70 %;
    the rest is open:
    docs/embedding_alltoall.md, "Known limits")."""
    row = shape["D"] * ESIZE.get(dtype, 4)
    if row < 128:
        return f"lookup ({row}-byte rows: ceiling {52 if row <= 32 else 64} %)"
    if shape["L"] == 1:
        return "lookup (L = 1: out as large as the rows)"
    if shape.get("dist") == "ragged":  # not a ceiling: an open inefficiency (sessions 37-40)
        return "lookup (ragged bags: open inefficiency)"
    return "lookup"


def check_one_rank(op, shape, dtype, results, base, hbm=HBM_GBPS, floor_scale=1.0):
    """The one-GPU fallbacks of the issues (see the docstring) for a row of a one-rank run;
    floor_scale: the file's HBM rate over the one judged against (--hbm-gbps), which scales the
    one-rank floor (W's bytes over the file's rate)."""
    out = []
    c = base.get("compute_us")
    # the fused kernels' GEMV phase: impls 1 and 2 only (one rank's AUTO is impl 0, cuBLAS)
    fused = [r for r in results if r["impl_id"] in (1, 2) and r.get("time_us") is not None
             and not r.get("wrong")]  # an impl with wrong elements never meets a target
    best = min(fused, key=lambda r: r["time_us"]) if fused else None
    if op == "gemv_allreduce" and best is not None and best.get("floor_us"):
        # the kernel-efficiency half is its floor target's, stated for M <= 16 only
        frac = best["floor_us"] * floor_scale / best["time_us"]
        if shape["M"] <= 16:
            out.append(("gemv hbm >= 80%", frac, 0.8, frac >= 0.8, best["impl"]))
        else:
            out.append(("gemv hbm >= 80% (n/a)", frac, 0.8, None, best["impl"]))
    if op == "embedding_alltoall" and c:
        frac = lookup_hbm(shape, dtype, c, hbm)
        out.append(("lookup hbm >= 75%", frac, 0.75, frac >= 0.75, lookup_note(shape, dtype)))
    tiles = [r for r in results if r.get("impl") == "tiles" and r.get("time_us") is not None
             and not r.get("wrong")]
    if op == "gemm_alltoall" and tiles and c:
        frac = c / tiles[0]["time_us"]
        out.append(("tiles >= 70% cublas", frac, 0.7, frac >= 0.7, "tiles"))
    return out


def check_row(op, shape, dtype, results, ranks=None, local=False, hbm=HBM_GBPS, floor_scale=1.0):
    """[(target, value, bound, met, note)] for one row; value/bound in the target's unit; hbm:
    the HBM rate in GB/s of the lookup's share (the JSON's hbm_gbps where it has one, or
    --hbm-gbps); floor_scale: one rank's floor times this (check_one_rank).
    ranks = 1: a one-rank run (check_one_rank's targets only). local: a local-transport run
    (virtual ranks sharing one GPU): the overlap bound and the lookup's HBM share assume a GPU
    per rank, so they are listed as n/a there (the issues' one-GPU fallback is fused vs the
    baseline on the local transport)."""
    by_id = {r["impl_id"]: r for r in results if r.get("time_us") is not None}
    base = by_id.get(0)
    out = []
    bad = [r for r in results if r.get("wrong")]
    if bad:  # wrong elements anywhere in the row: a target of its own, missed
        out.append(("0 wrong", sum(r["wrong"] for r in bad), 0, False,
                    ",".join(str(r.get("impl", r["impl_id"])) for r in bad)))
    if base is None:  # every other target compares with impl 0: missed, never dropped
        return out + [("impl 0 timed", None, None, False, "no impl 0 time: row not judged")]
    t0 = base["time_us"]
    # an impl with wrong elements is never "the fastest fco impl" (until session 55 it could be)
    fco = [r for r in results
           if r["impl_id"] != 0 and r.get("time_us") is not None and not r.get("wrong")]
    best = min(fco, key=lambda r: r["time_us"]) if fco else None
    auto = by_id.get(-1)
    if auto is not None:  # at any P: AUTO is never slower than the baseline (and right)
        out.append(("auto >= impl 0", t0 / auto["time_us"], 0.99,
                    t0 / auto["time_us"] >= 0.99 and not auto.get("wrong"), "x"))
    elif any(r["impl_id"] == -1 for r in results):
        out.append(("auto >= impl 0", None, 0.99, False, "auto ran without a time"))
    if ranks == 1:
        return out + check_one_rank(op, shape, dtype, results, base, hbm, floor_scale)
    c, a = base.get("compute_us"), base.get("comm_us")
    if best is None:
        if any(r["impl_id"] != 0 for r in results):  # fco impls ran, none usable
            out.append(("fco impl timed", None, None, False,
                        "no fco impl with a time and no wrong element"))
        if op == "embedding_alltoall" and c:  # the lookup's target needs impl 0 only
            out.append(lookup_target(shape, dtype, c, hbm, local))
        return out
    tb, name = best["time_us"], best["impl"]
    if c is not None and a is not None and c > 0 and a > 0:
        bound = max(c, a) + 0.2 * min(c, a)
        out.append(("overlap (n/a: local)" if local else "overlap", tb, bound,
                    None if local else tb <= bound, name))
    ratio = a / c if c and a else None
    if op == "gemv_allreduce" and c and t0 > c:
        # comm_us is fco's own all-reduce (AUTO: the one-shot); the "all-reduce alone" is
        # the one users have, NCCL's: its share of impl 0 (impl 0 − the GEMV alone) counts too
        # (until session 55 only fco's, ~30-45 % faster, gated: 16384² M 16 was n/a)
        ratio = max(ratio or 0.0, (t0 - c) / c)
    need = {"gemv_allreduce": 0.2, "embedding_alltoall": 0.3, "gemm_alltoall": 0.3}.get(op)
    applies = ratio is not None and need is not None and ratio >= need
    if op == "gemv_allreduce":
        applies = applies and shape["M"] <= 16
        fl = best.get("floor_us")
        if shape["M"] <= 16 and fl:
            out.append(("1.2 floor + 3", tb, 1.2 * fl + 3, tb <= 1.2 * fl + 3, name))
    if need is not None:
        sp = t0 / tb
        out.append(("1.3x impl 0" if applies else "1.3x impl 0 (n/a)", sp, 1.3,
                    sp >= 1.3 if applies else None, name))
    if op == "embedding_alltoall" and c:
        out.append(lookup_target(shape, dtype, c, hbm, local))
    return out


def lookup_target(shape, dtype, c, hbm, local):
    frac = lookup_hbm(shape, dtype, c, hbm)
    return ("lookup hbm >= 75% (n/a: local)" if local else "lookup hbm >= 75%", frac, 0.75,
            None if local else frac >= 0.75, lookup_note(shape, dtype))


def _num(v):
    return "-" if v is None else f"{v:.3f}"


LOWER_IS_BETTER = ("overlap", "1.2 floor + 3")  # times against a bound; the rest: ratios


def slack(target, value, bound):
    """Room to the bound relative to it: > 0 met, < 0 missed; None where there is no value."""
    if value is None or bound is None:
        return None
    if not bound:
        return 0.0
    lower = target.split(" (")[0] in LOWER_IS_BETTER  # "overlap (n/a: local)" is a time too
    return (bound - value) / bound if lower else (value - bound) / bound


def report(paths, show_all=False, file=sys.stdout, hbm_gbps=None):
    """Print the table; returns (met, missed) counts. hbm_gbps: judge the HBM-share targets
    against this rate (GB/s) instead of each file's. ValueError naming the file for one that is
    not JSON or not in fco-bench's layout."""
    counts = [0, 0]
    print(f"{'op':<19} {'shape':<26} {'dtype':<5} {'target':<18} {'value':>9} {'bound':>9} "
          f"{'':<6} {'slack':>7}  fco impl", file=file)
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
            _report_file(path, doc, show_all, file, hbm_gbps, counts)
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # json's are ValueErrors
            raise ValueError(f"{path}: not a readable fco-bench JSON file "
                             f"({type(e).__name__}: {e})") from None
    print(f"# targets met {counts[0]}, missed {counts[1]}", file=file)
    return counts[0], counts[1]


def _report_file(path, doc, show_all, file, hbm_gbps, counts):
    rows = rows_of(doc)
    # CPU times: the cpu machine, or -t cpu on a GPU host / with -M (which names the GPU
    # machine but writes transport "cpu", gpus 0)
    if doc.get("machine") == "cpu" or doc.get("transport") == "cpu" or doc.get("gpus") == 0:
        print(f"# {path}: cpu transport (CPU times): no target applies", file=file)
        return
    ranks = 1 if doc.get("transport") == "nccl" and doc.get("gpus") == 1 else None
    local = doc.get("transport") == "local"
    tag = f"{doc.get('machine', '?')} {doc.get('transport', '?')} commit {doc.get('commit')}"
    if ranks == 1:
        tag += " (one rank: the issues' one-GPU targets)"
    if local:
        tag += " (virtual ranks on one GPU: overlap and lookup HBM n/a)"
    rate = doc.get("hbm_gbps")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                             or not rate > 0):
        raise ValueError(f"hbm_gbps {rate!r} is not a positive number")
    known = machine_hbm(doc.get("machine"))
    file_hbm = rate or known or HBM_GBPS
    hbm = hbm_gbps or file_hbm
    tag += f", HBM {hbm:.0f} GB/s"
    where = (f"the file's {file_hbm:.0f}" if rate else
             f"{doc.get('machine')}'s copy rate {file_hbm:.0f}, not in the file" if known else
             f"the H200's {file_hbm:.0f}: neither in the file nor its machine known")
    if hbm_gbps:
        tag += f" (--hbm-gbps; {where})"
    elif not rate:
        tag += f" ({where})"
    print(f"# {path}: {tag}", file=file)
    for (op, sj, dt), results in rows.items():
        shape = json.loads(sj)
        for target, value, bound, ok, note in check_row(op, shape, dt, results, ranks, local,
                                                        hbm, file_hbm / hbm):
            if ok is None and not show_all:
                continue
            verdict = "n/a" if ok is None else "met" if ok else "MISSED"
            counts[0] += ok is True
            counts[1] += ok is False
            sl = slack(target, value, bound)
            print(f"{op:<19} {_shape_str(op, shape):<26} {dt:<5} {target:<18} "
                  f"{_num(value):>9} {_num(bound):>9} {verdict:<6} "
                  f"{'' if sl is None else format(sl, '+.1%'):>7}  {note}", file=file)


def _hbm_arg(argv):
    """--hbm-gbps R / --hbm-gbps=R: (R, the other arguments); ValueError on a bad or missing R."""
    rest, hbm, i = [], None, 0
    while i < len(argv):
        a = argv[i]
        if a == "--hbm-gbps" or a.startswith("--hbm-gbps="):
            if "=" in a:
                v = a.split("=", 1)[1]
            elif i + 1 < len(argv):
                v, i = argv[i + 1], i + 1
            else:
                raise ValueError("--hbm-gbps needs a rate in GB/s")
            try:
                hbm = float(v)
            except ValueError:
                raise ValueError(f"--hbm-gbps {v!r}: not a number") from None
            if not hbm > 0 or hbm == float("inf"):
                raise ValueError(f"--hbm-gbps {v!r}: must be a positive rate in GB/s")
        else:
            rest.append(a)
        i += 1
    return hbm, rest


def main(argv):
    try:
        hbm, argv = _hbm_arg(argv)
    except ValueError as e:
        print(f"targets.py: {e}", file=sys.stderr)
        return 2
    args = [a for a in argv if a != "--all"]
    if not args or any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0 if args else 2
    try:
        report(args, "--all" in argv, hbm_gbps=hbm)
    except (OSError, ValueError, KeyError) as e:
        print(f"targets.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
