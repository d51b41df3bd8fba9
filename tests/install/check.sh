#!/usr/bin/env bash
# tests/install/check.sh — `make install` into a scratch prefix; pkg-config's version is the
# installed header's; a program outside the tree (examples/c/gemv_allreduce.c) built the way its
# header says, with `pkg-config fco`, against the installed libfco.so and, statically, libfco.a
# (Libs.private), run on the cpu transport; the installed fco-bench loads the installed libfco.so;
# then `make uninstall` must leave nothing; a DESTDIR
# install stages under DESTDIR/PREFIX, and a relative PREFIX is refused.
# `make test` calls it after tests/run.sh (BUILD and MAKE from make). Reads BUILD (default build),
# MAKE (default make), CC (default cc) and TMPDIR (where the scratch prefix goes, default /tmp).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
CC=${CC:-cc}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/fco-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL install: $*"; exit 1; }
echo "# install check: make install PREFIX=$prefix (build $BUILD)"

$MAKE --no-print-directory -s BUILD="$BUILD" PREFIX="$prefix" install >"$prefix.log" 2>&1 ||
  { cat "$prefix.log"; rm -f "$prefix.log"; fail "make install failed"; }
rm -f "$prefix.log"
for f in include/fco.h lib/libfco.so lib/libfco.a lib/pkgconfig/fco.pc bin/fco-bench bin/fco-sim; do
  [ -f "$prefix/$f" ] || fail "$f not installed"
done

command -v pkg-config >/dev/null || fail "pkg-config not found (Debian: apt-get install pkg-config)"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
version=$(pkg-config --modversion fco) || fail "pkg-config does not know fco"
[ "$(pkg-config --variable=prefix fco)" = "$prefix" ] || fail "fco.pc's prefix is not $prefix"

hdr=$(awk '/^#define FCO_VERSION_(MAJOR|MINOR|PATCH) /{v = v s $3; s = "."} END {print v}' \
  "$prefix/include/fco.h")
[ "$version" = "$hdr" ] || fail "pkg-config says version $version, the installed fco.h $hdr"

# examples/c/gemv_allreduce.c as its header says to build it against an installed fco (no GPU
# buffers: the cpu transport); it checks y against float64 and the loaded library's version
# against the header's. Shared: the installed libfco.so found through the rpath that fco.pc's Libs
# gives, as a user's program would find it. LD_LIBRARY_PATH is unset for the run and for ldd: a
# caller's would outrank the rpath (a RUNPATH) and could supply another libfco.so (a build tree's),
# and the run must prove the installed program starts without it.
ex=examples/c/gemv_allreduce.c
# shellcheck disable=SC2046
$CC -Wall -Werror -o "$prefix/consumer" $ex $(pkg-config --cflags --libs fco) -lm ||
  fail "$ex does not build against libfco.so"
env -u LD_LIBRARY_PATH FCO_TRANSPORT=cpu "$prefix/consumer" 3 200 96 2 >/dev/null ||
  fail "$ex built against libfco.so failed (without LD_LIBRARY_PATH: fco.pc's rpath)"
# (ldd's output in a variable: `ldd | grep -q` fails under pipefail when grep exits first)
deps=$(env -u LD_LIBRARY_PATH ldd "$prefix/consumer")
grep -q "$prefix/lib/libfco.so" <<<"$deps" || fail "consumer is not linked against the installed libfco.so: $deps"

# The installed fco-bench runs on the installed libfco.so (the build's binary has an rpath to the
# build tree: installed as it was before session 55, it loaded the build tree's library).
deps=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/fco-bench")
grep -q "$prefix/lib/libfco.so" <<<"$deps" ||
  fail "the installed fco-bench does not load the installed libfco.so: $deps"
env -u LD_LIBRARY_PATH "$prefix/bin/fco-bench" --help >/dev/null ||
  fail "the installed fco-bench --help failed"

# Static: everything libfco.a needs comes from Libs.private (a C compiler driver, not g++).
libs=$(pkg-config --static --libs fco)
# shellcheck disable=SC2046,SC2086
$CC -Wall -Werror -o "$prefix/consumer-static" $ex $(pkg-config --cflags fco) \
  "$prefix/lib/libfco.a" ${libs/-lfco/} -lm || fail "$ex does not build against libfco.a with Libs.private"
deps=$(ldd "$prefix/consumer-static")
if grep -q libfco <<<"$deps"; then fail "consumer-static loads libfco.so: $deps"; fi
FCO_TRANSPORT=cpu "$prefix/consumer-static" 3 200 96 3 bf16 >/dev/null ||
  fail "$ex built against libfco.a failed"

$MAKE --no-print-directory -s BUILD="$BUILD" PREFIX="$prefix" uninstall >/dev/null ||
  fail "make uninstall failed"
left=$(find "$prefix" -type f ! -name 'consumer*')
[ -z "$left" ] || fail "make uninstall left: $left"

# Staging (DESTDIR), as packagers install: the files under DESTDIR/PREFIX, fco.pc naming PREFIX.
stage="$prefix/stage"
$MAKE --no-print-directory -s BUILD="$BUILD" PREFIX=/opt/fco DESTDIR="$stage" install >/dev/null 2>&1 ||
  fail "make install DESTDIR=... failed"
[ -f "$stage/opt/fco/lib/libfco.so" ] || fail "DESTDIR: libfco.so not under DESTDIR/PREFIX"
grep -qx 'prefix=/opt/fco' "$stage/opt/fco/lib/pkgconfig/fco.pc" || fail "DESTDIR: fco.pc does not name PREFIX"
# A relative PREFIX is refused (fco.pc would name a path relative to nowhere), nothing written.
if out=$($MAKE --no-print-directory -s BUILD="$BUILD" PREFIX=relative DESTDIR="$prefix/rel" install 2>&1); then
  fail "make install PREFIX=relative succeeded"
fi
grep -q "must be an absolute path" <<<"$out" || fail "make install PREFIX=relative: $out"
[ ! -e "$prefix/rel" ] || fail "make install PREFIX=relative wrote $(find "$prefix/rel" -type f | head -3)"
echo "PASS install: fco $version into a prefix, the C example built with pkg-config (shared and static) and correct, uninstall clean, DESTDIR staged, relative PREFIX refused"
