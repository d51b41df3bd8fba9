#!/bin/bash
# Session 49, one GPU: the static tile order by default where a launch has no more tiles than warps
# (fco_ea_few_tiles, both lean kernels: host rule only — the kernels' SASS equals a9c4f24's, cuobjdump).
# (1) test_embedding_alltoall on local (P = 1..4; its new tile_orders part checks the plans: static on a
# small problem, claimed forced, claimed on a big one) and test_ea_plan; (2) old (a9c4f24's two embedding
# objects, build-ab/ea_old.o, fl_old.o) vs new, impl 0 and 1, bf16, B / 256 and B / 16 on workloads 1, 3, 4, 8,
# at P = 1 and local P = 2, two rounds alternating. Only B / 256 rows should change (B / 16: more tiles than
# warps). Carry: build/obj at the commit (stripped) + build-ab/{ea_old,fl_old}.o: tar czf build/carry.tgz
# build/obj build-ab. Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o7; rm -rf $O /tmp/lib-*; mkdir -p $O/ab; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools tests > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
mkdir -p /tmp/lib-new /tmp/lib-old; cp build/lib/libfco.so /tmp/lib-new/
E=build/obj/src/cuda/embedding_alltoall.o F=build/obj/src/cuda/embedding_alltoall_fused_lean.o
cp $E /tmp/ea_new.o; cp $F /tmp/fl_new.o
cp build-ab/ea_old.o $E; cp build-ab/fl_old.o $F; touch $E $F
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 && cp build/lib/libfco.so /tmp/lib-old/
cp /tmp/ea_new.o $E; cp /tmp/fl_new.o $F; touch $E $F
make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1
md5sum /tmp/lib-*/libfco.so build/lib/libfco.so | tee $O/md5.txt
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
el builds
build/tests/test_ea_plan > $O/test-ea-plan.log 2>&1; el "test_ea_plan rc=$?"
FCO_TRANSPORT=local timeout 200 build/tests/test_embedding_alltoall > $O/test-ea-local.log 2>&1
el "test_embedding_alltoall local rc=$?"; tail -3 $O/test-ea-local.log; pack
P1="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0,1 -d bf16"
L2="build/bin/fco-bench embedding_alltoall -t local -g 2 -R 3 -n 10 -w 3 -D 0,1 -d bf16"
for round in 1 2; do
  for v in old new; do
    [ $(( $(date +%s) - T0 )) -gt 480 ] && { el "time up at round $round $v"; break 2; }
    for div in 256 16; do
      for t in p1 l2; do
        B=$P1; [ $t = l2 ] && B=$L2
        LD_LIBRARY_PATH=/tmp/lib-$v FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,3,4,8 timeout 60 $B \
          -J $O/ab/$v-$t-d$div-$round.json > $O/ab/$v-$t-d$div-$round.txt 2>&1
      done
    done
    el "round $round $v"
  done
  pack
done
python3 - $O <<'PY' | tee $O/table.txt
import json, sys, glob, statistics
O = sys.argv[1]
rows = {}
for f in sorted(glob.glob(O + "/ab/*.json")):
    v, t = f.split("/")[-1].split("-")[:2]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]
        k = "%s %d/%d/%d/%d %s impl%s" % (t, s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["impl"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("median us of the rounds (rounds in brackets); p1 = P = 1, l2 = local P = 2")
print("".ljust(40) + "old".rjust(9) + "new".rjust(9) + "old/new".rjust(9))
for k, m in sorted(rows.items()):
    if "old" in m and "new" in m:
        a, b = statistics.median(m["old"]), statistics.median(m["new"])
        print(k.ljust(40) + "%9.2f%9.2f%9.3f" % (a, b, a / b) + "   [%s] [%s]" % (
            ",".join("%.2f" % x for x in m["old"]), ",".join("%.2f" % x for x in m["new"])))
PY
python3 - $O <<'PY' | tee $O/plans.txt
import json, sys, glob, re
for f in sorted(glob.glob(sys.argv[1] + "/ab/*-1.json")):
    for r in json.load(open(f))["results"]:
        s = r["shape"]; m = re.search(r"kernel ([^,]*)", r.get("plan", ""))
        print(f.split("/")[-1][:-7], "%d/%d/%d/%d" % (s["B"], s["tables_per_gpu"], s["D"], s["L"]), r["impl"],
              m.group(1) if m else r.get("plan", ""))
PY
pack
