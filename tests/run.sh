#!/usr/bin/env bash
# tests/run.sh — run every test program of the suite and summarise. `make test` calls it.
#   BUILD=build tests/run.sh              (BUILD: the make build directory; default build)
#   FCO_TRANSPORT=local tests/run.sh      (transport under test; cpu when unset)
#   TEST_TIMEOUT=120 VERBOSE=1 tests/run.sh [test_name ...]
# Test programs read: FCO_TEST_SEED (reproduce a run), FCO_TEST_QUICK=1 (fewer cases),
# FCO_TEST_MAX_RANKS (largest world of the rank loops, default 4, up to 8: the scale-up runs),
# FCO_TEST_TRACE=1 (print every test context to stderr as it is set: where a hang is; a test
# killed by the timeout also says what it was doing).
# Each test runs under `timeout`; exit 0 = PASS, 77 = SKIP, anything else = FAIL (its output is
# printed). Full logs go to $BUILD/tests/logs/<transport>/. The run fails when any test failed,
# or when none passed (a run that executes nothing proves nothing).
set -u
BUILD=${BUILD:-build}
TEST_TIMEOUT=${TEST_TIMEOUT:-120}
VERBOSE=${VERBOSE:-0}
transport=${FCO_TRANSPORT:-cpu}
logdir=$BUILD/tests/logs/$transport
mkdir -p "$logdir"

stale_msg=""
if [ $# -gt 0 ]; then
  tests=()
  for name in "$@"; do tests+=("$BUILD/tests/${name#tests/}"); done
else
  # The suite is what the sources say (as the Makefile's TESTS): tests/test_*.c and, as
  # test_example_*, examples/c/*.c. A program left in $BUILD/tests by a renamed or removed test
  # does not run; one that was not built fails ("no such test program").
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  shopt -s nullglob
  tests=()
  for src in "$root"/tests/test_*.c; do tests+=("$BUILD/tests/$(basename "$src" .c)"); done
  for src in "$root"/examples/c/*.c; do tests+=("$BUILD/tests/test_example_$(basename "$src" .c)"); done
  shopt -u nullglob
  stale=()
  for t in "$BUILD"/tests/test_*; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    case " ${tests[*]} " in *" $t "*) ;; *) stale+=("$(basename "$t")") ;; esac
  done
  [ ${#stale[@]} -gt 0 ] && stale_msg="# not run (no source in tests/ or examples/c/ any more): ${stale[*]}"
fi

pass=0 fail=0 skip=0 failed=()
start=$(date +%s)
echo "# fco tests: transport $transport, build $BUILD, timeout ${TEST_TIMEOUT}s per test"
[ -n "$stale_msg" ] && echo "$stale_msg"
for t in "${tests[@]}"; do
  name=$(basename "$t")
  log=$logdir/$name.log
  t0=$(date +%s.%N)
  if [ -f "$t" ] && [ -x "$t" ]; then
    timeout -k 5 "$TEST_TIMEOUT" "$t" >"$log" 2>&1
    rc=$?
  else
    echo "no such test program: $t" >"$log"
    rc=127
  fi
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
    0) status=PASS; pass=$((pass + 1)) ;;
    77) status=SKIP; skip=$((skip + 1)) ;;
    124 | 137) status=FAIL; fail=$((fail + 1)); failed+=("$name")
       echo "timed out after ${TEST_TIMEOUT}s (a hang: waits must be bounded)" >>"$log" ;;
    *) status=FAIL; fail=$((fail + 1)); failed+=("$name") ;;
  esac
  why=""
  [ $status = SKIP ] && why=" ($(grep -m1 '^SKIP' "$log" | sed 's/^SKIP: *//'))"
  printf '%-4s %-28s %6ss%s\n' "$status" "$name" "$secs" "$why"
  if [ $status = FAIL ] || [ "$VERBOSE" = 1 ]; then
    sed 's/^/    | /' "$log"
    [ $status = FAIL ] && echo "    | exit status $rc"
  fi
done

total=$((pass + fail + skip))
echo "# $transport: $pass passed, $fail failed, $skip skipped of $total in $(($(date +%s) - start))s (logs: $logdir)"
if [ $fail -gt 0 ]; then
  echo "# FAILED: ${failed[*]}"
  exit 1
fi
if [ $pass -eq 0 ]; then
  echo "# FAILED: no test passed (nothing built in $BUILD/tests, or everything skipped)"
  exit 1
fi
exit 0
