#!/bin/bash
# Session 20 run 4 (one H200): the README's first command, `make bench`, as a user on a
# one-GPU machine runs it (every operator's fco-bench table with its defaults: nccl, one rank —
# the header now says there is nothing to communicate and how to get the A/B), then the same
# tables' gemv_allreduce on local P = 2 beside. Build against torch's NCCL as tests/gpu/run.sh does.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o4; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
timeout 400 make bench NCCL_HOME=$NCCL_HOME > $O/make-bench.txt 2> $O/make-bench.err; echo "make bench rc=$?"
pack
el make bench done
head -12 $O/make-bench.txt; grep -c "^ " $O/make-bench.txt; grep "wrong elements" $O/make-bench.txt; wc -l $O/make-bench.err; head -5 $O/make-bench.err
