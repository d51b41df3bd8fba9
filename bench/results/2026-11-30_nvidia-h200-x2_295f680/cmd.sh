#!/bin/bash
# Session 9 run 10 (2xH200, commit 295f680): examples/moe_layer.py on 2 GPUs with its combine output
# in fco.empty_symmetric memory (default) and without (--no-symmetric).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=295f680
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for m in "" --no-symmetric; do
  timeout 90 torchrun --nproc-per-node 2 examples/moe_layer.py $m > $OUT/moe$m.txt 2>&1; echo "moe $m rc=$?"; grep -v "^W1130\|^\*\*\*" $OUT/moe$m.txt | tail -5
done
