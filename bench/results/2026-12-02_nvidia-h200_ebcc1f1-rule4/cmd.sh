#!/bin/bash
# Session 26 (one H200): the automatic TMA group size (groups of 4 where they stream W from more blocks than groups of
# 8; ebcc1f1) against both forced (FCO_GEMV_GROUP_TMA=4 / 8) at the per-GPU slices of issue 3's shapes at P = 2
# (8192×4096, 8192×14336, 4096×7168, 16384×8192) and at 4096×14336, 2048×8192 (P = 1, M 48 / 64), to settle the tie
# (equal blocks: groups of 4 unsplit against groups of 8 split in 2); P = 2 (local) M 64 with the rule; the gemv tests
# (local P = 1..4, nccl P = 1, quick) with the rule's test.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-local.txt 2>&1; echo tests local rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels > $O/tests-nccl.txt 2>&1; echo tests nccl rc=$?
cp -r build/tests/logs $O/; pack
b() { local tag=$1 g=$2 nk=$3 m=$4; shift 4; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D 0,1 -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
SP="8192x4096,8192x14336,4096x7168,16384x8192,4096x14336,2048x8192"
P2="4096x14336,8192x8192,8192x28672,16384x16384"
b rule 1 "$SP" "48,64"
b t4 1 "$SP" "48,64" FCO_GEMV_GROUP_TMA=4
b t8 1 "$SP" "48,64" FCO_GEMV_GROUP_TMA=8
pack
b rule-p2 2 "$P2" "64"
rm -f $O/build.log; pack
tail -n 3 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-110; done
python3 - $O <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + '/gemv-g*.json')):
    d = json.load(open(f))
    for r in d['results']:
        if 'impl 1' in r.get('plan', ''): print(os.path.basename(f), r['plan'].split('tma ')[-1][:110])
PY
