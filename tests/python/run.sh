#!/usr/bin/env bash
# tests/python/run.sh — the Python suite (pytest tests/python) against $BUILD/lib/libfco.so, run by
# `make test` after the C tests. It needs a python with torch and pytest: $FCO_PY, else the venv
# python/ci_deps.sh makes (FCO_VENV / FCO_TORCH_VERSION as there), else python3 if it has both.
# Without one it says so and skips (exit 0), unless FCO_REQUIRE_PY=1 (CI), where that is a
# failure. FCO_PY_SKIP=1 skips on purpose.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if [ "${FCO_PY_SKIP:-0}" = 1 ]; then
  echo "# python tests: skipped (FCO_PY_SKIP=1)"
  exit 0
fi
PY=${FCO_PY:-}
if [ -z "$PY" ]; then
  # the venv python/ci_deps.sh makes (the same FCO_VENV / FCO_TORCH_VERSION defaults)
  venv=${FCO_VENV:-$HOME/.cache/fco/venv-torch${FCO_TORCH_VERSION:-2.11.0}}
  for c in "$venv/bin/python" python3; do
    if [ -x "$(command -v "$c" 2>/dev/null || echo "$c")" ] && "$c" -c 'import torch, pytest' 2>/dev/null; then
      PY=$c
      break
    fi
  done
fi
if [ -z "$PY" ]; then
  if [ "${FCO_REQUIRE_PY:-0}" = 1 ]; then
    echo "python tests: no python with torch + pytest (FCO_REQUIRE_PY=1): run bash python/ci_deps.sh" >&2
    exit 1
  fi
  echo "# python tests: skipped, no python with torch + pytest here (bash python/ci_deps.sh makes one)"
  exit 0
fi
export FCO_LIB=${FCO_LIB:-$PWD/$BUILD/lib/libfco.so}
[ "${BUILD#/}" != "$BUILD" ] && export FCO_LIB=$BUILD/lib/libfco.so
echo "# python tests: $PY, FCO_LIB=$FCO_LIB"
exec "$PY" -m pytest tests/python -q -rs -p no:cacheprovider
