"""test_bench_cli.py — fco-bench (tools/fco-bench) runs every operator's table on the cpu
transport with tiny shapes: every element checked (0 wrong), -R rounds reported in the header,
-J writes JSON with one result per row, each naming the impl that ran (plan; AUTO's also under
each table), bad flags and workload lists that select nothing exit 2, one wrong gemm_alltoall
element counts once. Run: pytest tests/python/test_bench_cli.py
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


@pytest.mark.parametrize("flag", [["-R", "0"], ["-R", "65"], ["-R", "x"], ["-n", "0"],
                                  # strtod takes "nan" / "inf": -b nan ran a 2^63-byte size
                                  ["-b", "nan"], ["-b", "-nan"], ["-e", "inf"], ["-i", "nan"]])
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
    ("gemv_allreduce", {"FCO_BENCH_GEMV_NK": "72x40", "FCO_BENCH_GEMV_M": "1,0,x"}, ["'0'", "'x'"]),
    ("embedding_alltoall", {"FCO_BENCH_EA_WORKLOADS": "0,7,9", "FCO_BENCH_EA_BATCH_DIV": "2048",
                            "FCO_BENCH_EA_ROWS": "300"}, ["'9'"]),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": ";".join(["24,72,40,4,1"] * 65)}, ["more than 64"]),
    ("gemm_alltoall", {"FCO_BENCH_GA_SHAPES": "24,72,40,4,1;24,72,40,4,1,x;24,72,40,4,5,r;"
                                              "24,72,40,4,1,2,7;24,72,40,4,1,9"},
     ["'24,72,40,4,1,x'", "'24,72,40,4,5,r'", "'24,72,40,4,1,2,7'", "'24,72,40,4,1,9'"]),
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


_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include "fco.h"
/* Corrupts element 0 of rank 0's output of impl 1 after the group: one wrong element. */
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
    float v = VALUE;
    memcpy(victim, &v, sizeof v);
    victim = NULL;
  }
  return r;
}
"""


@pytest.mark.parametrize("value", ["777.0f", "__builtin_nanf(\"\")"])
def test_gemm_one_wrong_element_counts_once(value, tmp_path):
    """One corrupted element of gemm_alltoall's output (an LD_PRELOAD shim over libfco) is one
    #wrong: it sits in a sampled row that the spread picks repeated (counted twice), and a NaN
    was counted by the finiteness scan and again by the comparison (three times)."""
    import shutil
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the LD_PRELOAD shim")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    src, so = tmp_path / "shim.c", tmp_path / "shim.so"
    src.write_text(_SHIM)
    c = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-DVALUE=" + value, "-I",
                        os.path.join(root, "include"), "-o", str(so), str(src), "-ldl"],
                       capture_output=True, text=True)
    assert c.returncode == 0, c.stderr
    p = run(["gemm_alltoall", "-t", "cpu", "-g", "2", "-n", "1", "-w", "0", "-d", "f32", "-D",
             "0,1"], {"FCO_BENCH_GA_SHAPES": "16,64,64,4,2", "LD_PRELOAD": str(so)})
    assert p.returncode == 1, p.stdout + p.stderr
    assert "# wrong elements: 1\n" in p.stdout, p.stdout + p.stderr
    assert p.stderr.count("out[0][0]") == 1, p.stderr


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
