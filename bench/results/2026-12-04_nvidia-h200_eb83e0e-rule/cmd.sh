#!/bin/bash
# Session 36 (one H200): (1) the new one-rank gemm_alltoall AUTO rule — test_gemm_alltoall_checks on local and
# nccl (its one-rank cases read AUTO's choice back), fco-bench -D auto on run d9de2c3-ga1rule's shapes (graphs);
# (2) examples/moe_layer.py again; (3) bench/probe/host_cost_probe.py: the host time of one eager call per op.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 200 build/tests/test_gemm_alltoall_checks > $O/checks-$tr.txt 2>&1; echo "test_gemm_alltoall_checks $tr rc=$?"
  tail -2 $O/checks-$tr.txt
done
pack
S="2048,1408,2048,16,2;2048,1408,2048,16,2,1.25;2048,1408,2048,16,2,2;2048,1408,2048,16,2,4"
S="$S;1024,14336,4096,8,2;1024,14336,4096,8,2,1.25;512,2048,7168,32,8;512,2048,7168,32,8,4"
S="$S;1536,2048,4096,8,2;2048,2048,4096,8,2;2048,1408,2048,16,4;128,2048,7168,32,8"
FCO_BENCH_GA_SHAPES="$S" timeout 250 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -d bf16 -D auto -G 1 -R 4 -n 20 -w 5 \
  -J $O/ga-auto.json > $O/ga-auto.txt 2> $O/ga-auto.err; echo "fco-bench rc=$?"
pack
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
timeout 100 torchrun --nproc-per-node 1 --standalone examples/moe_layer.py > $O/moe_layer.txt 2>&1; echo "moe_layer rc=$?"
grep "us/step\|check" $O/moe_layer.txt
pack
timeout 150 torchrun --nproc-per-node 1 --standalone bench/probe/host_cost_probe.py > $O/host_cost.txt 2>&1; echo "host_cost rc=$?"
pack
grep -v "^#  " $O/ga-auto.txt | grep "^ \|^# tok" | cut -c1-150
grep -A16 "^# host_cost_probe" $O/host_cost.txt
