#!/bin/bash
# Written in session 48 for one GPU (~420 s with a cold start; session 48 ran out of device time before it):
# the claimed lookup without its start burst, two codings. Run 2026-12-05_nvidia-h100-x1_571244b-claim (one
# H100): warp w taking tile w before claiming (fco_ea_lookup_next: claim j gives tile nw + j; no claims where
# tiles <= warps) made impl 0 1.07–1.66x faster at small batches but 0.990–0.999x on the full-size claimed
# bf16 rows (f32 1.002–1.008x), every claimed kernel's registers reallocated. v1 = that change
# (lookup_v1.diff: the loop's counts computed in the kernel, live across the tile; ptxas 12 / 16 B of spills
# in the int64 16-bit kernels against 8 / 12); v2 = lookup_v2.diff (the counts passed as parameters: 8 / 4
# B); old = main. Only embedding_alltoall.o differs (cuobjdump: the six claimed lookup kernels, nothing
# else). Land v2 (or v1) if no full-size row is slower than old beyond the rounds' spread and the test
# passes; both diffs apply to 571244b and carry their test_ea_plan.c change (the CPU test of the claim rule).
# (1) test_embedding_alltoall on local at P <= 2 with v2; (2) P = 1 impl 0, bf16 all workloads, f32 on 1 / 8,
# B / 16 and / 256 on 1, 3, 4, 8, two rounds alternating; beside them old with FCO_EA_LOOKUP_DYN=0 ("st": the
# static lookup kernel — if it matches v1 / v2 at the small batches, a host rule taking it where a launch has few
# tiles a warp would keep the claimed kernel's code as it is). Carry (CPU machine, at the commit run):
#   P=bench/results/pending/session48-lookup; mkdir -p build-ab
#   for v in v1 v2; do git apply $P/lookup_$v.diff && make -j2 build/obj/src/cuda/embedding_alltoall.o &&
#     strip --strip-debug build/obj/src/cuda/embedding_alltoall.o -o build-ab/ea_$v.o; git apply -R $P/lookup_$v.diff; done
#   make -j2 lib tools tests; find build/obj -name '*.o' | xargs strip --strip-debug; tar czf build/carry.tgz build/obj build-ab
# (session 48 left such a carry on the CPU machine, built at its last commit: build-ab/ea_v1.o, ea_v2.o.)
# (3) the fused kernel at local P = 2, B / 16 and / 256, claimed against static order (see below).
# Run: FCO_COMMIT=<commit> bash cmd.sh; copy this script and the diffs into the run's folder.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o4; rm -rf $O; mkdir -p $O/ab; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }  # the device tool returns at most 8 files
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
E=build/obj/src/cuda/embedding_alltoall.o
cp $E /tmp/ea_old.o; mkdir -p /tmp/lib-old /tmp/lib-v1 /tmp/lib-v2
cp build/lib/libfco.so /tmp/lib-old/
for v in v1 v2; do  # v2 last: its library stays in build/lib for the test
  cp build-ab/ea_$v.o $E; touch $E
  make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -5 $O/build.log; pack; exit 1; }
  cp build/lib/libfco.so /tmp/lib-$v/
done
md5sum /tmp/lib-*/libfco.so build/lib/libfco.so | tee $O/md5.txt
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
el builds
FCO_TEST_MAX_RANKS=2 FCO_TRANSPORT=local timeout 150 build/tests/test_embedding_alltoall > $O/test-ea-local-v2.log 2>&1
el "test_embedding_alltoall local P<=2 (v2) rc=$?"; pack
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0"
for round in 1 2; do
  for v in old v1 v2 st; do  # st: old with the static lookup order forced (FCO_EA_LOOKUP_DYN=0)
    [ $(( $(date +%s) - T0 )) -gt 440 ] && { el "time up at round $round $v"; break 2; }
    X="env LD_LIBRARY_PATH=/tmp/lib-$v"
    [ $v = st ] && X="env LD_LIBRARY_PATH=/tmp/lib-old FCO_EA_LOOKUP_DYN=0"
    $X timeout 60 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1
    $X FCO_BENCH_EA_WORKLOADS=1,8 timeout 60 $B -d f32 -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    for div in 16 256; do
      $X FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,3,4,8 timeout 60 $B -d bf16 \
        -J $O/ab/$v-d$div-$round.json > $O/ab/$v-d$div-$round.txt 2>&1
    done
    el "round $round $v rc=$?"
  done
  pack
done
# (3) the fused kernel's tile order at small batches on local P = 2 (claimed, the default, against static:
# FCO_EA_LEAN_DYN=0), main's library: at P = 1 the claimed order costs it 3–7 µs a call at B / 256 (run
# 2026-12-05_nvidia-h200_571244b-gap); does it at P = 2, where its remote queue is not empty?
mkdir -p $O/fdyn
L="build/bin/fco-bench embedding_alltoall -t local -g 2 -R 3 -n 10 -w 3 -D 1 -d bf16"
for round in 1 2; do
  for dyn in 1 0; do
    [ $(( $(date +%s) - T0 )) -gt 500 ] && { el "fused order: time up at round $round dyn $dyn"; break 2; }
    for div in 16 256; do
      LD_LIBRARY_PATH=/tmp/lib-old FCO_EA_LEAN_DYN=$dyn FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,3,4,8 \
        timeout 60 $L -J $O/fdyn/dyn$dyn-d$div-$round.json > $O/fdyn/dyn$dyn-d$div-$round.txt 2>&1
    done
    el "fused order round $round dyn $dyn rc=$?"
  done
  pack
done
python3 - $O <<'PY' | tee $O/table.txt
import json, sys, glob, statistics
O = sys.argv[1]
rows = {}
for f in sorted(glob.glob(O + "/ab/*.json")):
    v = f.split("/")[-1].split("-")[0]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]
        k = "%d/%d/%d/%d %s %s %s" % (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"],
                                      r["impl"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
vs = ("old", "v1", "v2", "st")
print("== impl 0 at P = 1: median us of the rounds (the rounds in brackets)")
print("".ljust(32) + "".join(v.rjust(9) for v in vs) + "".join(("old/" + v).rjust(9) for v in vs[1:]))
for k, m in sorted(rows.items()):
    if all(v in m for v in vs):
        t = [statistics.median(m[v]) for v in vs]
        print(k.ljust(32) + "".join("%9.2f" % x for x in t) + "".join("%9.3f" % (t[0] / x) for x in t[1:])
              + "   " + " ".join("[%s]" % ",".join("%.2f" % x for x in m[v]) for v in vs))
fd = {}
for f in sorted(glob.glob(O + "/fdyn/*.json")):
    d = f.split("/")[-1].split("-")[0]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]
        k = "%d/%d/%d/%d %s %s" % (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["impl"])
        fd.setdefault(k, {}).setdefault(d, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("== fused, local P = 2, bf16: claimed (dyn1) / static (dyn0), median us")
for k, m in sorted(fd.items()):
    if "dyn1" in m and "dyn0" in m:
        a, b = statistics.median(m["dyn1"]), statistics.median(m["dyn0"])
        print(k.ljust(32) + "%9.2f%9.2f%9.3f" % (a, b, a / b))
PY
pack
