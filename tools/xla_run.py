#!/usr/bin/env python3
"""xla_run.py - run spmdc's per-device program on N XLA CPU devices and
compare it with XLA running the unpartitioned input: a numerical check that
does not depend on spmdc's own simulator.

    python3 tools/xla_run.py INPUT.hlo PROGRAM.hlo [--mesh x=2,y=4] [--seed S]
                             [--root-sharding '{devices=[2,1]<=[2]}'] [--rtol R]

INPUT.hlo is what was given to `spmdc compile`, PROGRAM.hlo what it emitted.
Pass the same named --mesh as to spmdc: the input's named shardings are then
rebound to it by axis name, as spmdc does (`--mesh model=4` on a file written
for mesh[model=8]).  The script
  1. draws random values for the entry parameters (seeded, uniform in [-1, 1),
     integers in [-8, 8), pred 0/1);
  2. runs INPUT on one CPU device with its shardings removed: the reference;
  3. cuts each parameter into per-device pieces by the parameter's sharding in
     INPUT (XLA's own HloSharding: positional or named; uneven shards are
     padded with garbage, 1e4 + index, which a correct program never lets
     leak into a result).  A parameter INPUT leaves unannotated (a JAX export
     whose argument shardings come from propagation,
     allow_spmd_sharding_propagation_to_parameters) is cut by the sharding
     spmdc gave it: `spmdc propagate INPUT [--mesh]` is run for it (the
     binary from --spmdc, $SPMDC, the repository's build/spmdc or PATH), and
     so is an unannotated root without --root-sharding.  The pieces' shapes
     are checked against PROGRAM's parameters before anything runs (XLA
     crashes on buffers of another shape): a difference is an error naming
     the parameter;
  4. runs PROGRAM on N CPU devices as N replicas (partition-id() becomes
     replica-id(), channel ids are dropped from all-to-all and
     collective-permute so their ids are replica ids; all-reduce, all-gather
     and reduce-scatter with use_global_device_ids keep theirs);
  5. compares every device's result with its piece of the reference under the
     root's sharding (INPUT's, or --root-sharding when the input leaves the
     root unannotated), ignoring padding.  A tuple-shaped root (several
     results; any printing style, Shardy exports included) is compared leaf by
     leaf under the elements of its tuple sharding.

Exit status: 0 every device matches, 1 a mismatch or XLA rejected a module,
2 usage.  Prints "skipped: jax not installed" and exits 0 without jax.
Meant for the small examples (mlp_small.hlo, mlp_2d_small.hlo, ...):
XLA really computes.
"""
import argparse
import itertools
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xla_partition import guess_devices, matching_brace, quote_named_shardings  # noqa: E402

NP_TYPES = {"pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
            "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
            "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16"}
DEFAULT_RTOL = {"bf16": 2e-2, "f16": 5e-3, "f32": 1e-5, "f64": 1e-12, "c64": 1e-5, "c128": 1e-12}


