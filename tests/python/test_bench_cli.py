"""test_bench_cli.py — fco-bench (tools/fco-bench) runs every operator's table on the cpu
transport with tiny shapes: every element checked (0 wrong), -R rounds reported in the header,
-J writes JSON with one result per row, each naming the impl that ran (plan; AUTO's also under
each table), bad flags and workload lists that select nothing exit 2, one wrong gemm_alltoall
element counts once; the table's best / speedup / auto_x and #wrong agree with the JSON, sizes,
flags, defaults and workload knobs as documented (tools/fco-bench/README.md), -R reports medians,
corrupted outputs are counted per element (LD_PRELOAD shims), the element conversions are exact;
env values past the ops' range and an unwritable -J exit 2 before running, skipped rows say why,
-M stays one UTF-8 header line.
Run: pytest tests/python/test_bench_cli.py
"""
import json
import os
import re
import subprocess
from collections import Counter

import pytest

import fco

# Tiny shapes through the bench's own environment knobs (tools/fco-bench/README.md).
OPS = {
    "allreduce": ([ "-b", "1K", "-e", "4K"], {}),
    "gemv_allreduce": ([], {"FCO_BENCH_GEMV_NK": "72x40", "FCO_BENCH_GEMV_M": "1,3"}),
    "embedding_alltoall": ([], {"FCO_BENCH_EA_WORKLOADS": "0,4", "FCO_BENCH_EA_BATCH_DIV": "2048",
                                "FCO_BENCH_EA_ROWS": "300"}),
    "gemm_alltoall": ([], {"FCO_BENCH_GA_SHAPES": "40,72,48,4,2;24,72,40,3,1,4"}),
}


def bench_bin():
    exe = os.path.join(os.path.dirname(os.path.dirname(fco.lib_path())), "bin", "fco-bench")
    if not os.path.exists(exe):
        pytest.fail(f"{exe} missing: `make` builds it next to libfco")
    return exe


def run(args, extra_env=None, timeout=300):
    env = dict(os.environ)
    env.update(extra_env or {})
    env.setdefault("FCO_TIMEOUT_MS", "15000")
    return subprocess.run([bench_bin()] + args, capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_op_in_rounds(op, tmp_path):
    args, env = OPS[op]
    js = tmp_path / "out.json"
    p = run([op, "-t", "cpu", "-g", "2", "-n", "2", "-w", "1", "-R", "3", "-d", "f32,bf16",
             "-J", str(js)] + args, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "cpu transport" in p.stdout or "threads of one process" in p.stdout
    assert re.search(r"# op %s\s+iters 2\s+rounds 3\s+warmup 1" % op, p.stdout), p.stdout
    assert "# wrong elements: 0" in p.stdout, p.stdout
    rows = [l for l in p.stdout.splitlines() if l.strip() and not l.startswith("#")]
    assert rows, p.stdout
    doc = json.loads(js.read_text())
    assert doc["tool"] == "fco-bench"
    assert len(doc["results"]) >= len(rows) >= 2  # f32 and bf16 rows at least
    for res in doc["results"]:
        assert res["op"] == op
        if res["time_us"] is None:
            continue
        # fco_last_plan of the column's calls: the op and the impl that ran (AUTO resolved)
        m = re.match(r"%s impl (\d+)( |$)" % op, res.get("plan", ""))
        assert m, res
        if res["impl_id"] >= 0:
            assert int(m.group(1)) == res["impl_id"], res
    # the AUTO column's impl per row, under each table (f32 and bf16 here)
    assert len(re.findall(r"^# auto ran, per row:( \d+)+ \(", p.stdout, re.M)) == 2, p.stdout


def test_unsupported_impls_listed_once():
    """An impl the op refuses on this transport (the LL one-shot on cpu) is "-" in its rows and
    one line under the metadata with the op's reason, not a stderr line per impl and dtype."""
    p = run(["gemv_allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32,bf16"],
            {"FCO_BENCH_GEMV_NK": "72x40", "FCO_BENCH_GEMV_M": "1,3"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "unsupported" not in p.stderr.lower(), p.stderr
    lines = [l for l in p.stdout.splitlines() if '"-" where unsupported' in l]
    assert sorted(l.split(":")[0] for l in lines) == ["# oneshot_ll", "# oneshot_ll_pdl"], lines
    assert all("(first in f32)" in l and "GPU transports" in l for l in lines), lines
    assert "# wrong elements: 0" in p.stdout, p.stdout
    # the GPU-only columns are said to be so, not described as cuBLAS timings (session 62 audit)
    assert "cuBLAS" not in p.stdout and "GPU transports only" in p.stdout, p.stdout


@pytest.mark.parametrize("flag", [["-R", "0"], ["-R", "65"], ["-R", "x"], ["-n", "0"],
                                  # strtod takes "nan" / "inf": -b nan ran a 2^63-byte size
                                  ["-b", "nan"], ["-b", "-nan"], ["-e", "inf"], ["-i", "nan"],
                                  ["-R", "3x"], ["-b", "0"], ["-e", "0"], ["-b", "1Kx"],
                                  ["-b", "1e16"], ["-f", "1"], ["-L", "0"], ["-c", "2"],
                                  ["-G", "-1"], ["-d", "f32,bogus"]])
def test_bad_flags_exit_2(flag):
    p = run(["allreduce", "-t", "cpu"] + flag)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "want" in p.stderr, p.stderr


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help(flag):
    """-h and --help print the usage (every op and option) on stdout and exit 0."""
    p = run([flag])
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("usage: fco-bench"), p.stdout
    for word in list(OPS) + ["-R rounds", "-G 0|1", "--help"]:
        assert word in p.stdout, (word, p.stdout)


def test_unknown_option_exit_2():
    p = run(["--bogus"])
    assert p.returncode == 2, p.stdout + p.stderr
    assert "bogus" in p.stderr and "fco-bench -h" in p.stderr, p.stderr


def _round_orders(p, op, dt):
    """The impl labels in timing order, one list per round, from FCO_BENCH_PROGRESS's stderr."""
    rounds, cur = [], []
    for line in p.stderr.splitlines():
        m = re.match(r"# progress: time %s %s \d+ B impl (\S+)$" % (op, dt), line)
        if m:
            cur.append(m.group(1))
        elif line.startswith("# progress: finish row"):
            rounds.append(cur)
            cur = []
    return rounds


@pytest.mark.parametrize("impls,rounds", [(None, 4), ("0,1,auto", 6)])
def test_rounds_balance_column_order(impls, rounds):
    """-R: the impl columns' order changes per round so that, over n rounds (2n for odd n), every
    column is timed right after every other equally often and in every place equally often (a
    column after a heavy one reads slower on a GPU); round 0 keeps the listed order."""
    args = ["gemm_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "1", "-R", str(rounds),
            "-d", "f32"] + (["-D", impls] if impls else [])
    p = run(args, {"FCO_BENCH_PROGRESS": "1", "FCO_BENCH_GA_SHAPES": "40,72,48,4,2"})
    assert p.returncode == 0, p.stdout + p.stderr
    orders = _round_orders(p, "gemm_alltoall", "f32")
    assert len(orders) == rounds, p.stderr
    first = orders[0]
    n = len(first)
    assert n == (3 if impls else 4) and len(set(first)) == n, first
    hdr = next(l for l in p.stdout.splitlines() if l.startswith("# tokens,K,N"))
    cols = hdr.split()
    assert [cols.index(c) for c in first] == sorted(cols.index(c) for c in first), (hdr, first)
    reps = rounds // n  # each ordered pair / place this many times
    for order in orders:
        assert sorted(order) == sorted(first), (order, first)
    pairs = Counter((o[i - 1], o[i]) for o in orders for i in range(1, n))
    # every ordered pair of distinct columns adjacent equally often: once per n rounds for even
    # n; for odd n the design needs 2n rounds and gives each pair twice
    want = 2 if n % 2 else reps
    assert pairs == Counter({(a, b): want for a in first for b in first if a != b}), pairs
    for place in range(n):
        assert Counter(o[place] for o in orders) == Counter({c: reps for c in first}), orders


@pytest.mark.parametrize("op,env,bad", [
    # "-72x40" was an N of 2^64 − 72 (out of host memory, exit 1), "8x8junk" taken as 8x8
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x40,0x40,72x0,-72x40,8x8junk, 24x16 ",
                        "FCO_BENCH_GEMV_M": "1,0,x,2x"},
     ["'0'", "'x'", "'2x'", "'0x40'", "'72x0'", "'-72x40'", "'8x8junk'"]),
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x40", "FCO_BENCH_GEMV_M": "1," * 16 + "3"},
     ["FCO_BENCH_GEMV_M: more than 16 values; '3' and the rest"]),
    ("embedding_alltoall", {"FCO_BENCH_EA_WORKLOADS": "0,7,9,-1", "FCO_BENCH_EA_BATCH_DIV": "2048",
                            "FCO_BENCH_EA_ROWS": "300"}, ["'9'", "'-1'"]),
    ("embedding_alltoall", {"FCO_BENCH_EA_WORKLOADS": "4", "FCO_BENCH_EA_BATCH_DIV": "0",
                            "FCO_BENCH_EA_ROWS": "300"},
     ['FCO_BENCH_EA_BATCH_DIV="0" is not a positive integer: ignored']),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": ";".join(["24,72,40,4,1"] * 65)}, ["more than 64"]),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "24,72,40,4,1;24,72,40,4,1,x;24,72,40,4,5,r;"
                                              "24,72,40,4,1,2,7;24,72,40,4,1,9;24,72,40,1,1,0.5"},
     ["'24,72,40,4,1,x'", "'24,72,40,4,5,r'", "'24,72,40,4,1,2,7'", "'24,72,40,4,1,9'",
      "'24,72,40,1,1,0.5'"]),  # skew 1 when E = 1
    # after top-k only blanks (or ",skew"): "... 3" was taken as its first five fields
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "24,72,40,4,1 ;24,72,40,4,2 3;24,72,40,4,1 , 2 "},
     ["'24,72,40,4,2 3'"]),
])
def test_workload_lists_say_what_they_drop(op, env, bad):
    """An entry of a workload list that names nothing (or one past the table's room) is reported
    on stderr, not dropped silently; the valid ones still run (0 wrong)."""
    p = run([op, "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D", "0"], env)
    assert p.returncode == 0, p.stdout + p.stderr
    for b in bad:
        assert b in p.stderr and "ignored" in p.stderr, p.stderr
    assert "# wrong elements: 0" in p.stdout, p.stdout
    rows = [l for l in p.stdout.splitlines() if l.strip() and not l.startswith("#")]
    assert rows, p.stdout


