#!/usr/bin/env python3
"""xla_propagated.py - the module as XLA's own sharding propagation leaves
it, every instruction with a sharding, so that spmdc's partitioner can be
measured on XLA's choice of shardings (independently of spmdc's
propagation).

    python3 tools/xla_propagated.py --out-dir DIR FILE.hlo...

For every file it compiles the module with XLA's SPMD pipeline (as
tools/xla_partition.py does: N CPU devices, GSPMD or Shardy by the file's
attributes) with the module dumped after the sharding-propagation pass, and
writes that dump to DIR/<file name>.  Then, for example:

    spmdc compile DIR/cnn_height.hlo --report json   # spmdc's partitioner on XLA's shardings
    spmdc verify DIR/cnn_height.hlo

Exit status: 0 every file written, 1 XLA rejected one (or wrote no such
dump), 2 usage.  Prints a message and exits 0 without jax.
"""
import argparse
import atexit
import glob
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--devices", type=int, default=0, help="number of partitions (default: from the file)")
    args = ap.parse_args()
    dump = tempfile.mkdtemp(prefix="xla_propagated_")
    atexit.register(shutil.rmtree, dump, True)  # XLA's dumps: read, then not kept
    os.environ["XLA_FLAGS"] = ("%s --xla_force_host_platform_device_count=8 --xla_dump_to=%s "
                               "--xla_dump_hlo_pass_re=sharding-propagation" % (os.environ.get("XLA_FLAGS", ""), dump))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import jax  # noqa: F401
    except ImportError:
        print("skipped: jax not installed")
        return 0
    import xla_partition as xp
    os.makedirs(args.out_dir, exist_ok=True)
    rc = 0
    for path in args.files:
        text = open(path).read()
        before = set(glob.glob(os.path.join(dump, "*")))
        try:
            xp.compile_with_xla(xp.quote_named_shardings(text), args.devices or xp.guess_devices(text),
                                "xla.sdy." in text)
        except Exception as e:  # XLA's error text
            print("%s: XLA rejected it: %s" % (path, str(e).splitlines()[0]))
            rc = 1
            continue
        after = sorted(set(glob.glob(os.path.join(dump, "*"))) - before)
        prop = [f for f in after if "after_sharding-propagation" in f]
        if not prop:
            print("%s: XLA wrote no module after sharding propagation" % path)
            rc = 1
            continue
        out = os.path.join(args.out_dir, os.path.basename(path))
        with open(prop[-1]) as f, open(out, "w") as g:
            g.write(f.read())
        print("wrote %s" % out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
