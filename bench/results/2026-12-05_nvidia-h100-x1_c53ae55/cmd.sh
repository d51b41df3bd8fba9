#!/bin/bash
# Session 44, written for one H200, ran on one H100 (call 2 of the run): (1) the local C suite (quick) at c53ae55 (2d54cf2's new tests and
# test_timeout's cpu hook case: on local the suite runs as before); (2) the lean lookup's tile
# size on ragged bags: impl 0's claimed lookup at P = 1, bf16, workloads 1 (65536/8/64/8 uniform)
# and 8 (the same, ragged 0..16), FCO_EA_LEAN_CHUNKS 4 / 8 (the default at mean 8) / 16 / 32 in
# alternating invocations, two rounds. Tree: the working tree; build/obj carried (build/carry.tgz).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }  # the device tool returns at most 8 files
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
OUT=$O/suite FCO_COMMIT=${FCO_COMMIT:-unknown} FCO_GPU_PREBUILT=1 FCO_GPU_QUICK=1 FCO_GPU_PYTEST=0 \
  FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_SUITES=local FCO_GPU_BUDGET=380 bash tests/gpu/run.sh \
  > $O/suite.txt 2>&1
el "run.sh rc=$?"; tail -40 $O/suite.txt; pack
mkdir -p $O/chunks
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0 -d bf16"
for round in 1 2; do
  for c in 8 16 4 32; do
    [ $(( $(date +%s) - T0 )) -gt 560 ] && { el "time up at round $round c$c"; break 2; }
    FCO_EA_LEAN_CHUNKS=$c FCO_BENCH_EA_WORKLOADS=1,8 timeout 40 $B -J $O/chunks/c$c-$round.json \
      > $O/chunks/c$c-$round.txt 2>&1
    el "round $round chunks $c rc=$?"; pack
  done
done
python3 - $O <<'PY' | tee $O/chunks.txt
import json, sys, glob, statistics
O = sys.argv[1]; rows = {}
for f in sorted(glob.glob(O + "/chunks/*.json")):
    c = f.split("/")[-1].split("-")[0]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]; k = "%d/%d/%d/%d %s" % (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4])
        rows.setdefault(k, {}).setdefault(c, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
cs = ["c4", "c8", "c16", "c32"]
print("lookup us (median of rounds)".ljust(28) + "".join(c.rjust(9) for c in cs))
for k, m in sorted(rows.items()):
    print(k.ljust(28) + "".join(("%9.1f" % statistics.median(m[c])) if c in m else "        -" for c in cs))
PY
pack
