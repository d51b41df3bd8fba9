#!/bin/bash
# Written in session 47 for one H200 (~450 s with a cold start; run it on the commit the carry was built at).
# (1) The landed claimed lookup (f9f014e: lean_tile's stream per pooling mode, kPool) as one build: its
# test_embedding_alltoall on local, and impl 0 in bf16 / f32 against the lookup before it ("old": build-ab/ea_head.o,
# embedding_alltoall.o of 9ad3459) — session 47 measured it by SASS-identical objects only, and f32 not on the H200.
# (2) The fused kernel with kPool on its (non-multi-table) tiles ("fk": build-ab/eafl_kpool.o, fused_kpool.diff
# beside this script; ptxas -v: more spills in several fused kernels, e.g. 88/188 -> 96/212 B): impl 1 against
# main's at P = 1 and local P = 2 on all bf16 workloads and the f32 ones, then its test on local if time is left.
# Land fk only if impl 1 is faster on the ragged rows and no row slower, and its test passes.
# Carry: on the CPU machine `make -j2 lib tools tests` at the commit run, `find build/obj -name '*.o' | xargs
# strip --strip-debug`, `tar czf build/carry.tgz build/obj build-ab`. build-ab/ea_head.o: embedding_alltoall.cu built
# with 9ad3459's embedding_alltoall_lean.cuh; build-ab/eafl_kpool.o: embedding_alltoall_fused_lean.cu built with
# fused_kpool.diff applied (both stripped; rebuild them if src/ops/*.h or src/cuda/*.cuh they include changed).
# Table: old / new / fk side by side; on impl 0 rows old vs new is the lookup change, on impl 1 rows old and new
# share main's fused object, so old/fk there is main's fused kernel against fk's.
# Run: FCO_COMMIT=<commit> bash cmd.sh; copy this script into the run's folder.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O/ab $O/local; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }  # the device tool returns at most 8 files
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
E=build/obj/src/cuda/embedding_alltoall.o; F=build/obj/src/cuda/embedding_alltoall_fused_lean.o
cp $E /tmp/ea_new.o; cp $F /tmp/fl_new.o; mkdir -p /tmp/lib-new /tmp/lib-old /tmp/lib-fk
cp build/lib/libfco.so /tmp/lib-new/
lib() {  # objects $1 $2 linked into libfco.so, copied to folder $3 (build/lib: left there)
  cp $1 $E; cp $2 $F; touch $E $F
  make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || return 1
  [ "$3" = build/lib ] || cp build/lib/libfco.so $3/
}
lib build-ab/ea_head.o /tmp/fl_new.o /tmp/lib-old || { tail -5 $O/build.log; pack; exit 1; }
lib /tmp/ea_new.o build-ab/eafl_kpool.o /tmp/lib-fk || { tail -5 $O/build.log; pack; exit 1; }
lib /tmp/ea_new.o /tmp/fl_new.o build/lib  # the tree's own library back in build/lib for the tests
md5sum /tmp/lib-*/libfco.so build/lib/libfco.so | tee $O/md5.txt
el builds
FCO_TRANSPORT=local timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-local-new.log 2>&1
el "test_embedding_alltoall local (new) rc=$?"; pack
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1"
for round in 1 2; do
  for v in old new fk; do
    [ $(( $(date +%s) - T0 )) -gt 420 ] && { el "P1 A/B: time up at round $round $v"; break 2; }
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 60 $B -d bf16 -J $O/ab/$v-bf16-$round.json > $O/ab/$v-bf16-$round.txt 2>&1
    LD_LIBRARY_PATH=/tmp/lib-$v FCO_BENCH_EA_WORKLOADS=0,1,3,7,8 timeout 60 $B -d f32 \
      -J $O/ab/$v-f32-$round.json > $O/ab/$v-f32-$round.txt 2>&1
    el "P1 round $round $v rc=$?"
  done
  pack
done
L="build/bin/fco-bench embedding_alltoall -t local -g 2 -R 3 -n 10 -w 3 -D 0,1 -d bf16"
for round in 1 2; do
  for v in new fk; do
    [ $(( $(date +%s) - T0 )) -gt 480 ] && { el "local A/B: time up at round $round $v"; break 2; }
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 60 $L -J $O/local/$v-$round.json > $O/local/$v-$round.txt 2>&1
    el "local P2 round $round $v rc=$?"
  done
  pack
done
python3 - $O <<'PY' | tee $O/table.txt
import json, sys, glob, statistics
O = sys.argv[1]
for sub, vs in (("ab", ("old", "new", "fk")), ("local", ("new", "fk"))):
    rows = {}
    for f in sorted(glob.glob(O + "/" + sub + "/*.json")):
        v = f.split("/")[-1].split("-")[0]
        try: res = json.load(open(f))["results"]
        except Exception as e: print("bad", f, e); continue
        for r in res:
            s = r["shape"]
            k = "%d/%d/%d/%d %s %s impl%s" % (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4],
                                             r["dtype"], r["impl"])
            rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
            if r.get("wrong"): print("WRONG", f, k, r["wrong"])
    print("== %s: median us of the rounds" % ("P = 1" if sub == "ab" else "local P = 2"))
    print("".ljust(44) + "".join(v.rjust(9) for v in vs) + "".join(("%s/%s" % (vs[0], v)).rjust(10) for v in vs[1:]))
    for k, m in sorted(rows.items()):
        if all(v in m for v in vs):
            t = [statistics.median(m[v]) for v in vs]
            print(k.ljust(44) + "".join("%9.1f" % x for x in t) + "".join("%10.3f" % (t[0] / x) for x in t[1:]))
PY
pack
if [ $(( $(date +%s) - T0 )) -lt 400 ]; then
  LD_LIBRARY_PATH=/tmp/lib-fk FCO_TRANSPORT=local timeout 180 build/tests/test_embedding_alltoall \
    > $O/test-ea-local-fk.log 2>&1
  el "test_embedding_alltoall local (fk) rc=$?"
else
  el "fk's test not run: time"
fi
pack
