#!/bin/bash
# Session 34 (one H200), commit 472e5cd:
# (1) test_streams against main's gemm_alltoall.cu of before the merge (1215cd1, compiled into build/oldga/,
#     linked into /tmp/oldlib/libfco.so with the other objects of src/): its chunks_independent part must FAIL
#     (run abf563a-streams's try linked the trace objects too and never built the old library);
# (2) the string knobs (fco_env_choice): test_config_env local + nccl, test_gemm_alltoall_checks local (the
#     FCO_GA_TILE / FCO_GA_EPI read-back cases) + nccl, test_embedding_alltoall (FCO_EA_DECODE cases) local quick;
# (3) fco-bench gemm_alltoall with the floor's GEMM rate measured in the run: local -g 2 bf16 (default
#     workloads), nccl -g 1 f32 (one workload); bench/gemm_alltoall_torch.py --nproc 1 (its measured peak).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000 FCO_COMMIT=${FCO_COMMIT:-unknown}
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o1; rm -rf $O; mkdir -p $O
pack() { tar czf $OUT/out.tgz -C $O .; }
find build/obj build/oldga -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
rm -f $O/build.log
mkdir -p /tmp/oldlib
g++ -shared -o /tmp/oldlib/libfco.so $(find build/obj/src -name '*.o' ! -path '*/cuda/gemm_alltoall.o') build/oldga/gemm_alltoall.o \
  -L/usr/local/cuda/lib64 -lcudart -lcublas -lcublasLt -L$NCCL_HOME/lib -l:libnccl.so.2 -lpthread -lrt -lm > $O/oldlib.txt 2>&1; echo "old lib link rc=$?"
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 120 build/tests/test_streams > $O/streams-$tr.txt 2>&1; echo "test_streams $tr rc=$?"
  LD_LIBRARY_PATH=/tmp/oldlib:$NCCL_HOME/lib FCO_TRANSPORT=$tr timeout 120 build/tests/test_streams > $O/streams-old-$tr.txt 2>&1
  echo "test_streams against 1215cd1's gemm_alltoall.cu, $tr rc=$? (want nonzero)"
  LD_LIBRARY_PATH=/tmp/oldlib:$NCCL_HOME/lib ldd build/tests/test_streams | grep fco >> $O/oldlib.txt
done
pack
for tr in local nccl; do
  FCO_TRANSPORT=$tr timeout 60 build/tests/test_config_env > $O/config-$tr.txt 2>&1; echo "test_config_env $tr rc=$?"
done
FCO_TRANSPORT=local FCO_TEST_QUICK=1 FCO_TEST_MAX_RANKS=4 TEST_TIMEOUT=150 timeout 250 tests/run.sh \
  test_gemm_alltoall_checks test_embedding_alltoall > $O/suite-local.txt 2>&1; echo local rc=$?
FCO_TRANSPORT=nccl FCO_TEST_QUICK=1 TEST_TIMEOUT=100 timeout 120 tests/run.sh test_gemm_alltoall_checks > $O/suite-nccl.txt 2>&1; echo nccl rc=$?
cp -r build/tests/logs $O/ 2>/dev/null; pack
timeout 150 build/bin/fco-bench gemm_alltoall -t local -g 2 -d bf16 -n 10 -w 3 -J $O/ga-local-bf16.json > $O/ga-local-bf16.txt 2>&1; echo "bench local bf16 rc=$?"
FCO_BENCH_GA_SHAPES="512,2048,7168,32,8" timeout 60 build/bin/fco-bench gemm_alltoall -t nccl -g 1 -d f32 -n 5 -w 2 -J $O/ga-f32.json > $O/ga-f32.txt 2>&1; echo "bench f32 rc=$?"
pack
PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so timeout 120 python3 bench/gemm_alltoall_torch.py --nproc 1 --fco none --iters 10 --warmup 3 > $O/torch.txt 2>&1; echo "torch rc=$?"
pack
for f in $O/streams-*.txt; do echo "== $f"; grep -v "^$" $f | tail -3; done
cat $O/config-*.txt | grep -i "knob\|PASS\|FAIL"; grep -h "^PASS\|^FAIL\|^#" $O/suite-*.txt
grep -h "rate\|^  \|^#.*tokens" $O/ga-*.txt; grep "rate\|^  \|tokens" $O/torch.txt | head -8
