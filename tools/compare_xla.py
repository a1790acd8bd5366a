#!/usr/bin/env python3
"""compare_xla.py - spmdc against XLA's own SPMD partitioner on the real-program
suites of examples/models/ (tools/export_models.py).

    python3 tools/compare_xla.py [SUITE...] [--spmdc build/spmdc]
                                 [--models examples/models] [--format markdown|json]
                                 [--timeout SECONDS] [--fail-over]

SUITE is a directory of sidecars under --models (windows, indexing, control, numerics
in examples/models, or one of your own exported the same way); default all.
For every model (its <name>.json sidecar) and every file of it (the GSPMD form
and, where there is one, the Shardy form) the script

  1. runs `SPMDC compile FILE --mesh MESH -o OUT --report json --report-out R`
     with the sidecar's mesh and reads the report (docs/report.md, schema
     spmdc.report/v1): total bytes per device, collectives by kind, and the
     full-rematerialization warnings;
  2. runs `SPMDC verify FILE --mesh MESH` (the simulator's numerical check)
     and, with --xla-run PYTHON, tools/xla_run.py: the emitted program on 8
     XLA:CPU devices against XLA's run of the unpartitioned file (a check that
     does not depend on spmdc's simulator; PYTHON must have jax);
  3. takes XLA's bytes per device after its spmd-partitioning pass from
     baseline.json (loop trips counted; the Shardy form of a model whose file
     XLA rejects uses its GSPMD twin's figure, marked ²);

and prints one row per file: model, mesh, XLA's collectives by kind, XLA
bytes/device, spmdc bytes/device,
the ratio spmdc/XLA, the verify result, the number of full-rematerialization
warnings, and spmdc's collectives or, when it refuses the program, its first
error (`line: message`, and how many errors in all).  Nothing is cached: every
run compiles and verifies afresh, so the table is today's spmdc.

Exit status: 0 (the table is the result); with --fail-over, 1 when any file is
refused, fails verify, warns of full rematerialization or sends more bytes per
device than XLA; 2 usage (no such suite, no spmdc).  Needs no jax.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))


def run(cmd, timeout):
    """(exit code or 'timeout', stdout, stderr)."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", "", ""


def first_error(stderr):
    """`line N: message (K errors)` from spmdc's diagnostics, or the last line."""
    lines = [x for x in stderr.splitlines() if x.strip()]
    count = re.search(r"spmdc: (\d+) errors?", stderr)
    for x in lines:
        m = re.match(r"^(?:[^:]*):(\d+):(\d+): error: (.*)$", x)
        if m:
            more = " (%s errors)" % count.group(1) if count and count.group(1) != "1" else ""
            return "line %s: %s%s" % (m.group(1), m.group(3), more)
    return lines[-1] if lines else "no message"


def xla_kinds(base):
    """XLA's collectives by kind: `2 collective-permute, 1 all-reduce (×4 trips)`."""
    if "collectives" not in base:
        return base.get("error", "")
    counts = {}
    for c in base["collectives"]:
        key = (c["kind"], c["multiplier"])
        counts[key] = counts.get(key, 0) + 1
    return ", ".join("%d %s%s" % (n, k, " (×%d trips)" % m if m != 1 else "")
                     for (k, m), n in counts.items()) or "no collectives"


def kinds(report):
    by = report.get("totals", {}).get("by_kind", {})
    return ", ".join("%d %s" % (v["count"], k) for k, v in by.items()) or "no collectives"


def compare_file(spmdc, path, mesh, tmp, timeout, xla_python=None):
    out, rep = os.path.join(tmp, "out.hlo"), os.path.join(tmp, "report.json")
    for f in (out, rep):
        if os.path.exists(f):
            os.remove(f)
    row = {"spmdc_bytes": None, "remat": None, "verify": None, "result": None, "ok": False}
    rc, _, err = run([spmdc, "compile", path, "--mesh", mesh, "-o", out, "--report", "json",
                      "--report-out", rep], timeout)
    if rc == "timeout":
        row["result"] = "compile timed out after %d s" % timeout
        return row
    if rc != 0:
        row["result"] = "refused: " + first_error(err)
        return row
    with open(rep) as f:
        report = json.load(f)
    row["spmdc_bytes"] = report["totals"]["bytes_per_device"]
    row["remat"] = sum(1 for w in report.get("warnings", []) if w.get("kind") == "full-rematerialization")
    row["result"] = kinds(report)
    rc, vout, verr = run([spmdc, "verify", path, "--mesh", mesh], timeout)
    if rc == "timeout":
        row["verify"] = "timed out"
    elif rc == 0:
        row["verify"] = "ok"
    else:
        # docs/cli.md: 1 a wrong program, 4 cannot verify (too large, unsupported), 5 input error
        what = {1: "MISMATCH", 4: "cannot verify", 5: "input error"}.get(rc, "FAIL")
        last = [x for x in (vout + verr).splitlines() if x.strip()]
        row["verify"] = "%s (exit %s): %s" % (what, rc, first_error(verr) if "error:" in verr
                                               else (last[-1] if last else ""))
    if xla_python:
        rc, xout, xerr = run([xla_python, os.path.join(HERE, "xla_run.py"), path, out,
                              "--mesh", mesh], timeout)
        last = [x for x in (xout + xerr).splitlines() if x.strip()]
        row["xla_run"] = ("timed out" if rc == "timeout" else "ok" if rc == 0 else
                          "FAIL: " + (last[-1] if last else "exit %s" % rc))
    row["ok"] = row["verify"] == "ok" and row["remat"] == 0 and row.get("xla_run", "ok") == "ok"
    return row


