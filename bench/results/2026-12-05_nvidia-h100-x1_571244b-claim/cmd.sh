#!/bin/bash
# Written in session 48 for one GPU (~400 s with a cold start): the claimed orders without their start burst.
# Run 2026-12-05_*_571244b-gap: at small batches the fused kernel's claimed order cost 3–5 µs a call at P = 1
# (static order faster), and the claimed lookup lost to the static fused kernel at B / 16 — every warp's first
# claim hit one address at the kernel's start. New: the lookup's warps take tile w first and claim the rest
# (fco_ea_lookup_next); the fused kernel's blocks claim kWarps tiles with one atomic for their warps' first
# tiles (lean_first_claim) and no longer lift both queues up front. (1) test_embedding_alltoall and _bad on
# local (new); (2) P = 1 impl 0 / 1, old (571244b's objects: build-ab/ea_base.o, fl_base.o) against new,
# bf16 all workloads, f32 on 1 and 8, B / 16 and B / 256 on 1, 3, 4, 8, two rounds alternating; (3) local
# P = 2, bf16, old / new, two rounds. Carry: build/obj of the tree (stripped) and build-ab/ as
# build/carry.tgz. Run: FCO_COMMIT=<commit> bash cmd.sh; copy this script into the run's folder.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o3; rm -rf $O; mkdir -p $O/ab $O/local; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }  # the device tool returns at most 8 files
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
E=build/obj/src/cuda/embedding_alltoall.o; F=build/obj/src/cuda/embedding_alltoall_fused_lean.o
cp $E /tmp/ea_new.o; cp $F /tmp/fl_new.o; mkdir -p /tmp/lib-new /tmp/lib-old
cp build/lib/libfco.so /tmp/lib-new/
cp build-ab/ea_base.o $E; cp build-ab/fl_base.o $F; touch $E $F
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -5 $O/build.log; pack; exit 1; }
cp build/lib/libfco.so /tmp/lib-old/
cp /tmp/ea_new.o $E; cp /tmp/fl_new.o $F; touch $E $F
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1
md5sum /tmp/lib-*/libfco.so build/lib/libfco.so | tee $O/md5.txt
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
el builds
FCO_TRANSPORT=local timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-local.log 2>&1
el "test_embedding_alltoall local rc=$?"; pack
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1"
for round in 1 2; do
  for v in old new; do
    [ $(( $(date +%s) - T0 )) -gt 400 ] && { el "P1: time up at round $round $v"; break 2; }
    X="env LD_LIBRARY_PATH=/tmp/lib-$v"
    $X timeout 60 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1
    $X FCO_BENCH_EA_WORKLOADS=1,8 timeout 60 $B -d f32 -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    for div in 16 256; do
      $X FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,3,4,8 timeout 60 $B -d bf16 \
        -J $O/ab/$v-d$div-$round.json > $O/ab/$v-d$div-$round.txt 2>&1
    done
    el "P1 round $round $v rc=$?"
  done
  pack
done
L="build/bin/fco-bench embedding_alltoall -t local -g 2 -R 3 -n 10 -w 3 -D 0,1 -d bf16"
for round in 1 2; do
  for v in old new; do
    [ $(( $(date +%s) - T0 )) -gt 460 ] && { el "local: time up at round $round $v"; break 2; }
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 60 $L -J $O/local/$v-$round.json > $O/local/$v-$round.txt 2>&1
    el "local P2 round $round $v rc=$?"
  done
  pack
done
python3 - $O <<'PY' | tee $O/table.txt
import json, sys, glob, statistics
O = sys.argv[1]
for sub in ("ab", "local"):
    rows = {}
    for f in sorted(glob.glob(O + "/" + sub + "/*.json")):
        v = f.split("/")[-1].split("-")[0]
        try: res = json.load(open(f))["results"]
        except Exception as e: print("bad", f, e); continue
        for r in res:
            s = r["shape"]
            k = "%d/%d/%d/%d %s %s %s" % (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"], r["impl"])
            rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
            if r.get("wrong"): print("WRONG", f, k, r["wrong"])
    print("== %s: median us of the rounds" % ("P = 1" if sub == "ab" else "local P = 2"))
    print("".ljust(40) + "old".rjust(9) + "new".rjust(9) + "old/new".rjust(9))
    for k, m in sorted(rows.items()):
        if "old" in m and "new" in m:
            a, b = statistics.median(m["old"]), statistics.median(m["new"])
            print(k.ljust(40) + "%9.2f%9.2f%9.3f" % (a, b, a / b))
PY
pack
if [ $(( $(date +%s) - T0 )) -lt 440 ]; then
  FCO_TRANSPORT=local timeout 120 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-local.log 2>&1
  el "test_embedding_alltoall_bad local rc=$?"
else
  el "_bad not run: time"
fi
pack
