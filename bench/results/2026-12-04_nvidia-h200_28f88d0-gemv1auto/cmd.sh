#!/bin/bash
# Session 36 (one H200): gemv_allreduce's one-rank AUTO rule (impl 1 at bf16 / f16, M <= 48, 2048 < N <= 4096):
# test_gemv_allreduce (quick) on nccl and local — its auto_rule reads the choice back at P = 1; fco-bench at one
# rank, N 4096 over K 1024..28672 and N 3072 (between measured points), -D 1,auto, graphs, -R 3.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for tr in nccl local; do
  FCO_TRANSPORT=$tr FCO_TEST_QUICK=1 timeout 200 build/tests/test_gemv_allreduce > $O/gemv-$tr.txt 2>&1; echo "test_gemv_allreduce $tr rc=$?"; tail -2 $O/gemv-$tr.txt
done
pack
export FCO_BENCH_GEMV_NK="4096x1024,4096x2048,4096x4096,4096x7168,4096x14336,4096x28672,3072x8192,3072x3072"
export FCO_BENCH_GEMV_M="1,4,8,16,32,48,64"
timeout 300 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -d bf16 -D 1,auto -G 1 -R 3 -n 20 -w 5 -J $O/gemv-p1.json > $O/gemv-p1.txt 2> $O/gemv-p1.err; echo "fco-bench rc=$?"
pack
grep -v "^#  " $O/gemv-p1.txt | grep "^ \|^# *N \|wrong" | cut -c1-150
