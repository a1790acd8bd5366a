#!/bin/sh
# deps.sh - installs what spmdc needs to build and test, if it is missing.
# Debian/Ubuntu packages: cmake, a C compiler, flex, bison, cmocka, uthash, jansson.
set -eu
need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v make >/dev/null 2>&1 || need="$need make"
command -v flex >/dev/null 2>&1 || need="$need flex"
command -v bison >/dev/null 2>&1 || need="$need bison"
[ -f /usr/include/cmocka.h ] || need="$need libcmocka-dev"
[ -f /usr/include/uthash.h ] || need="$need uthash-dev"
[ -f /usr/include/jansson.h ] || need="$need libjansson-dev"
# Optional (the tests that need them skip without them, and so does this script when a
# package cannot be had): Graphviz renders `compile --dot` in tests/dot_render.sh (2.4 MB
# without recommends); valgrind checks a sample of the golden cases (tests/valgrind.sh);
# clang with its runtimes (libclang-rt-N-dev) brings libFuzzer for the fuzz targets (tools/fuzz.sh).
optional=""
command -v dot >/dev/null 2>&1 || optional="graphviz"
command -v valgrind >/dev/null 2>&1 || optional="$optional valgrind"
command -v clang >/dev/null 2>&1 || optional="$optional clang"
# libFuzzer and the sanitizer runtimes are a package of their own on Debian 12 (libclang-rt-N-dev,
# which a clang installed without recommends lacks).
fuzz_links() {
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' |
    clang -x c -fsanitize=fuzzer,address,undefined -o /dev/null - >/dev/null 2>&1
}
clang_rt() {
  major=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n 1)
  [ -z "$major" ] || echo "libclang-rt-$major-dev"
}
if command -v clang >/dev/null 2>&1 && ! fuzz_links; then optional="$optional $(clang_rt)"; fi
[ -n "$need$optional" ] || exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if [ -n "$need" ]; then
  echo "deps.sh: installing:$need"
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq $need >/dev/null
else
  $SUDO apt-get update -qq >/dev/null 2>&1 || true
fi
if [ -n "$optional" ]; then
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $optional >/dev/null 2>&1 ||
    echo "deps.sh:$optional not installed; the tests that need them skip"
  if command -v clang >/dev/null 2>&1 && ! fuzz_links && [ -n "$(clang_rt)" ]; then
    $SUDO apt-get install -y -qq --no-install-recommends "$(clang_rt)" >/dev/null 2>&1 ||
      echo "deps.sh: $(clang_rt) not installed; the fuzz targets skip"
  fi
fi
