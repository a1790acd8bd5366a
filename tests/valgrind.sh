#!/bin/sh
# valgrind.sh SPMDC [STEP] - a sample of the golden cases (every STEP-th
# tests/cases/**/*.cmd in sorted order, default 24, plus the hardening
# cases that drive the interpreter and the front end to their limits) under
# valgrind's memcheck: no read of uninitialised memory, no invalid access, no
# definite leak.  The expected output still has to match (run_case.sh), and
# memcheck's own findings make the run exit 99 (its report is printed; add
# --track-origins=yes below to see where an uninitialised value came from).
# About 2-3 s per case.  Needs a build without sanitizers; prints
# "skipped: valgrind not installed" without valgrind.
set -u
spmdc=$1
step=${2:-24}
case $spmdc in /*) ;; *) spmdc=$(pwd)/$spmdc ;; esac
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v valgrind >/dev/null 2>&1; then
  echo "skipped: valgrind not installed"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/spmdc" <<EOF
#!/bin/sh
exec valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \\
  --log-file="$tmp/vg.%p.log" "$spmdc" "\$@"
EOF
chmod +x "$tmp/spmdc"

# The sample: every STEP-th case, and the hardening cases at the limits.
find "$here/cases" -name '*.cmd' | sort | awk -v s="$step" 'NR % s == 1' >"$tmp/list"
for c in divergent_while interp_int_limits index_int_limits index_int_limits_dim1 utf8_bom cr_line_ends \
         crlf_error float_literal_range required_attributes sdy_mesh_from_header.verify; do
  echo "$here/cases/hardening/$c.cmd" >>"$tmp/list"
done
pass=0
fail=0
for c in $(sort -u "$tmp/list"); do
  rm -f "$tmp"/vg.*.log
  if out=$(sh "$here/run_case.sh" "$tmp/spmdc" "$c" 2>&1); then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: ${c#"$here"/cases/}"
    echo "$out" | head -20
    cat "$tmp"/vg.*.log 2>/dev/null | head -40
  fi
done
echo "valgrind: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
