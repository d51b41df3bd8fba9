#!/bin/bash
# Session 34's last run (one H200): the README's first command (`make bench`: every op's fco-bench table with
# its defaults, nccl, one rank; gemm_alltoall's floor now from the GEMM rate measured in the run) and the three
# PyTorch examples (torchrun --nproc-per-node 1, their own check of fco against plain torch), at HEAD.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
for e in tp_mlp_decode dlrm_forward moe_layer; do
  timeout 100 torchrun --nproc-per-node 1 --standalone examples/$e.py > $O/$e.txt 2>&1; echo "$e rc=$?"
  grep -v "^W12\|^\*\*\*" $O/$e.txt | tail -4
  pack
done
timeout 200 make NCCL_HOME=$NCCL_HOME bench > $O/make-bench.txt 2> $O/make-bench.err; echo "make bench rc=$?"
pack
grep -c "" $O/make-bench.err; grep -h "wrong elements\|GEMM rate" $O/make-bench.txt
