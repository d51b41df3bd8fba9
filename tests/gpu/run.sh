#!/usr/bin/env bash
# tests/gpu/run.sh — the one script for the GPU machine: build against torch's NCCL, check the
# allreduce kernels below the library, run the test suite on the local transport (and on nccl
# with >= 2 GPUs), run fco-bench, and print a summary table last.
#   bash tests/gpu/run.sh                 (from anywhere; it cds to the repository root)
# Env: OUT (log folder, default /tmp/fco-out), FCO_GPU_QUICK=1 (shorter run: quick tests, fewer
# bench sizes), NCCL_HOME (default: the NCCL inside torch's wheel), FCO_COMMIT (for the records),
# FCO_GPU_TESTS=0 (skip the test suites), FCO_GPU_SUITES="local nccl" (the suites' transports),
# FCO_GPU_PYTEST=0 (skip the GPU pytest run), FCO_GPU_PYTEST_K="expr" (only the GPU tests pytest's
# -k selects: the whole set outruns one call on an H100, so split it, e.g. "test_gemm_tma" and
# "not test_gemm_tma" in two calls),
# FCO_GPU_BENCH=0 (skip the fco-bench tables), FCO_GPU_TORCH=0 (skip the torch comparison scripts bench/*_torch.py and examples/),
# FCO_GPU_OPS="allreduce gemv_allreduce ..." (bench only these ops; default all),
# FCO_GPU_BENCH_RANKS (ranks of the nccl benches; default every GPU when more than 2 — issue 7's
# P = 4 / 8 runs — else 2),
# FCO_GPU_PROBE=1 (also build and run bench/probe/*.cu), FCO_GPU_EXTRA="cmd" (one more step),
# FCO_GPU_PREBUILT=1 (keep the objects of build/obj built on the CPU machine: see the build step).
# Full logs: $OUT/build.log, kernel-check.log (and <check>.log per tests/gpu/*.cu),
# tests-<transport>.log, bench-<name>.txt/.json, probe-<name>.log, extra.log.
# A failing step does not stop the others; the exit status is 1 when any step failed.
# Time (2×H200, session 6; session 8: test_embedding_alltoall alone ~55 s on nccl, ~25 s local, so
# a test may take 150 s here): build ~120 s, kernel checks ~25 s, C suites ~60 s local + ~70 s nccl,
# pytest -m gpu ~600 s (~480 s quick; most of it Triton compiling test_gemm_tma's kernels), each bench op
# 10–60 s: everything does not fit one 10-minute device call. Split it, e.g.
# FCO_GPU_PYTEST=0 in one call and FCO_GPU_TESTS=0 FCO_GPU_BENCH=0 in the next (a step cut by
# FCO_GPU_BUDGET shows as FAIL "timed out" / "budget spent").
set -euo pipefail
cd "$(dirname "$0")/../.."

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/fco-out}
QUICK=${FCO_GPU_QUICK:-0}
mkdir -p "$OUT"
# One libnccl.so.2 per process: build against the one torch loads.
NCCL_HOME=${NCCL_HOME:-$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])')}
export NCCL_HOME
# (pass FCO_COMMIT from the machine that made the tree: a device copy's .git can lag the files it
# runs — "-dirty" marks that case)
export FCO_COMMIT=${FCO_COMMIT:-$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)}
BIN=build/bin/fco-bench
T_START=$(date +%s)

# The whole script stays within FCO_GPU_BUDGET seconds (the device tool allows 10 minutes a
# command): every step's bound is cut to what is left, and a step with no time left is failed.
BUDGET=${FCO_GPU_BUDGET:-500}
DEADLINE=$((T_START + BUDGET))
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:$PATH

