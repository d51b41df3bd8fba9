#!/bin/bash
# Written in session 37 for the next session with a GPU (one H200 is enough; ~150 s): why ragged bags cost the lean
# lookup 12-50 % (run 2026-12-04_nvidia-h200_c174235-ragged). Hypothesis (docs/embedding_alltoall.md, "Known limits"):
# a lane group's share of a warp tile is W / RW bags, equal in bags, not rows, so a warp runs as long as its longest
# share. Cheap test before any kernel change: more bags per share (FCO_EA_LEAN_CHUNKS, the chunks of 4 rows a share
# holds at the mean bag; default 8 at L 8, 16 at L >= 16) lowers the shares' spread (~1/sqrt(bags)) — if the ragged
# rows speed up with it while the fixed-L ones do not, the hypothesis holds and the row split is the fix. Also the
# impl 0 lookup's static tile stride vs the fused kernel's claimed tiles (FCO_EA_LEAN_DYN=0 / 1 on impl 1).
# Copy into bench/results/<date>_nvidia-h200_<commit>/cmd.sh and run with build/obj carried.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib tools > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
export FCO_BENCH_EA_WORKLOADS=0,1,7,8
B="build/bin/fco-bench embedding_alltoall -t nccl -g 1 -d bf16 -G 1 -R 3 -n 10 -w 3"
for c in default 16 32 64; do
  if [ $c = default ]; then unset FCO_EA_LEAN_CHUNKS; else export FCO_EA_LEAN_CHUNKS=$c; fi
  timeout 60 $B -D 1 -J $O/chunks-$c.json > $O/chunks-$c.txt 2>&1; echo "chunks $c rc=$?"
done
unset FCO_EA_LEAN_CHUNKS
for d in 0 1; do FCO_EA_LEAN_DYN=$d timeout 60 $B -D 1 > $O/dyn-$d.txt 2>&1; echo "dyn $d rc=$?"; done
pack
for f in $O/chunks-*.txt $O/dyn-*.txt; do echo "== $(basename $f)"; grep -v "^#  " $f | grep "^ \|wrong" | cut -c1-150; done
