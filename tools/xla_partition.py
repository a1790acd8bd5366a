#!/usr/bin/env python3
"""xla_partition.py - run XLA's own SPMD partitioner on an HLO file and list
the collectives it emits, costed with spmdc's model (docs/report.md).

    XLA_FLAGS are set by the script itself; just run:
    python3 tools/xla_partition.py [--devices N] [--dump-dir DIR] [--print]
                                   [--json] [--markdown] FILE.hlo...

For every file it
  1. reads the HLO text; named shardings written with bare axis names
     (`{mesh[model=8], [{}, {model}]}`, spmdc's spelling) get their axis names
     quoted (`{mesh['model'=8], [{}, {'model'}]}`), the only spelling the XLA
     in jaxlib 0.10.2 parses;
  2. parses it with XLA's HLO parser, converts it to StableHLO and compiles it
     for N CPU devices with use_spmd_partitioning=true (GSPMD, or Shardy when
     the file carries xla.sdy.* attributes), dumping the module after the
     spmd-partitioning pass (--xla_dump_to, --xla_dump_hlo_pass_re=spmd);
  3. lists the collectives of (a) the module right after XLA's partitioner and
     (b) XLA's final optimized module, with per-device shapes, group sizes and
     bytes sent per device:
        all-reduce          floor(2*(n-1)*B/n), B = operand bytes
        all-gather          floor((n-1)*B/n),   B = result bytes
        reduce-scatter      floor((n-1)*B/n),   B = operand bytes
        all-to-all          floor((n-1)*B/n),   B = operand bytes
        collective-permute  B (operand bytes)

N is --devices, else num_partitions=N in the header, else the product of the
first named mesh's axis sizes, else the device count of the first positional
`devices=[...]` sharding.

Exit status: 0 ok, 1 when XLA rejected a file, 2 usage.  Prints a message and
exits 0 when jax is not installed.
"""
import argparse
import glob
import json
import os
import re
import sys
import tempfile

ELEM_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e4m3fn": 1,
    "f8e4m3b11fnuz": 1, "f8e3m4": 1, "f8e5m2fnuz": 1, "f8e4m3fnuz": 1,
    "f8e8m0fnu": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4,
    "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "token": 0,
}
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
               "collective-permute", "collective-broadcast")


# ----------------------------------------------------------------- text helpers

def matching_brace(text, i):
    """Index just past the brace group opening at text[i] == '{' (strings skipped)."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


TOKEN_RE = re.compile(r"""'[^']*'|"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_.-]*|.""", re.S)
NAMED_KEYWORDS = {"mesh", "maximal_mesh", "device_ids", "device_id", "replicated",
                  "unreduced", "manual", "metadata", "last_tile_dim_replicate"}


def quote_named_body(body):
    """Quote bare axis names in one sharding value that uses the named form."""
    out = []
    toks = TOKEN_RE.findall(body)
    stack = []          # bracket kinds: '[' or '{' (axis group or other)
    in_mesh = False     # inside mesh[...]
    prev = ""
    for k, t in enumerate(toks):
        nxt = toks[k + 1] if k + 1 < len(toks) else ""
        if t == "[":
            stack.append("mesh[" if prev == "mesh" else "[")
            in_mesh = prev == "mesh"
        elif t == "]":
            if stack:
                stack.pop()
            in_mesh = False
        elif t == "{":
            axis_group = bool(stack) and stack[-1] == "[" or prev == "="
            stack.append("axes" if axis_group and not out_is_metadata(out) else "{")
        elif t == "}":
            if stack:
                stack.pop()
        elif re.match(r"[A-Za-z_]", t) and t not in NAMED_KEYWORDS:
            if in_mesh and nxt == "=":
                t = "'%s'" % t
            elif stack and stack[-1] == "axes":
                t = "'%s'" % t
        out.append(t)
        if not t.isspace():
            prev = t
    return "".join(out)


def out_is_metadata(out):
    tail = "".join(out[-3:])
    return tail.endswith("metadata=")


def quote_named_shardings(text):
    """Rewrites every sharding={...} that uses mesh[...] with quoted axis names."""
    res = []
    i = 0
    key = "sharding={"
    while True:
        j = text.find(key, i)
        if j < 0:
            res.append(text[i:])
            break
        start = j + len(key) - 1
        end = matching_brace(text, start)
        body = text[start:end]
        res.append(text[i:start])
        res.append(quote_named_body(body) if "mesh[" in body else body)
        i = end
    return "".join(res)


def guess_devices(text):
    m = re.search(r"^HloModule[^\n]*\bnum_partitions=(\d+)", text, re.M)
    if m:
        return int(m.group(1))
    m = re.search(r"mesh\[([^\]]*)\]", text)
    if m:
        sizes = [int(s) for s in re.findall(r"=\s*(\d+)", m.group(1))]
        n = 1
        for s in sizes:
            n *= s
        return n
    m = re.search(r"devices=\[([\d,]+)\]", text)
    if m:
        n = 1
        for s in m.group(1).split(","):
            n *= int(s)
        return n
    return 1


