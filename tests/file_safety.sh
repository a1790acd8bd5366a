#!/bin/sh
# file_safety.sh SPMDC - spmdc never loses or damages a file (docs/cli.md,
# "Where output goes"): every case runs spmdc in a fresh directory and checks
# its exit status and the files left behind.
#
# Permissions mean nothing to root, so as root the script runs itself again
# as the user nobody (setpriv or runuser); where neither exists, the cases
# that need permissions are skipped and said so.  Ends with the line
# "file_safety: N passed, M failed".
set -u
spmdc=$1
case $spmdc in /*) ;; *) spmdc=$(pwd)/$spmdc ;; esac
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

if [ "$(id -u)" -eq 0 ] && [ -z "${SPMDC_FILE_SAFETY_AS_ROOT:-}" ]; then
  if command -v setpriv >/dev/null 2>&1 && setpriv --reuid=nobody --regid=nogroup --clear-groups true 2>/dev/null; then
    exec setpriv --reuid=nobody --regid=nogroup --clear-groups sh "$self" "$spmdc"
  elif command -v runuser >/dev/null 2>&1 && runuser -u nobody -- true 2>/dev/null; then
    exec runuser -u nobody -- sh "$self" "$spmdc"
  fi
  echo "file_safety: no way to become an ordinary user: permission cases skipped"
  SPMDC_FILE_SAFETY_AS_ROOT=1
  export SPMDC_FILE_SAFETY_AS_ROOT
fi
as_root=${SPMDC_FILE_SAFETY_AS_ROOT:-}

pass=0
fail=0
skip=0
top=$(mktemp -d /tmp/spmdc-file-safety.XXXXXX) || exit 1
trap 'chmod -R u+w "$top" 2>/dev/null; rm -rf "$top"' EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $case: $*"; }
skipped() { skip=$((skip + 1)); echo "skipped: $case: $*"; }

# A fresh directory with the small input in.hlo (and nothing else).
fresh() {
  case=$1
  d=$top/$1
  mkdir -p "$d"
  cat >"$d/in.hlo" <<'EOF'
HloModule fs
ENTRY %main {
  %x = f32[8,8] parameter(0), sharding={devices=[2,1]<=[2]}
  %w = f32[8,8] parameter(1), sharding={devices=[1,2]<=[2]}
  ROOT %y = f32[8,8] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
EOF
  cd "$d" || exit 1
}

# run STATUS ARGS...: spmdc ARGS must exit with STATUS.
run() {
  want=$1
  shift
  "$spmdc" "$@" >"$top/stdout" 2>"$top/stderr"
  got=$?
  if [ "$got" -ne "$want" ]; then
    bad "spmdc $* exited $got, expected $want: $(head -c 300 "$top/stderr")"
    return 1
  fi
  return 0
}

# Only the named files (besides in.hlo) are in the current directory.
only() {
  left=$(ls -A | grep -v '^in\.hlo$' | sort | tr '\n' ' ')
  want=$(printf '%s\n' "$@" | grep -v '^$' | sort | tr '\n' ' ')
  if [ "$left" != "$want" ]; then bad "files left: '$left', expected '$want'"; return 1; fi
  return 0
}

same_bytes() {
  if cmp -s "$1" "$2"; then return 0; fi
  bad "$1 differs from $2"
  return 1
}

# ---------------------------------------------------------------- one file, two names

fresh same_relative_absolute
run 2 compile in.hlo -o out.hlo --report-out "$d/out.hlo" && only && ok
fresh same_dotdot
mkdir sub
run 2 compile in.hlo -o sub/../out.hlo --report-out ./out.hlo && only sub && ok
fresh same_symlink_existing
echo old >out.hlo
ln -s out.hlo link.hlo
run 2 compile in.hlo -o link.hlo --report-out out.hlo && only out.hlo link.hlo && [ "$(cat out.hlo)" = old ] && ok
fresh same_symlink_dangling
ln -s target.hlo link.hlo
run 2 compile in.hlo -o target.hlo --report-out link.hlo && only link.hlo && ok
fresh same_hard_link
echo old >out.hlo
ln out.hlo hard.hlo
run 2 compile in.hlo -o hard.hlo --report-out out.hlo && [ "$(cat out.hlo)" = old ] && ok
fresh dev_null_twice
run 0 compile in.hlo -o /dev/null --report-out /dev/null && only && ok

# ---------------------------------------------------------------- the input file

fresh output_is_input
cp in.hlo keep.hlo
run 2 compile in.hlo -o in.hlo && same_bytes in.hlo keep.hlo && ok
fresh output_is_input_other_spelling
cp in.hlo keep.hlo
mkdir sub
ln -s ../in.hlo sub/alias.hlo
run 2 compile ./in.hlo -o sub/alias.hlo && same_bytes in.hlo keep.hlo && \
  run 2 compile in.hlo --report-out "$d/sub/../in.hlo" && same_bytes in.hlo keep.hlo && ok
fresh output_is_stdin
cp in.hlo keep.hlo
if "$spmdc" compile - -o in.hlo <in.hlo >/dev/null 2>&1; then bad "accepted -o naming the file on stdin"
elif same_bytes in.hlo keep.hlo; then ok; fi

# ---------------------------------------------------------------- read-only outputs

if [ -n "$as_root" ]; then
  case=read_only; skipped "needs a non-root user"
else
  fresh read_only_output
  echo old >out.hlo
  chmod 444 out.hlo
  run 1 compile in.hlo -o out.hlo && [ "$(cat out.hlo)" = old ] && only out.hlo && ok
  fresh read_only_report_writes_nothing
  echo old >report.txt
  chmod 444 report.txt
  run 1 compile in.hlo -o out.hlo --report-out report.txt && [ "$(cat report.txt)" = old ] && only report.txt && ok
  fresh writable_file_in_read_only_directory
  mkdir ro
  echo old >ro/out.hlo
  chmod 666 ro/out.hlo
  chmod 555 ro
  run 0 compile in.hlo -o ro/out.hlo --report none && grep -q '^HloModule fs' ro/out.hlo && \
    [ "$(ls -A ro)" = out.hlo ] && ok
  chmod 755 ro
  fresh new_file_in_read_only_directory
  mkdir ro
  chmod 555 ro
  run 1 compile in.hlo -o ro/out.hlo && [ -z "$(ls -A ro)" ] && ok
  chmod 755 ro
fi

# ---------------------------------------------------------------- all or nothing

fresh second_output_fails_first_not_written
echo old >out.hlo
run 1 compile in.hlo -o out.hlo --report-out nosuchdir/report.txt && [ "$(cat out.hlo)" = old ] && only out.hlo && ok
fresh failed_run_keeps_output
echo old >out.hlo
printf 'HloModule broken\nENTRY %%e {\n  ROOT %%x = f32[2] parameter(0\n}\n' >bad.hlo
run 1 compile bad.hlo -o out.hlo && [ "$(cat out.hlo)" = old ] && only out.hlo bad.hlo && ok

# ---------------------------------------------------------------- names and links

fresh long_name
name=$(awk 'BEGIN { while (n++ < 251) printf "a"; print ".hlo" }') # 255 bytes: NAME_MAX
run 0 compile in.hlo -o "$name" --report none && only "$name" && grep -q '^HloModule fs' "$name" && ok
fresh symlink_output_writes_target
echo old >target.hlo
ln -s target.hlo link.hlo
run 0 compile in.hlo -o link.hlo --report none && [ -L link.hlo ] && grep -q '^HloModule fs' target.hlo && ok
fresh mode_kept
echo old >out.hlo
chmod 640 out.hlo
run 0 compile in.hlo -o out.hlo --report none && [ "$(stat -c %a out.hlo)" = 640 ] && ok
# a rerun over its own outputs replaces both whole, and no temporary is left
fresh rerun_replaces
run 0 compile in.hlo -o out.hlo --report-out rep.txt && cp out.hlo first.hlo && cp rep.txt first.txt && \
  echo old >out.hlo && echo old >rep.txt && run 0 compile in.hlo -o out.hlo --report-out rep.txt && \
  only out.hlo rep.txt first.hlo first.txt && same_bytes out.hlo first.hlo && same_bytes rep.txt first.txt && ok
# the file's other name keeps the old bytes, as a rename over it leaves them
fresh replace_hard_linked
echo old >out.hlo
ln out.hlo other.hlo
run 0 compile in.hlo -o out.hlo --report none && [ "$(cat other.hlo)" = old ] && grep -q '^HloModule fs' out.hlo && \
  only out.hlo other.hlo && ok

# ---------------------------------------------------------------- interrupted runs

# The report goes to a FIFO nobody reads, so spmdc blocks in the middle of
# writing its outputs (the program's temporary already written); the signal
# must remove that temporary and leave out.hlo as it was.  XCPU and XFSZ are
# what the CPU-time and file-size limits send (their default action dumps
# core: no core files here).
ulimit -c 0 2>/dev/null || true
for sig in TERM INT HUP QUIT USR1 ALRM XCPU XFSZ; do
  fresh "interrupted_$sig"
  echo old >out.hlo
  mkfifo report.fifo
  if ! env --default-signal="$sig" true 2>/dev/null; then skipped "env --default-signal unsupported"; continue; fi
  env --default-signal="$sig" "$spmdc" compile in.hlo -o out.hlo --report-out report.fifo >/dev/null 2>&1 &
  pid=$!
  n=0
  while [ -z "$(ls -A | grep '^\.spmdc-')" ] && [ $n -lt 100 ]; do sleep 0.05; n=$((n + 1)); done
  if [ $n -ge 100 ]; then bad "no temporary appeared"; kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null; continue; fi
  kill -"$sig" $pid
  wait $pid
  st=$?
  [ "$st" -gt 128 ] && [ "$(cat out.hlo)" = old ] && only out.hlo report.fifo && ok || bad "status $st"
done

# ---------------------------------------------------------------- the input limit

fresh input_stream_over_limit
export SPMDC_MAX_INPUT_BYTES=1M
run 1 compile /dev/zero -o out.hlo && grep -q 'larger than the input limit of 1048576 bytes' "$top/stderr" && only && ok
unset SPMDC_MAX_INPUT_BYTES
fresh input_file_over_default_limit
if truncate -s 3G big.hlo 2>/dev/null; then # sparse: refused from its size, never read
  run 1 compile big.hlo -o out.hlo && grep -q 'larger than the input limit of 2147483648 bytes' "$top/stderr" && only big.hlo && ok
else
  skipped "no sparse files"
fi
fresh input_at_limit
size=$(wc -c <in.hlo)
export SPMDC_MAX_INPUT_BYTES=$size
if run 0 compile in.hlo -o out.hlo --report none; then
  export SPMDC_MAX_INPUT_BYTES=$((size - 1))
  run 1 compile - -o out2.hlo <in.hlo && only out.hlo && ok
fi
unset SPMDC_MAX_INPUT_BYTES
fresh input_limit_malformed
export SPMDC_MAX_INPUT_BYTES=5G
run 1 compile in.hlo && grep -q 'SPMDC_MAX_INPUT_BYTES' "$top/stderr" && ok
unset SPMDC_MAX_INPUT_BYTES

# ---------------------------------------------------------------- out of memory

# verify of two f32[8192,8192] values (256 MiB each) under a 384 MiB address
# space: exit 70 with the message, no crash.  Sanitizer builds cannot run
# under such a limit at all, so the case is skipped there.
fresh out_of_memory
cat >big.hlo <<'EOF2'
HloModule oom
ENTRY %main {
  %x = f32[8192,8192] parameter(0)
  ROOT %y = f32[8192,8192] negate(%x)
}
EOF2
if (ulimit -v 393216 && "$spmdc" --version) >/dev/null 2>&1; then
  (ulimit -v 393216 && exec "$spmdc" verify big.hlo) >"$top/stdout" 2>"$top/stderr"
  st=$?
  if [ "$st" -eq 70 ] && grep -q '^spmdc: fatal: out of memory$' "$top/stderr"; then ok
  else bad "exit $st, expected 70: $(head -c 300 "$top/stderr")"; fi
else
  skipped "spmdc does not start under ulimit -v (a sanitizer build)"
fi

# ---------------------------------------------------------------- `--` ends the options

fresh double_dash
cp in.hlo ./-dash.hlo
run 0 compile --report none -- -dash.hlo && grep -q '^HloModule fs' "$top/stdout" && \
  run 0 verify -- -dash.hlo && grep -q '^verify: OK' "$top/stdout" && \
  run 0 check -- -dash.hlo && run 0 sweep --mesh d0=1,2 -- -dash.hlo && grep -q 'sweep of -dash.hlo' "$top/stdout" && \
  run 1 compile -- --mesh && ok

echo "file_safety: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