@pytest.mark.parametrize("op,env", [
    ("embedding_alltoall", {"FCO_BENCH_EA_WORKLOADS": "99"}),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "1,2,3"}),
])
def test_no_workload_selected_is_a_usage_error(op, env):
    """A workload list whose every entry is dropped selects nothing: a usage error (exit 2)
    naming the list, not "out of host memory" (exit 1)."""
    p = run([op, "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32"], env)
    assert p.returncode == 2, p.stdout + p.stderr
    name = next(iter(env))
    assert f"{name}: no workload selected for {op}" in p.stderr, p.stderr
    assert "out of host memory" not in p.stderr, p.stderr


def _shim(tmp_path, src, *defines):
    """src built as an LD_PRELOAD library over libfco (skips without a C compiler)."""
    import shutil
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the LD_PRELOAD shim")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    c, so = tmp_path / "shim.c", tmp_path / "shim.so"
    c.write_text(src)
    p = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-I", os.path.join(root, "include"), "-o",
                        str(so), str(c), "-ldl"] + ["-D" + d for d in defines],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return str(so)


_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include "fco.h"
/* Sets element INDEX of rank 0's output of impl 1 to VALUE (of its value, old) after the group:
 * one wrong element. */
static void* victim;
fco_result_t fco_gemm_alltoall(fco_comm_t c, const void* a, int64_t ar, const void* w, int wl,
                               int ne, const int32_t* cn, const int32_t* ch, const int32_t* rr,
                               void* out, int64_t orows, int64_t k, int64_t n, fco_dtype_t dt,
                               int impl, void* s) {
  static __typeof__(fco_gemm_alltoall)* real;
  if (!real) real = (__typeof__(fco_gemm_alltoall)*)dlsym(RTLD_NEXT, "fco_gemm_alltoall");
  if (!victim && impl == 1) victim = out;
  return real(c, a, ar, w, wl, ne, cn, ch, rr, out, orows, k, n, dt, impl, s);
}
fco_result_t fco_group_end(void) {
  static __typeof__(fco_group_end)* real;
  if (!real) real = (__typeof__(fco_group_end)*)dlsym(RTLD_NEXT, "fco_group_end");
  fco_result_t r = real();
  if (victim) {
    float old, v;
    memcpy(&old, (float*)victim + INDEX, sizeof old);
    v = VALUE;
    memcpy((float*)victim + INDEX, &v, sizeof v);
    victim = NULL;
  }
  return r;
}
"""


@pytest.mark.parametrize("value,index,where,shape", [
    ("777.0f", 0, "out[0][0]", "16,64,64,4,2"),
    ("__builtin_nanf(\"\")", 0, "out[0][0]", "16,64,64,4,2"),
    # the last element: rank 0 has 32 rows of N 64
    ("__builtin_nanf(\"\")", 2047, "out[31][63]", "16,64,64,4,2"),
    ("old * 1.001f + 0.001f", 0, "out[0][0]", "16,64,64,4,2"),  # past 1e-5 · (|ref| + Σ|a·w|)
    # 80 rows, 40 from each source: row 39 (N 48), the last of source 0's, is no spread pick
    ("777.0f", 39 * 48, "out[39][0]", "40,72,48,4,2"),
])
def test_gemm_one_wrong_element_counts_once(value, index, where, shape, tmp_path):
    """One corrupted element of gemm_alltoall's output (an LD_PRELOAD shim over libfco) is one
    #wrong: it sits in a sampled row that the spread picks repeated (counted twice), and a NaN
    was counted by the finiteness scan and again by the comparison (three times)."""
    so = _shim(tmp_path, _SHIM, "VALUE=" + value, f"INDEX={index}")
    p = run(["gemm_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D",
             "0,1"], {"FCO_BENCH_GA_SHAPES": shape, "LD_PRELOAD": so})
    assert p.returncode == 1, p.stdout + p.stderr
    assert "# wrong elements: 1\n" in p.stdout, p.stdout + p.stderr
    assert p.stderr.count(where) == 1, p.stderr


def _torch_route():
    """bench/gemm_alltoall_torch.py's route() (the torch script beside fco-bench's table)."""
    import importlib.util
    import sys
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)  # its _torch_bench
    spec = importlib.util.spec_from_file_location("gemm_alltoall_torch",
                                                  os.path.join(bench, "gemm_alltoall_torch.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.route


@pytest.mark.parametrize("ranks", [1, 2])
def test_gemm_random_routing(ranks, tmp_path):
    """The skew field "r": random routing (each token's top-k distinct experts from a seed of the
    workload), shown as "r" in the table and skew -1 in the JSON, 0 wrong; the same rows in
    fco-bench (route_random) and in the torch script (route_random, so its columns sit beside):
    every workload's a_rows (the most any rank receives) as the script's route gives it, and
    unlike the balanced routing's (but at top-k = E, where every token goes to every expert)."""
    shapes = [(40, 72, 48, 4, 2), (64, 24, 16, 8, 3), (33, 16, 24, 6, 6)]
    env = {"FCO_BENCH_GA_SHAPES": ";".join(",".join(map(str, w)) + ",r" for w in shapes)}
    js = tmp_path / "r.json"
    p = run(["gemm_alltoall", "-t", "cpu", "-g", str(ranks), "-n", "1", "-w", "0", "-d", "f32",
             "-J", str(js)], env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "# wrong elements: 0" in p.stdout, p.stdout
    for w in shapes:
        assert re.search(r"^  %s,r\s" % ",".join(map(str, w)), p.stdout, re.M), p.stdout
    route = _torch_route()
    got = {}
    for res in json.loads(js.read_text())["results"]:
        sh = res["shape"]
        assert sh["skew"] == -1, sh
        got[(sh["tokens"], sh["k"], sh["n"], sh["experts"], sh["topk"])] = sh["a_rows"]
    assert set(got) == set(shapes), got
    for (tokens, k, n, E, topk), a_rows in got.items():
        per = route(tokens, topk, E, -1.0)
        assert sum(per) == tokens * topk and all(c >= 0 for c in per), per
        El = E // ranks
        want = max(sum(per[r * El:(r + 1) * El]) for r in range(ranks)) * ranks
        assert a_rows == want, ((tokens, k, n, E, topk), a_rows, want, per)
        if topk < E:
            assert len(set(per)) > 1, per  # not the balanced split
        else:  # top-k = E: every token to every expert
            assert per == [tokens] * E, per


@pytest.mark.parametrize("value,progress,said", [("1", True, False), ("0", False, False),
                                                 ("yes", False, True), ("-1", False, True)])
def test_progress_knob_is_0_or_1(value, progress, said):
    """FCO_BENCH_PROGRESS (like FCO_BENCH_SYM) is read by libfco's fco_env_flag: 1 prints the
    progress lines, 0 none; another value is said once on stderr and ignored — off (it was
    `atoi(...) > 0`: "yes" silently off, "2" on)."""
    p = run(["gemm_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D", "0"],
            {"FCO_BENCH_PROGRESS": value, "FCO_BENCH_SYM": value,
             "FCO_BENCH_GA_SHAPES": "40,72,48,4,2"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "# wrong elements: 0" in p.stdout, p.stdout
    assert ("# progress: setup gemm_alltoall f32" in p.stderr) == progress, p.stderr
    for knob in ("FCO_BENCH_PROGRESS", "FCO_BENCH_SYM"):
        msg = f'{knob}="{value}" is not 0 (off) or 1 (on): ignored, as if unset'
        assert p.stderr.count(msg) == (1 if said else 0), p.stderr


def _table(stdout):
    """The data rows of fco-bench's tables as dicts, keyed by the header line's column names
    (every value is one blank-separated token: a number, "-" or an impl name)."""
    rows, names = [], None
    for line in stdout.splitlines():
        if line.startswith("#"):
            if "#wrong" in line:
                names = line.split()[1:]
            continue
        if line.strip():
            vals = line.split()
            assert names and len(vals) == len(names), (names, line)
            rows.append(dict(zip(names, vals)))
    return rows


def _near(got, want, abs_tol):
    return abs(got - want) <= abs_tol + 2e-3 * abs(want)


_SLOW_FUSED = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
#include "fco.h"
/* Every call of an impl >= 1 sleeps 10 ms first: impl 0 is the fastest column. */
static void nap(int impl) {
  struct timespec ts = {0, 10000000L};
  if (impl >= 1) nanosleep(&ts, NULL);
}
#define REAL(f) static __typeof__(f)* real; \
  if (!real) real = (__typeof__(f)*)dlsym(RTLD_NEXT, #f)
fco_result_t fco_allreduce(fco_comm_t c, const void* in, void* out, size_t n, fco_dtype_t dt,
                           int impl, void* s) {
  REAL(fco_allreduce);
  nap(impl);
  return real(c, in, out, n, dt, impl, s);
}
fco_result_t fco_gemv_allreduce(fco_comm_t c, const void* x, const void* w, const void* b, void* y,
                                size_t M, size_t N, size_t K, fco_dtype_t dt, int impl, void* s) {
  REAL(fco_gemv_allreduce);
  nap(impl);
  return real(c, x, w, b, y, M, N, K, dt, impl, s);
}
fco_result_t fco_gemm_alltoall(fco_comm_t c, const void* a, int64_t ar, const void* w, int wl,
                               int ne, const int32_t* cn, const int32_t* ch, const int32_t* rr,
                               void* out, int64_t orows, int64_t k, int64_t n, fco_dtype_t dt,
                               int impl, void* s) {
  REAL(fco_gemm_alltoall);
  nap(impl);
  return real(c, a, ar, w, wl, ne, cn, ch, rr, out, orows, k, n, dt, impl, s);
}
"""


@pytest.mark.parametrize("op,slow", [(op, False) for op in sorted(OPS)]
                         + [(op, True) for op in ("allreduce", "gemm_alltoall", "gemv_allreduce")])
def test_table_and_json_agree(op, slow, tmp_path):
    """Per row: the JSON's baseline_us is impl 0's time and speedup baseline / time; the table's
    best is the fastest impl >= 1, speedup impl 0 / best, auto_x impl 0 / auto, #wrong 0; no floor
    on cpu; the header of a cpu run: gpus 0, transport cpu (machine cpu without a GPU), no HBM
    rate. slow: the fused impls made slower than impl 0 (an LD_PRELOAD shim): best is still one
    of them."""
    from _dist import gpu_count
    args, env = OPS[op]
    js = tmp_path / "t.json"
    env = dict(env, FCO_MACHINE="")
    if slow:
        env["LD_PRELOAD"] = _shim(tmp_path, _SLOW_FUSED)
    p = run([op, "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-J", str(js)] + args,
            env)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(js.read_text())
    assert doc["gpus"] == 0 and doc["transport"] == "cpu", doc
    # no HBM rate on cpu (GPU transports measure the card's copy rate: JSON hbm_gbps, # HBM line)
    assert "hbm_gbps" not in doc and "hbm_measured" not in doc, doc
    assert "# HBM" not in p.stdout, p.stdout
    if gpu_count() == 0:
        assert doc["machine"] == "cpu", doc
    table = _table(p.stdout)
    res = doc["results"]
    n = len(res) // len(table)
    assert table and n * len(table) == len(res), (table, res)
    for i, trow in enumerate(table):
        row = res[i * n:(i + 1) * n]
        assert len({json.dumps(r["shape"], sort_keys=True) for r in row}) == 1, row
        t0 = row[0]["time_us"]
        assert row[0]["impl_id"] == 0 and t0 > 0, row
        for r in row:
            assert r["baseline_us"] == t0 and r["floor_us"] is None, r
            if r["time_us"] is None:
                assert trow[r["impl"]] == "-" and r["wrong"] is None and r["speedup"] is None, r
                continue
            assert r["wrong"] == 0, r
            assert _near(r["speedup"], t0 / r["time_us"], 1e-4), r
            assert _near(float(trow[r["impl"]]), r["time_us"], 0.051), (trow, r)
            if op == "allreduce":  # its collective alone is impl 0; no compute part
                assert r["comm_us"] == t0 and r["compute_us"] is None, r
        fused = [r for r in row if r["impl_id"] >= 1 and r["time_us"] is not None]
        best = min(fused, key=lambda r: r["time_us"])
        if "best" in trow:  # embedding_alltoall's speedup is over its one fused impl
            assert trow["best"] == best["impl"], (trow, best)
        assert _near(float(trow["speedup"]), t0 / best["time_us"], 0.006), (trow, best)
        assert not slow or t0 < best["time_us"], (trow, best)
        auto = next(r for r in row if r["impl_id"] == -1)
        assert _near(float(trow["auto_x"]), t0 / auto["time_us"], 0.006), (trow, auto)
        assert trow["floor"] == "-" and trow["#wrong"] == "0", trow


def test_checks_off(tmp_path):
    """-c 0: nothing checked — #wrong "-" in the table, null in the JSON, "(checks off)"."""
    js = tmp_path / "c.json"
    p = run(["allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-c", "0", "-d", "f32",
             "-b", "1K", "-e", "1K", "-J", str(js)])
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"# op allreduce\s+iters 1\s+rounds 1\s+warmup 0\s+graph 0\s+check 0 ",
                     p.stdout), p.stdout
    assert "# wrong elements: 0 (checks off)\n" in p.stdout, p.stdout
    table = _table(p.stdout)
    assert [r["#wrong"] for r in table] == ["-"], table
    assert [r["wrong"] for r in json.loads(js.read_text())["results"]] == [None] * 3


@pytest.mark.parametrize("args,want", [
    (["-b", "1K", "-e", "16K"], [(1024, 256), (4096, 1024), (16384, 4096)]),  # -f 4 default
    (["-b", "1KB", "-e", "4kb", "-f", "2"], [(1024, 256), (2048, 512), (4096, 1024)]),
    (["-b", "1K", "-e", "3K", "-i", "1K"], [(1024, 256), (2048, 512), (3072, 768)]),
    (["-b", "8K", "-e", "1K"], [(8192, 2048)]),  # -e below -b is raised to -b
    (["-b", "6", "-e", "6"], [(4, 1)]),  # rounded down to whole elements
    (["-b", "4", "-e", "4"], [(4, 1)]),
    (["-b", "2", "-e", "2"], []),  # smaller than one f32: skipped
    # sizes that round to the same count run once (4 and 16 B ran twice: 7 → 4, 19 → 16)
    (["-b", "4", "-e", "20", "-i", "3"], [(4, 1), (8, 2), (12, 3), (16, 4)]),
    (["-b", "1", "-e", "9", "-i", "1"], [(4, 1), (8, 2)]),
])
def test_size_sweep(args, want):
    """-b / -e / -f / -i: the rows' size (B) and count (elements), K = 1024, inclusive of -e."""
    p = run(["allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D", "0"]
            + args)
    assert p.returncode == 0, p.stdout + p.stderr
    got = [(int(r["size"]), int(r["count"])) for r in _table(p.stdout)]
    assert got == want, p.stdout


@pytest.mark.parametrize("args,env,msg", [
    (["allreduce", "-t", "cpu", "-f", "2", "-i", "1K", "-e", "2K", "-n", "1", "-w", "0"], {},
     "give -f or -i, not both"),
    (["allreduce", "extra"], {}, "unexpected argument 'extra'"),
    (["bogus_op", "-t", "cpu"], {},
     "unknown op 'bogus_op'; known: allreduce gemv_allreduce embedding_alltoall gemm_alltoall"),
    (["allreduce", "-t", "cpu", "-g", "2", "-D", "2"], {},
     "-D 2: want impl numbers 0..1, names, auto or all"),
    (["gemm_alltoall", "-t", "cpu", "-g", "2", "-D", "0,bogus"], {},
     "-D 0,bogus: want impl numbers 0..2, names, auto or all"),
    (["allreduce"], {"FCO_TRANSPORT": "bogus"},
     "FCO_TRANSPORT=bogus: want auto, nccl, local or cpu"),
    (["allreduce", "-t", "bogus"], {}, "-t bogus: want auto, nccl, local or cpu"),
    (["allreduce", "-t", "cpu", "-g", "0"], {}, "-g 0: want 1..64"),
    (["allreduce", "-t", "cpu", "-g", "65"], {}, "-g 65: want 1..64"),
    (["allreduce", "-t", "cpu", "-G", "2"], {}, "-G 2: want 0 or 1"),
    # an -D that names nothing ran impl 0 alone, silently (-d "" is a usage error)
    (["allreduce", "-t", "cpu", "-D", ""], {}, "-D : want impl numbers 0..1, names, auto or all"),
    (["allreduce", "-t", "cpu", "-D", ","], {}, "-D ,: want impl numbers 0..1, names, auto or all"),
    (["gemm_alltoall", "-t", "cpu", "-D", ",,"], {},
     "-D ,,: want impl numbers 0..2, names, auto or all"),
])
def test_usage_errors_exit_2(args, env, msg):
    p = run(args, env)
    assert p.returncode == 2, p.stdout + p.stderr
    assert msg in p.stderr and "(fco-bench -h for help)" in p.stderr, p.stderr


def test_gpu_transport_without_gpu_exit_2():
    from _dist import gpu_count
    if gpu_count():
        pytest.skip("a GPU is visible here")
    p = run(["allreduce", "-t", "nccl"])
    assert p.returncode == 2, p.stdout + p.stderr
    assert "-t nccl needs a GPU" in p.stderr and "(use -t cpu)" in p.stderr, p.stderr


def test_defaults_and_upper_bounds_on_cpu():
    """The cpu defaults (10 iterations, 3 warm-up, 2 ranks, -R 1); -R 64 (the most) and -G 1
    (said ignored on cpu) are accepted."""
    base = ["allreduce", "-t", "cpu", "-b", "1K", "-e", "1K", "-d", "f32", "-D", "0"]
    p = run(base)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"# op allreduce\s+iters 10\s+rounds 1\s+warmup 3\s+graph 0\s+check 1 ",
                     p.stdout), p.stdout
    assert re.search(r"# transport cpu\s+ranks 2\s+threads of one process", p.stdout), p.stdout
    p = run(base + ["-n", "1", "-w", "0", "-R", "64", "-G", "1", "-c", "1"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"iters 1\s+rounds 64\s+warmup 0\s+graph 0\s+check 1 ", p.stdout), p.stdout
    assert "-G 1 ignored: the cpu transport has no CUDA graphs" in p.stderr, p.stderr


@pytest.mark.parametrize("spec,cols", [("tiles", ["ref", "tiles"]), ("2", ["ref", "chunks"]),
                                       ("auto", ["ref", "auto"]),
                                       ("chunks,0,tiles", ["ref", "tiles", "chunks"])])
def test_impl_selection(spec, cols, tmp_path):
    """-D: impl 0 always runs first, the named impls ascending, auto only when asked (last)."""
    js = tmp_path / "d.json"
    p = run(["gemm_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D", spec,
             "-J", str(js)], {"FCO_BENCH_GA_SHAPES": "40,72,48,4,2"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert [r["impl"] for r in json.loads(js.read_text())["results"]] == cols
    assert ("# auto ran, per row:" in p.stdout) == ("auto" in cols), p.stdout


@pytest.mark.parametrize("flag,env,want", [(["-M", 'rack "7" \\ b'], {}, 'rack "7" \\ b'),
                                           ([], {"FCO_MACHINE": "envbox"}, "envbox")])
def test_machine_name(flag, env, want, tmp_path):
    """-M, else FCO_MACHINE, names the machine in the header and the JSON (quotes and
    backslashes escaped there)."""
    js = tmp_path / "m.json"
    p = run(["allreduce", "-t", "cpu", "-n", "1", "-w", "0", "-d", "f32", "-D", "0", "-b", "1K",
             "-e", "1K", "-J", str(js)] + flag, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"  machine {want}\n" in p.stdout, p.stdout
    assert json.loads(js.read_text())["machine"] == want


_CORRUPT = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include "fco.h"
/* Corrupts the first and the last f32 element (LAST) of rank VICTIM's out of impl 1 after the
 * group: the VICTIM-th impl 1 call of the group (fco-bench issues rank 0's, then rank 1's, ...). */
#ifndef VICTIM
#define VICTIM 0
#endif
#ifndef BAD
#define BAD 777.0f
#endif
static float* victim;
static int nth; /* impl 1 calls of this group so far */
#define REAL(f) static __typeof__(f)* real; \
  if (!real) real = (__typeof__(f)*)dlsym(RTLD_NEXT, #f)
#define TAKE(p) if (impl == 1 && nth++ == VICTIM) victim = (float*)(p)
fco_result_t fco_allreduce(fco_comm_t c, const void* in, void* out, size_t n, fco_dtype_t dt,
                           int impl, void* s) {
  REAL(fco_allreduce);
  TAKE(out);
  return real(c, in, out, n, dt, impl, s);
}
fco_result_t fco_gemv_allreduce(fco_comm_t c, const void* x, const void* w, const void* b, void* y,
                                size_t M, size_t N, size_t K, fco_dtype_t dt, int impl, void* s) {
  REAL(fco_gemv_allreduce);
  TAKE(y);
  return real(c, x, w, b, y, M, N, K, dt, impl, s);
}
fco_result_t fco_embedding_alltoall(fco_comm_t c, const void* w, const int64_t* tr,
                                    const int32_t* tpr, const int64_t* bpr, int64_t d,
                                    fco_dtype_t dt, const void* o, const void* ix, int64_t ni,
                                    fco_emb_index_t it, const float* psw, fco_emb_pooling_t pl,
                                    void* out, int impl, void* s) {
  REAL(fco_embedding_alltoall);
  TAKE(out);
  return real(c, w, tr, tpr, bpr, d, dt, o, ix, ni, it, psw, pl, out, impl, s);
}
fco_result_t fco_group_end(void) {
  REAL(fco_group_end);
  fco_result_t r = real();
  if (victim) {
    victim[0] = victim[LAST] = BAD;
    victim = NULL;
  }
  nth = 0;
  return r;
}
"""


@pytest.mark.parametrize("victim", [0, 1])  # -g 2: the first rank and the last
@pytest.mark.parametrize("op,env,last", [
    ("allreduce", {}, 255),  # -b 1K: 256 f32
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x40", "FCO_BENCH_GEMV_M": "3"}, 3 * 72 - 1),
    # workload 4 at B 65536 / 2048 = 32: rank 0's out [16 samples][16 tables][D 64]
    ("embedding_alltoall", {"FCO_BENCH_EA_WORKLOADS": "4", "FCO_BENCH_EA_BATCH_DIV": "2048",
                            "FCO_BENCH_EA_ROWS": "300"}, 16 * 16 * 64 - 1),
])
def test_two_wrong_elements_count_twice(op, env, last, victim, tmp_path):
    """Impl 1's first and last output element of rank VICTIM corrupted (an LD_PRELOAD shim): 2
    wrong, counted in round 0 only (-R 2), in the row's #wrong (summed over its impls, auto last),
    the impl's JSON "wrong" (the others 0) and the total; exit 1. The check reads every rank's
    output: rank 1's two wrong elements count as rank 0's (a check of rank 0 alone passed), and
    the examples on stderr name the corrupted rank only."""
    so = _shim(tmp_path, _CORRUPT, f"LAST={last}", f"VICTIM={victim}")
    js = tmp_path / "w.json"
    p = run([op, "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-R", "2", "-d", "f32", "-D",
             "0,1,auto", "-b", "1K", "-e", "1K", "-J", str(js)], dict(env, LD_PRELOAD=so))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "# wrong elements: 2\n" in p.stdout, p.stdout + p.stderr
    assert [r["#wrong"] for r in _table(p.stdout)] == ["2"], p.stdout
    res = json.loads(js.read_text())["results"]
    assert [(r["impl_id"], r["wrong"]) for r in res] == [(0, 0), (1, 2), (-1, 0)], res
    elem = "y" if op == "gemv_allreduce" else "out"  # "rank R y[i][j] = ..." / "rank R out[..."
    assert f": rank {victim} {elem}[" in p.stderr, p.stderr
    assert f": rank {1 - victim} {elem}[" not in p.stderr, p.stderr


def test_allreduce_zeros_caught_at_nine_ranks(tmp_path):
    """At P = 9 (and every multiple of 9) the allreduce check's expected sums were all 0 before
    session 55 (the rank term cancelled), so zeros written over rank 8's out passed; now the
    nine expected values differ at every P <= 64 and the two zeroed elements count."""
    so = _shim(tmp_path, _CORRUPT, "LAST=255", "VICTIM=8", "BAD=0.0f")
    p = run(["allreduce", "-t", "cpu", "-g", "9", "-n", "1", "-w", "0", "-d", "f32", "-D", "1",
             "-b", "1K", "-e", "1K"], {"LD_PRELOAD": so})
    assert p.returncode == 1, p.stdout + p.stderr
    assert "# wrong elements: 2\n" in p.stdout, p.stdout + p.stderr
    assert ": rank 8 out[" in p.stderr, p.stderr


_SLEEP = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
#include "fco.h"
/* The n-th group sleeps MS[n] ms first: a known time per round (-n 1 -w 0 -c 0: one group). */
fco_result_t fco_group_end(void) {
  static __typeof__(fco_group_end)* real;
  static const int ms[] = {MS};
  static unsigned n;
  if (!real) real = (__typeof__(fco_group_end)*)dlsym(RTLD_NEXT, "fco_group_end");
  const int t = ms[n++ % (sizeof ms / sizeof ms[0])];
  struct timespec ts = {t / 1000, (long)(t % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  return real();
}
"""


# a margin of 150 ms for a loaded CI machine's stalls; the wrong picks (the last round, the mean
# of three, either one of two) lie 200 ms or more from the median
@pytest.mark.parametrize("ms,want", [("200,50,1000", 200e3), ("50,450", 250e3)])
def test_rounds_report_the_median(ms, want, tmp_path):
    """-R: a column reports the median over its rounds (of 3: the middle one, not the last; of 2:
    the mean of both), comm_us (allreduce: impl 0) too. Rounds take MS ms by an LD_PRELOAD shim."""
    so = _shim(tmp_path, _SLEEP, "MS=" + ms)
    js = tmp_path / "r.json"
    p = run(["allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-c", "0", "-d", "f32",
             "-D", "0", "-b", "1K", "-e", "1K", "-R", str(ms.count(",") + 1), "-J", str(js)],
            {"LD_PRELOAD": so})
    assert p.returncode == 0, p.stdout + p.stderr
    (res,) = json.loads(js.read_text())["results"]
    assert want <= res["time_us"] < want + 150e3 and res["comm_us"] == res["time_us"], res


_FAIL = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include "fco.h"
/* impl 1 of fco_allreduce fails. */
fco_result_t fco_allreduce(fco_comm_t c, const void* in, void* out, size_t n, fco_dtype_t dt,
                           int impl, void* s) {
  static __typeof__(fco_allreduce)* real;
  if (!real) real = (__typeof__(fco_allreduce)*)dlsym(RTLD_NEXT, "fco_allreduce");
  return impl == 1 ? FCO_ERR_INTERNAL : real(c, in, out, n, dt, impl, s);
}
"""


def test_failed_call_stops_early(tmp_path):
    """A call that fails (impl 1, by an LD_PRELOAD shim): said on stderr with the column, the
    tables end with "# stopped early", exit 1."""
    so = _shim(tmp_path, _FAIL)
    p = run(["allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-b", "1K",
             "-e", "4K"], {"LD_PRELOAD": so})
    assert p.returncode == 1, p.stdout + p.stderr
    assert "fco-bench: allreduce f32 1024 B impl oneshot: " in p.stderr, p.stderr
    assert "# stopped early: a call failed (see stderr)\n" in p.stdout, p.stdout


def _ga(tokens, k, n, experts, topk, skew, a_rows):
    return {"tokens": tokens, "k": k, "n": n, "experts": experts, "topk": topk, "skew": skew,
            "ranks": 2, "a_rows": a_rows, "out_rows": tokens * topk}


def _ea(B, tpg, D, L, dist="uniform"):
    return {"B": B, "tables_per_gpu": tpg, "D": D, "L": L, "rows": 300, "dist": dist}


_EA_ENV = {"FCO_BENCH_EA_WORKLOADS": "0,4", "FCO_BENCH_EA_ROWS": "300"}


@pytest.mark.parametrize("op,env,dspec,shapes,dtypes", [
    # K_r: K / P, the remainder to the first ranks (rank 0's in the JSON)
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x41", "FCO_BENCH_GEMV_M": "2"}, "f32",
     [{"M": 2, "N": 72, "K": 41, "K_r": 21, "P": 2, "bias": False}], {"f32"}),
    # B / FCO_BENCH_EA_BATCH_DIV (at least one sample per rank), FCO_BENCH_EA_ROWS; f16 when
    # -d names it, all included (without -d the f32 and bf16:
    # test_embedding_f16_when_named)
    ("embedding_alltoall", dict(_EA_ENV, FCO_BENCH_EA_BATCH_DIV="2048"), "f16",
     [_ea(8, 8, 128, 32), _ea(32, 8, 64, 1)], {"f16"}),
    ("embedding_alltoall", dict(_EA_ENV, FCO_BENCH_EA_BATCH_DIV="100000"), "all",
     [_ea(2, 8, 128, 32), _ea(2, 8, 64, 1)], {"f32", "f16", "bf16"}),
    # the Zipf and ragged workloads (their index and bag generators; indices outside a table
    # would fail the call)
    ("embedding_alltoall", {"FCO_BENCH_EA_WORKLOADS": "3,8", "FCO_BENCH_EA_ROWS": "300",
                            "FCO_BENCH_EA_BATCH_DIV": "1024"}, "f32",
     [_ea(16, 8, 128, 32, "zipf"), _ea(64, 8, 64, 8, "ragged")], {"f32"}),
    # the default list on cpu: tokens (at least 2), K and N / 64; a_rows by hand: balanced
    # tokens · topk; skew 4 of 32 rows over 8 experts 16 + 2 × 7 + 2 (ties: the lower experts)
    # → rank 0's experts 0..3 24 rows from each of 2 sources; 16 rows over 32 experts: 0..15
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": ""}, "f32",
     [_ga(64, 224, 64, 8, 2, 1, 128), _ga(16, 224, 64, 8, 2, 1, 32), _ga(8, 32, 112, 32, 8, 1, 64),
      _ga(16, 224, 64, 8, 2, 4, 48), _ga(2, 32, 112, 32, 8, 1, 32)], {"f32"}),
])
def test_workload_shapes(op, env, dspec, shapes, dtypes, tmp_path):
    """The workloads the env knobs (or the cpu defaults) select, as the JSON's shapes, in order."""
    js = tmp_path / "s.json"
    p = run([op, "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", dspec, "-D", "0", "-J",
             str(js)], env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "# wrong elements: 0" in p.stdout, p.stdout
    res = json.loads(js.read_text())["results"]
    assert {r["dtype"] for r in res} == dtypes, res
    for dt in dtypes:
        assert [r["shape"] for r in res if r["dtype"] == dt] == shapes, res


def test_gemm_skewed_routing(tmp_path):
    """Skew s: expert 0 gets s × the average rows, the others the rest evenly, largest remainder
    (ties: the lower expert) — every workload's a_rows as the torch script's route() gives it
    (skew 0 and E at the ends of 0..E; 10 rows over 4 experts at skew 2: 5, 2, 2, 1 → rank 0
    receives 7 from each of 2 sources)."""
    shapes = [(40, 72, 48, 4, 2, 0), (40, 72, 48, 4, 2, 4), (5, 16, 24, 4, 2, 2),
              (24, 72, 40, 4, 1, 2.5), (33, 16, 24, 6, 3, 1)]
    env = {"FCO_BENCH_GA_SHAPES": ";".join(",".join(map(str, w)) for w in shapes)}
    js = tmp_path / "s.json"
    p = run(["gemm_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D",
             "0,1", "-J", str(js)], env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "# wrong elements: 0" in p.stdout, p.stdout
    route = _torch_route()
    got = {}
    for res in json.loads(js.read_text())["results"]:
        sh = res["shape"]
        assert sh["out_rows"] == sh["tokens"] * sh["topk"], sh
        got[tuple(sh[f] for f in ("tokens", "k", "n", "experts", "topk", "skew"))] = sh["a_rows"]
    assert set(got) == set(shapes), got
    assert got[(5, 16, 24, 4, 2, 2)] == 14, got
    for (tokens, k, n, E, topk, skew), a_rows in got.items():
        per = route(tokens, topk, E, float(skew))
        assert sum(per) == tokens * topk, per
        want = max(sum(per[:E // 2]), sum(per[E // 2:])) * 2
        assert a_rows == want, ((tokens, k, n, E, topk, skew), a_rows, per)


def test_gemm_experts_not_splitting_are_skipped():
    """At P = 3 a workload of 4 experts is skipped, said under the metadata; 6 experts run."""
    p = run(["gemm_alltoall", "-t", "cpu", "-g", "3", "-n", "1", "-w", "0", "-d", "f32", "-D", "0"],
            {"FCO_BENCH_GA_SHAPES": "24,72,40,4,1;24,72,48,6,2"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "# skipped (f32): gemm_alltoall: 4 experts do not split over 3 ranks\n" in p.stdout
    assert [r["tokens,K,N,E,topk,skew"] for r in _table(p.stdout)] == ["24,72,48,6,2,1"], p.stdout
    assert "# wrong elements: 0" in p.stdout, p.stdout


def test_element_conversions_and_median(tmp_path):
    """bench_util.c's host conversions (the inputs fco-bench writes, the outputs it reads back)
    against torch's round-to-nearest-even casts, bit for bit, and bench_median (the middle value,
    the mean of the middle two): the bench's sources built as a library and called by ctypes."""
    import ctypes
    import math
    import shutil

    import torch
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    so, lib = tmp_path / "bench_util.so", os.path.dirname(fco.lib_path())
    src = [os.path.join(root, "tools", "fco-bench", f) for f in ("bench_util.c", "bench_dev.c")]
    c = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-std=c11", "-D_GNU_SOURCE", "-I",
                        os.path.join(root, "include"), "-o", str(so)] + src
                       + ["-L" + lib, "-lfco", "-Wl,-rpath," + lib, "-lm"],
                       capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    u = ctypes.CDLL(str(so))
    us, fl = ctypes.c_ushort, ctypes.c_float
    for f, res, arg in (("bench_float_to_bf16", us, fl), ("bench_float_to_half", us, fl),
                        ("bench_bf16_to_float", fl, us), ("bench_half_to_float", fl, us)):
        getattr(u, f).restype, getattr(u, f).argtypes = res, [arg]
    u.bench_median.restype = ctypes.c_double
    u.bench_median.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_int]
    # ties (1 + 2^-8 / 2^-11 halfway, odd and even), subnormal f16 (< 2^-14) and its ties, the
    # largest finite f16 and past it (65520 rounds to inf), inf, NaN, signed zero
    xs = [0.0, -0.0, 1.0, -1.5, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -11, 1 + 3 * 2 ** -11,
          1 + 2 ** -11 + 2 ** -20, 3.14159, -2.71828e-3, 2 ** -14, 2 ** -15, 3 * 2 ** -25,
          5 * 2 ** -25, 2 ** -24, 2 ** -26, 6e-5, 65504.0, 65519.0, 65520.0, 1e30, -1e-30,
          float("inf"), -float("inf"), float("nan")]
    t = torch.tensor(xs, dtype=torch.float32)
    for dt, to, back in ((torch.bfloat16, u.bench_float_to_bf16, u.bench_bf16_to_float),
                         (torch.float16, u.bench_float_to_half, u.bench_half_to_float)):
        want = t.to(dt)
        bits = want.view(torch.int16).tolist()
        for x, w, b in zip(t.tolist(), want.float().tolist(), bits):
            got = to(x)
            if w != w:  # NaN: any NaN pattern
                assert (got & 0x7fff) > (0x7f80 if dt == torch.bfloat16 else 0x7c00), (x, got)
                assert back(got) != back(got), (x, got)
                continue
            assert got == b & 0xffff, (dt, x, hex(got), hex(b & 0xffff))
            assert back(got) == w and math.copysign(1, back(got)) == math.copysign(1, w), (dt, x)
    for vals, want in (([3.0, 1.0, 2.0], 2.0), ([4.0, 1.0, 3.0, 10.0], 3.5), ([7.0], 7.0)):
        arr = (ctypes.c_double * len(vals))(*vals)
        assert u.bench_median(arr, len(vals)) == want, vals
    assert u.bench_median((ctypes.c_double * 1)(1.0), 0) == -1


# Values past what the op (or the bench) takes: refused with the entry named, exit 2, nothing run.
# Before: FCO_BENCH_GEMV_M=2^62 and NK 2^62x40 overflowed a heap buffer (the size products
# wrapped; SIGSEGV), FCO_BENCH_EA_ROWS=2^56+1 too, M=99999999999999999999 was clamped to
# LONG_MAX and ran, 4294967336 in FCO_BENCH_GA_SHAPES wrapped to 40 tokens (sscanf's %d).
@pytest.mark.parametrize("op,env,msg", [
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x40", "FCO_BENCH_GEMV_M": "4611686018427387904"},
     "FCO_BENCH_GEMV_M: '4611686018427387904' is more than 64 (fco_gemv_allreduce takes M <= 64"),
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x40", "FCO_BENCH_GEMV_M": "1,99999999999999999999"},
     "FCO_BENCH_GEMV_M: '99999999999999999999' is more than 64"),
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x40", "FCO_BENCH_GEMV_M": "65"},
     "FCO_BENCH_GEMV_M: '65' is more than 64"),
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "4611686018427387904x40", "FCO_BENCH_GEMV_M": "1"},
     "FCO_BENCH_GEMV_NK: '4611686018427387904x40': N and K must be below 2^31"),
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x40,72x18446744073709551656"},
     "FCO_BENCH_GEMV_NK: '72x18446744073709551656': N and K must be below 2^31"),
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "2000000x2000000", "FCO_BENCH_GEMV_M": "1"},
     "FCO_BENCH_GEMV_NK: '2000000x2000000': shape too large"),
    ("embedding_alltoall", {"FCO_BENCH_EA_WORKLOADS": "4", "FCO_BENCH_EA_BATCH_DIV": "2048",
                            "FCO_BENCH_EA_ROWS": "72057594037927937"},
     'FCO_BENCH_EA_ROWS="72057594037927937" is more than 1099511627776: refused'),
    ("embedding_alltoall", {"FCO_BENCH_EA_WORKLOADS": "4", "FCO_BENCH_EA_ROWS": "300",
                            "FCO_BENCH_EA_BATCH_DIV": "99999999999999999999"},
     'FCO_BENCH_EA_BATCH_DIV="99999999999999999999" is more than 1099511627776: refused'),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "4294967336,72,48,4,2"},
     "FCO_BENCH_GA_SHAPES entry '4294967336,72,48,4,2': a field is more than 2^31 - 1"),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "40,72,48,4,2;40,72,4294967344,4,2"},
     "FCO_BENCH_GA_SHAPES entry '40,72,4294967344,4,2': a field is more than 2^31 - 1"),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "65536,72,48,4,65536"},
     "FCO_BENCH_GA_SHAPES entry '65536,72,48,4,65536': tokens x top-k rows more than 2^31 - 1"),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "40,2000000000,2000000000,4,2"},
     "FCO_BENCH_GA_SHAPES entry '40,2000000000,2000000000,4,2': shape too large"),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "40,72,48,1024,2"},
     "FCO_BENCH_GA_SHAPES entry '40,72,48,1024,2': more than 256 experts a rank"),
])
def test_env_values_out_of_range_are_usage_errors(op, env, msg):
    p = run([op, "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D", "0"], env,
            timeout=120)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert msg in p.stderr and ": refused" in p.stderr, p.stderr
    assert "(fco-bench -h for help)" in p.stderr, p.stderr
    assert not _table(p.stdout), p.stdout


