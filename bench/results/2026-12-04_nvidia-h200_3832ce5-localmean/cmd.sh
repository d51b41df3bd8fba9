#!/bin/bash
# Session 37 (one H200): gemm_alltoall's local AUTO bound by mean rows · N at P >= 2 (tiles only where
# a_rows / E_r · N < 2^21): test_gemm_alltoall_checks on local (P 1..4) and nccl (P 1), once more with
# FCO_GEMM_A2A_AUTO=1 forcing the tiles (its new N 2048 case must then fail); fco-bench local P = 2 and 4 on
# random / balanced rows at K <= 2048 (impl 0, tiles, AUTO); then torch._grouped_mm (bench/gemm_alltoall_torch.py
# --gemm grouped) at P = 1 on the same rows and the balanced ones, torch columns only.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for t in local nccl; do
  FCO_TRANSPORT=$t timeout 120 build/tests/test_gemm_alltoall_checks > $O/checks-$t.txt 2>&1; echo "checks $t rc=$?"
done
FCO_GEMM_A2A_AUTO=1 FCO_TRANSPORT=local timeout 120 build/tests/test_gemm_alltoall_checks > $O/checks-forced.txt 2>&1
echo "checks local, tiles forced (must fail) rc=$?"; grep -m2 "FAIL\|expected" $O/checks-forced.txt | cut -c1-200
pack
S="1024,2048,4096,8,2,r;2048,2048,4096,8,2,r;1024,2048,4096,8,2;1024,2048,4096,8,2,2;2048,1408,2048,16,2,r"
S="$S;512,2048,7168,32,8,r;128,2048,7168,32,8,r;128,2048,7168,32,8"
for g in 2 4; do
  FCO_BENCH_GA_SHAPES="$S" timeout 150 build/bin/fco-bench gemm_alltoall -t local -g $g -d bf16 -D tiles,auto -G 1 -R 4 -n 10 -w 3 \
    -J $O/ga-local$g.json > $O/ga-local$g.txt 2> $O/ga-local$g.err; echo "P=$g rc=$?"
  pack
done
S2="$S;4096,14336,4096,8,2,r;1024,14336,4096,8,2,r;4096,14336,4096,8,2;1024,14336,4096,8,2;512,2048,7168,32,8"
FCO_BENCH_GA_SHAPES="$S2" timeout 150 python3 bench/gemm_alltoall_torch.py --nproc 1 --gemm grouped --fco none \
  --json $O/torch-grouped1.json > $O/torch-grouped1.txt 2>&1; echo "torch grouped rc=$?"; pack
for g in 2 4; do echo "== local P=$g"; grep -v "^#  " $O/ga-local$g.txt | grep "^ \|^# tok\|wrong" | cut -c1-150; done
grep -v "^#  " $O/torch-grouped1.txt | tail -14 | cut -c1-130
