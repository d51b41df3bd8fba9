#!/bin/bash
# Session 47, one H200: impl 0's lookup, three builds side by side — head (main), kpool (session 46's
# lean_store.diff: the stream compiled per pooling mode on every tile) and v4 (the working tree: only the
# ragged stream per pooling mode; even tiles keep main's run-time test). Carried: build/obj at main
# (stripped) and build-ab/ea_{head,kpool}.o; the device's first make compiles embedding_alltoall.cu from
# the working tree (v4). bf16, all workloads, impl 0 only (impl 1's kernel is main's in all three),
# three rounds, CUDA graphs. Run: FCO_COMMIT=<commit> bash cmd.sh.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O/ab; T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
E=build/obj/src/cuda/embedding_alltoall.o
cp $E build-ab/ea_v4.o
for v in head kpool v4; do
  cp build-ab/ea_$v.o $E; touch $E
  make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -20 $O/build.log; pack; exit 1; }
  mkdir -p /tmp/lib-$v; cp build/lib/libfco.so /tmp/lib-$v/
done
md5sum /tmp/lib-*/libfco.so build-ab/*.o | tee $O/md5.txt
el builds
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0 -d bf16"
for round in 1 2 3; do
  for v in head kpool v4; do
    [ $(( $(date +%s) - T0 )) -gt 400 ] && { el "time up at round $round $v"; break 2; }
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 60 $B -J $O/ab/$v-$round.json > $O/ab/$v-$round.txt 2>&1
    el "round $round $v rc=$?"
  done
  pack
done
python3 - $O <<'PY' | tee $O/table.txt
import json, sys, glob, statistics
O = sys.argv[1]; rows = {}
for f in sorted(glob.glob(O + "/ab/*.json")):
    v = f.split("/")[-1].split("-")[0]
    try: res = json.load(open(f))["results"]
    except Exception as e: print("bad", f, e); continue
    for r in res:
        s = r["shape"]; k = "%d/%d/%d/%d %s" % (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("impl 0 us, median of rounds".ljust(30) + "    head   kpool      v4  head/kpool  head/v4")
for k, m in sorted(rows.items()):
    if all(v in m for v in ("head", "kpool", "v4")):
        h, a, b = (statistics.median(m[v]) for v in ("head", "kpool", "v4"))
        print(k.ljust(30) + "%8.1f%8.1f%8.1f%12.3f%9.3f" % (h, a, b, h / a, h / b))
PY
pack
