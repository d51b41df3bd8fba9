#!/bin/bash
# Session 26 (one H200): the automatic TMA group size as landed (5296b78, the tree at a732302: groups of 4 where they stream W from more
# blocks, or as many in fewer K slices). fco-bench gemv_allreduce with the rule at P = 1 (the per-GPU slices of issue
# 3's shapes at P = 2 and the full shapes, M 48 / 64) and P = 2 (local, M 48 / 64, the four shapes, impl 0..3); then
# the whole C suite (local, quick: P = 1..4), the gemv tests on nccl P = 1 (quick), pytest -m gpu (quick).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
b() { local tag=$1 g=$2 nk=$3 m=$4 d=$5; shift 5; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D $d -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
SP="8192x4096,8192x14336,4096x7168,16384x8192,4096x14336,8192x8192,8192x28672,16384x16384,2048x8192,5120x8192"
P2="8192x8192,8192x28672,4096x14336,16384x16384"
b rule 1 "$SP" "48,64" 0,1
b rule-p2 2 "$P2" "48,64" all
pack
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=250 FCO_TEST_QUICK=1 tests/run.sh > $O/tests-local.txt 2>&1; echo tests local rc=$?
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=150 FCO_TEST_QUICK=1 tests/run.sh test_gemv_allreduce_kernels test_gemv_allreduce > $O/tests-nccl.txt 2>&1; echo tests nccl rc=$?
cp -r build/tests/logs $O/; rm -f $O/build.log; pack
(export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so FCO_TEST_QUICK=1; timeout 200 python3 -m pytest tests/python -m gpu -q -p no:cacheprovider -rs > $O/pytest.txt 2>&1; echo pytest rc=$?)
pack
tail -n 4 $O/tests-local.txt; tail -n 3 $O/tests-nccl.txt; tail -n 3 $O/pytest.txt
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]" $f | cut -c1-130; done
python3 - $O <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(sys.argv[1] + '/gemv-g*.json')):
    d = json.load(open(f))
    for r in d['results']:
        if 'impl 1' in r.get('plan', ''): print(os.path.basename(f), r['plan'].split('tma ')[-1][:60], r['plan'][-60:])
PY
