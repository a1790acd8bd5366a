#!/usr/bin/env python3
"""gen_partial_sums.py - pending partial sums passed through every op kind,
checked numerically by `spmdc verify` (docs/partitioning.md: a pending sum
passes an op only where the op is linear in it in the same element type).

    python3 tools/gen_partial_sums.py SPMDC [--types s8,u8,...] [--meshes 2,4,3]
                                     [--keep DIR] [--only SUBSTRING]

For every element type, every source of a pending value over the split axis
x of mesh[x=4] (a reduce over a split dim with each reducer kind the type
has, a dot over a split contraction, a value annotated `unreduced={x}`, a
contraction into each other result type) and every consumer (each unary and
binary elementwise op, converts and bitcast-converts, compare, clamp,
select, reduce and reduce-window with each reducer and an identity or other
init, custom reducers, pad, dots into every result type, map, sort, tuples,
calls, while loops, conditionals), one module is written and verified at
each mesh size (the named axis rebinds).  Integer and pred outputs are
compared exactly, so any MISMATCH there is a fault.  Float types (f32, f16,
bf16, f64, not in the default list) also report ill-conditioned consumers
(1/x, rsqrt, log, remainder of a sum near zero) whose rounding the
tolerance does not cover; a float bitcast-convert of a sum is left out (it
compares rounding bits exactly).

Prints one line per module that fails (MISMATCH, or an exit status other
than 0, 4 for an op the simulator does not run and 5 for an input spmdc
refuses).  Exit status: 0 none failed, 1 some did, 2 usage.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

INTS = ["s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"]
FLOATS = ["f64", "f32", "f16", "bf16"]
TYPES = INTS + FLOATS + ["pred"]
LO = {"s8": -128, "u8": 0, "s16": -32768, "u16": 0, "s32": -2147483648, "u32": 0,
      "s64": -9223372036854775808, "u64": 0}
HI = {"s8": 127, "u8": 255, "s16": 32767, "u16": 65535, "s32": 2147483647, "u32": 4294967295,
      "s64": 9223372036854775807, "u64": 18446744073709551615}


def isint(t):
    return t in INTS


def red_ops(t):
    if t == "pred": return ["add","maximum","minimum","multiply","and","or"]
    if t == "c64": return ["add","multiply"]
    ops = ["add","multiply","maximum","minimum"]
    if isint(t): ops += ["and","or"]
    return ops
def const(t, v):
    if t == "pred": return "true" if v else "false"
    if t == "c64": return "(%s, 0)" % v
    return str(v)
def reducer(name, t, op):
    return f"%{name} (a: {t}[], b: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n  %b = {t}[] parameter(1)\n  ROOT %r = {t}[] {op}(%a, %b)\n}}\n"
def identity(t, op):
    if t == "pred":
        return {"add":"false","or":"false","maximum":"false","minimum":"true","multiply":"true","and":"true"}[op]
    lo, hi = LO, HI
    if op == "add" or op == "or": return const(t, 0)
    if op == "multiply": return const(t, 1)
    if op == "and": return "-1" if t[0]=="s" else str(hi[t])
    if op == "maximum": return str(lo[t]) if isint(t) else "-inf"
    if op == "minimum": return str(hi[t]) if isint(t) else "inf"

# consumer ops: (name, fn(t) -> (extra_comps, lines, result type) or None)
def consumers(t):
    """(name, extra computations, lines ending in %o, result type) per consumer of %p."""
    C = []
    un_f = ["exponential","log","sqrt","cosine","floor","ceil","round-nearest-afz","round-nearest-even","tanh","logistic","abs","sign","is-finite","rsqrt","cbrt","exponential-minus-one","log-plus-one","sine","tan"]
    un_i = ["abs","sign","not","popcnt","count-leading-zeros","negate"]
    if t in FLOATS:
        for u in un_f + ["negate"]:
            rt = "pred" if u == "is-finite" else t
            C.append((u, [], [f"%o = {t}[8] {u}(%p)" if rt==t else f"%o = pred[8] {u}(%p)"], rt))
        C.append(("reduce-precision", [], [f"%o = {t}[8] reduce-precision(%p), exponent_bits=5, mantissa_bits=2"], t))
    if isint(t):
        for u in un_i:
            C.append((u, [], [f"%o = {t}[8] {u}(%p)"], t))
    if t == "pred":
        C.append(("not", [], [f"%o = pred[8] not(%p)"], t))
    if t == "c64":
        for u in ["real","imag","abs","negate","exponential","sqrt"]:
            rt = "f32" if u in ("real","imag","abs") else t
            C.append((u, [], [f"%o = {rt}[8] {u}(%p)"], rt))
    # converts
    for t2 in TYPES:
        if t2 == t or (t=="c64"): continue
        C.append(("convert_"+t2, [], [f"%o = {t2}[8] convert(%p)"], t2))
    C.append(("convert_same", [], [f"%o = {t}[8] convert(%p)"], t))
    bw = {"s8": ["u8"], "u8": ["s8"], "s16": ["u16"], "u16": ["s16"], "u32": ["s32", "f32"],
          "s32": ["u32", "f32"], "s64": ["u64"], "u64": ["s64"]}
    for t2 in bw.get(t, []):
        C.append(("bitcast_"+t2, [], [f"%o = {t2}[8] bitcast-convert(%p)"], t2))
    # binary with constant
    c3 = const(t, 3 if t!="pred" else 1)
    bins = ["add","subtract","multiply","divide","maximum","minimum","power","remainder","atan2"]
    if isint(t) or t=="pred": bins += ["and","or","xor"]
    if isint(t): bins += ["shift-left","shift-right-logical","shift-right-arithmetic"]
    for b in bins:
        if t=="pred" and b in ("divide","power","remainder","atan2","subtract"): continue
        if t=="c64" and b in ("maximum","minimum","remainder","atan2"): continue
        if isint(t) and b=="atan2": continue
        for order in (0,1):
            ops = "(%p, %cb)" if order==0 else "(%cb, %p)"
            C.append((f"{b}_{order}", [], [f"%c = {t}[] constant({c3})", f"%cb = {t}[8] broadcast(%c), dimensions={{}}", f"%o = {t}[8] {b}{ops}"], t))
        C.append((f"{b}_self", [], [f"%o = {t}[8] {b}(%p, %p)"], t))
        C.append((f"{b}_q", [], [f"%o = {t}[8] {b}(%p, %q)"], t))
    if t != "c64":
        for d in ["EQ","NE","LT","GT","LE","GE"]:
            C.append(("compare_"+d, [], [f"%c = {t}[] constant({c3})", f"%cb = {t}[8] broadcast(%c), dimensions={{}}", f"%o = pred[8] compare(%p, %cb), direction={d}"], "pred"))
        C.append(("clamp", [], [f"%lo = {t}[] constant({const(t,0 if t!='pred' else 0)})", f"%hi = {t}[] constant({c3})", f"%o = {t}[8] clamp(%lo, %p, %hi)"], t))
        C.append(("select_cmp", [], [f"%c = {t}[] constant({c3})", f"%cb = {t}[8] broadcast(%c), dimensions={{}}", f"%s = pred[8] compare(%p, %cb), direction=GT", f"%o = {t}[8] select(%s, %p, %q)"], t))
    C.append(("select_pq", [], [f"%o = {t}[8] select(%sp, %p, %q)"], t))
    C.append(("select_pc", [], [f"%c = {t}[] constant({c3})", f"%cb = {t}[8] broadcast(%c), dimensions={{}}", f"%o = {t}[8] select(%sp, %p, %cb)"], t))
    # reduce / reduce-window of p with each reducer kind, identity and non-identity init
    for r in red_ops(t):
        for init in ("id", "c"):
            iv = identity(t, r) if t!="c64" else ("(0, 0)" if r=="add" else "(1, 0)")
            if init == "c": iv = c3
            C.append((f"reduce_{r}_{init}", [reducer("rc", t, r)], [f"%i = {t}[] constant({iv})", f"%o = {t}[] reduce(%p, %i), dimensions={{0}}, to_apply=%rc"], t))
            C.append((f"rwin_{r}_{init}", [reducer("rc", t, r)], [f"%i = {t}[] constant({iv})", f"%o = {t}[8] reduce-window(%p, %i), window={{size=3 pad=1_1}}, to_apply=%rc"], t))
    # custom reducers
    if t not in ("pred",):
        C.append(("reduce_custom_sq", [f"%rc (a: {t}[], b: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n  %b = {t}[] parameter(1)\n  %bb = {t}[] multiply(%b, %b)\n  ROOT %r = {t}[] add(%a, %bb)\n}}\n"], [f"%i = {t}[] constant({const(t,0)})", f"%o = {t}[] reduce(%p, %i), dimensions={{0}}, to_apply=%rc"], t))
        C.append(("reduce_custom_sub", [f"%rc (a: {t}[], b: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n  %b = {t}[] parameter(1)\n  ROOT %r = {t}[] subtract(%a, %b)\n}}\n"], [f"%i = {t}[] constant({const(t,0)})", f"%o = {t}[] reduce(%p, %i), dimensions={{0}}, to_apply=%rc"], t))
        C.append(("reduce_custom_ba", [f"%rc (a: {t}[], b: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n  %b = {t}[] parameter(1)\n  ROOT %r = {t}[] add(%b, %a)\n}}\n"], [f"%i = {t}[] constant({const(t,0)})", f"%o = {t}[] reduce(%p, %i), dimensions={{0}}, to_apply=%rc"], t))
    # pad with non-identity
    C.append(("pad_c", [], [f"%c = {t}[] constant({c3})", f"%o = {t}[12] pad(%p, %c), padding=2_2"], t))
    C.append(("pad_interior", [], [f"%c = {t}[] constant({c3})", f"%o = {t}[15] pad(%p, %c), padding=0_0_1"], t))
    # dot widening/narrowing
    if t != "pred":
        for t2 in TYPES:
            if t2 in ("pred",) : continue
            if t=="c64" and t2!="c64": continue
            if t!="c64" and t2=="c64": continue
            C.append((f"dot_{t2}", [], [f"%w = {t}[8,2] parameter(2)", f"%o = {t2}[2] dot(%p, %w), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}"], t2))
        C.append(("dot_pq", [], [f"%o = {t}[] dot(%p, %q), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}"], t))
    # map
    C.append(("map_mul", [f"%mc (a: {t}[], b: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n  %b = {t}[] parameter(1)\n  ROOT %r = {t}[] multiply(%a, %b)\n}}\n"], [f"%o = {t}[8] map(%p, %p), dimensions={{0}}, to_apply=%mc"], t))
    C.append(("map_neg", [f"%mc (a: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n  ROOT %r = {t}[] negate(%a)\n}}\n" if t!="pred" else f"%mc (a: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n  ROOT %r = {t}[] not(%a)\n}}\n"], [f"%o = {t}[8] map(%p), dimensions={{0}}, to_apply=%mc"], t))
    if t != "c64":
        C.append(("sort", [f"%cmp (a: {t}[], b: {t}[]) -> pred[] {{\n  %a = {t}[] parameter(0)\n  %b = {t}[] parameter(1)\n  ROOT %r = pred[] compare(%a, %b), direction=LT\n}}\n"], [f"%o = {t}[8] sort(%p), dimensions={{0}}, to_apply=%cmp"], t))
    # tuple / gte / call / while / conditional
    C.append(("tuple_gte_mul", [], [f"%tp = ({t}[8], {t}[8]) tuple(%p, %q)", f"%g0 = {t}[8] get-tuple-element(%tp), index=0", f"%g1 = {t}[8] get-tuple-element(%tp), index=1", f"%o = {t}[8] multiply(%g0, %g1)"], t))
    unop = "negate" if t!="pred" else "not"
    C.append(("call_sq", [f"%cf (a: {t}[8]) -> {t}[8] {{\n  %a = {t}[8] parameter(0)\n  ROOT %r = {t}[8] multiply(%a, %a)\n}}\n"], [f"%o = {t}[8] call(%p), to_apply=%cf"], t))
    C.append(("call_div", [f"%cf (a: {t}[8], b: {t}[8]) -> {t}[8] {{\n  %a = {t}[8] parameter(0)\n  %b = {t}[8] parameter(1)\n  ROOT %r = {t}[8] {'divide' if t!='pred' else 'xor'}(%a, %b)\n}}\n"], [f"%o = {t}[8] call(%p, %q), to_apply=%cf"], t))
    C.append(("while_sq", [
        f"%wc (s: (s32[], {t}[8])) -> pred[] {{\n  %s = (s32[], {t}[8]) parameter(0)\n  %i = s32[] get-tuple-element(%s), index=0\n  %n = s32[] constant(2)\n  ROOT %r = pred[] compare(%i, %n), direction=LT\n}}\n",
        f"%wb (s: (s32[], {t}[8])) -> (s32[], {t}[8]) {{\n  %s = (s32[], {t}[8]) parameter(0)\n  %i = s32[] get-tuple-element(%s), index=0\n  %one = s32[] constant(1)\n  %i2 = s32[] add(%i, %one)\n  %v = {t}[8] get-tuple-element(%s), index=1\n  %v2 = {t}[8] multiply(%v, %v)\n  ROOT %r = (s32[], {t}[8]) tuple(%i2, %v2)\n}}\n"],
        [f"%z0 = s32[] constant(0)", f"%init = (s32[], {t}[8]) tuple(%z0, %p)", f"%w = (s32[], {t}[8]) while(%init), condition=%wc, body=%wb", f"%o = {t}[8] get-tuple-element(%w), index=1"], t))
    C.append(("while_add_then_sq", [
        f"%wc (s: (s32[], {t}[8])) -> pred[] {{\n  %s = (s32[], {t}[8]) parameter(0)\n  %i = s32[] get-tuple-element(%s), index=0\n  %n = s32[] constant(2)\n  ROOT %r = pred[] compare(%i, %n), direction=LT\n}}\n",
        f"%wb (s: (s32[], {t}[8])) -> (s32[], {t}[8]) {{\n  %s = (s32[], {t}[8]) parameter(0)\n  %i = s32[] get-tuple-element(%s), index=0\n  %one = s32[] constant(1)\n  %i2 = s32[] add(%i, %one)\n  %v = {t}[8] get-tuple-element(%s), index=1\n  %v2 = {t}[8] add(%v, %v)\n  ROOT %r = (s32[], {t}[8]) tuple(%i2, %v2)\n}}\n"],
        [f"%z0 = s32[] constant(0)", f"%init = (s32[], {t}[8]) tuple(%z0, %p)", f"%w = (s32[], {t}[8]) while(%init), condition=%wc, body=%wb", f"%o0 = {t}[8] get-tuple-element(%w), index=1", f"%o = {t}[8] multiply(%o0, %o0)"], t))
    C.append(("cond_sq", [
        f"%br0 (a: {t}[8]) -> {t}[8] {{\n  %a = {t}[8] parameter(0)\n  ROOT %r = {t}[8] multiply(%a, %a)\n}}\n",
        f"%br1 (a: {t}[8]) -> {t}[8] {{\n  %a = {t}[8] parameter(0)\n  ROOT %r = {t}[8] {unop}(%a)\n}}\n"],
        [f"%bi = s32[] parameter(3)", f"%o = {t}[8] conditional(%bi, %p, %p), branch_computations={{%br0, %br1}}"], t))
    C.append(("cond_pred", [
        f"%br0 (a: {t}[8]) -> {t}[8] {{\n  %a = {t}[8] parameter(0)\n  ROOT %r = {t}[8] multiply(%a, %a)\n}}\n",
        f"%br1 (a: {t}[8]) -> {t}[8] {{\n  %a = {t}[8] parameter(0)\n  ROOT %r = {t}[8] {unop}(%a)\n}}\n"],
        [f"%bp = pred[] parameter(3)", f"%o = {t}[8] conditional(%bp, %p, %p), true_computation=%br0, false_computation=%br1"], t))
    return C


def source(t, kind):
    """Lines making %p and %q (t[8], pending over x) and %sp (pred[8])."""
    comps, L = [], []
    L.append(f"%x = {t}[8,16] parameter(0), sharding={{mesh[x=4], [{{}}, {{x}}]}}")
    L.append(f"%y = {t}[8,16] parameter(1), sharding={{mesh[x=4], [{{}}, {{x}}]}}")
    L.append("%sp = pred[8] parameter(4)")
    if kind.startswith("reduce_"):
        r = kind[7:]
        comps.append(reducer("sr", t, r))
        L.append(f"%z = {t}[] constant({identity(t, r)})")
        L.append(f"%p = {t}[8] reduce(%x, %z), dimensions={{1}}, to_apply=%sr")
        L.append(f"%q = {t}[8] reduce(%y, %z), dimensions={{1}}, to_apply=%sr")
    elif kind.startswith("dot_from_"):
        a = kind[9:]
        L[0] = f"%x = {a}[8,16] parameter(0), sharding={{mesh[x=4], [{{}}, {{x}}]}}"
        L[1] = f"%y = {a}[8,16] parameter(1), sharding={{mesh[x=4], [{{}}, {{x}}]}}"
        L.append(f"%v = {a}[16] parameter(5), sharding={{mesh[x=4], [{{x}}]}}")
        L.append(f"%p = {t}[8] dot(%x, %v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")
        L.append(f"%q = {t}[8] dot(%y, %v), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")
    elif kind == "unreduced":
        L.append(f"%x1 = {t}[8] parameter(6), sharding={{mesh[x=4], [{{}}]}}")
        L.append(f"%y1 = {t}[8] parameter(7), sharding={{mesh[x=4], [{{}}]}}")
        L.append(f"%p = {t}[8] copy(%x1), sharding={{mesh[x=4], [{{}}], unreduced={{x}}}}")
        L.append(f"%q = {t}[8] copy(%y1), sharding={{mesh[x=4], [{{}}], unreduced={{x}}}}")
    return comps, L


def kinds(t, types):
    ks = ["reduce_" + r for r in red_ops(t)]
    ks += ["dot_from_" + a for a in types if a != "pred" or t == "pred"]
    ks.append("unreduced")
    return ks


def build(t, kind, cons):
    name, ccomps, clines, rt = cons
    scomps, slines = source(t, kind)
    comps = []
    for c in scomps + ccomps:
        if c not in comps:
            comps.append(c)
    body = slines + clines
    if "%sp)" not in " ".join(body) and "%sp," not in " ".join(body):
        body = [b for b in body if not b.startswith("%sp =")]
    n = [0]

    def renumber(mo):
        n[0] += 1
        return "parameter(%d)" % (n[0] - 1)
    body = [re.sub(r"parameter\(\d+\)", renumber, b) for b in body]
    root_shape = body[-1].split("=", 1)[1].split()[0]
    return ("HloModule m\n\n" + "\n".join(comps) + "\nENTRY %main {\n" +
            "\n".join("  " + b for b in body) + f"\n  ROOT %out = {root_shape} copy(%o)\n}}\n")


def verify_at_meshes(spmdc, path, meshes):
    """Runs `spmdc verify path --mesh M` for each mesh M until one fails;
    prints the failure (MISMATCH or the exit status, with the first line that
    says why) and returns 1, else 0.  Exit 4 and 5 (the simulator or spmdc
    refuses the module) end the run quietly: they hold at every mesh."""
    for m in meshes:
        try:
            r = subprocess.run([spmdc, "verify", path, "--mesh", m], capture_output=True, text=True, timeout=60)
            rc, text = r.returncode, r.stdout + r.stderr
        except subprocess.TimeoutExpired:
            rc, text = "timeout", ""
        if rc in (0, 4, 5):
            if rc:
                return 0
            continue
        why = [x.strip() for x in text.splitlines() if "MISMATCH" in x or "error" in x][:1]
        print(f"{'MISMATCH' if 'MISMATCH' in text else 'exit ' + str(rc)} --mesh {m} {path}"
              f"{': ' + why[0] if why else ''}", flush=True)
        return 1
    return 0


def finish(tool, ran, failed, out, keep):
    """Prints the run's count and returns the exit status (1 if any module
    failed).  The modules stay in `out` when one failed or they were asked
    for (--keep), and the line names it; else they go."""
    if failed or keep:
        print(f"{tool}: {ran} modules, {failed} failed ({out})")
    else:
        shutil.rmtree(out, True)
        print(f"{tool}: {ran} modules, {failed} failed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("spmdc")
    ap.add_argument("--types", default=",".join(INTS + ["pred"]))
    ap.add_argument("--meshes", default="2,4,3")
    ap.add_argument("--keep", help="write the modules to this directory (default: a temporary one)")
    ap.add_argument("--only", default="", help="only modules whose name holds this text")
    args = ap.parse_args()
    types = args.types.split(",")
    if any(t not in TYPES for t in types):
        print(f"gen_partial_sums: types are {','.join(TYPES)}", file=sys.stderr)
        return 2
    out = args.keep or tempfile.mkdtemp(prefix="partial_sums.")
    os.makedirs(out, exist_ok=True)
    failed = ran = 0
    for t in types:
        for kind in kinds(t, types):
            for cons in consumers(t):
                if cons[0].startswith("bitcast_") and t in FLOATS:
                    continue
                name = f"{t}__{kind}__{cons[0]}"
                if args.only not in name:
                    continue
                path = os.path.join(out, name + ".hlo")
                with open(path, "w") as f:
                    f.write(build(t, kind, cons))
                ran += 1
                failed += verify_at_meshes(args.spmdc, path, args.meshes.split(","))
    return finish("gen_partial_sums", ran, failed, out, args.keep)


if __name__ == "__main__":
    sys.exit(main())
