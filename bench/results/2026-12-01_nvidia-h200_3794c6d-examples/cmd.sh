#!/bin/bash
# Session 19 run 6 (one H200, commit 3794c6d): the three PyTorch examples on one GPU
# (torchrun --nproc-per-node 1, CUDA, their own check of fco against plain torch) — the first
# GPU run of examples/ since session 9 (2×H200, 295f680); at one rank fco's AUTO runs each op's
# one-rank path (gemv: cuBLAS; embedding: the lookup; gemm: tiles or the GEMMs straight into out).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=3794c6d
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o6; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
for e in tp_mlp_decode dlrm_forward moe_layer; do
  timeout 150 torchrun --nproc-per-node 1 --standalone examples/$e.py > $O/$e.txt 2>&1; echo "$e rc=$?"
  grep -v "^W1201\|^\*\*\*" $O/$e.txt | tail -6
  pack
done
