#!/bin/bash
# Session 36 (one H200): (1) gemv_allreduce at one rank, where AUTO is cuBLAS (impl 0) at every shape: impl 1
# (the fused kernels; at P = 1 the GEMV phase alone) against it at M 1..64 over the bench's shapes and their P = 2
# slices (fco-bench, nccl, one rank, bf16, graphs, -R 3) — is there an M range where AUTO should take impl 1?
# (2) test_embedding_alltoall (quick) on local after FCO_EA_LAND_KB's read moved into one helper.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
FCO_TRANSPORT=local FCO_TEST_QUICK=1 timeout 200 build/tests/test_embedding_alltoall > $O/ea-local.txt 2>&1; echo "test_embedding_alltoall local rc=$?"; tail -2 $O/ea-local.txt
pack
export FCO_BENCH_GEMV_NK="8192x8192,8192x28672,4096x14336,16384x16384,8192x4096,4096x7168,8192x14336,16384x8192,4096x4096"
export FCO_BENCH_GEMV_M="1,8,16,17,24,32,33,48,64"
timeout 400 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -d bf16 -D 1 -G 1 -R 3 -n 20 -w 5 -J $O/gemv-p1.json > $O/gemv-p1.txt 2> $O/gemv-p1.err; echo "fco-bench rc=$?"
pack
grep -v "^#  " $O/gemv-p1.txt | grep "^ \|^# *N \|wrong" | cut -c1-140
