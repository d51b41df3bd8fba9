#!/bin/bash
# Session 24 (one H200, commit 34bb36f): is the TMA tile's fixed cost (the y loop's ~2.9 us, the
# barrier init's ~0.8, the pair hand-off's ~0.8 in runs 0c41359-gtrace / ee6e36d-vstore) the
# instruction cache? ncu's warp-state sampling per SASS instruction (SourceCounters) of impl 1
# (the fused kernel) and impl 0's cuBLAS GEMM, P = 1, M 64, N 8192, K 8192 and 2048, eager.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-34bb36f}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
NCU=$(which ncu)
for K in 8192 2048; do
  FCO_BENCH_GEMV_NK=8192x$K FCO_BENCH_GEMV_M=64 timeout 150 $NCU -k regex:gemv_allreduce_kernel -s 2 -c 1 \
    --section WarpStateStats --section SourceCounters --section LaunchStats -f -o $O/fused$K \
    build/bin/fco-bench gemv_allreduce -t local -g 1 -G 0 -d bf16 -n 2 -w 1 -R 1 -D 1 > $O/ncu-fused$K.log 2>&1; echo fused $K rc=$?
  $NCU -i $O/fused$K.ncu-rep --page details > $O/details-fused$K.txt 2>&1
  $NCU -i $O/fused$K.ncu-rep --page source --csv --print-source sass > $O/sass-fused$K.csv 2> $O/sass-fused$K.err; echo sass rc=$?
  $NCU -i $O/fused$K.ncu-rep --page source --csv --print-source cuda > $O/cuda-fused$K.csv 2> $O/cuda-fused$K.err; echo cuda rc=$?
done
FCO_BENCH_GEMV_NK=8192x8192 FCO_BENCH_GEMV_M=64 timeout 150 $NCU -k regex:'nvjet|gemm|xmma|cutlass' -s 2 -c 1 \
  --section WarpStateStats --section SourceCounters --section LaunchStats -f -o $O/cublas \
  build/bin/fco-bench gemv_allreduce -t local -g 1 -G 0 -d bf16 -n 2 -w 1 -R 1 -D 0 > $O/ncu-cublas.log 2>&1; echo cublas rc=$?
$NCU -i $O/cublas.ncu-rep --page details > $O/details-cublas.txt 2>&1
$NCU --help 2>&1 | grep -n -A3 "print-source\|--page" > $O/ncu-help.txt

cuobjdump -sass build/obj/src/cuda/gemv_allreduce.o > $O/gar.sass 2>&1
awk '/Function :/{if(name)print n, name; name=$3; n=0} /\/\*[0-9a-f]{4,5}\*\/ /{n++} END{print n, name}' $O/gar.sass | sort -n > $O/fsizes.txt
xz -9 $O/gar.sass
rm -f $O/build.log; pack
ls -la $O
tail -8 $O/fsizes.txt | cut -c1-160
for f in $O/details-*.txt; do echo "== $f"; grep -E "Duration|No Instruction|Stall|Warp Cycles Per Issued|Block Size|Grid Size|Registers" $f | head -30; done
python3 - $O/sass-fused8192.csv <<'PY'
import csv, sys
try:
    rows=list(csv.reader(open(sys.argv[1])))
except Exception as e:
    print('no csv', e); sys.exit()
print(len(rows)); print(rows[:2])
PY
