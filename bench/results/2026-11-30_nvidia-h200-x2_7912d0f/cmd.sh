#!/bin/bash
# Session 8 run 4 (2xH200): the new default (claimed tiles where bags are short): tests on nccl and
# local (full), the op pytest, A/B bf16+f32 -D 0,1,auto, the torch script in the same run.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el build done
B="build/bin/fco-bench"
for t in nccl local; do
  el "test embedding $t"
  FCO_TEST_TRACE=1 FCO_TRANSPORT=$t timeout 110 build/tests/test_embedding_alltoall > $OUT/test-$t.log 2>&1; echo "rc=$?"
  grep -vE '^>' $OUT/test-$t.log | tail -4; grep -E '^>' $OUT/test-$t.log | tail -1
done
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
el pytest; timeout 60 python3 -m pytest tests/python/test_gpu_ops.py -m gpu -q -p no:cacheprovider -k embedding 2>&1 | tail -1
E="$B embedding_alltoall -t nccl -g 2 -G 1 -n 10 -w 2"
{
  for d in bf16 f32; do el "defaults $d"; timeout 60 $E -d $d -D 0,1,auto 2>&1 | grep -v '^# progress'; done
  for d in bf16 f32; do el "static order $d (FCO_EA_LEAN_DYN=0)"; FCO_EA_LEAN_DYN=0 timeout 60 $E -d $d -D 1 2>&1 | grep -v '^# progress'; done
  el "bf16 local transport (one GPU, 2 virtual ranks)"; timeout 60 $B embedding_alltoall -t local -g 2 -d bf16 -n 10 -w 2 -D 0,1 2>&1 | grep -E '^ +[0-9]|^# +B'
} > $OUT/ea.txt 2>&1
el "torch"; timeout 120 python3 bench/embedding_alltoall_torch.py --nproc 2 > $OUT/torch-ea.txt 2>&1; echo rc=$?
el all done
grep -E '^ +[0-9]|^\[' $OUT/ea.txt | cut -c1-170
grep -E '^ +[0-9]' $OUT/torch-ea.txt | cut -c1-150