steps=()   # "name|status|seconds|note", printed in the summary
failed=0
record() { # name rc seconds note
  local st
  case $2 in
    0) st=PASS ;;
    77) st=SKIP ;;
    *) st=FAIL; failed=1 ;;
  esac
  steps+=("$1|$st|$3|$4")
}
# run_step name log timeout_s command...: run with a bound, log everything, never abort.
run_step() {
  local name=$1 log=$2 limit=$3 t0 rc left
  shift 3
  left=$((DEADLINE - $(date +%s)))
  if [ "$left" -lt 20 ]; then
    echo "== $name: not run, the ${BUDGET}s budget is spent" | tee "$log"
    record "$name" 1 0 "not run: budget spent"
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  t0=$(date +%s)
  echo "== $name ($(date -u +%H:%M:%S), bound ${limit}s, log $log)"
  if timeout -k 10 "$limit" "$@" >"$log" 2>&1; then rc=0; else rc=$?; fi
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    echo "   timed out after ${limit}s" | tee -a "$log"
  fi
  record "$name" $rc $(($(date +%s) - t0)) "rc $rc"
  tail -n 3 "$log" | sed 's/^/   | /'
  return 0
}

{
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit $FCO_COMMIT"
  echo "host $(hostname)"
  echo "NCCL_HOME $NCCL_HOME"
  nvidia-smi -L || true
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  nvcc --version | tail -n 2 || true
} >"$OUT/meta.txt" 2>&1
cat "$OUT/meta.txt"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
NGPU=${NGPU:-0}
# 5 to 8 GPUs (issue 7's scale-up runs): the nccl suite's rank loops go up to every GPU (the
# local suite keeps its default, P <= 4: worlds of 5..8 virtual ranks on one GPU passed in run
# 2026-12-01_nvidia-h200_7f065bc-local8 and take ~4 min there; FCO_TEST_MAX_RANKS set by the
# caller applies to both)
NCCL_MAX_RANKS=${FCO_TEST_MAX_RANKS:-}
[ -z "$NCCL_MAX_RANKS" ] && [ "$NGPU" -gt 4 ] && NCCL_MAX_RANKS=$NGPU

# ---- build --------------------------------------------------------------------------------
# FCO_GPU_PREBUILT=1: the objects under build/obj were built on the CPU machine with the same
# flags and travelled with the tree (device tool: carry ["build/carry.tgz"], made by
# bench/results/pending/make_carry.sh: unpacked here, its .d files free of the NCCL header this
# machine lacks, so nothing recompiles; or carry ["build/obj"], where the five TUs that include
# nccl.h recompile); newer than the sources, make keeps them and only links (3 s instead of
# ~150 s, runs ac50ff3 / 3cf8337).
if [ "${FCO_GPU_PREBUILT:-0}" = 1 ]; then
  if [ -f build/carry.tgz ] && ! tar xzf build/carry.tgz; then
    echo "FCO_GPU_PREBUILT: build/carry.tgz did not unpack: make builds what is missing"
  fi
  if [ -d build/obj ]; then find build/obj -name '*.o' -exec touch {} +; fi
fi
run_step build "$OUT/build.log" 400 make -j16 NCCL_HOME="$NCCL_HOME"
if [ ! -x "$BIN" ] || [ ! -d build/tests ]; then
  echo "build failed: see $OUT/build.log"
  tail -n 40 "$OUT/build.log"
  exit 1
fi

