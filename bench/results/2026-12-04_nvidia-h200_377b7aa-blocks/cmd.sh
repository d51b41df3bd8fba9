#!/bin/bash
# Session 39 (one H200): the fused lean kernel's blocks a SM on short bags after the trimmed copy issue (df76ec6's
# kernels; HEAD 377b7aa changes docs only). The default (run 65443c9, before it) is 3 blocks where bags hold <= 4 rows
# on average, 4 above. fco-bench embedding_alltoall, P = 1 (nccl), impl 0 and fused, FCO_EA_LEAN_BLOCKS 3 / 4 /
# unset, workloads 1 (65536/8/64/8, control), 4 (L = 1), 5 (131072/8/32/4), 6 (262144/4/16/2), bf16 and f32, two
# interleaved rounds. build/obj carried (built at df76ec6 on the CPU machine: links only).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o9; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME FCO_GIT_COMMIT=377b7aa lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
for round in 1 2; do
  for b in 3 4 auto; do
    for d in bf16 f32; do
      if [ $b = auto ]; then unset FCO_EA_LEAN_BLOCKS; else export FCO_EA_LEAN_BLOCKS=$b; fi
      FCO_BENCH_EA_WORKLOADS=1,4,5,6 timeout 60 build/bin/fco-bench embedding_alltoall -t nccl -g 1 -G 1 -R 3 -n 10 -w 3 \
        -D 0,1 -d $d -J $O/b$b-$d-$round.json > $O/b$b-$d-$round.txt 2>&1 || echo "b$b $d $round rc=$?"
    done
  done
  pack
done
unset FCO_EA_LEAN_BLOCKS
python3 - $O <<'PY'
import json, sys, glob, statistics
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/b*-*-*.json")):
    b = f.split("/")[-1].split("-")[0][1:]
    for r in json.load(open(f))["results"]:
        s = r["shape"]; k = (s["B"], s["D"], s["L"], r["dtype"], r["impl"])
        rows.setdefault(k, {}).setdefault(b, []).append(r["time_us"])
        if r.get("wrong"): print("WRONG", f, k, r["wrong"])
print("P = 1, median µs by FCO_EA_LEAN_BLOCKS:                3        4     auto")
for k, m in rows.items():
    print(" ".join(str(x) for x in k).ljust(48), " ".join(f"{statistics.median(m.get(b, [0])):8.1f}" for b in ("3", "4", "auto")))
PY
