#!/bin/bash
# Session 36 (one H200): bench/probe/wrapper_cost_probe.py — where the torch wrappers' host time goes
# (fco.gemv_allreduce 25 µs, fco.gemm_alltoall 32 µs above their raw C calls in run ..._eb83e0e-rule).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
timeout 200 torchrun --nproc-per-node 1 --standalone bench/probe/wrapper_cost_probe.py > $O/wrapper_cost.txt 2>&1; echo "rc=$?"
pack
grep -v "^W12\|^\*\*\*" $O/wrapper_cost.txt | cut -c1-140 | head -80
