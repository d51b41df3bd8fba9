#!/bin/bash
# Session 15's two-GPU run (nvidia-h200-x2), written while the machine was refused; copied into
# bench/results/<date>_nvidia-h200-x2_<commit>/cmd.sh with FCO_COMMIT set (FCO_COMMIT=... bash
# cmd.sh) when it runs. X2_PART=tests / bench splits it into two calls (below); the first 2-GPU
# run since session 11.
# Sessions 12-14's changes (half-width LL words, wide plain one-shot, split groups at M 33..64,
# one kernel per grouped tile; embedding ring alignment / tile sizes / claimed order; gemm impl 2
# call_plan; session 15: fco_last_plan in the core and both GPU transports, the gemv knobs in
# the op layer) measured at P = 2: (1) the whole C suite, quick, on nccl; (2) fco-bench gemv at every
# listed M (every impl + auto, -J), split groups off (FCO_GEMV_SPLIT=1) at M = 64 beside,
# fp32 LL words at M 1 / 16 beside, fp32 grouped partials (session 22) at M 64 beside; (3) embedding bf16 / f32 (-D 0,1,auto, -J); (4) gemm bf16
# every impl (-J), and the skewed workload's impl 0 + chunks / + AUTO in separate invocations
# (session 20: AUTO's unexplained gap to the same impl); (5) targets.py; (6) if time is left, the torch script of gemv (fco columns).
# Outputs in /tmp/o, packed into $OUT/out.tgz at the end (the device tool returns <= 8 files).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 FCO_TIMEOUT_MS=15000
export FCO_COMMIT=${FCO_COMMIT:?set FCO_COMMIT to the commit that runs} PYTHONPATH=$PWD/python FCO_LIB=$PWD/build/lib/libfco.so
export NCCL_HOME=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')
export PATH=/usr/local/cuda/bin:$PATH
O=/tmp/o; rm -rf $O; mkdir -p $O
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf $OUT/out.tgz -C $O .; }
nvidia-smi -L > $O/smi.txt; nvidia-smi topo -m >> $O/smi.txt 2>&1
# the carry: build/carry.tgz (make_carry.sh: objects without the NCCL header lines in their .d
# files, so make only links) or build/obj itself (then the five NCCL TUs recompile, ~2-3 min)
[ -f build/carry.tgz ] && tar xzf build/carry.tgz
[ -d build/obj ] && find build/obj -name '*.o' -exec touch {} +
make -j16 NCCL_HOME=$NCCL_HOME > $O/build.log 2>&1 && make -j16 NCCL_HOME=$NCCL_HOME tests >> $O/build.log 2>&1 || { tail -30 $O/build.log; pack; exit 1; }
el build done
# X2_PART=tests: build, (0) and (1) only; X2_PART=bench: build, then (2) on (the benches); unset:
# everything, whose worst case reaches the benches only after ~540 s of the 600 s a call may run
# (session 62's script audit) — so with the machine for two calls, run it as two.
PART=${X2_PART:-all}
case $PART in all | tests | bench) ;; *) echo "X2_PART=$PART: want tests, bench or unset"; exit 2 ;; esac
if [ "$PART" != bench ]; then
# (0) sessions 56 and 57's two-GPU tests first (the suite below is capped at 240 s and could end
# before them): gemm impl 0's bad counts / mixed impls / changed counts, each under a 60 s
# deadline, a one-thread world refused on the host before anything is queued (session 57, R1),
# one slot on both ranks after a one-sided fco_mem_free (S1); the caller's device kept; gemv
# FCO_CHECK_ARGS with a peer 2 s late; the embedding at the epoch limit with a late peer and its
# back-to-back calls (b2b: the R2 race, which only two GPUs can show) and its failed resolve
# (session 58's `fault` part: FCO_FAULT_EA_RESOLVE, the receiver must report its own error);
# gemm's freed slot staged; session 60's gate ahead of growth and fco_mem_alloc (test_grow_gate:
# a rank alone in a growth / an allocation times out instead of hanging, sizes agreed)
el "session 56-60 tests nccl"
FIRST="test_grow_gate test_gemm_alltoall_nccl_faults test_device_keep test_embedding_alltoall_direct test_gemv_allreduce test_gemm_alltoall_freed"
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 timeout 300 tests/run.sh \
  $FIRST > $O/tests-nccl-s56.txt 2>&1; echo rc=$?
