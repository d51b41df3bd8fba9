#!/bin/bash
# Session 49, one GPU: (1) tests/gpu/run.sh quick, local C suite (fco_allreduce's AUTO on local: copies +
# one reduction above 8 MB / P, test_last_plan's new part; fco-bench's measured HBM rate), (2) fco-bench
# allreduce on local P = 2, 256 KB..64 MB (AUTO against impl 0 at every size). Carry: build/obj at the
# commit, stripped. Run: FCO_COMMIT=<commit> bash cmd.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
D=$OUT; O=/tmp/o9; rm -rf $O; mkdir -p $O
pack() { tar czf $D/out.tgz -C $O . 2>/dev/null; }
tar xzf build/carry.tgz && find build/obj -name '*.o' -exec touch {} +
OUT=$O FCO_GPU_PREBUILT=1 FCO_GPU_QUICK=1 FCO_GPU_PYTEST=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 \
  FCO_GPU_SUITES=local FCO_GPU_BUDGET=300 bash tests/gpu/run.sh > $O/run.log 2>&1
echo "run.sh rc=$?"; tail -9 $O/run.log; pack
nvidia-smi --query-gpu=name --format=csv > $O/gpu.txt 2>&1
timeout 120 build/bin/fco-bench allreduce -t local -g 2 -b 256K -e 64M -J $O/ar-local.json > $O/ar-local.txt 2>&1
echo "allreduce rc=$?"; python3 bench/targets.py $O/ar-local.json > $O/targets.txt 2>&1
grep -v "^# knobs\|^# progress" $O/ar-local.txt | tail -30; tail -2 $O/targets.txt; pack
