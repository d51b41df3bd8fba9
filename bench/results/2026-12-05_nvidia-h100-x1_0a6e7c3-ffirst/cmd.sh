#!/bin/bash
# Written in session 48 for one GPU (~330 s with a cold start): the fused kernel's claimed order with each warp's
# first tile taken without a claim (fused_first.diff: fco_ea_lean_first — warp g of the rank pools remote tile g
# for the first ⌈split %⌉ of the warps, local tiles after, every warp one where the tiles are at least the warps,
# pooled when the warp's loop is at that tile's queue; claim j of a queue gives tile first[q] + j, and a queue
# whose tiles all went first is never claimed from).
# Runs 2026-12-05_*_571244b-gap: at P = 1 the claimed order cost the fused kernel 3–7 µs a call at B / 256 where
# the static order did not; the block's one claim of session 48's claim run did not remove it. ptxas: the P = 1
# kernels 88 / 188 -> 104 / 196 B of spills (all in the kernel's cold tail, cuobjdump). ff = main + the diff's
# build of embedding_alltoall_fused_lean.o (build-ab/fl_first.o); old = main. (1) test_embedding_alltoall and
# _bad on local with ff (the protocol changed: counts, signals); (2) impl 1 at P = 1 (bf16 all workloads, f32 on
# 1 / 8, B / 16 and / 256 on 1, 3, 4, 8) and at local P = 2 (bf16 all, B / 16 and / 256 on 1, 3, 4, 8), old / ff,
# two rounds alternating. Land the diff if the tests pass, the small batches gain and no full-size row is slower
# beyond the rounds' spread. Carry (CPU machine): build/obj of main, stripped, and build-ab/fl_first.o (git apply
# the diff, make -j2 build/obj/src/cuda/embedding_alltoall_fused_lean.o, strip --strip-debug it to
# build-ab/fl_first.o, git apply -R, make -j2 lib tools tests), tar czf build/carry.tgz build/obj build-ab
# (session 48 left one with ea_v1.o / ea_v2.o of pending/session48-lookup too: one carry for both scripts).
# Run: FCO_COMMIT=<commit> bash cmd.sh; copy this script and the diff into the run's folder.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o5; rm -rf $O; mkdir -p $O/p1 $O/local; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }  # the device tool returns at most 8 files
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
F=build/obj/src/cuda/embedding_alltoall_fused_lean.o
mkdir -p /tmp/lib-old /tmp/lib-ff; cp build/lib/libfco.so /tmp/lib-old/
cp $F /tmp/fl_old.o; cp build-ab/fl_first.o $F; touch $F  # ff's library stays in build/lib for the tests
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -5 $O/build.log; pack; exit 1; }
cp build/lib/libfco.so /tmp/lib-ff/
md5sum /tmp/lib-*/libfco.so build/lib/libfco.so | tee $O/md5.txt
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
el builds
FCO_TRANSPORT=local timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-local-ff.log 2>&1
el "test_embedding_alltoall local (ff) rc=$?"; pack
FCO_TRANSPORT=local timeout 120 build/tests/test_embedding_alltoall_bad > $O/test-ea-bad-local-ff.log 2>&1
el "test_embedding_alltoall_bad local (ff) rc=$?"; pack
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 1"
L="build/bin/fco-bench embedding_alltoall -t local -g 2 -R 3 -n 10 -w 3 -D 1 -d bf16"
for round in 1 2; do
  for v in old ff; do
    [ $(( $(date +%s) - T0 )) -gt 480 ] && { el "time up at round $round $v"; break 2; }
    X="env LD_LIBRARY_PATH=/tmp/lib-$v"
    $X timeout 60 $B -d bf16 -J $O/p1/$v-bf16-$round.json > $O/p1/$v-bf16-$round.txt 2>&1
    $X FCO_BENCH_EA_WORKLOADS=1,8 timeout 60 $B -d f32 -J $O/p1/$v-f32-$round.json > $O/p1/$v-f32-$round.txt 2>&1
    $X timeout 60 $L -J $O/local/$v-bf16-$round.json > $O/local/$v-bf16-$round.txt 2>&1
    for div in 16 256; do
      $X FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,3,4,8 timeout 60 $B -d bf16 \
        -J $O/p1/$v-d$div-$round.json > $O/p1/$v-d$div-$round.txt 2>&1
      $X FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,3,4,8 timeout 60 $L \
        -J $O/local/$v-d$div-$round.json > $O/local/$v-d$div-$round.txt 2>&1
    done
    el "round $round $v rc=$?"
  done
  pack
done
python3 - $O <<'PY' | tee $O/table.txt
import json, sys, glob, statistics
O = sys.argv[1]
for sub, title in (("p1", "P = 1"), ("local", "local P = 2")):
    rows = {}
    for f in sorted(glob.glob(O + "/" + sub + "/*.json")):
        v = f.split("/")[-1].split("-")[0]
        try: res = json.load(open(f))["results"]
        except Exception as e: print("bad", f, e); continue
        for r in res:
            s = r["shape"]
            k = "%d/%d/%d/%d %s %s %s" % (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"],
                                          r["impl"])
            rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
            if r.get("wrong"): print("WRONG", f, k, r["wrong"])
    print("== %s: median us of the rounds (the rounds in brackets)" % title)
    print("".ljust(40) + "old".rjust(9) + "ff".rjust(9) + "old/ff".rjust(9))
    for k, m in sorted(rows.items()):
        if "old" in m and "ff" in m:
            a, b = statistics.median(m["old"]), statistics.median(m["ff"])
            print(k.ljust(40) + "%9.2f%9.2f%9.3f" % (a, b, a / b) + "   [%s] [%s]" % (
                ",".join("%.2f" % x for x in m["old"]), ",".join("%.2f" % x for x in m["ff"])))
PY
pack
