#!/bin/sh
# test_xla_parse.sh SPMDC [FILE.hlo...] - does XLA accept what spmdc emits?
#
# Compiles every example (default: examples/*.hlo next to this script) with
# `SPMDC compile FILE --report none`, plus the named-axis examples again at a
# second mesh size (`--mesh model=4`, `--mesh data=4,model=2`), and runs
# `tools/check_xla_parse.py --compile` on each per-device program: XLA's own
# HLO parser, StableHLO conversion + MLIR shape verification, and a full
# XLA:CPU compile for the program's devices (no execution).  Each example's
# `SPMDC propagate` output (the module with every value's sharding) goes
# through XLA's parser too.
#
# Exit status: 0 all accepted (or skipped: no python with jax), 1 a compile
# failed or XLA rejected an output, 2 usage.  Meant for ctest:
#   add_test(NAME xla/parse COMMAND sh tools/test_xla_parse.sh $<TARGET_FILE:spmdc>)
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: test_xla_parse.sh SPMDC [FILE.hlo...]" >&2
  exit 2
fi
spmdc=$1
shift
if [ ! -x "$spmdc" ]; then
  echo "test_xla_parse.sh: $spmdc is not an executable" >&2
  exit 2
fi
# The python to run XLA with: $SPMDC_PYTHON (ctest sets it from
# SPMDC_XLA_PYTHON, see tools/xla_venv.sh), else python3.
py=${SPMDC_PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -c 'import jax' >/dev/null 2>&1; then
  echo "skipped: jax not installed"
  exit 0
fi
[ $# -eq 0 ] && set -- "$here"/../examples/*.hlo

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
n=0
# run_one FILE TAG [--mesh SPEC]: compile, then hand the output to XLA.
run_one() {
  f=$1
  tag=$2
  shift 2
  n=$((n + 1))
  out="$tmp/$n.$(basename "$f" .hlo)$tag.hlo"
  if ! "$spmdc" compile "$f" "$@" -o "$out" --report none 2>"$tmp/err"; then
    echo "FAIL compile: $(basename "$f")${*:+ $*}"
    sed 's/^/    /' "$tmp/err" | head -n 10
    fail=1
    return
  fi
  # XLA:CPU has no ragged-dot kernel (JAX expands ragged_dot before XLA on
  # CPU): such a program is checked by XLA's parser and MLIR's verifier only.
  flag=--compile
  note=""
  if grep -q ' ragged-dot(' "$out"; then
    flag=""
    note=" (parsed and verified; XLA:CPU runs no ragged-dot)"
  fi
  # shellcheck disable=SC2086
  if msg=$("$py" "$here/check_xla_parse.py" $flag "$out" 2>&1); then
    echo "ok: $(basename "$f")${*:+ $*}$note"
  else
    echo "FAIL xla: $(basename "$f")${*:+ $*}"
    printf '%s\n' "$msg" | sed 's/^/    /' | head -n 20
    fail=1
  fi
}

# run_propagate FILE: `spmdc propagate`, then XLA's parser on the module with
# every value's sharding.
run_propagate() {
  f=$1
  n=$((n + 1))
  out="$tmp/$n.$(basename "$f" .hlo).propagated.hlo"
  if ! "$spmdc" propagate "$f" -o "$out" 2>"$tmp/err"; then
    echo "FAIL propagate: $(basename "$f")"
    sed 's/^/    /' "$tmp/err" | head -n 10
    fail=1
    return
  fi
  if msg=$("$py" "$here/check_xla_parse.py" --parse-only "$out" 2>&1); then
    echo "ok: propagate $(basename "$f")"
  else
    echo "FAIL xla: propagate $(basename "$f")"
    printf '%s\n' "$msg" | sed 's/^/    /' | head -n 20
    fail=1
  fi
}

for f in "$@"; do
  run_one "$f" ""
  run_propagate "$f"
  if grep -q 'sharding={mesh\[data=2,model=4\]' "$f"; then
    run_one "$f" ".m2" --mesh data=4,model=2
  elif grep -q 'sharding={mesh\[model=8\]' "$f"; then
    run_one "$f" ".m4" --mesh model=4
  fi
done
exit $fail
