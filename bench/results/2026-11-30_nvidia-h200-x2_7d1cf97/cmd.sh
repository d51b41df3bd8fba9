#!/bin/bash
# Session 8 run 1 (2xH200): first GPU run of everything after 3cf8337 (lean mix/tables/profile
# variants, review fixes, wait_ge): test_embedding_alltoall on nccl and local (full), the op
# pytest, A/B bf16+f32 with defaults, the MIX / TABLES knobs, a PROFILE timeline, torch same run.
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
  for m in 50 100; do el "bf16 FCO_EA_LEAN_MIX=$m"; FCO_EA_LEAN_MIX=$m timeout 50 $E -d bf16 -D 1 2>&1 | grep -v '^# progress'; done
  for n in 2 4; do el "bf16 FCO_EA_LEAN_TABLES=$n"; FCO_EA_LEAN_TABLES=$n timeout 50 $E -d bf16 -D 1 2>&1 | grep -v '^# progress'; done
  el "bf16 MIX=50 TABLES=4"; FCO_EA_LEAN_MIX=50 FCO_EA_LEAN_TABLES=4 timeout 50 $E -d bf16 -D 1 2>&1 | grep -v '^# progress'
} > $OUT/ea.txt 2>&1
el "profile"; FCO_EA_PROFILE=1 timeout 60 $B embedding_alltoall -t nccl -g 2 -G 0 -n 3 -w 1 -d bf16 -D 1 > $OUT/ea-prof.txt 2>&1; echo rc=$?
el "torch"; timeout 120 python3 bench/embedding_alltoall_torch.py --nproc 2 > $OUT/torch-ea.txt 2>&1; echo rc=$?
el all done
grep -E '^ +[0-9]|^\[' $OUT/ea.txt | cut -c1-170
grep -E '^ +[0-9]' $OUT/torch-ea.txt | cut -c1-150
grep -iE 'median|rank' $OUT/ea-prof.txt | head -30