# ---- kernel checks (below the library): every tests/gpu/*.cu, built and run as its header says --
# A program's header holds its "nvcc ..." command (continuation lines end in "\\"); when that
# command builds without running ("-o path" and no "&&"), the binary is run after it.
header_cmd() { # file -> the header's nvcc command (empty when none)
  awk '/^ \*[ \t]+nvcc /{on=1} on{l=$0; sub(/^ \*[ \t]*/, "", l); c=sub(/\\[ \t]*$/, "", l);
       printf "%s ", l; if(!c) exit}' "$1"
}
run_program() { # stepname file: build and run a self-contained .cu by its header command
  local name=$1 f=$2 cmd bin
  cmd=$(header_cmd "$f")
  if [ -z "$cmd" ]; then record "$name" 1 0 "no nvcc line in $f"; return 0; fi
  if [[ $cmd != *"&&"* ]]; then
    bin=$(sed -n 's/.*-o[ \t]\+\([^ \t]\+\).*/\1/p' <<<"$cmd")
    [ -n "$bin" ] && cmd="mkdir -p $(dirname "$bin") && $cmd && $bin"
  fi
  echo "$cmd" >"$OUT/$name.cmd"
  run_step "$name" "$OUT/$name.log" 240 bash -c "$cmd"
}
for f in tests/gpu/*.cu; do
  [ -f "$f" ] || continue
  n=$(basename "$f" .cu)
  [ "$n" = ar_kernel_check ] && n=kernel-check  # its historical log name
  run_program "$n" "$f"
done

# ---- probes (FCO_GPU_PROBE=1): bench/probe/*.cu, kernel-efficiency experiments, same header rule
if [ "${FCO_GPU_PROBE:-0}" = 1 ]; then
  for f in bench/probe/*.cu; do
    [ -f "$f" ] && run_program "probe-$(basename "$f" .cu)" "$f"
  done
fi

# ---- FCO_GPU_EXTRA="command": one more step (e.g. an ncu profile), log $OUT/extra.log -------
if [ -n "${FCO_GPU_EXTRA:-}" ]; then
  run_step extra "$OUT/extra.log" 300 bash -c "$FCO_GPU_EXTRA"
fi

# ---- test suite per transport --------------------------------------------------------------
# FCO_GPU_SUITES="local nccl" (default both): which transports' suites run — at P = 8 the nccl
# suite may need a call of its own (local's worlds up to 8 took 234 s on one H200, run
# 7f065bc-local8). A suite's bound is 420 s (the local suite at P <= 4 took 228 s on one H100 in
# run 2026-12-05_nvidia-h100-x1_c95c171-local, before test_random_shapes).
suite() { # transport
  local t=$1 bound=420 tmo=${TEST_TIMEOUT:-150} ranks=${FCO_TEST_MAX_RANKS:-}
  if [ "$t" = nccl ] && [ -n "$NCCL_MAX_RANKS" ]; then
    ranks=$NCCL_MAX_RANKS
    [ "$ranks" -gt 4 ] && bound=540 && tmo=${TEST_TIMEOUT:-400}
  fi
  run_step "tests-$t" "$OUT/tests-$t.log" $bound env FCO_TRANSPORT="$t" BUILD=build \
    ${ranks:+FCO_TEST_MAX_RANKS=$ranks} TEST_TIMEOUT="$tmo" VERBOSE=1 FCO_TEST_QUICK="$QUICK" \
    tests/run.sh
}
if [ "${FCO_GPU_TESTS:-1}" = 1 ]; then
  for t in ${FCO_GPU_SUITES:-local nccl}; do
    case $t in
      local) suite local ;;
      nccl)
        if [ "$NGPU" -ge 2 ]; then suite nccl
        else record tests-nccl 77 0 "$NGPU GPU(s): nccl needs 2"; fi ;;
      *) record "tests-$t" 1 0 "FCO_GPU_SUITES: unknown transport $t" ;;
    esac
  done
fi

# ---- Python package on the GPU: the torch ops (marker gpu; the CPU suite runs in CI) ----------
if [ "${FCO_GPU_PYTEST:-1}" = 1 ]; then
  if python3 -c 'import pytest, torch' 2>/dev/null; then
    # 59 tests; all of them take ~600 s on one H200 (sessions 12-13 stopped at 300 s after 45;
    # run bf0c8f3-pytest timed the rest: test_gemm_tma ~40 s a case, Triton compiling), so quick
    # runs (FCO_TEST_QUICK) take test_gemm_tma's pairwise cover (4 of 8 cases): ~480 s, more
    # than what the C suites leave of one call (run 831171e: 53 of 55 in 446 s) — give it a call
    # of its own: FCO_GPU_TESTS=0 FCO_GPU_BENCH=0 FCO_GPU_TORCH=0 FCO_GPU_BUDGET=590. On one
    # H100 the whole set did not fit that either (run 8e160f1: 58 of 59 in the step's 541 s):
    # there, two calls with FCO_GPU_PYTEST_K="test_gemm_tma" / "not test_gemm_tma".
    PYTEST_K=()
    [ -n "${FCO_GPU_PYTEST_K:-}" ] && PYTEST_K=(-k "$FCO_GPU_PYTEST_K")
    run_step pytest-gpu "$OUT/pytest-gpu.log" 560 env FCO_LIB="$PWD/build/lib/libfco.so" \
      FCO_TEST_QUICK="$QUICK" FCO_PY_BENCH_JSON="$OUT/python-timing.json" \
      FCO_PY_OPS_BENCH_JSON="$OUT/python-ops-timing.json" \
      python3 -m pytest tests/python -m gpu -rs -q -p no:cacheprovider --durations=25 \
      ${PYTEST_K[@]+"${PYTEST_K[@]}"}
  else
    record pytest-gpu 77 0 "no pytest/torch in python3"
  fi
fi

# ---- bench: per op, local (virtual ranks on GPU 0) and nccl (BR GPUs, CUDA graphs) -----------
# FCO_GPU_OPS selects the ops (default: all); FCO_GPU_BENCH_RANKS the nccl ranks (BR).
BR=${FCO_GPU_BENCH_RANKS:-2}
[ -z "${FCO_GPU_BENCH_RANKS:-}" ] && [ "$NGPU" -gt 2 ] && BR=$NGPU
PR=""; [ "$BR" = 2 ] || PR="-p$BR"  # P = 2 keeps the historical step names
export FCO_BENCH_PROGRESS=${FCO_BENCH_PROGRESS:-1}  # a stalled step shows where (stderr, in the log)
OPS=${FCO_GPU_OPS:-allreduce gemv_allreduce embedding_alltoall gemm_alltoall}
if [ "$QUICK" = 1 ]; then sizes=(-b 1K -e 4M -f 4); else sizes=(-b 1K -e 64M -f 4); fi
bench() { # name op args...
  local name=$1 op=$2
  shift 2
  run_step "bench-$name" "$OUT/bench-$name.txt" 180 "$BIN" "$op" "$@" -J "$OUT/bench-$name.json"
}
[ "${FCO_GPU_BENCH:-1}" = 1 ] || OPS_BENCH=""
for op in ${OPS_BENCH-$OPS}; do
  case $op in
    allreduce)
      # -G 1 (CUDA graphs), as the nccl rows: eager times on local held the host's launch rate,
      # which charged impl 0's several launches more than the fused impls' one (until session 55)
      bench ar-local allreduce -t local -g 2 -G 1 "${sizes[@]}"
      if [ "$NGPU" -ge 2 ]; then
        # The fused path must beat ncclAllReduce up to 1 MB: fine steps there, eager and graphed.
        bench "ar-nccl$PR" allreduce -t nccl -g "$BR" -b 1K -e 64M -f 2 -d bf16
        bench "ar-nccl-graph$PR" allreduce -t nccl -g "$BR" -G 1 -b 1K -e 64M -f 2 -d bf16
        [ "$QUICK" = 1 ] || bench "ar-nccl-graph-all$PR" allreduce -t nccl -g "$BR" -G 1 "${sizes[@]}"
      fi
      ;;
    *)
      bench "$op-local" "$op" -t local -g 2 -G 1 -d bf16 -n 20 -w 3
      # P = 1 (one rank, no communication): the fused kernel's compute against impl 0's on the
      # same work — where a fused kernel is slower than the unfused one it shares code with, the
      # gap is the kernel's, not the protocol's (session 12: a misaligned cp.async ring, found so);
      # also the issues' one-GPU targets (bench/targets.py, summary below)
      bench "$op-p1" "$op" -t nccl -g 1 -G 1 -d bf16 -D 0,1 -n 10 -w 3
      if [ "$NGPU" -ge 2 ]; then
        # -R 3: the columns timed in three rounds (clock drift under long GEMMs falls on all alike)
        bench "$op-nccl-graph$PR" "$op" -t nccl -g "$BR" -G 1 -d bf16 -R 3 -n 10 -w 3
        [ "$QUICK" = 1 ] ||
          bench "$op-nccl-graph-f32$PR" "$op" -t nccl -g "$BR" -G 1 -d f32 -R 3 -n 10 -w 3
        # outputs in symmetric buffers (fco_mem_alloc): the peers store into them in place
        case $op in embedding_alltoall | gemm_alltoall)
          FCO_BENCH_SYM=1 bench "$op-nccl-graph-sym$PR" "$op" -t nccl -g "$BR" -G 1 -d bf16 \
            -R 3 -n 10 -w 3 ;;
        esac
      fi
      ;;
  esac
done

# ---- what users have today (bench/*_torch.py) and the examples, same run ------------------------
# The torch scripts time the unfused torch paths on fco-bench's workloads; the examples check fco's
# torch ops against plain torch and print both timings. Ops selected by FCO_GPU_OPS as above.
if [ "${FCO_GPU_TORCH:-1}" = 1 ] && python3 -c 'import torch' 2>/dev/null; then
  NP=2; [ "$NGPU" -ge 2 ] || NP=1
  export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH} FCO_LIB=$PWD/build/lib/libfco.so
  for op in $OPS; do
    case $op in
      gemv_allreduce)
        run_step torch-gemv_allreduce "$OUT/torch-gemv_allreduce.txt" 150 python3 \
          bench/gemv_allreduce_torch.py --nprocs $NP --json "$OUT/torch-gemv_allreduce.json"
        run_step example-tp_mlp_decode "$OUT/example-tp_mlp_decode.txt" 90 torchrun \
          --nproc-per-node $NP examples/tp_mlp_decode.py ;;
      embedding_alltoall)
        run_step torch-embedding_alltoall "$OUT/torch-embedding_alltoall.txt" 150 python3 \
          bench/embedding_alltoall_torch.py --nproc $NP --json "$OUT/torch-embedding_alltoall.json"
        run_step example-dlrm_forward "$OUT/example-dlrm_forward.txt" 90 torchrun \
          --nproc-per-node $NP examples/dlrm_forward.py ;;
      gemm_alltoall)
        run_step torch-gemm_alltoall "$OUT/torch-gemm_alltoall.txt" 150 python3 \
          bench/gemm_alltoall_torch.py --nproc $NP --json "$OUT/torch-gemm_alltoall.json"
        run_step example-moe_layer "$OUT/example-moe_layer.txt" 90 torchrun \
          --nproc-per-node $NP examples/moe_layer.py ;;
    esac
  done
fi

# ---- summary (last) ------------------------------------------------------------------------
echo
echo "================================ bench tables ================================"
for f in "$OUT"/bench-*.txt "$OUT"/torch-*.txt "$OUT"/example-*.txt; do
  [ -f "$f" ] || continue
  echo "---- $(basename "$f")"
  grep -v '^\s*$' "$f" | grep -vi 'warning' | grep -v '^# progress:' || true
done
# The issues' targets from the nccl tables (bench/targets.py; the torch comparisons not included),
# and their one-GPU fallbacks from the P = 1 tables
shopt -s nullglob
tjson=("$OUT"/bench-*-nccl-graph*.json "$OUT"/bench-*-p1.json)
if [ ${#tjson[@]} -gt 0 ]; then
  echo
  echo "=================================== targets ==================================="
  python3 bench/targets.py "${tjson[@]}" || true
fi
shopt -u nullglob
echo
echo "=================================== summary ==================================="
echo "commit $FCO_COMMIT, $NGPU GPU(s), logs in $OUT, $(($(date +%s) - T_START))s in all"
printf '%-22s %-5s %6s  %s\n' step status time note
for s in "${steps[@]}"; do
  IFS='|' read -r name st secs note <<<"$s"
  case $name in
    tests-*)
      line=$(grep -E '^# [a-z]+: [0-9]+ passed' "$OUT/$name.log" 2>/dev/null | tail -n 1 || true)
      [ -n "$line" ] && note=${line#\# }
      fails=$(grep -E '^FAIL ' "$OUT/$name.log" 2>/dev/null | awk '{print $2}' | tr '\n' ' ' || true)
      [ -n "$fails" ] && note="$note; failed: $fails"
      ;;
  esac
  printf '%-22s %-5s %5ss  %s\n' "$name" "$st" "$secs" "$note"
done
if [ "$failed" -ne 0 ]; then
  echo "RESULT: FAIL"
  exit 1
fi
echo "RESULT: PASS"
