#!/bin/bash
# Session 36 (one H200): where examples/moe_layer.py's eager time goes (bench/probe/moe_example_probe.py:
# wall / host / GPU µs per path and impl, torch.profiler tables), and the three examples twice each with
# the side-by-side timing of _util.compare (is the speedup line stable between invocations now?).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME lib > $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
export PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
timeout 240 torchrun --nproc-per-node 1 --standalone bench/probe/moe_example_probe.py > $O/probe.txt 2>&1; echo "probe rc=$?"
pack
grep -A12 "^# moe_example_probe" $O/probe.txt
for i in 1 2; do for e in tp_mlp_decode dlrm_forward moe_layer; do
  timeout 100 torchrun --nproc-per-node 1 --standalone examples/$e.py > $O/$e-$i.txt 2>&1; echo "$e #$i rc=$?"
  grep "us/step" $O/$e-$i.txt
  pack
done; done
