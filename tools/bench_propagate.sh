#!/usr/bin/env bash
# bench_propagate.sh [BUILD_DIR] [SIZE] - time sharding propagation alone on
# two generated modules of about SIZE instructions (default 1,000,000).
#
#   tools/bench_propagate.sh                 # build/, 1,000,000 instructions
#   tools/bench_propagate.sh build-rel 100000
#
# Builds the bench_propagate target in BUILD_DIR (configure it Release for
# figures worth quoting), writes
#   - a Megatron MLP stack (tools/gen_mlp_layers.py, 5 instructions a layer:
#     two dots, a ReLU, two annotated weights), and
#   - a transformer training step (tools/gen_transformer.py, forward, backward
#     and SGD update, about 89 instructions a layer; weights annotated over
#     data=2 x model=4),
# and runs bench_propagate on each (3 runs; it prints the fastest wall and CPU
# time of the propagation pass, one core).  Exit status: 0 ok, 1 a build or a
# run failed, 2 usage.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
size=${2:-1000000}
case $size in ''|*[!0-9]*) echo "bench_propagate.sh: SIZE must be a number" >&2; exit 2;; esac
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "bench_propagate.sh: $build is not a configured build directory" >&2
  exit 2
fi
cmake --build "$build" --target bench_propagate -j2 >/dev/null || exit 1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 5 instructions a layer plus 3
python3 "$here/gen_mlp_layers.py" $(( (size - 3) / 5 )) >"$tmp/mlp.hlo"
# 89 instructions a layer plus 22
python3 "$here/gen_transformer.py" $(( (size - 22) / 89 )) --batch 8 --seq 16 --model 64 \
  --heads 8 --ffn 256 --dtype f32 --data 2 --model-par 4 >"$tmp/transformer.hlo"
"$build/bench_propagate" "$tmp/mlp.hlo" --repeat 3 | sed "s|$tmp/||"
"$build/bench_propagate" "$tmp/transformer.hlo" --repeat 3 | sed "s|$tmp/||"