SHAPE_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")


def parse_shape(s):
    """List of (dtype, dims) leaves of an HLO shape text (tuples flattened)."""
    leaves = []
    for dt, dims in SHAPE_RE.findall(s):
        if dt not in ELEM_BYTES:
            continue
        d = [int(x) for x in dims.split(",") if x.strip() and x.strip().lstrip("<=").isdigit()]
        leaves.append((dt, d))
    return leaves


def shape_bytes(leaves):
    total = 0
    for dt, dims in leaves:
        n = 1
        for d in dims:
            n *= d
        total += n * ELEM_BYTES[dt]
    return total


def shape_str(leaves):
    return ", ".join("%s[%s]" % (dt, ",".join(map(str, d))) for dt, d in leaves)


INST_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([A-Za-z_][\w.-]*)\s*=\s*(.*?)\s+([a-z][a-z0-9-]*)\((.*)$")


def split_instruction(line):
    """(name, shape_text, opcode, operand_names, attr_text) or None."""
    m = INST_RE.match(line)
    if not m:
        return None
    name, shape, opcode, rest = m.groups()
    depth = 0
    k = 0
    for k, c in enumerate(rest):
        if c in "({[":
            depth += 1
        elif c in ")}]":
            if depth == 0:
                break
            depth -= 1
    operands = re.findall(r"%?([A-Za-z_][\w.-]*)\s*(?:,|$)", rest[:k])
    return name, shape, opcode, operands, rest[k + 1:]


def group_info(attrs, ndev):
    """(group_size, num_groups, groups text) from replica_groups=..."""
    m = re.search(r"replica_groups=(\{\{.*?\}\}|\{\})", attrs)
    if m:
        if m.group(1) == "{}":
            return ndev, 1, "{}"
        groups = re.findall(r"\{([\d,]*)\}", m.group(1))
        return len(groups[0].split(",")), len(groups), m.group(1)
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=\[[\d,]*\](?:T\([\d,]*\))?", attrs)
    if m:
        return int(m.group(2)), int(m.group(1)), m.group(0)[len("replica_groups="):]
    m = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", attrs)
    if m:
        sizes = dict((a, int(s)) for a, s in re.findall(r"'([^']*)'\s*=\s*(\d+)", m.group(1)))
        n = 1
        for ref in re.finditer(r"'([^']*)'(?::\((\d+)\)(\d+))?", m.group(2)):
            n *= int(ref.group(3)) if ref.group(3) else sizes[ref.group(1)]
        total = 1
        for s in sizes.values():
            total *= s
        return n, total // n, m.group(0)[len("replica_groups="):]
    return ndev, 1, "(none)"


def collectives(text, ndev):
    """Collectives of an HLO module text, in program order."""
    shapes = {}
    rows = []
    for line in text.splitlines():
        if line.lstrip().startswith("%") is False and "=" not in line:
            continue
        p = split_instruction(line)
        if not p:
            continue
        name, shape, opcode, operands, attrs = p
        shapes[name] = parse_shape(shape)
        base = opcode[:-len("-start")] if opcode.endswith("-start") else opcode
        if base not in COLLECTIVES:
            continue
        op_leaves = []
        for o in operands:
            op_leaves += shapes.get(o, [])
        res_leaves = shapes[name]
        if opcode.endswith("-start") and len(res_leaves) > len(op_leaves):
            res_leaves = res_leaves[len(op_leaves):]   # async: (operands, results)
        n, g, groups = group_info(attrs, ndev)
        bop, bres = shape_bytes(op_leaves), shape_bytes(res_leaves)
        if base == "all-reduce":
            sent = 2 * (n - 1) * bop // n
        elif base == "all-gather":
            sent = (n - 1) * bres // n
        elif base in ("reduce-scatter", "all-to-all"):
            sent = (n - 1) * bop // n
        else:
            sent = bop
        if base == "collective-permute":
            m = re.search(r"source_target_pairs=(\{[^ ]*?\}\})", attrs)
            groups = m.group(1) if m else groups
        rows.append({"kind": base, "instruction": name,
                     "operand": shape_str(op_leaves), "result": shape_str(res_leaves),
                     "group_size": n, "num_groups": g, "groups": groups,
                     "bytes_per_device": sent})
    return rows


# ------------------------------------------------------------------- XLA driving

def compile_with_xla(text, ndev, shardy):
    """Compiles HLO text with XLA's SPMD partitioner; returns the executable."""
    import numpy as np
    import jax
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc

    module = xc.hlo.hlo_module_from_text(text)
    mlir = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    opts = xc.CompileOptions()
    opts.num_replicas = 1
    opts.num_partitions = ndev
    bo = opts.executable_build_options
    bo.use_spmd_partitioning = True
    bo.use_shardy_partitioner = shardy
    opts.device_assignment = xc.DeviceAssignment.create(np.arange(ndev).reshape(1, ndev))
    devs = jax.devices()[:ndev]
    backend = devs[0].client
    return backend.compile_and_load(mlir, executable_devices=xc.DeviceList(tuple(devs)),
                                    compile_options=opts)


def fmt_bytes(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return "%.2f %s" % (b / div, unit)
    return "%d B" % b


def print_rows(title, rows, out):
    out.write("  %s: %d collective%s, %s bytes per device\n" % (
        title, len(rows), "" if len(rows) == 1 else "s",
        "{:,}".format(sum(r["bytes_per_device"] for r in rows))))
    for r in rows:
        out.write("    %-18s %-22s %s -> %s  n=%d x%d  %s bytes (%s)\n      groups %s\n" % (
            r["kind"], r["instruction"], r["operand"], r["result"], r["group_size"],
            r["num_groups"], "{:,}".format(r["bytes_per_device"]),
            fmt_bytes(r["bytes_per_device"]), r["groups"]))


def markdown_rows(rows):
    lines = ["| # | kind | instruction | per-device operand -> result | n x groups | bytes/device |",
             "|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        lines.append("| %d | %s | `%s` | `%s` -> `%s` | %d x %d | %s |" % (
            i, r["kind"], r["instruction"], r["operand"], r["result"], r["group_size"],
            r["num_groups"], "{:,}".format(r["bytes_per_device"])))
    lines.append("| | **total** | | | | **%s** |" % "{:,}".format(
        sum(r["bytes_per_device"] for r in rows)))
    return "\n".join(lines)


def newest(pattern, seen):
    files = [f for f in glob.glob(pattern) if f not in seen]
    files.sort(key=os.path.getmtime)
    return files[-1] if files else None


def run_one(path, args, dump_dir, seen):
    text = open(path).read()
    ndev = args.devices or guess_devices(text)
    shardy = "xla.sdy." in text
    xla_text = quote_named_shardings(text)
    before = set(glob.glob(os.path.join(dump_dir, "*")))
    exe = compile_with_xla(xla_text, ndev, shardy)
    after = set(glob.glob(os.path.join(dump_dir, "*"))) - before
    part = [f for f in after if "after_spmd-partitioning" in f]
    part_text = open(sorted(part)[-1]).read() if part else ""
    final_text = exe.hlo_modules()[0].to_string()
    seen |= after
    return {"file": path, "devices": ndev, "partitioner": "shardy" if shardy else "gspmd",
            "after_spmd_partitioning": collectives(part_text, ndev),
            "after_optimizations": collectives(final_text, ndev),
            "partitioned_text": part_text, "final_text": final_text}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--devices", type=int, default=0, help="number of partitions")
    ap.add_argument("--dump-dir", help="keep XLA's dumps here (default: a temp dir)")
    ap.add_argument("--print", action="store_true", help="print the partitioned module")
    ap.add_argument("--json", action="store_true", help="JSON instead of text")
    ap.add_argument("--markdown", action="store_true", help="markdown tables")
    args = ap.parse_args()

    dump_dir = args.dump_dir or tempfile.mkdtemp(prefix="xla_partition_")
    os.makedirs(dump_dir, exist_ok=True)
    maxdev = max([args.devices or guess_devices(open(f).read()) for f in args.files] + [8])
    os.environ["XLA_FLAGS"] = ("%s --xla_force_host_platform_device_count=%d --xla_dump_to=%s "
                               "--xla_dump_hlo_pass_re=spmd-partitioning" % (
                                   os.environ.get("XLA_FLAGS", ""), maxdev, dump_dir))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import jax  # noqa: F401
    except ImportError:
        print("skipped: jax not installed (pip install jax) - XLA comparison not run")
        return 0

    results, rc, seen = [], 0, set()
    for f in args.files:
        try:
            results.append(run_one(f, args, dump_dir, seen))
        except Exception as e:  # XLA reports errors as JaxRuntimeError / ValueError
            sys.stderr.write("%s: XLA rejected it: %s\n" % (f, str(e).strip()))
            rc = 1
    out = sys.stdout
    if args.json:
        for r in results:
            del r["partitioned_text"], r["final_text"]
        json.dump(results, out, indent=2)
        out.write("\n")
        return rc
    for r in results:
        if args.markdown:
            out.write("### %s (%d devices, %s)\n\nAfter XLA's spmd-partitioning pass:\n\n%s\n\n"
                      "After all of XLA's optimizations:\n\n%s\n\n" % (
                          r["file"], r["devices"], r["partitioner"],
                          markdown_rows(r["after_spmd_partitioning"]),
                          markdown_rows(r["after_optimizations"])))
            continue
        out.write("%s (%d devices, %s)\n" % (r["file"], r["devices"], r["partitioner"]))
        print_rows("after spmd-partitioning", r["after_spmd_partitioning"], out)
        print_rows("after optimizations", r["after_optimizations"], out)
        if args.print:
            out.write(r["partitioned_text"])
        out.write("\n")
    if not args.dump_dir:
        out.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
