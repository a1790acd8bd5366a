#!/bin/sh
# run_case.sh SPMDC CASE.cmd - one golden command case.
#
# CASE.cmd holds the spmdc arguments on one line (words split by the shell,
# no quotes needed), run from CASE.cmd's directory so diagnostics show
# relative paths.  Expectations beside it (each optional, but at least one of
# .stdout/.stderr must exist):
#   CASE.stdout  exact standard output
#   CASE.stderr  exact standard error
#   CASE.exit    expected exit status (default 0)
# When the exit status is non-zero and the arguments name `-o FILE`, FILE
# must not exist afterwards (no partial output).
# UPDATE_GOLDEN=1 rewrites .stdout/.stderr/.exit from the actual run.
set -u
spmdc=$1
cmd=$2
dir=$(dirname "$cmd")
base=$(basename "$cmd" .cmd)
cd "$dir" || exit 2
args=$(cat "$base.cmd")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
outfile=$(printf '%s\n' $args | awk 'p {print; exit} $0 == "-o" {p = 1}')
# Only a plain file name in the case's own directory is ever removed (never
# /dev/null or anything outside the case directory).
case $outfile in */*|"") outfile="" ;; esac
# ... and never a file the case also reads (`-o in.hlo` naming its own input
# is a case of spmdc refusing it, not a file to clean up).
if [ -n "$outfile" ] && [ "$(printf '%s\n' $args | grep -cxF -- "$outfile")" -gt 1 ]; then outfile=""; fi
[ -n "$outfile" ] && rm -f "$outfile"
# shellcheck disable=SC2086
"$spmdc" $args >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
if [ "${UPDATE_GOLDEN:-}" = 1 ]; then
  cp "$tmp/stdout" "$base.stdout"
  if [ -s "$tmp/stderr" ] || [ -f "$base.stderr" ]; then cp "$tmp/stderr" "$base.stderr"; fi
  if [ "$rc" -ne 0 ]; then echo "$rc" >"$base.exit"; else rm -f "$base.exit"; fi
  [ -n "$outfile" ] && rm -f "$outfile"
  exit 0
fi
want=0
[ -f "$base.exit" ] && want=$(cat "$base.exit")
fail=0
if [ "$rc" -ne "$want" ]; then echo "exit status $rc, expected $want"; fail=1; fi
if [ -f "$base.stdout" ] && ! diff -u "$base.stdout" "$tmp/stdout"; then fail=1; fi
if [ -f "$base.stderr" ] && ! diff -u "$base.stderr" "$tmp/stderr"; then fail=1; fi
if [ "$rc" -ne 0 ] && [ -n "$outfile" ] && [ -e "$outfile" ]; then
  echo "partial output file $outfile left behind"; fail=1
fi
[ -n "$outfile" ] && rm -f "$outfile"
if [ $fail -ne 0 ]; then echo "--- stderr was:"; cat "$tmp/stderr"; fi
exit $fail
