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
        collective-permute  B (operand bytes); 0 when every pair is {d,d}
     n is the size of one replica group, from every form XLA prints:
     `{{0,1},{2,3}}`, `{}` (all devices), the iota form `[G,S]<=[dims]T(perm)`
     and the mesh form `mesh['axis_0'=4,'axis_1'=2], device_ids=([2,4]T(1,0))
     {'axis_1'}` (groups run along the named axes or sub-axes `'a':(pre)size`
     of a mesh whose device order is device_ids; the groups are expanded to
     device lists, so n and the number of groups are exact);
  4. counts a collective inside a while body once per loop trip where the trip
     count is known (a `known_trip_count` backend config, or the induction
     variable lax.scan and fori_loop write: condition `i < N`, body `i + 1`,
     i starting at a constant) and says so ("4 loop trips (induction variable
     0 from 0 to 4)"); with an unknown count the collective is counted once and
     the row says that too.  Collectives in conditional branches are counted
     once, as if the branch were taken.

N is --devices, else num_partitions=N in the header, else the product of the
first named mesh's axis sizes, else the device count of the first positional
`devices=[...]` sharding.

Exit status: 0 ok, 1 when XLA rejected a file, 2 usage.  Prints a message and
exits 0 when jax is not installed.

--json prints one object per file (a file XLA rejected: file and error): file,
devices, partitioner, and the rows of
after_spmd_partitioning / after_optimizations, each with kind, instruction,
computation, operand, result (per-device shapes), group_size, num_groups,
groups (XLA's text), bytes_per_trip, multiplier (times the collective runs per
program run), loop (how that was found, empty outside loops) and
bytes_per_device (= bytes_per_trip * multiplier).
"""
import argparse
import atexit
import glob
import itertools
import json
import os
import re
import shutil
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


INST_RE = re.compile(r"^\s*(ROOT\s+)?%?([A-Za-z_][\w.-]*)\s*=\s*(.*?)\s+([a-z][a-z0-9-]*)\((.*)$")
COMP_RE = re.compile(r"^(ENTRY\s+)?%?([A-Za-z_][\w.-]*)\s*(?:\(.*\)\s*->\s*.*)?\{\s*$")


def split_instruction(line):
    """(name, shape_text, opcode, operand_names, attr_text, is_root, operand_text)
    or None."""
    m = INST_RE.match(line)
    if not m:
        return None
    root, name, shape, opcode, rest = m.groups()
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
    return name, shape, opcode, operands, rest[k + 1:], bool(root), rest[:k]


def parse_module(text):
    """Computations of an HLO module text: (entry name, {name: [instruction dicts]}).

    Each instruction: name, shape (text), opcode, operands (names), attrs (the
    text after the operand list), root (bool).  Instruction names are unique
    within a module, as XLA prints them."""
    comps, entry, cur = {}, None, None
    for line in text.splitlines():
        if cur is None:
            m = COMP_RE.match(line)
            if m and not line.startswith(" "):
                cur = m.group(2)
                comps[cur] = []
                if m.group(1):
                    entry = cur
            continue
        if line.startswith("}"):
            cur = None
            continue
        p = split_instruction(line)
        if p:
            name, shape, opcode, operands, attrs, root, args = p
            comps[cur].append({"name": name, "shape": shape, "opcode": opcode,
                               "operands": operands, "attrs": attrs, "root": root,
                               "args": args})
    if entry is None and comps:
        entry = list(comps)[-1]
    return entry, comps


# ------------------------------------------------------------- replica groups

def iota_list(reshape_dims, perm):
    """Device ids of XLA's iota tile assignment [..]<=[reshape_dims]T(perm),
    flattened row-major: iota(prod(reshape_dims)) reshaped to reshape_dims,
    transposed by perm."""
    perm = perm or list(range(len(reshape_dims)))
    tdims = [reshape_dims[p] for p in perm]
    strides = [1] * len(reshape_dims)
    for k in range(len(reshape_dims) - 2, -1, -1):
        strides[k] = strides[k + 1] * reshape_dims[k + 1]
    out = []
    for idx in itertools.product(*[range(t) for t in tdims]):
        out.append(sum(idx[k] * strides[perm[k]] for k in range(len(perm))))
    return out


def ints(s):
    return [int(x) for x in re.findall(r"-?\d+", s or "")]


def mesh_groups(axes, device_ids, refs):
    """Replica groups of XLA's mesh form `mesh['a'=2,'b'=4], device_ids=(..) {refs}`.

    axes: [(name, size)] major to minor; device_ids: flat device list in mesh
    order (None: iota); refs: [(name, pre, size)] (pre None for a whole axis),
    Shardy's sub-axis `'b':(pre)size` being the factor of size `size` of axis b
    after a major part of size `pre`.  Devices that agree on every mesh
    coordinate outside the refs form one group, ordered by the refs in the order
    given.  Returns a list of groups (lists of device ids)."""
    sizes = dict(axes)
    total = 1
    for _, s in axes:
        total *= s
    devs = device_ids if device_ids is not None else list(range(total))
    # Split every axis into factors at the boundaries its sub-axes name.
    bounds = {a: {1, s} for a, s in axes}
    for a, pre, size in refs:
        if pre is not None:
            bounds[a] |= {pre, pre * size}
    fine = []           # (axis, lo, hi): factor covering major-products [lo, hi)
    for a, s in axes:
        b = sorted(bounds[a])
        for lo, hi in zip(b, b[1:]):
            fine.append((a, lo, hi))
    fsizes = [hi // lo for _, lo, hi in fine]
    group_dims = []
    for a, pre, size in refs:
        lo, hi = (1, sizes[a]) if pre is None else (pre, pre * size)
        group_dims += [k for k, (fa, flo, fhi) in enumerate(fine) if fa == a and flo >= lo and fhi <= hi]
    other = [k for k in range(len(fine)) if k not in group_dims]
    groups = {}
    for flat, idx in enumerate(itertools.product(*[range(s) for s in fsizes])):
        key = tuple(idx[k] for k in other)
        pos = 0
        for k in group_dims:
            pos = pos * fsizes[k] + idx[k]
        groups.setdefault(key, {})[pos] = devs[flat]
    return [[g[p] for p in sorted(g)] for _, g in sorted(groups.items())]


MESH_RG_RE = re.compile(r"replica_groups=mesh\[([^\]]*)\](?:,\s*device_ids=\(([^)]*(?:\)[^ {]*)?)\))?\s*\{([^}]*)\}")


def replica_groups(attrs, ndev):
    """(groups as lists of device ids, the attribute text) for every form XLA
    prints: `{}` (one group of all devices), `{{0,1},{2,3}}`, the iota form
    `[G,S]<=[dims]T(perm)`, and the mesh form `mesh['a'=2,'b'=4]
    {'b'}` with optional `, device_ids=([dims]T(perm))` or an explicit id list.
    No replica_groups attribute: one group of all devices."""
    m = re.search(r"replica_groups=(\{\{.*?\}\}|\{\})", attrs)
    if m:
        if m.group(1) == "{}":
            return [list(range(ndev))], "{}"
        return [ints(g) for g in re.findall(r"\{([\d,\s]*)\}", m.group(1)[1:-1])], m.group(1)
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=\[([\d,]*)\](?:T\(([\d,]*)\))?", attrs)
    if m:
        g, s = int(m.group(1)), int(m.group(2))
        flat = iota_list(ints(m.group(3)), ints(m.group(4)) if m.group(4) else None)
        return [flat[i * s:(i + 1) * s] for i in range(g)], m.group(0)[len("replica_groups="):]
    m = MESH_RG_RE.search(attrs)
    if m:
        axes = [(a, int(s)) for a, s in re.findall(r"'([^']*)'\s*=\s*(\d+)", m.group(1))]
        total = 1
        for _, s in axes:
            total *= s
        ids = None
        if m.group(2):
            it = re.match(r"\s*\[([\d,]*)\](?:T\(([\d,]*)\))?\s*$", m.group(2))
            ids = iota_list(ints(it.group(1)), ints(it.group(2)) if it.group(2) else None) \
                if it else ints(m.group(2))
            if len(ids) != total:
                raise ValueError("device_ids of %s do not fill the mesh" % m.group(0))
        refs = []
        for r in re.finditer(r"'([^']*)'(?::\((\d+)\)(\d+))?", m.group(3)):
            refs.append((r.group(1), int(r.group(2)) if r.group(2) else None,
                         int(r.group(3)) if r.group(3) else None))
        return mesh_groups(axes, ids, refs), m.group(0)[len("replica_groups="):]
    return [list(range(ndev))], "(none: all devices)"


# ------------------------------------------------------------------ loop trips

def trip_count(while_inst, comps, by_name):
    """(trips, how) for a while instruction, or (None, reason).

    A `known_trip_count` backend config is taken as is; otherwise the pattern
    lax.scan / fori_loop write: the condition is `compare(gte(param, i),
    constant(N)), direction=LT`, the body's root tuple sets element i to
    `add(gte(param, i), constant(1))`, and the while's operand is a tuple whose
    element i is constant(S): N - S trips."""
    m = re.search(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)', while_inst["attrs"])
    if m:
        return int(m.group(1)), "known_trip_count"
    cm = re.search(r"condition=%?([\w.-]+)", while_inst["attrs"])
    bm = re.search(r"body=%?([\w.-]+)", while_inst["attrs"])
    if not cm or not bm or cm.group(1) not in comps or bm.group(1) not in comps:
        return None, "no condition/body"
    cond, body = comps[cm.group(1)], comps[bm.group(1)]

    def gte_index(inst, comp):
        if inst and inst["opcode"] == "get-tuple-element":
            src = by_name.get(inst["operands"][0])
            if src and src["opcode"] == "parameter" and src in comp:
                return int(re.search(r"index=(\d+)", inst["attrs"]).group(1))
        return None

    root = next((i for i in cond if i["root"]), None)
    if not root or root["opcode"] != "compare" or len(root["operands"]) != 2:
        return None, "condition is not a compare"
    a, b = (by_name.get(o) for o in root["operands"])
    direction = re.search(r"direction=(\w+)", root["attrs"])
    direction = direction.group(1) if direction else ""
    if direction == "GT":
        a, b, direction = b, a, "LT"
    idx, limit = gte_index(a, cond), const_value(b)
    if direction != "LT" or idx is None or limit is None:
        return None, "condition is not `i < N`"
    broot = next((i for i in body if i["root"]), None)
    if not broot or broot["opcode"] != "tuple" or idx >= len(broot["operands"]):
        return None, "body root is not a tuple"
    inc = by_name.get(broot["operands"][idx])
    if not inc or inc["opcode"] != "add":
        return None, "induction variable not incremented"
    x, y = (by_name.get(o) for o in inc["operands"])
    if const_value(x) == 1:
        x, y = y, x
    if gte_index(x, body) != idx or const_value(y) != 1:
        return None, "induction variable not incremented by 1"
    init = by_name.get(while_inst["operands"][0])
    while init and init["opcode"] == "copy":
        init = by_name.get(init["operands"][0])
    if not init or init["opcode"] != "tuple":
        return None, "while operand is not a tuple"
    start = const_value(by_name.get(init["operands"][idx]))
    if start is None:
        return None, "induction variable does not start at a constant"
    return max(0, limit - start), "induction variable %d from %d to %d" % (idx, start, limit)


def const_value(inst):
    """Integer value of a scalar constant instruction, else None."""
    if not inst or inst["opcode"] != "constant" or "[]" not in inst["shape"]:
        return None
    m = re.match(r"\s*(-?\d+)\s*$", inst["args"])
    return int(m.group(1)) if m else None


CALLED_RE = re.compile(r"\b(to_apply|calls|body|condition|true_computation|false_computation)=%?([\w.-]+)")


def multipliers(entry, comps, by_name):
    """{computation: (times run per program run, note)}: 1 for ENTRY; a while
    body runs trips times per run of its caller (1 with a note when the count is
    unknown); called computations and conditional branches once per caller run
    (a branch note: it runs only when taken)."""
    sites = {}          # callee -> [(caller, factor, note)]
    for cname, insts in comps.items():
        for inst in insts:
            called = CALLED_RE.findall(inst["attrs"])
            bc = re.search(r"branch_computations=\{([^}]*)\}", inst["attrs"])
            if bc:
                called += [("branch", c.strip().lstrip("%")) for c in bc.group(1).split(",")]
            for kind, callee in called:
                if callee not in comps:
                    continue
                factor, note = 1, ""
                if inst["opcode"] == "while" and kind == "body":
                    trips, how = trip_count(inst, comps, by_name)
                    if trips is None:
                        note = "in a loop of unknown trip count (%s): counted once" % how
                    else:
                        factor, note = trips, "%d loop trips (%s)" % (trips, how)
                elif kind in ("branch", "true_computation", "false_computation"):
                    note = "in a conditional branch (%s): counted as if taken" % inst["name"]
                sites.setdefault(callee, []).append((cname, factor, note))
    memo = {entry: (1, "")}

    def mult(c, stack=()):
        if c in memo:
            return memo[c]
        if c in stack:
            return (1, "recursive")
        total, notes = 0, []
        for caller, factor, note in sites.get(c, []):
            m, n = mult(caller, stack + (c,))
            total += m * factor
            notes += [x for x in (n, note) if x]
        memo[c] = (total, "; ".join(dict.fromkeys(notes)))
        return memo[c]

    return {c: mult(c) for c in comps}


def collectives(text, ndev):
    """Collectives of an HLO module text, in program order (computations in
    the order printed), with bytes per device for all the times they run."""
    entry, comps = parse_module(text)
    by_name = {}
    for insts in comps.values():
        for inst in insts:
            by_name[inst["name"]] = inst
    mults = multipliers(entry, comps, by_name)
    rows = []
    for cname, insts in comps.items():
        mult, note = mults.get(cname, (0, ""))
        for inst in insts:
            opcode = inst["opcode"]
            base = opcode[:-len("-start")] if opcode.endswith("-start") else opcode
            if base not in COLLECTIVES:
                continue
            op_leaves = []
            for o in inst["operands"]:
                op_leaves += parse_shape(by_name[o]["shape"]) if o in by_name else []
            res_leaves = parse_shape(inst["shape"])
            if opcode.endswith("-start") and len(res_leaves) > len(op_leaves):
                res_leaves = res_leaves[len(op_leaves):]   # async: (operands, results)
            bop, bres = shape_bytes(op_leaves), shape_bytes(res_leaves)
            if base == "collective-permute":
                m = re.search(r"source_target_pairs=\{(.*?)\}\}", inst["attrs"])
                pairs = re.findall(r"\{(\d+),(\d+)\}", m.group(0)) if m else []
                moving = [p for p in pairs if p[0] != p[1]]
                groups_text = m.group(0)[len("source_target_pairs="):] if m else "(none)"
                n, g = len(moving), 1
                sent = bop if moving else 0
            else:
                groups, groups_text = replica_groups(inst["attrs"], ndev)
                n, g = len(groups[0]) if groups else 1, len(groups)
                if base == "all-reduce":
                    sent = 2 * (n - 1) * bop // n
                elif base == "all-gather":
                    sent = (n - 1) * bres // n
                elif base in ("reduce-scatter", "all-to-all"):
                    sent = (n - 1) * bop // n
                else:
                    sent = bop
            rows.append({"kind": base, "instruction": inst["name"], "computation": cname,
                         "operand": shape_str(op_leaves), "result": shape_str(res_leaves),
                         "group_size": n, "num_groups": g, "groups": groups_text,
                         "bytes_per_trip": sent, "multiplier": mult, "loop": note,
                         "bytes_per_device": sent * mult})
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
    # The module header's propagation permissions (JAX writes them when an
    # argument or result sharding is left to XLA) live in the compile options;
    # the text-to-StableHLO conversion drops them, so pass them on.
    for key in ("allow_spmd_sharding_propagation_to_output",
                "allow_spmd_sharding_propagation_to_parameters"):
        m = re.search(r"^HloModule[^\n]*\b%s=\{([a-z,]*)\}" % key, text, re.M)
        if m:
            setattr(bo, key, [v == "true" for v in m.group(1).split(",")])
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
        out.write("    %-18s %-22s %s -> %s  n=%d x%d  %s bytes (%s)%s\n      groups %s\n" % (
            r["kind"], r["instruction"], r["operand"], r["result"], r["group_size"],
            r["num_groups"], "{:,}".format(r["bytes_per_device"]),
            fmt_bytes(r["bytes_per_device"]),
            "  [%s x %s: %s]" % ("{:,}".format(r["bytes_per_trip"]), r["multiplier"], r["loop"])
            if r["loop"] else "", r["groups"]))


def markdown_rows(rows):
    lines = ["| # | kind | instruction | per-device operand -> result | n x groups | bytes/device |",
             "|---|---|---|---|---|---|"]
    for i, r in enumerate(rows):
        lines.append("| %d | %s | `%s` | `%s` -> `%s` | %d x %d | %s%s |" % (
            i, r["kind"], r["instruction"], r["operand"], r["result"], r["group_size"],
            r["num_groups"], "{:,}".format(r["bytes_per_device"]),
            " (%s × %s: %s)" % ("{:,}".format(r["bytes_per_trip"]), r["multiplier"], r["loop"])
            if r["loop"] else ""))
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
    if not args.dump_dir:
        atexit.register(shutil.rmtree, dump_dir, True)  # XLA's dumps: read, then not kept
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
            if args.json:
                results.append({"file": f, "error": str(e).strip().splitlines()[0]})
            rc = 1
    out = sys.stdout
    if args.json:
        for r in results:
            r.pop("partitioned_text", None)
            r.pop("final_text", None)
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
