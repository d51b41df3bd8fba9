#!/usr/bin/env bash
# python/ci_deps.sh — install what `pytest tests/python` needs (torch, pytest) into a virtual
# environment and print the path of its python as the last line of stdout; progress goes to
# stderr. Idempotent: a venv that already has the pinned torch is reused in about a second.
#   PY=$(bash python/ci_deps.sh) && "$PY" -m pytest tests/python
# Env: FCO_VENV (default ~/.cache/fco/venv-torch<version>), FCO_TORCH_VERSION (default 2.11.0,
# the torch of the GPU machine: its wheel carries NCCL 2.28.9, the NCCL fco builds against).
#
# Why the full PyPI wheel: PyPI's Linux torch pulls the CUDA libraries (nvidia-* wheels) and the
# CPU-only wheels live on another index, which is not reachable here. Measured on a 2-core CI
# machine (Python 3.11, PyPI only), fresh venv, --no-cache-dir: torch 2.11.0 downloads 2.8 GB
# (torch 531 MB + 16 nvidia-* / triton wheels), takes 47-99 s and 4.7 GB of disk. `--no-deps
# torch` cannot import without libcudart/cublas/cudnn/nccl/... (all are DT_NEEDED by
# libtorch_cuda.so), so it saves nothing safe; see docs/python.md for the numbers.
set -euo pipefail
TORCH_VERSION=${FCO_TORCH_VERSION:-2.11.0}
VENV=${FCO_VENV:-$HOME/.cache/fco/venv-torch$TORCH_VERSION}
PY=$VENV/bin/python
t0=$(date +%s)

EXTRA=(pytest numpy)  # numpy: torch warns at import without it
have() {
  [ -x "$PY" ] && "$PY" - "$TORCH_VERSION" >/dev/null 2>&1 <<'PYEOF'
import sys
import numpy, pytest, torch  # noqa: F401
assert torch.__version__.split("+")[0] == sys.argv[1]
PYEOF
}

if have; then
  echo "ci_deps: reusing $VENV (torch $TORCH_VERSION)" >&2
  echo "$PY"
  exit 0
fi
if [ -x "$PY" ] && "$PY" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  echo "ci_deps: $VENV has torch $TORCH_VERSION; adding ${EXTRA[*]}" >&2
  "$PY" -m pip install --no-cache-dir --disable-pip-version-check -q "${EXTRA[@]}" >&2
  have && { echo "$PY"; exit 0; }
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -m venv --help >/dev/null 2>&1 || ! "$PYTHON" -c 'import ensurepip' 2>/dev/null; then
  if command -v apt-get >/dev/null; then  # Debian's python3 ships venv separately
    echo "ci_deps: installing python3-venv" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
  fi
fi
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV" >&2
echo "ci_deps: pip install torch==$TORCH_VERSION ${EXTRA[*]} into $VENV (about 2.8 GB)" >&2
"$PY" -m pip install --no-cache-dir --disable-pip-version-check -q "torch==$TORCH_VERSION" "${EXTRA[@]}" >&2
have || { echo "ci_deps: torch $TORCH_VERSION did not import from $VENV" >&2; exit 1; }
echo "ci_deps: done in $(($(date +%s) - t0)) s" >&2
echo "$PY"
