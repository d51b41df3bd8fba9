#!/usr/bin/env bash
# regen.sh — rewrite the expected outputs of fco-sim's end-to-end test (tests/test_sim_e2e.c)
# from cases.txt, after an intended model change; review `git diff` before committing.
#   tools/fco-sim/expected/regen.sh            (BUILD=dir to use another build directory)
set -euo pipefail
cd "$(dirname "$0")/../../.."
BUILD=${BUILD:-build}
make -s BUILD="$BUILD" "$BUILD/bin/fco-sim"
while IFS= read -r line; do
  case $line in '' | '#'*) continue ;; esac
  name=${line%%:*}
  read -r -a args <<<"${line#*:}"
  "$BUILD/bin/fco-sim" "${args[@]}" >"tools/fco-sim/expected/$name.txt"
  echo "wrote tools/fco-sim/expected/$name.txt"
done <tools/fco-sim/expected/cases.txt
