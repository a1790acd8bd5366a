#!/bin/sh
# same_output.sh SPMDC A.hlo B.hlo [ARGS...] - `spmdc compile` of A and of B
# (with ARGS) must give byte-identical programs (stdout), reports (stderr)
# and exit statuses.  For twins that say one thing two ways, e.g. a Shardy
# mesh written inline and the same mesh declared by name (cases/sdy/inline_*).
set -u
spmdc=$1
a=$2
b=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$spmdc" compile "$a" "$@" >"$tmp/a.out" 2>"$tmp/a.err"
ra=$?
"$spmdc" compile "$b" "$@" >"$tmp/b.out" 2>"$tmp/b.err"
rb=$?
fail=0
if [ "$ra" -ne "$rb" ]; then echo "exit status $ra for $a but $rb for $b"; fail=1; fi
if ! diff -u "$tmp/a.out" "$tmp/b.out"; then echo "the programs differ"; fail=1; fi
if ! diff -u "$tmp/a.err" "$tmp/b.err"; then echo "the reports differ"; fail=1; fi
if [ ! -s "$tmp/a.out" ]; then echo "no program written for $a"; cat "$tmp/a.err"; fail=1; fi
exit $fail
