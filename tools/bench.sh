#!/usr/bin/env bash
# bench.sh [SPMDC] [LAYERS] - time `spmdc compile` on a deep Megatron MLP stack.
#
#   tools/bench.sh                         # build/spmdc, 10,000 layers
#   tools/bench.sh build-rel/spmdc 50000   # any binary, any depth
#   SPMDC_MESH=model=4 tools/bench.sh      # compile at another mesh size
#
# Generates the stack with tools/gen_mlp_layers.py (bf16, hidden 1024, axis
# `model`, 8 devices: 2L dots, L ReLUs, 5L+3 instructions), compiles it with
# the JSON report, and prints the wall time, peak memory (when GNU time is
# installed) and sizes.  Checks that the report lists exactly L all-reduces
# (the Megatron plan) when jq or python3 is there to read it.  Exit status:
# 0 ok, 1 compile failed or the report is wrong, 2 usage / missing tools.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
spmdc=${1:-${SPMDC:-$here/../build/spmdc}}
layers=${2:-10000}
mesh=${SPMDC_MESH:-}

if [ ! -x "$spmdc" ]; then
  echo "bench.sh: no spmdc binary at $spmdc (build it, or pass its path)" >&2
  exit 2
fi
case $layers in ''|*[!0-9]*) echo "bench.sh: LAYERS must be a number" >&2; exit 2;; esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/gen_mlp_layers.py" "$layers" >"$tmp/stack.hlo"
count_insts() { grep -cE '^[[:space:]]+(ROOT[[:space:]]+)?%?[A-Za-z_][A-Za-z0-9_.-]*[[:space:]]*=' "$1" || true; }
insts=$(count_insts "$tmp/stack.hlo")
echo "input:   $layers layers, $insts instructions, $(wc -c <"$tmp/stack.hlo") bytes"

args=(compile "$tmp/stack.hlo" -o "$tmp/out.hlo" --report json --report-out "$tmp/report.json")
[ -n "$mesh" ] && args+=(--mesh "$mesh")

rc=0
TIMEFORMAT='compile: %R s wall, %U s user, %S s sys'
if [ -x /usr/bin/time ] && /usr/bin/time -f '%M' true >/dev/null 2>&1; then
  { time /usr/bin/time -f '%M' -o "$tmp/rss" "$spmdc" "${args[@]}" 2>"$tmp/stderr" || rc=$?; } 2>"$tmp/time"
else
  { time "$spmdc" "${args[@]}" 2>"$tmp/stderr" || rc=$?; } 2>"$tmp/time"
fi
cat "$tmp/time"
if [ -s "$tmp/rss" ]; then echo "peak:    $(tail -n 1 "$tmp/rss") KiB resident"; fi
if [ "$rc" -ne 0 ]; then
  echo "bench.sh: spmdc compile failed (exit $rc):" >&2
  head -n 20 "$tmp/stderr" >&2
  exit 1
fi
echo "output:  $(count_insts "$tmp/out.hlo") instructions, $(wc -c <"$tmp/out.hlo") bytes"

count=""
if command -v jq >/dev/null 2>&1; then
  count=$(jq '[.collectives[] | select(.kind == "all-reduce")] | length' "$tmp/report.json")
  total=$(jq '.totals.bytes_per_device' "$tmp/report.json")
elif command -v python3 >/dev/null 2>&1; then
  count=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(c["kind"]=="all-reduce" for c in r["collectives"]))' "$tmp/report.json")
  total=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["totals"]["bytes_per_device"])' "$tmp/report.json")
fi
if [ -n "$count" ]; then
  echo "report:  $count all-reduces, $total bytes per device"
  if [ "$count" -ne "$layers" ]; then
    echo "bench.sh: expected $layers all-reduces (one per layer), report has $count" >&2
    exit 1
  fi
fi
