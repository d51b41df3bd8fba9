#!/bin/bash
# make_mut.sh — build/mut.tgz for cmd-mut.sh: gemm_alltoall.o compiled with mutation B (impl 2's
# JoinBack disarmed) and with D (`mid_call.on = true;` removed), each in a copy of the tree
# (tracked files + this build/obj, so only that object is compiled: seconds), stripped of debug
# info. Run after `make -j2` at the commit the device call runs.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
[ -f build/obj/src/cuda/gemm_alltoall.o ] || { echo "make_mut: run make (with nvcc) first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git ls-files | tar cf - -T - | (mkdir "$tmp/tree" && cd "$tmp/tree" && tar xf -)
cp -a build "$tmp/tree/"
mkdir "$tmp/mut"
G=src/cuda/gemm_alltoall.cu
mutate() { # name, python replace (old, new): exactly one match or fail
  cp "$G" "$tmp/tree/$G"
  python3 - "$tmp/tree/$G" "$2" "$3" <<'PY'
import sys
p, old, new = sys.argv[1:4]
s = open(p).read()
if s.count(old) != 1: sys.exit(f"make_mut: '{old}' found {s.count(old)} times in {p}")
open(p, 'w').write(s.replace(old, new))
PY
  (cd "$tmp/tree" && make -s build/obj/src/cuda/gemm_alltoall.o)
  strip --strip-debug -o "$tmp/mut/gemm_alltoall_$1.o" "$tmp/tree/build/obj/src/cuda/gemm_alltoall.o"
  echo "make_mut: mutant $1 built"
}
mutate B "join_back{res, side, st, true}" "join_back{res, side, st, false}"
mutate D "  mid_call.on = true; /* a failed launch" "  /* mutant D */ /* a failed launch"
tar czf build/mut.tgz -C "$tmp" mut
echo "make_mut: build/mut.tgz ($(du -h build/mut.tgz | cut -f1))"
