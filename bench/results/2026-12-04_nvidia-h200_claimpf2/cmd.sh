#!/bin/bash
# Session 40 (one H200): run claimpf again, done right. In claimpf the first make recompiled embedding_alltoall.cu on
# the device from the working tree (which held pf) — its .d files name NCCL headers of this machine's paths — so
# both libraries were pf. Here both lookup objects are carried (build-old/ea_base.o = HEAD 9448e07's, build-old/ea_pf.o
# = the claim issued before the tile) and each is linked after that first make. fco-bench impl 0 at P = 1, bf16, the
# default rule, two interleaved rounds.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
tar xzf build/carry.tgz
O=/tmp/o; rm -rf $O; mkdir -p $O/ab
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
E=build/obj/src/cuda/embedding_alltoall.o
for v in base pf; do
  mkdir -p /tmp/lib-$v; cp build-old/ea_$v.o $E; touch $E
  make -j16 NCCL_HOME=$NCCL_HOME lib >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
  cp build/lib/libfco.so /tmp/lib-$v/; md5sum /tmp/lib-$v/libfco.so
done
el builds
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 -D 0 -d bf16"
for round in 1 2; do
  for v in base pf; do
    LD_LIBRARY_PATH=/tmp/lib-$v timeout 60 $B -J $O/ab/$v-$round.json > $O/ab/$v-$round.txt 2>&1; el "round $round $v rc=$?"
  done
  pack
done
python3 - $O/ab <<'PY'
import json, sys, glob, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    v = f.split("/")[-1].split("-")[0]
    for r in json.load(open(f))["results"]:
        s = r["shape"]; k = (s["B"], s["tables_per_gpu"], s["D"], s["L"], s["dist"][:4], r["dtype"])
        rows.setdefault(k, {}).setdefault(v, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("impl 0 lookup, P = 1, bf16, median us of two rounds         base        pf   base/pf")
for k, m in rows.items():
    b, p = statistics.median(m["base"]), statistics.median(m["pf"])
    print(" ".join(str(x) for x in k).ljust(52), f"{b:9.1f} {p:9.1f} {b / p:9.3f}")
PY
