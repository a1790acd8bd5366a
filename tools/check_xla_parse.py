#!/usr/bin/env python3
"""check_xla_parse.py - does XLA itself accept this HLO text?

    python3 tools/check_xla_parse.py [--parse-only | --compile] [--quote-named] FILE.hlo...

Every FILE ("-" = stdin) is
  1. parsed by XLA's own HLO parser (jaxlib's hlo_module_from_text, i.e.
     jax._src.lib.xla_client.hlo.hlo_module_from_text in jaxlib 0.10.2), and
  2. unless --parse-only, converted to StableHLO (jaxlib's hlo_to_stablehlo) and
     verified by MLIR.  The parser alone does not check that an instruction's
     printed shape is what its operands imply; MLIR's shape inference does (a
     dot printed with a wrong result shape, an all-reduce whose result differs
     from its operand, a broken replica group are rejected here);
  3. with --compile, compiled by XLA:CPU for the N devices of its
     num_partitions header (as N replicas, see tools/xla_run.py), in a child
     process, so that XLA's CHECK failures (aborts) count as rejections.

--quote-named rewrites named shardings with bare axis names
(`{mesh[model=8], [{model}, {}]}`) into the quoted spelling XLA 0.10.2 parses
(`{mesh['model'=8], [{'model'}, {}]}`) before checking; use it for spmdc's
input examples, not for its output (XLA must accept the output as printed).

Prints `ok: FILE` or `FILE: rejected by XLA: <message>` per file.  Exit status:
0 all accepted, 1 at least one rejected, 2 usage.  Prints
"skipped: jax not installed" and exits 0 when jax is missing.
"""
import argparse
import os
import subprocess
import sys


def check_one(text, parse_only):
    """None if XLA accepts text, else the error message."""
    from jax._src.lib import xla_client as xc
    from jax._src.lib import _jax
    try:
        module = xc.hlo.hlo_module_from_text(text)
    except Exception as e:  # JaxRuntimeError: INVALID_ARGUMENT: Syntax error ...
        return "parse: " + str(e).strip()
    if parse_only:
        return None
    try:
        bytecode = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    except Exception as e:
        return "conversion to StableHLO: " + str(e).strip()
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir
    try:
        with jmlir.make_ir_context():
            mod = ir.Module.parse(bytecode)
            if not mod.operation.verify():
                return "MLIR verification failed"
    except Exception as e:
        return "verification: " + str(e).strip()
    return None


def compile_one(path):
    """Child process of --compile: exit 0 iff XLA:CPU compiles the program."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from xla_partition import guess_devices
    text = open(path).read()
    n = max(guess_devices(text), 1)
    os.environ["XLA_FLAGS"] = "%s --xla_force_host_platform_device_count=%d" % (
        os.environ.get("XLA_FLAGS", ""), n)
    from xla_run import compile_text, replica_text
    compile_text(replica_text(text, rewrite_sdy=False), n)
    return 0


def check_compile(path):
    """None if XLA compiles the file (in a child process), else the error."""
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--compile-one", path],
                       capture_output=True, text=True)
    if r.returncode == 0:
        return None
    lines = [l for l in (r.stderr + r.stdout).splitlines() if l.strip() and not l.startswith("    @")]
    tail = [l for l in lines if "Check failed" in l or "Error" in l or "error" in l] or lines
    return "compile (exit %d): %s" % (r.returncode, "\n".join(tail[-5:]))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--compile-one":
        return compile_one(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--parse-only", action="store_true", help="only run XLA's parser")
    ap.add_argument("--compile", action="store_true",
                    help="also compile with XLA:CPU (N replicas) in a child process")
    ap.add_argument("--quote-named", action="store_true",
                    help="quote bare axis names of named shardings first")
    args = ap.parse_args()

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import jax  # noqa: F401
        from jax._src.lib import xla_client  # noqa: F401
    except ImportError:
        print("skipped: jax not installed")
        return 0
    quote = None
    if args.quote_named:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from xla_partition import quote_named_shardings as quote

    rc = 0
    for path in args.files:
        try:
            text = sys.stdin.read() if path == "-" else open(path).read()
        except OSError as e:
            print("%s: cannot read: %s" % (path, e.strerror))
            rc = 1
            continue
        if quote:
            text = quote(text)
        err = check_one(text, args.parse_only)
        if err is None and args.compile and not args.parse_only:
            if path == "-":
                err = "--compile needs a file, not stdin"
            elif quote:
                err = "--compile cannot be combined with --quote-named"
            else:
                err = check_compile(path)
        if err is None:
            print("ok: %s" % path)
        else:
            print("%s: rejected by XLA: %s" % (path, err))
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
