#!/bin/bash
# Session 34 (one H200): the whole C suite at HEAD after the side-stream merge, the string knobs and the bench's
# measured peak: local (quick, P 1..4) and nccl (quick, P = 1); fco-bench gemm_alltoall local -g 2 bf16 on two
# workloads (the floor's rate: the probe's, or the gemm column's where higher).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_BENCH_GA_SHAPES="4096,14336,4096,8,2;512,2048,7168,32,8" timeout 60 build/bin/fco-bench gemm_alltoall -t local -g 2 -d bf16 -n 10 -w 3 -J $O/ga.json > $O/ga.txt 2>&1; echo "bench rc=$?"
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 timeout 330 tests/run.sh > $O/suite-local.txt 2>&1; echo local suite rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 timeout 200 tests/run.sh > $O/suite-nccl.txt 2>&1; echo nccl suite rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
grep -h "^PASS\|^FAIL\|^SKIP\|^#" $O/suite-*.txt | grep -v "^PASS"
grep -h "rate\|^  \|tokens" $O/ga.txt
