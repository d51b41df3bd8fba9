#!/bin/bash
# Session 38 (one H200): the lean warp tile with both ways of sharing a tile's rows, chosen per
# tile by a warp vote (tiles of equal bags: equal bags a lane group, as before session 38; other
# tiles: the row split with the segmented scan). (1) tests that run the lean kernels: local
# (P = 1..4) and nccl (one rank), the bad-input test; the same test against a build whose row split
# drops the scan's partial sums (impl 0's lookup only, built here from the patched header carried
# in build/var) — it must fail; (2) impl 0's lookup alone side by side,
# two interleaved rounds: old = 5041c07's tile, v0 = 7900cd8 (row split everywhere), this build;
# (3) this build's fco-bench P = 1 (impl 0 and fused, bf16 and f32) and local P = 2 (bf16) on all
# nine workloads.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o6; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
# old / v0 / brk: this tree with another embedding_alltoall_lean.cuh (build/var/lean_<v>.cuh: 5041c07's,
# 7900cd8's, this one with the scan's partial sums dropped), impl 0's lookup (embedding_alltoall.o)
# recompiled here, the other objects this build's.
for v in old v0 brk; do
  (
    rm -rf /tmp/t-$v; mkdir -p /tmp/t-$v; cp -r Makefile include src tests tools examples /tmp/t-$v/
    mkdir -p /tmp/t-$v/build; cp -a build/obj /tmp/t-$v/build/obj
    cp build/var/lean_$v.cuh /tmp/t-$v/src/cuda/embedding_alltoall_lean.cuh
    find /tmp/t-$v/build/obj -name '*.o' -exec touch {} +
    rm -f /tmp/t-$v/build/obj/src/cuda/embedding_alltoall.o
    t=""; [ $v = brk ] && t=tests
    cd /tmp/t-$v && make -j8 NCCL_HOME=$NCCL_HOME FCO_GIT_COMMIT=$v lib tools $t > $O/build-$v.log 2>&1; echo "build $v rc=$?"
  ) &
done
wait
for v in old v0 brk; do ln -sfn /tmp/t-$v/build build-$v; done
rm -f $O/build.log; el builds; ls build-old/bin build-brk/tests | head -3
ln -sfn build build-new
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr rc=$?"; grep -E "^P=|PASS|FAIL" $O/test-ea-$tr.log | head -8
done
FCO_TRANSPORT=local timeout 100 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-local.log 2>&1; el "test_embedding_alltoall_bad local rc=$?"
FCO_TRANSPORT=local timeout 100 build-brk/tests/test_embedding_alltoall > $O/test-ea-brk-local.log 2>&1; el "broken scan: test_embedding_alltoall local rc=$? (must fail)"; grep -m3 -E "FAIL|wrong|long bags" $O/test-ea-brk-local.log
mkdir -p $O/ab
for round in 1 2; do
  for v in old v0 new; do
    B="build-$v/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0"
    timeout 90 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1; r1=$?
    FCO_BENCH_EA_WORKLOADS=1,5,8 timeout 60 $B -d f32 -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    el "round $round $v rc=$r1,$?"
  done
done
B="build/bin/fco-bench embedding_alltoall -R 3 -n 10 -w 3"
for d in bf16 f32; do timeout 120 $B -t nccl -g 1 -G 1 -d $d -D 0,1 -J $O/p1-$d.json > $O/p1-$d.txt 2>&1; el "p1 $d rc=$?"; done
timeout 150 $B -t local -g 2 -d bf16 -D 0,1 -J $O/local2.json > $O/local2.txt 2>&1; el "local2 rc=$?"
pack
python3 - $O/ab <<'PY'
import json, sys, glob, statistics
O = sys.argv[1]
rows = {}
for f in sorted(glob.glob(O + "/*-*-*.json")):
    v = f.split("/")[-1].split("-")[0]
    for r in json.load(open(f))["results"]:
        s = r["shape"]; k = (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("impl 0 (lookup alone), median µs over two rounds:   old       v0      new  old/new")
for k in rows:
    m = {v: statistics.median(x) for v, x in rows[k].items()}
    print(" ".join(str(x) for x in k).ljust(40), " ".join(f"{m.get(v, 0):8.1f}" for v in ("old", "v0", "new")), f"{m['old']/m['new']:6.2f}")
PY
for f in $O/p1-bf16.txt $O/p1-f32.txt $O/local2.txt; do echo "== $(basename $f)"; grep -v "^#  " $f | grep "^ \|wrong" | cut -c1-150; done
