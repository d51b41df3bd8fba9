#!/bin/bash
# Session 14 run 4 (1 H200, commit fe6672d): where the grouped M = 64 kernel loses time inside the
# operator (P = 1 graph timing 59.8 µs at 8192×8192 against ncu's 50.7 for the kernel, run 0b0b1f7):
# fco-bench P = 1 at M = 64 with FCO_GEMV_PDL 1 / 0, FCO_GEMV_GROUP_MMA 0 / 1, graphs on / off.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export FCO_COMMIT=fe6672d FCO_TIMEOUT_MS=15000
mkdir -p /tmp/o
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > /tmp/o/build.log 2>&1; echo "make rc $?"
export FCO_BENCH_GEMV_NK="8192x8192,4096x7168" FCO_BENCH_GEMV_M="64"
b() { # tag graph env...
  local tag=$1 g=$2; shift 2
  env "$@" timeout 100 build/bin/fco-bench gemv_allreduce -t nccl -g 1 -G $g -d bf16 -D 0,1 -n 20 -w 5 -R 3 \
    -J /tmp/o/$tag.json > /tmp/o/$tag.txt 2>&1; echo "$tag rc $?"
  grep -E '^ +[0-9]' /tmp/o/$tag.txt | sed "s/^/$tag /"
}
b default 1 FCO_X=1
b pdl0 1 FCO_GEMV_PDL=0
b mma 1 FCO_GEMV_GROUP_MMA=1
b eager 0 FCO_X=1
b eager-pdl0 0 FCO_GEMV_PDL=0
tar czf $OUT/out.tgz -C /tmp/o .
