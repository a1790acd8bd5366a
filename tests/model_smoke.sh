#!/bin/sh
# model_smoke.sh SPMDC FILE.hlo MESH - golden-free smoke test of one exported
# model (examples/models/, tools/export_models.py).
#
# `SPMDC compile FILE --mesh MESH` must either
#   - succeed with a non-empty per-device program, and then
#     `SPMDC verify FILE --mesh MESH` must prove it (exit 0): a partitioned
#     program that computes something else fails the test; or
#   - refuse the program with exit 1, a `file:line:col: error: ...` diagnostic
#     and no output file (a capability that is not there yet).
# Anything else (another exit status, a sanitizer report, a refusal without a
# located diagnostic, output left behind) fails.  How many bytes spmdc sends
# against XLA is tools/compare_xla.py's business, not this test's.
set -u
if [ $# -ne 3 ] || [ ! -x "$1" ]; then
  echo "usage: model_smoke.sh SPMDC FILE.hlo MESH" >&2
  exit 2
fi
spmdc=$1
file=$2
mesh=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$spmdc" compile "$file" --mesh "$mesh" -o "$tmp/out.hlo" --report none 2>"$tmp/err"
rc=$?
if grep -q -e 'Sanitizer' -e 'runtime error:' "$tmp/err"; then
  echo "FAIL: sanitizer report from compile"
  cat "$tmp/err"
  exit 1
fi
case $rc in
  0)
    if [ ! -s "$tmp/out.hlo" ]; then
      echo "FAIL: compile exited 0 without a program"
      exit 1
    fi
    if ! "$spmdc" verify "$file" --mesh "$mesh" >"$tmp/verify" 2>&1; then
      echo "FAIL: spmdc verify $file --mesh $mesh"
      cat "$tmp/verify"
      exit 1
    fi
    echo "ok: compiled and verified: $(tail -n 1 "$tmp/verify")"
    ;;
  1)
    if [ -e "$tmp/out.hlo" ]; then
      echo "FAIL: refused but left an output file"
      exit 1
    fi
    first=$(grep -m 1 -E '^[^:]+:[0-9]+:[0-9]+: error: ' "$tmp/err")
    if [ -z "$first" ]; then
      echo "FAIL: exit 1 without a file:line:col diagnostic"
      cat "$tmp/err"
      exit 1
    fi
    echo "ok: refused: $first"
    ;;
  *)
    echo "FAIL: compile exited $rc"
    cat "$tmp/err"
    exit 1
    ;;
esac
exit 0
