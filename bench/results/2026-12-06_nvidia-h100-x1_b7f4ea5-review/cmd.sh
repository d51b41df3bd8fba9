#!/bin/bash
# Session 57's last commits (3faf95f, 8e10166, dbcbbfe) on one GPU (~5 min with a cold start; its
# device time ran out): the test changes that never ran on a GPU — test_gemm_alltoall_tiles' plan
# assertions by compute capability, test_embedding_alltoall_direct's b2b plan assertions (the lean
# kernel's direct stores), test_bad_args' peer_destroyed, test_timeout's reserve through a healthy
# rank — plus test_mem_alloc and test_gemm_alltoall_freed after fco_mem_alloc's refusal path moved
# (local transport; the slot agreement itself needs nccl with a rank per process:
# test_gemm_alltoall_nccl_faults S1, in x2-session15.sh).
# Carry: `make -j2 && bash bench/results/pending/make_carry.sh` (no recompile on the device).
# Run: FCO_COMMIT=<commit> bash cmd.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
make -j16 NCCL_HOME="$NCCL_HOME" > $OUT/build.log 2>&1
echo "make rc=$? ($(grep -c nvcc $OUT/build.log) nvcc lines)"
FCO_TRANSPORT=local BUILD=build TEST_TIMEOUT=160 tests/run.sh test_gemm_alltoall_tiles \
  test_embedding_alltoall_direct test_mem_alloc test_gemm_alltoall_freed test_bad_args \
  test_timeout > $OUT/tests.txt 2>&1
echo "tests rc=$?"
cp build/tests/logs/local/test_gemm_alltoall_tiles.log build/tests/logs/local/test_embedding_alltoall_direct.log $OUT/
tail -6 $OUT/tests.txt
