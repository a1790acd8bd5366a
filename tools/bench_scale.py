#!/usr/bin/env python3
"""bench_scale.py - how spmdc's compile time and memory grow with the module,
side by side with XLA's own parse + sharding propagation + SPMD partitioning.

    python3 tools/bench_scale.py [--spmdc build/spmdc] [--sizes 1k,10k,100k,1m]
                                 [--runs 3] [--models mlp,transformer]
                                 [--xla-python /work/venv/bin/python | --no-xla]
                                 [--xla-timeout 900] [--shapes | --no-shapes]
                                 [--small-runs 15] [--stages] [--keep DIR]

For each model and size it generates the module (tools/gen_mlp_layers.py: 5
instructions a layer; tools/gen_transformer.py: 89 a layer, a training step
with named shardings over data=2,model=4), compiles it `--runs` times with
`spmdc compile IN -o OUT --report json --report-out REPORT` and prints, for
the fastest run: wall seconds, peak RSS (MiB), instructions per second, and
the growth of time and memory against the size before (per 10x more
instructions), and the CPU seconds (user + system) of that run: on a machine
other jobs share, wall time includes the waits for a core, CPU time does not.
The timed runs are the plain program.  One more run of each module, with the
stage timer on (SPMDC_TIME_PASSES, which reads /proc at every stage: about
1.5 ms of a 1k-instruction module's 4 ms), gives the peak RSS (the process's
own VmHWM) and, with --stages, the per-stage breakdown (read, parse, verify,
bind, canonicalize, propagate, partition, print (with the report's memory
estimate), report, write, free; seconds and the resident memory at the end
of the stage).

XLA: the same module in XLA's positional sharding form (--positional of the
generators; XLA 0.10.2's GSPMD does not take named meshes) is parsed with
XLA's HLO parser (hlo_module_from_text, timed in the child process) and
compiled for 8 host CPU devices; the time of XLA's `spmd-partitioner` pass
pipeline (sharding-propagation and spmd-partitioning, from XLA's pass log
with TF_CPP_VMODULE=hlo_pass_pipeline=1, invariant checkers left out) is
added to the parse time, and the child is stopped as soon as that pipeline
ends (the CPU backend's own compile is not part of the comparison).  spmdc
compiles the same positional file for the ratio (min of --runs).  A size
XLA does not finish within --xla-timeout seconds is printed as such.

The runs are spread over the sweep: --runs rounds, each of which compiles
every size once, so that a slow minute of this shared machine falls on all
sizes rather than on the growth from one size to the next.  Small modules
(under 20,000 instructions) run a few milliseconds, where one run's wall time
moves by as much as the run itself: they run --small-runs (15) times in all,
spread over the rounds.  For the XLA columns a small module runs in --runs
rounds of (spmdc's runs of the positional form, one XLA run), so that a slow
minute falls on both sides of the ratio, each side taking its fastest (XLA:
parse plus partitioning); a larger one --runs spmdc runs and one XLA run.

--shapes (on by default) adds the scale-shape rows (tools/gen_scale.py): a
tuple of N operands, N computations, a while body N ops deep, a loop carrying
N values, a chain of N nested calls, N collectives
in the report, N calls of one computation, N values in distinct device orders, each at two sizes 10x apart with the growth.

Needs no GNU time: peak RSS comes from spmdc's own SPMDC_TIME_PASSES line,
CPU seconds from wait4.  Exit status 0, or 1 when a compile
failed.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STAGE_RE = re.compile(r"^spmdc: time-passes: (\S+) ([0-9.]+) s, rss ([0-9.]+) MiB, peak ([0-9.]+) MiB, cpu ([0-9.]+) s$")
INST_RE = re.compile(rb"^\s+(?:ROOT\s+)?%?[A-Za-z_][A-Za-z0-9_.-]*\s*=", re.M)


def parse_size(s):
    s = s.strip().lower()
    mult = {"k": 1000, "m": 1000000}.get(s[-1:], 1)
    return int(float(s.rstrip("km")) * mult)


def fmt_n(n):
    return "%dM" % (n // 1000000) if n >= 1000000 and n % 1000000 == 0 else (
        "%dk" % (n // 1000) if n >= 1000 and n % 1000 == 0 else str(n))


def generate(model, n, path, positional=False):
    """Writes a module of about n instructions; returns the instruction count."""
    if model == "mlp":
        args = [os.path.join(HERE, "gen_mlp_layers.py"), str(max(1, (n - 3) // 5))]
    elif model == "transformer":
        args = [os.path.join(HERE, "gen_transformer.py"), str(max(1, (n - 16) // 89))]
    else:
        shape = model.split(":", 1)[1]
        args = [os.path.join(HERE, "gen_scale.py"), shape, str(n)]
    if positional:
        args.append("--positional")
    with open(path, "wb") as f:
        subprocess.run([sys.executable] + args, stdout=f, check=True)
    with open(path, "rb") as f:
        return len(INST_RE.findall(f.read()))


def spawn(argv, env, err_path):
    """Runs argv (stdout to /dev/null, stderr to err_path): (exit status, wall s, CPU s of the child)."""
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[
        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
        (os.POSIX_SPAWN_OPEN, 2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    return os.waitstatus_to_exitcode(status), wall, ru.ru_utime + ru.ru_stime


# path -> (peak MiB, stages) of its instrumented run (run_spmdc)
INSTRUMENTED = {}


def run_spmdc(spmdc, path, tmp, runs):
    """Min-wall run of `spmdc compile` with the JSON report: (wall, peak MiB, stages, cpu s) or None.
    The timed runs are the plain program; the stage timer (SPMDC_TIME_PASSES) reads /proc at every
    stage (about 1.5 ms of a 1k-instruction module's 4 ms), so the peak and the stages come from one
    more run of the module with it on, made once per module."""
    argv = [spmdc, "compile", path, "-o", os.path.join(tmp, "out.hlo"), "--report", "json",
            "--report-out", os.path.join(tmp, "report.json")]
    err = os.path.join(tmp, "stderr.txt")

    def clear():
        # every run writes new files: replacing the last run's would add ext4's writeback of the
        # replaced files on rename (0.1-0.2 s at 1M instructions) to the runs after the first
        for out in ("out.hlo", "report.json"):
            if os.path.exists(os.path.join(tmp, out)):
                os.remove(os.path.join(tmp, out))

    def failed():
        with open(err, errors="replace") as f:
            sys.stderr.write(f.read()[-2000:])
        return None

    if path not in INSTRUMENTED:
        clear()
        rc, _, _ = spawn(argv, dict(os.environ, SPMDC_TIME_PASSES="1"), err)
        if rc != 0:
            return failed()
        stages, peak = [], 0.0
        with open(err, errors="replace") as f:
            for line in f.read().splitlines():
                m = STAGE_RE.match(line)
                if m:
                    stages.append((m.group(1), float(m.group(2)), float(m.group(3))))
                    peak = max(peak, float(m.group(4)))
        INSTRUMENTED[path] = (peak, stages)
    env = {k: v for k, v in os.environ.items() if k != "SPMDC_TIME_PASSES"}
    best = None
    for _ in range(runs):
        clear()
        rc, wall, cpu = spawn(argv, env, err)
        if rc != 0:
            return failed()
        if best is None or wall < best[0]:
            best = (wall, INSTRUMENTED[path][0], INSTRUMENTED[path][1], cpu)
    return best


XLA_CHILD = r"""
import os, sys, time
sys.path.insert(0, sys.argv[2])
import xla_partition as xp
text = xp.quote_named_shardings(open(sys.argv[1]).read())
from jax._src.lib import xla_client as xc
t0 = time.perf_counter()
xc.hlo.hlo_module_from_text(text)
sys.stderr.write("BENCH parse %.6f\n" % (time.perf_counter() - t0))
sys.stderr.flush()
xp.compile_with_xla(text, 8, False)
"""
LOG_RE = re.compile(r"^[IWEF]\d{4} (\d+):(\d+):(\d+\.\d+)\s+\d+ hlo_pass_pipeline\.cc:\d+\]\s+(.*)$")


def run_xla(python, path, timeout):
    """XLA parse seconds + spmd-partitioner pipeline seconds, or a reason string."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="hlo_pass_pipeline=1")
    p = subprocess.Popen([python, "-c", XLA_CHILD, path, HERE], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env, text=True, errors="replace")
    start = time.monotonic()
    parse_s, in_spmd, spmd_s, prev = None, False, 0.0, None
    done, tail = False, []
    watchdog = threading.Timer(timeout, p.kill)  # XLA may work silently for a long time
    watchdog.start()
    try:
        for line in p.stderr:
            if time.monotonic() - start > timeout:
                break
            tail = (tail + [line])[-5:]
            if line.startswith("BENCH parse "):
                parse_s = float(line.split()[2])
                continue
            m = LOG_RE.match(line.rstrip("\n"))
            if not m:
                continue
            t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
            what = m.group(4)
            if prev is not None and in_spmd:
                spmd_s += t - prev  # the pass that was running ends here
            prev = None
            if what.startswith("Running HLO pass pipeline"):
                if in_spmd:
                    done = True
                    break
                in_spmd = what.endswith(": spmd-partitioner")
            elif what.startswith("HLO pass ") and in_spmd:
                prev = t
    finally:
        watchdog.cancel()
        if p.poll() is None:
            p.kill()
        p.wait()
    if done and parse_s is not None:
        return parse_s, spmd_s
    if time.monotonic() - start > timeout:
        return "not finished in %d s" % timeout
    return "failed: " + "".join(tail).strip()[-300:]


# Seconds to wait before timing spmdc on the positional form (xla_columns).
SETTLE_S = 1.0

# Under this many instructions a module is small: more runs (--small-runs; XLA: --runs).
SMALL = 20000


def faster(best, r):
    """The faster of two run_spmdc results; False once a run failed."""
    if best is False or r is None:
        return False
    return r if best is None or r[0] < best[0] else best


def small_runs_per_round(a):
    """A small module's runs in each of the --runs rounds: --small-runs (at least --runs) spread over them."""
    return -(-max(a.runs, a.small_runs) // max(1, a.runs))


def xla_columns(a, model, n, insts, tmp):
    """The XLA columns of a row: spmdc on the positional form, XLA's parse and partitioning, the ratio.
    A small module runs in --runs rounds of (spmdc's runs, one XLA run), so that a slow minute of the
    machine falls on both sides of the ratio; a larger one --runs spmdc runs and one XLA run."""
    ppath = os.path.join(tmp, "%s_%s.pos.hlo" % (model, fmt_n(n)))
    generate(model, n, ppath, positional=True)
    small = insts < SMALL
    rounds = a.runs if small else 1
    per = small_runs_per_round(a) if small else a.runs
    rp = x = None
    for _ in range(max(1, rounds)):
        # the machine stays slower for a moment after a large process ends (XLA's, or the last
        # 1M-instruction compile): a few milliseconds' runs right after it took 1.5x as long
        time.sleep(SETTLE_S)
        rp = faster(rp, run_spmdc(a.spmdc, ppath, tmp, per))
        if rp is False:
            break
        if not isinstance(x, str):
            xr = run_xla(a.xla_python, ppath, a.xla_timeout)
            x = xr if isinstance(xr, str) or x is None or sum(xr) < sum(x) else x
    if not a.keep:
        os.remove(ppath)
    if not rp:
        return "  spmdc failed on the positional form"
    if isinstance(x, str):
        return "  %10.3f  XLA %s" % (rp[0], x)
    return "  %10.3f %10.3f %10.3f %7.1fx" % (rp[0], x[0], x[1], (x[0] + x[1]) / rp[0])


def growth(rows, i, key):
    if i == 0:
        return ""
    a, b = rows[i - 1], rows[i]
    if a[key] <= 0 or a["n"] <= 0:
        return ""
    import math
    decades = math.log10(b["n"] / a["n"])
    if decades <= 0:
        return ""
    return "%.1fx" % ((b[key] / a[key]) ** (1.0 / decades))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spmdc", default=os.path.join(HERE, "..", "build", "spmdc"))
    ap.add_argument("--sizes", default="1k,10k,100k,1m")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small-runs", type=int, default=15,
                    help="spmdc runs (min taken) for modules under %d instructions" % SMALL)
    ap.add_argument("--models", default="mlp,transformer")
    ap.add_argument("--xla-python", default="/work/venv/bin/python")
    ap.add_argument("--no-xla", action="store_true")
    ap.add_argument("--xla-timeout", type=int, default=900)
    ap.add_argument("--shapes", dest="shapes", action="store_true", default=True)
    ap.add_argument("--no-shapes", dest="shapes", action="store_false")
    ap.add_argument("--shape-kinds", default="tuple,computations,while,loop-state,call-chain,collectives,"
                    "call-sites,device-orders",
                    help="which scale shapes --shapes runs")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--keep", help="keep the generated modules here")
    a = ap.parse_args()
    if not os.access(a.spmdc, os.X_OK):
        sys.stderr.write("bench_scale.py: no spmdc at %s (build it or pass --spmdc)\n" % a.spmdc)
        return 2
    sizes = [parse_size(s) for s in a.sizes.split(",") if s]
    xla = not a.no_xla and os.access(a.xla_python, os.X_OK)
    tmp = a.keep or tempfile.mkdtemp(prefix="bench_scale_")
    os.makedirs(tmp, exist_ok=True)
    rc = 0
    try:
        for model in [x for x in a.models.split(",") if x]:
            rows = []
            print("\n%s (spmdc compile, JSON report, min of %d runs; %d under %d instructions)" % (
                model, a.runs, max(a.runs, a.small_runs), SMALL))
            hdr = "%10s %12s %10s %12s %8s %8s %8s" % ("insts", "wall s", "peak MiB", "insts/s", "time/10x",
                                                       "mem/10x", "cpu s")
            if xla:
                hdr += "  %10s %10s %10s %8s" % ("spmdc(pos)", "XLA parse", "XLA part", "XLA/spmdc")
            print(hdr)
            # every size's runs are spread over the sweep in --runs rounds (each round runs every
            # size), so that a slow minute of the machine falls on all sizes and not on the growth
            # from one to the next
            mods = []
            for n in sizes:
                path = os.path.join(tmp, "%s_%s.hlo" % (model, fmt_n(n)))
                insts = generate(model, n, path)
                mods.append({"n": n, "path": path, "insts": insts, "r": None})
            for _ in range(max(1, a.runs)):
                for m in mods:
                    if m["r"] is not False:
                        per = small_runs_per_round(a) if m["insts"] < SMALL else 1
                        m["r"] = faster(m["r"], run_spmdc(a.spmdc, m["path"], tmp, per))
            for m in mods:
                insts, r = m["insts"], m["r"]
                if not a.keep:
                    os.remove(m["path"])
                if not r:
                    print("%10d  compile failed" % insts)
                    rc = 1
                    continue
                rows.append({"n": insts, "wall": r[0], "peak": r[1], "stages": r[2]})
                i = len(rows) - 1
                line = "%10d %12.3f %10.1f %12.0f %8s %8s %8.3f" % (insts, r[0], r[1], insts / r[0],
                                                                   growth(rows, i, "wall"), growth(rows, i, "peak"),
                                                                   r[3])
                if xla:
                    line += xla_columns(a, model, m["n"], insts, tmp)
                    if line.endswith("failed on the positional form"):
                        rc = 1
                print(line, flush=True)
                if a.stages:
                    print("           stages: " + ", ".join("%s %.3f s %.0f MiB" % s for s in r[2]), flush=True)
        if a.shapes:
            print("\nscale shapes (spmdc compile, JSON report, min of %d runs; growth per 10x)" % a.runs)
            print("%-14s %10s %10s %10s %10s %10s %8s %8s %8s" % ("shape", "N", "insts", "wall s", "peak MiB",
                                                                 "insts/s", "time/10x", "mem/10x", "cpu s"))
            for shape, ns in (("tuple", (100000, 1000000)), ("computations", (10000, 100000)),
                              ("while", (10000, 100000)), ("loop-state", (10000, 100000)),
                              ("call-chain", (10000, 100000)),
                              ("collectives", (20000, 200000)), ("call-sites", (10000, 100000)),
                              ("device-orders", (10000, 100000))):
                if shape not in a.shape_kinds.split(","):
                    continue
                rows = []
                for n in ns:
                    path = os.path.join(tmp, "scale_%s_%s.hlo" % (shape, fmt_n(n)))
                    insts = generate("scale:" + shape, n, path)
                    r = run_spmdc(a.spmdc, path, tmp, a.runs)
                    if not a.keep:
                        os.remove(path)
                    if not r:
                        print("%-14s %10d  compile failed" % (shape, n))
                        rc = 1
                        continue
                    rows.append({"n": insts, "wall": r[0], "peak": r[1]})
                    i = len(rows) - 1
                    print("%-14s %10d %10d %10.3f %10.1f %10.0f %8s %8s %8.3f" % (
                        shape, n, insts, r[0], r[1], insts / r[0], growth(rows, i, "wall"),
                        growth(rows, i, "peak"), r[3]), flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
