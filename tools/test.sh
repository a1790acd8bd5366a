#!/bin/sh
# test.sh - build spmdc twice (release, and debug with ASan+UBSan and the
# arena debug allocator) and run every test in both; the release ctest also
# runs a sample of the golden cases under valgrind (tests/valgrind.sh), and
# the libFuzzer targets then run 2,000 inputs each under ASan+UBSan
# (tools/fuzz.sh; both skipped cleanly without valgrind / clang).
set -eu
cd "$(dirname "$0")/.."
sh tools/deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
# The XLA-backed tests (xla/parse, xla/run) run with a pinned jax/jaxlib in
# build/venv (made once, reused while it imports the pinned versions); without
# network for pip they skip.
mkdir -p build
xla_python=$(sh tools/xla_venv.sh build/venv) || xla_python=""
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSPMDC_XLA_PYTHON="$xla_python" >/dev/null
cmake --build build -j"$jobs"
(cd build && ctest --output-on-failure -j"$jobs")
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSPMDC_SANITIZE=ON -DSPMDC_ARENA_DEBUG=ON \
  -DSPMDC_XLA_PYTHON="$xla_python" >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j"$jobs")
sh tools/fuzz.sh --runs 2000
