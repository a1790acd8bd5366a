#!/usr/bin/env python3
"""xla_suite.py - run the HLO modules of one of XLA's HLO test suites
(spmd_partitioner_test.cc, sharding_propagation_test.cc) through spmdc:
compile each, verify what compiles, and count the outcomes.

    python3 tools/xla_suite.py PATH/TO/xla/service/spmd/spmd_partitioner_test.cc \\
        [--spmdc build/spmdc] [--out DIR] [--timeout 60]

The test file comes from an XLA checkout (it is not part of this
repository).  Every TEST_F / TEST_P whose body holds a raw string R"(...)"
(or R"hlo(...)hlo", any delimiter) with `HloModule` gives one module per such
string, named after the test (suffix _2, _3, ... for further strings).  Its device count is the first of:

  1. the module header's num_partitions=N;
  2. what the test names: `/*num_devices=*/N` or `/*num_partitions=*/N`,
     or the second argument of PartitionComputation (the partitioner suite);
  3. derived from the module's shardings (the propagation suite names no
     count): the largest over all shardings of
       - an explicit device list (`devices=[2,2]0,3,1,2`, `maximal
         device=5`): the largest device id + 1;
       - an iota tile assignment (`devices=[2,2]<=[4]`,
         `devices=[4,2]<=[2,4]T(1,0)`): the product of the tile dims;
       - a named-axis sharding (`{mesh[x=2,y=4], ...}`): the mesh size;
  4. a module with no sharding at all runs at 1 device.

For each module:

    spmdc compile M.hlo --mesh N -o /dev/null
    spmdc verify  M.hlo --mesh N                (when the compile succeeds)

and the outcome is one of: verified (verify exit 0), MISMATCH (exit 1: a
wrong program), cannot-verify (exit 4: too large, or an op the simulator
does not run), refused (compile exit 1: the first error is printed), crash
(a signal), timeout.  Writes DIR/results.csv and prints the totals and the
refusals; exit status 1 if any module mismatched or crashed.
"""
import argparse
import csv
import os
import re
import subprocess
import sys

TEST_RE = re.compile(r"TEST_[FP]\(\s*\w+\s*,\s*(\w+)\s*\)")
RAW_RE = re.compile(r'R"([^()\\\s]{0,16})\((.*?)\)\1"', re.S)
ND_RE = re.compile(r"num_(?:devices|partitions)\s*=\s*\*/\s*(\d+)")
PC_RE = re.compile(r"PartitionComputation\(\s*\w+\s*,\s*(\d+)")
NP_RE = re.compile(r"num_partitions\s*=\s*(\d+)")
TILE_RE = re.compile(r"devices=\[([\d,\s]+)\]\s*(<=|[\d,\s]+)")
MAXIMAL_RE = re.compile(r"maximal\s+device=(\d+)")
MESH_RE = re.compile(r"mesh\[([^\]]*)\]")


def derived_devices(hlo):
    """The device count a module's shardings imply (rule 3/4 of the docstring)."""
    n = 1
    for m in TILE_RE.finditer(hlo):
        dims = [int(d) for d in m.group(1).replace(" ", "").split(",") if d]
        if m.group(2) == "<=":
            prod = 1
            for d in dims:
                prod *= d
            n = max(n, prod)
        else:
            ids = [int(d) for d in m.group(2).replace(" ", "").split(",") if d]
            n = max(n, max(ids) + 1 if ids else 1)
    for m in MAXIMAL_RE.finditer(hlo):
        n = max(n, int(m.group(1)) + 1)
    for m in MESH_RE.finditer(hlo):
        prod = 1
        for size in re.findall(r"=\s*(\d+)", m.group(1)):
            prod *= int(size)
        n = max(n, prod)
    return str(n)


def extract(text):
    """[(name, hlo, devices)] in file order."""
    marks = [(m.start(), m.group(1)) for m in TEST_RE.finditer(text)] + [(len(text), None)]
    out = []
    for (start, name), (end, _) in zip(marks, marks[1:]):
        body = text[start:end]
        mods = [m.group(2).lstrip("\n") for m in RAW_RE.finditer(body) if "HloModule" in m.group(2)]
        counts = ND_RE.findall(body) or PC_RE.findall(body)
        for i, hlo in enumerate(mods):
            nd = counts[min(i, len(counts) - 1)] if counts else ""
            np_ = NP_RE.search(hlo.split("\n", 1)[0])
            if np_:
                nd = np_.group(1)
            if not nd:
                nd = derived_devices(hlo)
            out.append((name + ("_%d" % (i + 1) if i else ""), hlo, nd))
    return out


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, ""
    err = p.stderr.decode("utf-8", "replace")
    first = next((l for l in err.splitlines() if ": error: " in l or l.startswith("spmdc: error")), "")
    return p.returncode, first


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("test_cc")
    ap.add_argument("--spmdc", default="build/spmdc")
    ap.add_argument("--out", default="xla-suite")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    mods = extract(open(args.test_cc, encoding="utf-8").read())
    os.makedirs(args.out, exist_ok=True)
    rows, totals = [], {}
    for name, hlo, nd in mods:
        path = os.path.join(args.out, name + ".hlo")
        with open(path, "w") as f:
            f.write(hlo)
        mesh = ["--mesh", nd] if nd else []
        rc, err = run([args.spmdc, "compile", path, "-o", os.devnull] + mesh, args.timeout)
        if rc is None:
            outcome = "timeout"
        elif rc < 0 or rc >= 128:
            outcome = "crash"
        elif rc != 0:
            outcome = "refused"
        else:
            rc, err = run([args.spmdc, "verify", path] + mesh, args.timeout)
            if rc is None:
                outcome = "timeout"
            elif rc < 0 or rc >= 128:
                outcome = "crash"
            else:
                outcome = {0: "verified", 1: "MISMATCH", 4: "cannot-verify"}.get(rc, "verify-error")
        totals[outcome] = totals.get(outcome, 0) + 1
        rows.append((name, nd, outcome, err))
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["module", "devices", "outcome", "first_error"])
        w.writerows(rows)
    print("%d modules from %s" % (len(rows), args.test_cc))
    for k in ("verified", "cannot-verify", "refused", "verify-error", "MISMATCH", "crash", "timeout"):
        print("  %-14s %d" % (k, totals.get(k, 0)))
    for name, nd, outcome, err in rows:
        if outcome not in ("verified", "cannot-verify"):
            print("%s %s (%s devices): %s" % (outcome, name, nd or "?", err))
    return 1 if totals.get("MISMATCH") or totals.get("crash") else 0


if __name__ == "__main__":
    sys.exit(main())
