#!/bin/sh
# roundtrip.sh SPMDC - every per-device program in tests/cases/examples/*.stdout
# (what `spmdc compile` emitted) is read back by spmdc's own parser and
# printed again byte for byte (`compile --dump-after parse`).
set -u
spmdc=$1
dir=$(cd "$(dirname "$0")" && pwd)/cases/examples
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
n=0
fail=0
for f in "$dir"/*.stdout; do
  n=$((n + 1))
  if ! "$spmdc" compile "$f" --dump-after parse -o "$tmp"; then
    echo "FAIL: spmdc cannot read back $(basename "$f")"; fail=1; continue
  fi
  if ! cmp -s "$f" "$tmp"; then
    echo "FAIL: $(basename "$f") changes when read back:"; diff -u "$f" "$tmp" | head -20; fail=1
  fi
done
echo "$n programs read back"
exit $fail