@pytest.mark.parametrize("op,env", [(op, env) for op, (args, env) in sorted(OPS.items())
                                    if op != "allreduce"])
def test_sweep_flags_warned_ignored_by_workload_ops(op, env):
    """-b/-e/-f/-i are allreduce's byte sweep: the ops with a workload list say on stderr that
    they ignore them (they were ignored silently), and still run; allreduce says nothing."""
    p = run([op, "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D", "0", "-b", "1K",
             "-e", "4K", "-i", "1K"], env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"fco-bench: -b -e -i ignored: the size sweep is allreduce's; %s runs its "
                     r"workload list \(FCO_BENCH_" % op, p.stderr), p.stderr
    assert _table(p.stdout), p.stdout
    p = run(["allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D", "0",
             "-b", "1K", "-e", "4K", "-i", "1K"])
    assert p.returncode == 0 and "ignored" not in p.stderr, p.stdout + p.stderr


def test_gemv_k_below_ranks_is_skipped_with_its_reason():
    """A gemv shape with K < P: a "# skipped (<dtype>): <why>" line (README), the other shapes
    run (it was an empty table, exit 0, no reason)."""
    p = run(["gemv_allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D",
             "0"], {"FCO_BENCH_GEMV_NK": "72x1,72x40", "FCO_BENCH_GEMV_M": "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert ("# skipped (f32): gemv_allreduce: K = 1 does not split over 2 ranks (each rank needs "
            "K_r >= 1)\n") in p.stdout, p.stdout
    assert [(r["N"], r["K"]) for r in _table(p.stdout)] == [("72", "40")], p.stdout


def test_gemm_above_the_bench_ranks_says_so():
    """gemm_alltoall above the bench's 8 ranks (its tables; libfco's cpu transport takes 64):
    the skip line gives that reason (it said "16 experts do not split over 16 ranks")."""
    p = run(["gemm_alltoall", "-t", "cpu", "-g", "16", "-n", "1", "-w", "0", "-d", "f32", "-D",
             "0"], {"FCO_BENCH_GA_SHAPES": "40,72,48,16,2"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert ("# skipped (f32): gemm_alltoall: fco-bench runs this op on at most 8 ranks, not 16\n"
            in p.stdout), p.stdout
    assert "do not split" not in p.stdout, p.stdout


def test_sizes_below_one_element_say_why():
    """-b 1 -e 3: no size holds a whole f32 (an empty table and nothing said): one skip line per
    dtype, not per size; f16 runs from 2 B on."""
    p = run(["allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32,f16", "-D",
             "0", "-b", "1", "-e", "3", "-i", "1"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert ("# skipped (f32): allreduce: sizes below 4 B (from 1 B) hold no whole f32 element\n"
            in p.stdout), p.stdout
    assert ("# skipped (f16): allreduce: sizes below 2 B (from 1 B) hold no whole f16 element\n"
            in p.stdout), p.stdout
    assert p.stdout.count("# skipped") == 2, p.stdout
    assert [(r["size"], r["dtype"]) for r in _table(p.stdout)] == [("2", "f16")], p.stdout


_M_BASE = ["allreduce", "-t", "cpu", "-n", "1", "-w", "0", "-d", "f32", "-D", "0", "-b", "1K",
           "-e", "1K"]


def test_machine_name_cut_at_a_character_boundary(tmp_path):
    """-M past 127 bytes is cut at a UTF-8 character boundary (an "é" cut in half made the JSON
    invalid UTF-8); a byte that is no UTF-8 is U+FFFD in the JSON and "?" in the header."""
    js = tmp_path / "m.json"
    p = run(_M_BASE + ["-J", str(js), "-M", "a" * 126 + "é"])  # "é": bytes 127 and 128
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(js.read_bytes().decode("utf-8"))["machine"] == "a" * 126
    assert "  machine " + "a" * 126 + "\n" in p.stdout, p.stdout
    p = run(_M_BASE + ["-J", str(js), "-M", b"bad\xffname"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "  machine bad?name\n" in p.stdout, p.stdout
    assert json.loads(js.read_bytes().decode("utf-8"))["machine"] == "bad\ufffdname"


def test_machine_name_control_characters_keep_one_header_line(tmp_path):
    """Control characters in -M (a newline began a line without '#', read as a table row) are
    "?" in the '#' header; the JSON keeps them, escaped."""
    js = tmp_path / "m.json"
    p = run(_M_BASE + ["-J", str(js), "-M", "rack\n7\x01"])
    assert p.returncode == 0, p.stdout + p.stderr
    assert "  machine rack?7?\n" in p.stdout, p.stdout
    assert not any(l.startswith("7") for l in p.stdout.splitlines()), p.stdout
    assert json.loads(js.read_text())["machine"] == "rack\n7\x01"


def test_ea_rows_are_decimal(tmp_path):
    """FCO_BENCH_EA_ROWS=010 is ten rows (strtoll's base 0 read it as octal 8)."""
    js = tmp_path / "e.json"
    p = run(["embedding_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32",
             "-D", "0", "-J", str(js)],
            {"FCO_BENCH_EA_WORKLOADS": "4", "FCO_BENCH_EA_BATCH_DIV": "2048",
             "FCO_BENCH_EA_ROWS": "010"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert [r["shape"]["rows"] for r in json.loads(js.read_text())["results"]] == [10]


def test_ea_long_workload_token_names_nothing():
    """A workload token longer than the parser's room names nothing, said (it was cut to its
    first 31 characters: 000...04 ran workload 0)."""
    tok = "0" * 40 + "4"
    p = run(["embedding_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32",
             "-D", "0"], {"FCO_BENCH_EA_WORKLOADS": tok, "FCO_BENCH_EA_BATCH_DIV": "2048",
                          "FCO_BENCH_EA_ROWS": "300"})
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"FCO_BENCH_EA_WORKLOADS: '{tok}' is not a workload number 0..8, ignored" in p.stderr
    assert "no workload selected for embedding_alltoall" in p.stderr, p.stderr


def test_json_path_checked_before_the_run(tmp_path):
    """-J that cannot be opened for writing is a usage error before anything runs (it was found
    after the whole run); an existing file is kept until the record replaces it, and a file
    made by a run that stops on a usage error is removed."""
    base = ["allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D", "0",
            "-b", "1K", "-e", "1K"]
    bad = tmp_path / "missing" / "x.json"
    p = run(base + ["-J", str(bad)], {"FCO_BENCH_PROGRESS": "1"})
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"-J {bad}: cannot open it for writing: " in p.stderr, p.stderr
    assert "(fco-bench -h for help)" in p.stderr and "# progress" not in p.stderr, p.stderr
    assert p.stdout == "", p.stdout
    new = tmp_path / "new.json"
    p = run(base[:-6] + ["-D", "bogus", "-J", str(new)])
    assert p.returncode == 2 and not new.exists(), p.stdout + p.stderr
    old = tmp_path / "old.json"
    old.write_text("old")
    p = run(base[:-6] + ["-D", "bogus", "-J", str(old)])
    assert p.returncode == 2 and old.read_text() == "old", p.stdout + p.stderr
    p = run(base + ["-J", str(old)])
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(json.loads(old.read_text())["results"]) == 1


@pytest.mark.parametrize("dspec, dtypes, said", [
    (None, {"f32", "bf16"}, True),  # the dtypes, the f16 skip said once
    ("f32,f16,bf16", {"f32", "f16", "bf16"}, False),  # a full list dropped f16, unsaid
    ("all", {"f32", "f16", "bf16"}, False),
    ("f16", {"f16"}, False),
])
def test_embedding_f16_when_named(dspec, dtypes, said, tmp_path):
    js = tmp_path / "e.json"
    p = run(["embedding_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-D", "0",
             "-J", str(js)] + (["-d", dspec] if dspec else []),
            {"FCO_BENCH_EA_WORKLOADS": "0,4", "FCO_BENCH_EA_BATCH_DIV": "2048",
             "FCO_BENCH_EA_ROWS": "300"})
    assert p.returncode == 0 and "# wrong elements: 0" in p.stdout, p.stdout + p.stderr
    assert {r["dtype"] for r in json.loads(js.read_text())["results"]} == dtypes
    assert p.stdout.count("# skipped (f16)") == (1 if said else 0), p.stdout


def test_gemv_check_exact_at_large_k():
    """Past K = 32768 the check's sparse W takes a wider stride, so every sum stays within 256
    (exact in bf16): at K = 2^25 the sums reached several hundred, which bf16 rounds, and
    correct results were counted wrong (exit 1)."""
    p = run(["gemv_allreduce", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "bf16", "-D",
             "0"], {"FCO_BENCH_GEMV_NK": "4x33554432", "FCO_BENCH_GEMV_M": "1"})
    assert p.returncode == 0 and "# wrong elements: 0" in p.stdout, p.stdout + p.stderr


def test_torch_peers_hbm_rate_knob(monkeypatch):
    """bench/_torch_bench.hbm_gbps: FCO_BENCH_HBM_GBPS as fco-bench reads it (a positive number is
    taken as given, without touching a GPU); anything else is said on stderr and the rate is
    measured (on this machine without CUDA, that fails: the knob was not taken)."""
    import sys
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import _torch_bench
    import torch
    for v, want in (("2930", 2930.0), (" 4300.5 ", 4300.5)):
        monkeypatch.setenv("FCO_BENCH_HBM_GBPS", v)
        assert _torch_bench.hbm_gbps(torch.device("cuda", 0)) == want
    if not torch.cuda.is_available():
        for v in ("0", "-5", "nan", "inf", "fast"):
            monkeypatch.setenv("FCO_BENCH_HBM_GBPS", v)
            with pytest.raises((RuntimeError, AssertionError)):
                _torch_bench.hbm_gbps(torch.device("cuda", 0))