def as_wide(a):
    """a as float64, or complex128 when complex (float64 would drop the
    imaginary part, and a result differing only there would pass)."""
    import numpy as np
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def strip_attr(text, key):
    """Removes every `, key={...}` (balanced braces) from text."""
    out, i = [], 0
    pat = ", " + key + "={"
    while True:
        j = text.find(pat, i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        i = matching_brace(text, j + len(pat) - 1)


def entry_lines(text):
    """Instruction lines of the ENTRY computation of an XLA-printed module."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("ENTRY"):
            inside = True
            continue
        if inside and line.startswith("}"):
            break
        if inside and "=" in line:
            lines.append(line)
    return lines


INST = re.compile(r"^\s*(ROOT\s+)?%?([\w.-]+)\s*=\s*(.*)$")
SHAPE = re.compile(r"^([a-z][a-z0-9]*)\[([\d,]*)\]")
LEAF = re.compile(r"([a-z][a-z0-9]*)\[([\d,]*)\]")


def split_instruction(line):
    """(is_root, shape_text, opcode, rest after the opcode's '(') or None; the
    shape may be a tuple `(f32[2]{0}, s32[])` (balanced parentheses)."""
    m = INST.match(line)
    if not m:
        return None
    is_root, _, tail = m.groups()
    if tail.startswith("("):
        depth = 0
        for k, c in enumerate(tail):
            depth += c == "("
            depth -= c == ")"
            if depth == 0:
                break
        shape, tail = tail[:k + 1], tail[k + 1:]
    else:
        shape, _, tail = tail.partition(" ")
    m = re.match(r"\s*([a-z][a-z0-9-]*)\((.*)$", tail)
    if not m:
        return None
    return bool(is_root), shape, m.group(1), m.group(2)


def parse_shape(s):
    m = SHAPE.match(s)
    if not m:
        raise ValueError("unsupported (tuple or dynamic) shape %s" % s)
    return m.group(1), tuple(int(d) for d in m.group(2).split(",") if d)


def parse_leaves(s):
    """[(dtype, dims)] of an array shape or a flat tuple of arrays."""
    if not s.startswith("("):
        return [parse_shape(s)]
    if "(" in s[1:]:
        raise ValueError("nested tuple shape %s is not supported by xla_run.py" % s)
    return [(dt, tuple(int(d) for d in dims.split(",") if d)) for dt, dims in LEAF.findall(s)]


def split_tuple_sharding(text, n):
    """Per-leaf shardings of a sharding text: `{{replicated}, {devices=..}}`
    gives its elements, an array sharding applies to all n leaves, None gives
    None for each."""
    if not text:
        return [None] * n
    inner = text[1:-1].strip()
    if not inner.startswith("{"):
        return [text] * n
    out, i = [], 0
    while i < len(inner):
        if inner[i] == "{":
            j = matching_brace(inner, i)
            out.append(inner[i:j])
            i = j
        else:
            i += 1
    if len(out) != n:
        raise ValueError("tuple sharding %s has %d elements for %d results" % (text, len(out), n))
    return out


def sharding_of(line):
    k = line.find("sharding={")
    if k < 0:
        return None
    start = k + len("sharding=")
    return line[start:matching_brace(line, start)]


def signature(text):
    """(params: {number: (dtype, dims, sharding_text)},
        root: [(dtype, dims, sharding_text)] one per result leaf, or None)."""
    params, root = {}, None
    for line in entry_lines(text):
        p = split_instruction(line)
        if not p:
            continue
        is_root, shape, opcode, rest = p
        if opcode == "parameter":
            num = int(re.match(r"(\d+)\)", rest).group(1))
            params[num] = parse_shape(shape) + (sharding_of(line),)
        if is_root:
            leaves = parse_leaves(shape)
            shs = split_tuple_sharding(sharding_of(line), len(leaves))
            root = [leaf + (sh,) for leaf, sh in zip(leaves, shs)]
    return params, root


def find_spmdc(explicit):
    """The spmdc binary: --spmdc, $SPMDC, the repository's build/spmdc, PATH; None if none."""
    if explicit:
        return explicit
    if os.environ.get("SPMDC"):
        return os.environ["SPMDC"]
    built = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "spmdc")
    if os.access(built, os.X_OK):
        return built
    return shutil.which("spmdc")


def propagated_signature(spmdc, path, mesh, xc):
    """signature() of `spmdc propagate PATH [--mesh MESH]`: the shardings spmdc
    chose for every parameter and the root; raises RuntimeError if it fails."""
    cmd = [spmdc, "propagate", path] + (["--mesh", mesh] if mesh else [])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise RuntimeError("cannot run %s: %s" % (spmdc, e.strerror))
    if r.returncode != 0:
        raise RuntimeError("`%s` failed (exit %d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()[:1000]))
    return signature(xc.hlo.hlo_module_from_text(r.stdout).to_string())


def device_slices(sharding_text, dims, ndev):
    """Per device: tuple of (start, stop, padded_size) per dim."""
    from jax._src.lib import xla_client as xc
    full = [tuple((0, d, d) for d in dims)] * ndev
    if not sharding_text:
        return full
    hs = xc.HloSharding.from_string(sharding_text)
    if hasattr(hs, "v3_to_v2_sharding"):
        hs = hs.v3_to_v2_sharding()      # named (mesh) form -> tile assignment
    if hs.is_replicated() or not hs.is_tiled():
        if hs.is_tiled() or hs.is_replicated():
            return full
        raise ValueError("sharding %s is not supported by xla_run.py" % sharding_text)
    tdims = list(hs.tile_assignment_dimensions())
    devs = list(hs.tile_assignment_devices())
    rank = len(dims)
    if len(devs) != ndev:
        raise ValueError("sharding %s uses %d devices, not %d" % (sharding_text, len(devs), ndev))
    out = [None] * ndev
    for flat, idx in enumerate(itertools.product(*[range(t) for t in tdims])):
        sl = []
        for d in range(rank):
            c = -(-dims[d] // tdims[d])
            sl.append((min(idx[d] * c, dims[d]), min((idx[d] + 1) * c, dims[d]), c))
        out[devs[flat]] = tuple(sl)
    return out


def piece(full, sl, fill):
    """The padded local piece of full described by sl."""
    import numpy as np
    shape = tuple(c for _, _, c in sl)
    local = np.empty(shape, dtype=full.dtype)
    if fill is None:
        local[...] = 0
    else:
        local[...] = fill(shape, full.dtype)
    src = tuple(slice(a, b) for a, b, _ in sl)
    dst = tuple(slice(0, b - a) for a, b, _ in sl)
    local[dst] = full[src]
    return local


def random_array(rng, dtype, dims):
    import numpy as np
    import ml_dtypes  # noqa: F401 (bfloat16 for numpy)
    npt = np.dtype(NP_TYPES[dtype]) if dtype != "bf16" else np.dtype(ml_dtypes.bfloat16)
    if dtype == "pred":
        return rng.integers(0, 2, size=dims).astype(bool)
    if dtype[0] in "su":
        lo = 0 if dtype[0] == "u" else -8
        return rng.integers(lo, 8, size=dims).astype(npt)
    return rng.uniform(-1, 1, size=dims).astype(npt)


def compile_text(text, nrep):
    import numpy as np
    import jax
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc
    # the CPU LAPACK kernels (lapack_*_ffi custom-calls, e.g. a cholesky)
    # are registered by jax's linalg module and need their handlers set up
    # once; without it XLA crashes running such a call
    try:
        from jax._src.lax import linalg as jax_linalg
        jax_linalg.initialize_lapack()
    except (ImportError, AttributeError):
        pass
    module = xc.hlo.hlo_module_from_text(text)
    mlir = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    opts = xc.CompileOptions()
    opts.num_replicas = nrep
    opts.num_partitions = 1
    opts.executable_build_options.use_spmd_partitioning = False
    opts.device_assignment = xc.DeviceAssignment.create(np.arange(nrep).reshape(nrep, 1))
    devs = jax.devices()[:nrep]
    return devs, devs[0].client.compile_and_load(
        mlir, executable_devices=xc.DeviceList(tuple(devs)), compile_options=opts)


def run(exe, devs, per_device_args):
    """per_device_args[arg][device] = numpy array; returns [result leaf][device] -> numpy
    array (a tuple-shaped result is one leaf per element)."""
    import numpy as np
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    n = len(devs)
    mesh = Mesh(np.array(devs), ("d",))
    arrays = []
    for per_dev in per_device_args:
        local = per_dev[0].shape
        bufs = [jax.device_put(a, d) for a, d in zip(per_dev, devs)]
        if len(local) == 0:
            sh = NamedSharding(mesh, P())
            gshape = ()
        else:
            sh = NamedSharding(mesh, P("d"))
            gshape = (local[0] * n,) + tuple(local[1:])
        arrays.append(jax.make_array_from_single_device_arrays(gshape, sh, bufs))
    res = exe.execute_sharded(arrays)
    outs = res.disassemble_into_single_device_arrays()
    return [[np.asarray(x) for x in leaf] for leaf in outs]


def reference_text(text):
    t = strip_attr(quote_named_shardings(text), "sharding")
    t = re.sub(r", num_partitions=\d+", "", t)
    # Annotation custom-calls are identities.
    t = re.sub(r"custom-call\((%?[\w.-]+)\), custom_call_target=\"(?:Sharding|xla\.sdy\.FuncResultSharding)\"[^\n]*",
               r"copy(\1)", t)
    return t


def rebind_mesh(text, spec):
    """Replaces every mesh[...] of the named shardings by the axes of a named --mesh spec."""
    axes = [a.split("=") for a in spec.split(",")]
    if not all(len(a) == 2 and a[0] and a[1].isdigit() for a in axes):
        raise SystemExit("xla_run.py: --mesh must name its axes, e.g. model=4 or data=2,model=4")
    return re.sub(r"\bmesh\[[^\]]*\]", "mesh[%s]" % ",".join("%s=%s" % (a, n) for a, n in axes), text)


def replica_text(text, rewrite_sdy=True):
    """The per-device program rewritten to run as replicas (see the top)."""
    if rewrite_sdy and "xla.sdy." in text:
        # XLA aborts (CHECK failure in attribute_exporter.cc) compiling an
        # xla.sdy.FuncResultSharding custom-call without its frontend attributes.
        print("note: the program still contains xla.sdy.* custom-calls; run as copies")
        text = re.sub(r"custom-call\((%?[\w.-]+)\), custom_call_target=\"xla\.sdy\.[\w]+\"[^\n]*",
                      r"copy(\1)", text)
    t = text.replace("partition-id()", "replica-id()")
    t = re.sub(r", num_partitions=\d+", "", t)
    lines = []
    for line in t.splitlines():
        if re.search(r"\b(all-to-all|collective-permute)\(", line):
            line = re.sub(r", channel_id=\d+", "", line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("program")
    ap.add_argument("--mesh", help="named mesh the program was compiled for (data=2,model=4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--root-sharding", help="the result's sharding if INPUT does not say")
    ap.add_argument("--rtol", type=float, default=0.0, help="default: by element type")
    ap.add_argument("--spmdc", help="spmdc binary for the shardings of unannotated parameters "
                    "(default: $SPMDC, build/spmdc, PATH)")
    args = ap.parse_args()

    try:
        in_text = open(args.input).read()
        prog_text = open(args.program).read()
    except OSError as e:
        print("xla_run.py: cannot read %s: %s" % (e.filename, e.strerror))
        return 2
    if args.mesh:
        in_text = rebind_mesh(in_text, args.mesh)
    ndev = guess_devices(in_text) if args.mesh else (guess_devices(prog_text) or guess_devices(in_text))
    os.environ["XLA_FLAGS"] = "%s --xla_force_host_platform_device_count=%d" % (
        os.environ.get("XLA_FLAGS", ""), max(ndev, 1))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import numpy as np
        import jax  # noqa: F401
        from jax._src.lib import xla_client as xc
    except ImportError:
        print("skipped: jax not installed")
        return 0

    ref_text = reference_text(in_text)
    xla_in = xc.hlo.hlo_module_from_text(quote_named_shardings(in_text)).to_string()
    params, root = signature(xla_in)
    if root is None:
        print("xla_run.py: cannot find the ENTRY root of %s" % args.input)
        return 1
    if args.root_sharding:
        for k, sh in enumerate(split_tuple_sharding(args.root_sharding, len(root))):
            root[k] = root[k][:2] + (sh,)
    # Parameters (and a root) INPUT leaves unannotated: spmdc's propagated shardings.
    open_params = [k for k in sorted(params) if params[k][2] is None]
    open_root = not args.root_sharding and all(sh is None for _, _, sh in root)
    if open_params or open_root:
        spmdc = find_spmdc(args.spmdc)
        if spmdc:
            try:
                pparams, proot = propagated_signature(spmdc, args.input, args.mesh, xc)
            except RuntimeError as e:
                print("xla_run.py: cannot take the propagated shardings: %s" % e)
                return 1
            for k in open_params:
                if k in pparams:
                    params[k] = params[k][:2] + (pparams[k][2],)
            if open_root and proot and len(proot) == len(root):
                root = [r[:2] + (p[2],) for r, p in zip(root, proot)]
        elif open_params:
            print("note: no spmdc binary (--spmdc): unannotated parameters are cut as replicated")
    try:
        pparams_local, _ = signature(xc.hlo.hlo_module_from_text(prog_text).to_string())
    except Exception as e:
        print("xla_run.py: XLA cannot parse the program %s: %s" % (args.program, str(e).strip()[:2000]))
        return 1
    rng = np.random.default_rng(args.seed)
    full_args = [random_array(rng, *params[k][:2]) for k in sorted(params)]

    try:
        rdevs, rexe = compile_text(ref_text, 1)
        refs = [leaf[0] for leaf in run(rexe, rdevs, [[a] for a in full_args])]
    except Exception as e:
        print("xla_run.py: XLA cannot run the input %s: %s" % (args.input, str(e).strip()[:2000]))
        return 1

    garbage = lambda shape, dt: (1e4 + np.arange(int(np.prod(shape)))).reshape(shape).astype(dt)
    per_dev = []
    if sorted(pparams_local) != sorted(params):
        print("xla_run.py: the program %s has parameters %s, the input %s" % (
            args.program, sorted(pparams_local), sorted(params)))
        return 1
    for k, a in zip(sorted(params), full_args):
        sl = device_slices(params[k][2], params[k][1], ndev)
        fill = garbage if params[k][0] not in ("pred",) and params[k][0][0] == "f" else None
        per_dev.append([piece(a, s, fill) for s in sl])
        # XLA does not check the buffers' shapes against the program's
        # parameters before it runs (it crashes): check them here.
        want = pparams_local[k][1]
        for d, buf in enumerate(per_dev[-1]):
            if tuple(buf.shape) != tuple(want):
                print("xla_run.py: parameter %d is %s[%s] per device in the program %s, but cutting the input's "
                      "%s[%s] by its sharding %s gives %s on device %d; give the input the parameter's "
                      "sharding (or pass --spmdc so that spmdc's propagated one is used)" % (
                          k, pparams_local[k][0], ",".join(map(str, want)), args.program, params[k][0],
                          ",".join(map(str, params[k][1])), params[k][2] or "(none: replicated)",
                          "%s[%s]" % (params[k][0], ",".join(map(str, buf.shape))), d))
                return 1
    try:
        pdevs, pexe = compile_text(replica_text(prog_text), ndev)
        outs = run(pexe, pdevs, per_dev)
    except Exception as e:
        print("xla_run.py: XLA cannot run the program %s: %s" % (args.program, str(e).strip()[:2000]))
        return 1
    if len(outs) != len(root):
        print("xla_run.py: the program has %d results, the input %d" % (len(outs), len(root)))
        return 1

    bad = 0
    for leaf, (ref, leaf_outs, (dtype, dims, root_sh)) in enumerate(zip(refs, outs, root)):
        rtol = args.rtol or DEFAULT_RTOL.get(dtype, 0.0)
        scale = float(np.max(np.abs(as_wide(ref)))) if ref.size else 0.0
        rsl = device_slices(root_sh, dims, ndev)
        what = "result %d: " % leaf if len(root) > 1 else ""
        for d, (out, sl) in enumerate(zip(leaf_outs, rsl)):
            want = as_wide(ref[tuple(slice(a, b) for a, b, _ in sl)])
            shape = tuple(c for _, _, c in sl)
            if out.shape != shape:
                print("%sdevice %d: result shape %s, expected %s (root sharding %s)" % (
                    what, d, list(out.shape), list(shape), root_sh))
                bad += 1
                continue
            got = as_wide(out[tuple(slice(0, b - a) for a, b, _ in sl)])
            err = float(np.max(np.abs(got - want))) if got.size else 0.0
            ok = err <= rtol * max(scale, 1.0)
            bad += not ok
            print("%sdevice %d: %s max |error| %.3g%s" % (
                what, d, "ok  " if ok else "FAIL", err,
                "" if ok else " (allowed %.3g)" % (rtol * max(scale, 1.0))))
    total = ndev * len(root)
    print("%s: %d of %d device results match XLA's unpartitioned run (seed %d)" % (
        "ok" if not bad else "FAIL", total - bad, total, args.seed))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
