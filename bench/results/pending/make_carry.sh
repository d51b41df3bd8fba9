#!/bin/bash
# make_carry.sh — pack this machine's CUDA build (build/obj) for a device call: the objects
# stripped of debug info, their .d files without the NCCL headers, into build/carry.tgz (pass it
# as the run's carry; the device script does `tar xzf build/carry.tgz && find build/obj -name
# '*.o' -exec touch {} +`, then make with NCCL_HOME=torch's NCCL). The .d edit spares the device
# the five NCCL translation units' recompile (~2-3 min), which the missing
# /usr/local/cuda/include/nccl.h forced there; valid only while this machine's nccl.h is the
# version torch's wheel carries on the device (2.28.9 in session 56: checked below, compare with
# `python3 -c 'import nvidia.nccl'`'s include/nccl.h there when torch changes).
#   make -j2 && bash bench/results/pending/make_carry.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -d build/obj ] || { echo "make_carry: no build/obj (run make first)" >&2; exit 1; }
# a CPU-only build (FCO_CUDA=0) has no CUDA objects: carried, its C objects (built without
# FCO_HAVE_CUDA, newer than the sources) would be linked into the device's CUDA library
[ -f build/obj/src/transport/nccl.o ] ||
  { echo "make_carry: build/obj holds no CUDA objects (built with FCO_CUDA=0?): run make with nvcc" >&2; exit 1; }
make -q build/lib/libfco.so 2>/dev/null ||
  echo "make_carry: warning: build/lib/libfco.so is not up to date (run make)" >&2
v=$(awk '/define NCCL_(MAJOR|MINOR|PATCH) /{printf "%s%s", s, $3; s="."}' \
  /usr/local/cuda/include/nccl.h)
echo "make_carry: this machine's nccl.h is $v (the device must link the same: torch's NCCL)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build"
cp -r build/obj "$tmp/build/"
find "$tmp/build/obj" -name '*.d' -exec sed -i '/nccl\.h\|nccl_device/d' {} +
find "$tmp/build/obj" -name '*.o' -exec strip --strip-debug {} +
rm -f build/carry.tgz
tar czf build/carry.tgz -C "$tmp" build/obj
echo "make_carry: build/carry.tgz, $(du -h build/carry.tgz | cut -f1)"
