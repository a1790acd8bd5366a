#!/bin/sh
# dot_render.sh SPMDC - renders `spmdc compile --dot` output with Graphviz
# and checks the SVG: one node per instruction, the collective edges in
# colour.  Skipped (exit 0 with "skipped: graphviz not installed") without
# the `dot` program.
set -eu
spmdc=$1
src=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v dot >/dev/null 2>&1; then
  echo "skipped: graphviz not installed"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$spmdc" compile "$src/examples/mlp_misaligned.hlo" -o /dev/null --report none --dot "$tmp/g.dot"
dot -Tsvg "$tmp/g.dot" -o "$tmp/g.svg"
fail=0
# 5 instructions (x, a, b, h, y) and the result node
n=$(grep -c 'class="node"' "$tmp/g.svg")
[ "$n" -eq 6 ] || { echo "expected 6 nodes, got $n"; fail=1; }
# the all-to-all of a (purple) and the all-reduce of y (red); 5 edges: x, a -> h, h, b -> y,
# y -> result
grep -q 'to&#45;all 14,680,064 B' "$tmp/g.svg" || { echo "no all-to-all edge label"; fail=1; }
grep -q 'reduce 234,881,024 B' "$tmp/g.svg" || { echo "no all-reduce edge label"; fail=1; }
e=$(grep -c 'class="edge"' "$tmp/g.svg")
[ "$e" -eq 5 ] || { echo "expected 5 edges, got $e"; fail=1; }
[ $fail -eq 0 ] && echo "ok: rendered $n nodes and $e edges"
exit $fail
