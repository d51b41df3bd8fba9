#!/bin/bash
# Session 27 (one H200): local AUTO at M 33..64 on the grouped tiles (one-shot at P = 2, two-phase from P = 3 at N 8192;
# impl 0 off the tiles' vector path). test_gemv_allreduce (auto_rule and the rest) at local P = 1..8, then fco-bench
# gemv_allreduce impl 0 / 1 / 2 / AUTO at local P = 2, 4, 8 (M 48 / 64, the four shapes).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
FCO_TRANSPORT=local FCO_TEST_MAX_RANKS=8 FCO_TEST_QUICK=1 timeout 200 build/tests/test_gemv_allreduce > $O/test-op-local8.txt 2>&1; echo op test local P 1..8 rc=$?
grep -E "^P=|PASS|FAIL|while" $O/test-op-local8.txt | head -12
pack
b() { local tag=$1 g=$2 nk=$3 m=$4 d=$5; shift 5; env "$@" FCO_BENCH_GEMV_NK="$nk" FCO_BENCH_GEMV_M="$m" timeout 150 build/bin/fco-bench gemv_allreduce -t local -g $g -d bf16 -D $d -R 3 -G 1 -J $O/gemv-g$g-$tag.json > $O/gemv-g$g-$tag.txt 2>&1; echo $tag g$g rc=$?; }
S="8192x8192,8192x28672,4096x14336,16384x16384"
for g in 2 4 8; do b auto $g "$S" "48,64" 0,1,2,auto; done
pack
for f in $O/gemv-g*.txt; do echo "== $(basename $f)"; grep -E "^ +[0-9]|auto ran" $f | cut -c1-200; done