tail -6 $O/tests-nccl-s56.txt
# (1) the C suite on nccl, quick: the rest of it (the suite's programs as tests/run.sh lists them,
# less (0)'s, which ran above: run twice they would eat the 240 s bound's end of the suite)
REST=()
for s in tests/test_*.c; do n=$(basename "$s" .c); case " $FIRST " in *" $n "*) ;; *) REST+=("$n") ;; esac; done
for s in examples/c/*.c; do REST+=("test_example_$(basename "$s" .c)"); done
el "C suite nccl (${#REST[@]} tests; (0)'s $(wc -w <<<"$FIRST") above)"
FCO_TRANSPORT=nccl BUILD=build TEST_TIMEOUT=170 FCO_TEST_QUICK=1 timeout 240 tests/run.sh "${REST[@]}" > $O/tests-nccl.txt 2>&1; echo rc=$?
tail -4 $O/tests-nccl.txt; grep -E "FAIL" $O/tests-nccl.txt | head
pack
fi
[ "$PART" = tests ] && { el "X2_PART=tests: stop before the benches"; exit 0; }
# (2) gemv
B="build/bin/fco-bench gemv_allreduce -t nccl -g 2 -G 1 -d bf16 -n 20 -w 5 -R 3"
el "gemv all M"; timeout 170 $B -D all -J $O/gemv.json > $O/gemv.txt 2>&1; echo rc=$?
el "gemv M 64 split off"; FCO_GEMV_SPLIT=1 FCO_BENCH_GEMV_M=64 timeout 60 $B -D 1 -J $O/gemv-split1.json > $O/gemv-split1.txt 2>&1; echo rc=$?
# session 30: at M 9..32 the plain one-shot (the bench's oneshot column, FCO_GEMV_AR_LL=0) runs the TMA tile; beside
# gemv.json's oneshot / oneshot_ll columns at M 16, the one-tile kernels it replaced (FCO_GEMV_GROUP_TMA=0), M 16 / 24
el "gemv M 16,24 one-tile kernels"; FCO_GEMV_GROUP_TMA=0 FCO_BENCH_GEMV_M=16,24 timeout 60 $B -D 1 > $O/gemv-tma0.txt 2>&1; echo rc=$?
# session 31: on local AUTO takes the tile's plain pushes at M 9..16 (LL kept at P = 2 with N <= 4096: LL 1-15 % ahead
# there, run 2026-12-03_nvidia-h200_abc7a89-localtile); on nccl LL stays. Here: LL (oneshot_ll_pdl, the nccl default)
# against the tile (oneshot) at M 9 / 12, AUTO beside — whether nccl's rule should follow local's
el "gemv M 9,12 LL vs the tile"; FCO_BENCH_GEMV_M=9,12 timeout 60 $B -D 1,oneshot_ll_pdl,auto -J $O/gemv-m9.json > $O/gemv-m9.txt 2>&1; echo rc=$?
# fp32 LL words: the LL column (oneshot_ll_pdl, the library's LL default; against gemv.txt's) — not
# -D 1: fco-bench's oneshot column forces FCO_GEMV_AR_LL=0, where FCO_GEMV_LL_FP32 changes nothing
el "gemv M 1,16 fp32 LL words"; FCO_GEMV_LL_FP32=1 FCO_BENCH_GEMV_M=1,16 timeout 60 $B -D oneshot_ll_pdl > $O/gemv-llfp32.txt 2>&1; echo rc=$?
# the grouped pushes in the dtype (default) and fp32, alternating invocations (drift between
# invocations reached 13 % on one GPU in session 22, run b36d62b-ghalf)
el "gemv M 64 grouped partials dtype / fp32"
for g in 0 1 0 1; do
  echo "# FCO_GEMV_GROUP_FP32=$g" >> $O/gemv-groupfp32.txt
  FCO_GEMV_GROUP_FP32=$g FCO_BENCH_GEMV_M=64 timeout 30 $B -D 1 >> $O/gemv-groupfp32.txt 2>&1; echo rc=$?
done
# session 23: impl 1 at M 33..64 on the TMA tile in groups of 8 (default; split 2 as cluster pairs
# where the groups fill at most half the SMs: N = 8192 at one rank a GPU) against the session-22
# grouped tile (FCO_GEMV_GROUP_TMA=0), alternating, beside impl 3 (what AUTO runs at M > 16);
# session 24 cut the TMA tile's fixed cost ~9 -> ~5 us at one rank (run
# 2026-12-02_nvidia-h200_fe80fc1-tmapf); session 25 runs a split of 3 / 4 as clusters, lowered to
# clusters that fit (4096x14336: 4096x7168 a rank, split 3 clusters; run
# 2026-12-02_nvidia-h200_5236acd-rule); session 26 takes that tile in groups of 4 where those
# stream W from more blocks or as many in fewer slices (unset; 8 / 4 force a size; runs
# 2026-12-02_nvidia-h200_bff4c11-g4, ..._ebcc1f1-rule4, ..._5296b78-final): if impl 1 beats
# impl 3 here, AUTO's M > 16 rule follows; session 27: impl 2 (two-phase) on the same groups, the
# remote-owned groups first (run 2026-12-02_nvidia-h200_277baf1-tp: on one GPU at P = 2 1.8-2.2 us
# behind impl 1 where a block has one group, ahead at 16384^2): timed beside (-D 1,2,3)
el "gemv M 48,64 TMA tile: rule / groups of 8 / of 4 / the session-22 tile"
for t in unset 8 4 0; do
  echo "# FCO_GEMV_GROUP_TMA=$t" >> $O/gemv-tma.txt
  if [ $t = unset ]; then (unset FCO_GEMV_GROUP_TMA; FCO_BENCH_GEMV_M=48,64 timeout 50 $B -D 1,2,3 >> $O/gemv-tma.txt 2>&1); echo rc=$?
  else FCO_GEMV_GROUP_TMA=$t FCO_BENCH_GEMV_M=48,64 timeout 50 $B -D 1,2,3 >> $O/gemv-tma.txt 2>&1; echo rc=$?; fi
done
# session 28: impl 1 in rounds (FCO_GEMV_ROUNDS: a block takes several groups as rounds of one TMA
# ring, the first round's pushes crossing the link while the next round computes). At 8192^2 and
# 8192x28672 (N 8192 a rank) R = 2 runs groups of 4 as 64 cluster pairs in 2 rounds, the same 128
# streaming blocks as the default's 128 unsplit groups of 4; on one GPU at P = 1 that cost
# +0.05..0.8 us (run 2026-12-03_nvidia-h200_fee17dc-rounds); here it should hide about half the
# pushes. R = 1: off (unset: rounds only where owners take several groups, 16384^2). Alternating.
# Session 29: the pairs' split finalise (FCO_GEMV_PAIR_FIN, on by default: owner and helper each push
# and reduce half of their group; run 2026-12-03_nvidia-h200_9860fb4-finsplit2: local P = 2 with R = 2
# 0.93-0.98x, P = 1 +-1 %) beside R = 2 without it (0); FCO_GEMV_GROUP_TMA=8 in the loop above now
# runs pairs of groups of 8 with it (P = 1 8192x14336: 1.6 % faster than the default's groups of 4).
el "gemv M 48,64 rounds off / 2 with and without the split finalise"
for v in "1 1" "2 1" "2 0" "1 1" "2 1" "2 0"; do
  set -- $v
  g=$([ $1 = 2 ] && echo 4 || echo -1) # R = 2 in groups of 4 (128 streaming blocks); R = 1: the rule (session 29: pairs of 8 at N 8192)
  echo "# FCO_GEMV_ROUNDS=$1 FCO_GEMV_PAIR_FIN=$2 FCO_GEMV_GROUP_TMA=$g" >> $O/gemv-rounds.txt
  FCO_GEMV_ROUNDS=$1 FCO_GEMV_PAIR_FIN=$2 FCO_GEMV_GROUP_TMA=$g FCO_BENCH_GEMV_M=48,64 timeout 40 $B -D 1 >> $O/gemv-rounds.txt 2>&1; echo rc=$?
done
pack
# (3) embedding
for d in bf16 f32; do
  el "embedding $d"
  timeout 110 build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d $d -D 0,1,auto -R 3 -n 10 -w 2 -J $O/ea-$d.json > $O/ea-$d.txt 2>&1; echo rc=$?
done
# the claimed order against the static one at P = 2 (session 12 chose the claimed order
# everywhere at P = 1; session 16 lifted its queues once a block): fused only, bf16
el "embedding bf16 static order"; FCO_EA_LEAN_DYN=0 timeout 80 build/bin/fco-bench embedding_alltoall -t nccl -g 2 -G 1 -d bf16 -D 1 -R 2 -n 10 -w 2 > $O/ea-static.txt 2>&1; echo rc=$?
# session 49: both lean kernels take the static order where a launch has no more tiles than warps (fco_ea_few_tiles;
# 1.05-1.15x at B / 256 on local P = 2, run 2026-12-05_nvidia-h100-x1_a9c4f24-few): B / 256 and B / 16, the default
# beside both kernels' claimed order forced (FCO_EA_LEAN_DYN=1 FCO_EA_LOOKUP_DYN=1), two rounds
for r in 1 2; do for dyn in def 1; do X=env; [ $dyn = 1 ] && X="env FCO_EA_LEAN_DYN=1 FCO_EA_LOOKUP_DYN=1"
  for div in 256 16; do echo "== round $r dyn $dyn B / $div" >> $O/ea-small.txt
    $X FCO_BENCH_EA_BATCH_DIV=$div FCO_BENCH_EA_WORKLOADS=1,3,4,8 timeout 40 build/bin/fco-bench embedding_alltoall -t nccl \
      -g 2 -G 1 -d bf16 -D 0,1 -R 2 -n 10 -w 2 >> $O/ea-small.txt 2>&1; done; done; done
pack
# -R 4: the 4 columns (impl 0, tiles, chunks, auto) in fco-bench's balanced order (session 16)
el "gemm"; timeout 170 build/bin/fco-bench gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -R 4 -J $O/ga.json > $O/ga.txt 2>&1; echo rc=$?
# session 37: impl 0 runs one strided batched GEMM on balanced routing (torch.bmm's; 1.2-2.4x its GEMM per expert at
# one rank, run 2026-12-04_nvidia-h200_27ecec1-batched); ga.txt's impl 0 is that one, here the per-expert loop beside
# (how much of session 11's 1.63x at 512 tokens was the weaker baseline)
el "gemm impl 0 loop"; FCO_GA_BLAS=loop timeout 60 build/bin/fco-bench gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -R 2 -D 1 > $O/ga-loop.txt 2>&1; echo rc=$?
# AUTO (= chunks at K 14336) read ~20 µs slower than the chunks column on the skewed workload
# (runs 399af73, b964207; 105 µs at P = 4, 39ee289): impl 0 + one of them per invocation, so
# neither follows the tiles column (docs/gemm_alltoall.md's order hypothesis)
for D in 0,2 0,auto 0,2 0,auto; do
  FCO_BENCH_GA_SHAPES="1024,14336,4096,8,2,4" timeout 40 build/bin/fco-bench gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -R 2 -D $D >> $O/ga-skew-sep.txt 2>&1
done
# skewed routing at K <= 2048, where AUTO takes the tiles whatever the routing (session 36: on local P = 2 the
# tiles fell to 0.92 / 0.78x impl 0 at 1024,2048,4096 skew 2 / 4, run 2026-12-04_nvidia-h200_834f5cb-gaskew —
# there the virtual ranks split one GPU's SMs, so rank 0's extra rows run on half of them; on two GPUs?)
# (and random routing, the skew field r: each token's top-k experts drawn from a seed, session 36; at local P = 2
# the tiles lost 0.93 / 0.91x at 1024 / 2048 tokens, K 2048, N 4096, r — run 2026-12-04_nvidia-h200_0d43f65-random —
# and local AUTO now bounds mean rows · N, session 37; nccl's rule still takes the tiles there: does it lose too?)
el "gemm skew at K <= 2048"; FCO_BENCH_GA_SHAPES="1024,2048,4096,8,2;1024,2048,4096,8,2,2;1024,2048,4096,8,2,4;2048,1408,2048,16,2,4;512,2048,7168,32,8,4;2048,1408,2048,16,2,r;512,2048,7168,32,8,r;1024,14336,4096,8,2,r;1024,2048,4096,8,2,r;2048,2048,4096,8,2,r" \
  timeout 120 build/bin/fco-bench gemm_alltoall -t nccl -g 2 -G 1 -d bf16 -n 10 -w 2 -R 4 -D all > $O/ga-skew2048.txt 2>&1; echo rc=$?
pack
python3 bench/targets.py $O/gemv.json $O/ea-*.json $O/ga.json > $O/targets.txt 2>&1; pack
# (each step below packs: the device tool ends the command at 600 s, and what is not in out.tgz
# then does not come back)
[ $(( $(date +%s) - T0 )) -lt 420 ] && { el "torch gemv"; timeout 150 python3 bench/gemv_allreduce_torch.py --nprocs 2 --json $O/torch-gemv.json > $O/torch-gemv.txt 2>&1; echo rc=$?; pack; }
# the PyTorch examples at two ranks (last on two GPUs in session 11, run 2026-11-30_nvidia-h200-x2_462750b;
# since session 36 they time torch and fco side by side), each checking fco against plain torch
for e in tp_mlp_decode dlrm_forward moe_layer; do
  [ $(( $(date +%s) - T0 )) -lt 500 ] || break  # + its 90 s bound: within the 600 s call
  el "example $e"; timeout 90 torchrun --nproc-per-node 2 --standalone examples/$e.py > $O/example-$e.txt 2>&1; echo rc=$?
  grep "us/step\|check" $O/example-$e.txt; pack
done
el all done
pack
for f in gemv gemv-split1 gemv-llfp32 gemv-groupfp32 gemv-tma ea-bf16 ea-f32 ea-static ea-small ga ga-loop ga-skew-sep ga-skew2048; do echo "== $f"; grep -E '^ +[0-9]|wrong|rror|^#  +[NB]' $O/$f.txt | cut -c1-200; done
echo "== targets"; grep -c " met" $O/targets.txt; grep -v " met" $O/targets.txt | head -30
