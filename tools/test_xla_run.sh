#!/bin/sh
# test_xla_run.sh SPMDC - numerical check of spmdc's output by XLA itself.
#
# For each small example and the halo, shape-op and uneven golden cases (and a
# second mesh size where the file uses named
# axes) compiles it with `SPMDC compile`, then runs tools/xla_run.py: the
# per-device program on N XLA:CPU devices against XLA's run of the
# unpartitioned input, from the same random inputs (seeds 0 and 1).
# Independent of spmdc's own simulator (`spmdc verify`).
#
# Exit status: 0 all match (or skipped: no python with jax), 1 a compile failed,
# XLA rejected a program or a device's result differs, 2 usage.
#   add_test(NAME xla/run COMMAND sh tools/test_xla_run.sh $<TARGET_FILE:spmdc>)
set -u
here=$(cd "$(dirname "$0")" && pwd)
ex=$(cd "$here/../examples" && pwd)
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: test_xla_run.sh SPMDC" >&2
  exit 2
fi
spmdc=$1
# The python to run XLA with: $SPMDC_PYTHON (ctest sets it from
# SPMDC_XLA_PYTHON, see tools/xla_venv.sh), else python3.
py=${SPMDC_PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -c 'import jax' >/dev/null 2>&1; then
  echo "skipped: jax not installed"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# check FILE [MESH]
check() {
  f=$1
  mesh=${2:-}
  out="$tmp/out.hlo"
  rm -f "$out"
  if [ -n "$mesh" ]; then
    set -- --mesh "$mesh"
  else
    set --
  fi
  label="$(basename "$f")${mesh:+ --mesh $mesh}"
  if ! "$spmdc" compile "$f" "$@" -o "$out" --report none 2>"$tmp/err"; then
    echo "FAIL compile: $label"
    sed 's/^/    /' "$tmp/err" | head -n 10
    fail=1
    return
  fi
  for seed in 0 1; do
    if msg=$("$py" "$here/xla_run.py" "$@" --spmdc "$spmdc" --seed "$seed" "$f" "$out" 2>&1); then
      :
    else
      echo "FAIL run: $label (seed $seed)"
      printf '%s\n' "$msg" | sed 's/^/    /' | tail -n 12
      fail=1
      return
    fi
  done
  echo "ok: $label"
}

check "$ex/mlp_small.hlo"
check "$ex/mlp_small.hlo" model=4
check "$ex/mlp_small.hlo" model=2
check "$ex/mlp_2d_small.hlo"
check "$ex/mlp_2d_small.hlo" data=4,model=2
check "$ex/positional_small.hlo"
check "$ex/positional_1d_small.hlo"
check "$ex/named_quoted_small.hlo"
check "$ex/jax_mlp.hlo"
check "$ex/jax_mlp_sdy.hlo"
check "$ex/jax_attention.hlo"
check "$ex/jax_attention_sdy.hlo"
# The misaligned plan (all-to-all + all-reduce) at a size XLA:CPU runs quickly.
sed 's/bf16\[8192,8192\]/f32[64,64]/g' "$ex/mlp_misaligned.hlo" >"$tmp/mlp_misaligned_small.hlo"
check "$tmp/mlp_misaligned_small.hlo"
check "$tmp/mlp_misaligned_small.hlo" model=4
# Halo exchanges, shape ops and uneven shards (padding filled with garbage).
cases=$(cd "$here/../tests/cases" && pwd)
check "$cases/windows/conv_halo.hlo"
check "$cases/windows/reduce_window_halo.hlo"
check "$cases/windows/select_and_scatter_halo.hlo"
check "$cases/windows/shape_ops.hlo"
check "$cases/uneven/uneven_ops.hlo"
check "$cases/uneven/uneven_ops.hlo" x=2,y=2
# A parameter split by propagation only (cut by spmdc's propagated sharding).
check "$cases/uneven/param_propagated.hlo"
# A batched LAPACK custom-call (cholesky) kept split over its batch dim: XLA
# runs each device's call on its 2 matrices.
check "$cases/ops/custom_call_batch_dims.hlo"
# Complex results, compared with their imaginary parts.
check "$cases/ops/complex_reduce.hlo"
exit $fail