def source_commit():
    """Short id of the last commit that changed spmdc's sources, or "unknown"."""
    rc, out, _ = run(["git", "-C", ROOT, "log", "-1", "--format=%h", "--", "src", "include",
                      "grammar"], 30)
    if rc != 0 or not out.strip():
        return "unknown"
    dirty, _, _ = run(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", "src", "include",
                       "grammar"], 30)
    return out.strip() + (" plus uncommitted changes" if dirty == 1 else "")


def fmt_int(n):
    return "—" if n is None else "{:,}".format(n)


def ratio(spmdc, xla):
    if spmdc is None or xla is None:
        return "—"
    if xla == 0:
        return "1.00" if spmdc == 0 else "∞ (XLA: 0)"
    return "%.2f" % (spmdc / xla)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suites", nargs="*")
    ap.add_argument("--spmdc", default=os.path.join(ROOT, "build", "spmdc"))
    ap.add_argument("--models", default=os.path.join(ROOT, "examples", "models"))
    ap.add_argument("--format", choices=("markdown", "json"), default="markdown")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per spmdc run")
    ap.add_argument("--xla-run", metavar="PYTHON",
                    help="also run spmdc's program on 8 XLA:CPU devices against XLA's "
                         "unpartitioned run (tools/xla_run.py) with this python (needs jax)")
    ap.add_argument("--fail-over", action="store_true",
                    help="exit 1 when any file is worse than XLA or not proven")
    args = ap.parse_args()

    if not (os.path.isfile(args.spmdc) and os.access(args.spmdc, os.X_OK)):
        print("compare_xla.py: %s is not an executable (build spmdc or pass --spmdc)" % args.spmdc,
              file=sys.stderr)
        return 2
    suites = args.suites or sorted(d for d in os.listdir(args.models)
                                   if os.path.isdir(os.path.join(args.models, d)))
    for s in suites:
        if not os.path.isdir(os.path.join(args.models, s)):
            print("compare_xla.py: no suite %s in %s" % (s, args.models), file=sys.stderr)
            return 2
    with open(os.path.join(args.models, "baseline.json")) as f:
        base_all = json.load(f)
    baseline, baseline_jax = base_all["models"], base_all.get("jax", "?")

    rows, tmp = [], tempfile.mkdtemp(prefix="compare_xla_")
    for suite in suites:
        d = os.path.join(args.models, suite)
        for side in sorted(x for x in os.listdir(d) if x.endswith(".json")):
            with open(os.path.join(d, side)) as f:
                model = json.load(f)
            twin = None
            for fe in model["files"]:
                key = "%s/%s" % (suite, fe["file"])
                base = baseline.get(key, {"error": "not in baseline.json"})
                xla, note = base.get("bytes_per_device"), ""
                if xla is None and twin is not None:
                    xla, note = twin, "²"
                if fe["form"] == "gspmd":
                    twin = xla
                r = compare_file(args.spmdc, os.path.join(d, fe["file"]), model["mesh"], tmp,
                                 args.timeout, args.xla_run)
                r.update({"suite": suite, "model": model["name"], "file": key, "form": fe["form"],
                          "mesh": model["mesh"], "xla_bytes": xla, "xla_note": note,
                          "xla_collectives": xla_kinds(base)})
                r["ok"] = (r["ok"] and r["xla_bytes"] is not None
                           and r["spmdc_bytes"] <= r["xla_bytes"])
                rows.append(r)
    for f in ("out.hlo", "report.json"):
        p = os.path.join(tmp, f)
        if os.path.exists(p):
            os.remove(p)
    os.rmdir(tmp)

    commit = source_commit()
    if args.format == "json":
        json.dump({"spmdc_commit": commit, "xla_jax": baseline_jax, "rows": rows}, sys.stdout,
                  indent=2)
        sys.stdout.write("\n")
    else:
        print("Measured with spmdc built from commit %s (the last commit that changed src/, "
              "include/ or grammar/), XLA from jax/jaxlib %s (examples/models/baseline.json).\n"
              % (commit, baseline_jax))
        xr = bool(args.xla_run)
        print("| model | mesh | XLA collectives | XLA bytes/device | spmdc bytes/device | spmdc/XLA "
              "| verify |%s full remat | spmdc |" % (" XLA run |" if xr else ""))
        print("|---|---|---|---|---|---|---|---|---|%s" % ("---|" if xr else ""))
        for r in rows:
            name = "%s%s%s" % (r["suite"] + "/" if len(suites) > 1 else "", r["model"],
                               " (Shardy)" if r["form"] == "shardy" else "")
            print("| %s | %s | %s | %s%s | %s | %s | %s |%s %s | %s |" % (
                name, r["mesh"], r["xla_collectives"] if not r["xla_note"] else "(as GSPMD form)",
                fmt_int(r["xla_bytes"]), r["xla_note"], fmt_int(r["spmdc_bytes"]),
                ratio(r["spmdc_bytes"], r["xla_bytes"]), r["verify"] or "—",
                " %s |" % r.get("xla_run", "—") if xr else "",
                "—" if r["remat"] is None else r["remat"],
                r["result"].replace("|", "\\|")))
        n_ok = sum(1 for r in rows if r["ok"])
        print("\n%d of %d files: spmdc verified, no full rematerialization, no more bytes than XLA."
              % (n_ok, len(rows)))
        if any(r["xla_note"] for r in rows):
            print("² XLA rejects this Shardy file when it reads it back; the GSPMD form's figure.")
    if args.fail_over and any(not r["ok"] for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
