#!/bin/sh
# fuzz.sh - run spmdc's libFuzzer targets (tests/fuzz/) under ASan+UBSan.
#
#   sh tools/fuzz.sh [SECONDS] [TARGET...]      (default: 600 s each, parse_fuzz compile_fuzz)
#   sh tools/fuzz.sh --runs N [TARGET...]       (N inputs each: what the test command does)
#
# parse_fuzz feeds arbitrary bytes to the front end; compile_fuzz runs the
# whole pipeline (parse, verify, bind, canonicalize, propagate, partition,
# print, report) on them.  Each target starts from the committed corpus
# tests/fuzz/corpus/ plus every small .hlo of tests/cases/ and examples/,
# copied into build-fuzz/corpus-TARGET/ (new inputs libFuzzer finds are kept
# there, not in the source tree).  A crash, sanitizer report, leak, timeout
# (10 s) or memory blow-up (2 GiB) stops the run; the input is written to
# build-fuzz/crash-*, and the script exits 1.  To keep a finding as a
# regression seed, fix the bug and copy the input into tests/fuzz/corpus/.
#
# Needs clang with libFuzzer (Debian: apt-get install clang); without it
# the script prints "skipped: clang with libFuzzer not found" and exits 0.
set -eu
cd "$(dirname "$0")/.."
runs=""
secs=600
if [ "${1:-}" = "--runs" ]; then
  runs=$2
  shift 2
elif [ -n "${1:-}" ] && [ "$1" -eq "$1" ] 2>/dev/null; then
  secs=$1
  shift
fi
targets=${*:-parse_fuzz compile_fuzz}

if ! command -v clang >/dev/null 2>&1 ||
   ! echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' |
     clang -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1; then
  echo "skipped: clang with libFuzzer not found"
  exit 0
fi

jobs=$(nproc 2>/dev/null || echo 2)
[ "$jobs" -gt 2 ] && jobs=2
CC=clang cmake -S . -B build-fuzz -DSPMDC_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
# shellcheck disable=SC2086
cmake --build build-fuzz -j"$jobs" --target $targets >/dev/null

status=0
for t in $targets; do
  corpus=build-fuzz/corpus-$t
  mkdir -p "$corpus"
  cp tests/fuzz/corpus/* "$corpus"/ 2>/dev/null || true
  find tests/cases examples -name '*.hlo' -size -4k | while read -r f; do
    cp "$f" "$corpus/seed-$(echo "$f" | tr '/' '_')"
  done
  if [ -n "$runs" ]; then limit="-runs=$runs"; else limit="-max_total_time=$secs"; fi
  log=build-fuzz/$t.log
  if ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-fuzz/"$t" "$limit" -timeout=10 \
       -rss_limit_mb=2048 -max_len=16384 -print_final_stats=1 -artifact_prefix=build-fuzz/ "$corpus" >"$log" 2>&1; then
    echo "$t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log"), no failure"
  else
    echo "$t: FAILED (see $log):"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -5
    status=1
  fi
done
exit $status
