#!/bin/bash
# Session 39 (one H200): the lean warp tile's copies shared by the lane group (coop: where a row
# has ≥ 4 units, lane gl copies units [gl·4 mod G, +4) of row gl·4/G of each chunk: one index
# load and one address a lane for 4 copies; rows past the stream or outside the table zero-filled
# instead of valid bits). (1) tests that run the lean kernels: test_embedding_alltoall on local
# (P = 1..4) and nccl (one rank), test_embedding_alltoall_bad (bad indices: the reports moved to the
# copies); (2) impl 0 and impl 1 (fused, P = 1) side by side, two interleaved rounds: old = the
# tile before (HEAD's header, carried in build/var/lean_old.cuh; both lean TUs rebuilt here), new =
# this build; (3) this build's local P = 2 (bf16).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o7; rm -rf $O; mkdir -p $O
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
rm -f build/obj/src/cuda/embedding_alltoall.o build/obj/src/cuda/embedding_alltoall_fused_lean.o
(
  v=old; rm -rf /tmp/t-$v; mkdir -p /tmp/t-$v; cp -r Makefile include src tests tools examples /tmp/t-$v/
  mkdir -p /tmp/t-$v/build; cp -a build/obj /tmp/t-$v/build/obj
  cp build/var/lean_$v.cuh /tmp/t-$v/src/cuda/embedding_alltoall_lean.cuh
  find /tmp/t-$v/build/obj -name '*.o' -exec touch {} +
  cd /tmp/t-$v && make -j8 NCCL_HOME=$NCCL_HOME FCO_GIT_COMMIT=$v lib tools > $O/build-$v.log 2>&1; echo "build $v rc=$?"
) &
make -j8 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
wait
ln -sfn /tmp/t-old/build build-old; ln -sfn build build-new
el builds
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-$tr.log 2>&1; el "test_embedding_alltoall $tr rc=$?"; grep -E "^P=|PASS|FAIL" $O/test-ea-$tr.log | head -8
done
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 100 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-$tr.log 2>&1; el "test_embedding_alltoall_bad $tr rc=$?"; tail -2 $O/test-ea-bad-$tr.log
done
pack
mkdir -p $O/ab
for round in 1 2; do
  for v in old new; do
    B="build-$v/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1"
    timeout 120 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1; r1=$?
    FCO_BENCH_EA_WORKLOADS=0,1,5,7,8 timeout 90 $B -d f32 -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    el "round $round $v rc=$r1,$?"
  done
done
timeout 150 build/bin/fco-bench embedding_alltoall -R 3 -n 10 -w 3 -t local -g 2 -d bf16 -D 0,1 -J $O/local2.json > $O/local2.txt 2>&1; el "local2 rc=$?"
pack
python3 - $O/ab <<'PY'
import json, sys, glob, statistics
O = sys.argv[1]
rows = {}
for f in sorted(glob.glob(O + "/*-*-*.json")):
    v = f.split("/")[-1].split("-")[0]
    for r in json.load(open(f))["results"]:
        s = r["shape"]; k = (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"], r["impl"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("P = 1, median µs over two rounds (impl 0 = the lookup alone at P = 1):   old      new  old/new")
for k in rows:
    m = {v: statistics.median(x) for v, x in rows[k].items()}
    print(" ".join(str(x) for x in k).ljust(46), " ".join(f"{m.get(v, 0):8.1f}" for v in ("old", "new")), f"{m['old']/m['new']:6.2f}")
PY
echo "== local2"; grep -v "^#  " $O/local2.txt | grep "^ \|wrong" | cut -c1-150
