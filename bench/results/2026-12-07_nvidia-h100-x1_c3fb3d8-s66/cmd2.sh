#!/bin/bash
# Session 63 (one GPU), call 2: session 62's torch-peer changes, never run (3f72bba: CUDA graphs
# of 8 calls in the embedding and gemm peers; 22f93c1: their HBM rate measured as fco-bench's),
# then pytest -m gpu without test_gemm_tma (Triton compiles; the C objects are this session's).
# Carry: build/carry.tgz. Run: FCO_COMMIT=<commit> bash cmd2.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
O=/tmp/o63b; mkdir -p $O
echo "commit ${FCO_COMMIT:-?}" > $O/commit.txt
nvidia-smi --query-gpu=name --format=csv,noheader | tee $O/gpu.txt
pack() { tar czf $OUT/out.tgz -C $O .; }
FCO_BENCH_EA_WORKLOADS=4,5 timeout 150 python3 bench/embedding_alltoall_torch.py --nproc 1 \
  > $O/ea-torch.txt 2>&1
echo "ea torch rc=$? ${SECONDS}s"; tail -n 12 $O/ea-torch.txt; pack
FCO_BENCH_GA_SHAPES="512,2048,7168,32,8" timeout 120 python3 bench/gemm_alltoall_torch.py \
  --nproc 1 > $O/ga-torch.txt 2>&1
echo "ga torch rc=$? ${SECONDS}s"; tail -n 10 $O/ga-torch.txt; pack
timeout 120 python3 bench/gemv_allreduce_torch.py --nprocs 1 --fco 0 > $O/gemv-torch.txt 2>&1
echo "gemv torch rc=$? ${SECONDS}s"; tail -n 14 $O/gemv-torch.txt; pack
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME="$NCCL_HOME" > $O/build.log 2>&1
echo "make rc=$? ${SECONDS}s"
left=$((570 - SECONDS))
[ $left -lt 120 ] && { echo "pytest skipped (${SECONDS}s)"; exit 0; }
FCO_LIB=$PWD/build/lib/libfco.so FCO_TEST_QUICK=1 timeout $left python3 -m pytest tests/python \
  -m gpu -k "not test_gemm_tma" -rs -q -p no:cacheprovider --durations=15 > $O/pytest-gpu.txt 2>&1
echo "pytest -m gpu (not test_gemm_tma) rc=$? ${SECONDS}s"; tail -n 25 $O/pytest-gpu.txt; pack
