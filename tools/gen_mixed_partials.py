#!/usr/bin/env python3
"""gen_mixed_partials.py - two pending reductions over different mesh axes
meeting at one op, checked numerically by `spmdc verify`
(docs/partitioning.md: operands that carry sums over different axes pass an
op together only through a contraction; any other op closes them first).

    python3 tools/gen_mixed_partials.py SPMDC [--meshes a=2,b=2:a=2,b=3:a=3,b=2]
                                       [--keep DIR] [--only SUBSTRING]

For every reducer kind (add, maximum, minimum, multiply, and, or over s32),
every pair of axis sets the two pending values p and q are over (a and b, a
and {a,b}, {a,b} and b, a and a) and every consumer of both (concatenate,
dynamic-update-slice, each binary elementwise op, select, pad, a broadcast
then concatenate, dot), once with the consumer's result left to
propagation and once annotated `unreduced={a,b}`, one module is written and
verified on each mesh (the named axes rebind).  Integer outputs are
compared exactly.

Prints one line per module that fails (MISMATCH, or an exit status other
than 0, 4 and 5).  Exit status: 0 none failed, 1 some did, 2 usage.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_partial_sums import finish, verify_at_meshes  # noqa: E402

IDENTITY = {"add": "0", "maximum": "-2147483648", "minimum": "2147483647", "multiply": "1", "and": "-1", "or": "0"}
AXES = {"a": "{a}", "b": "{b}", "ab": "{a,b}"}
PAIRS = [("a", "b"), ("a", "ab"), ("ab", "b"), ("a", "a")]
CONSUMERS = ["concat", "dus", "add", "maximum", "minimum", "multiply", "and", "or", "subtract", "select", "pad",
             "bcast_concat", "dot"]


def module(red, ax1, ax2, cons, annotate):
    """The module text: p over ax1 and q over ax2 (reduces by red over dims split on them) into cons."""
    reducer = (f"%r (a: s32[], b: s32[]) -> s32[] {{\n  %a = s32[] parameter(0)\n  %b = s32[] parameter(1)\n"
               f"  ROOT %s = s32[] {red}(%a, %b)\n}}\n\n")
    body = [f"%x = s32[8,16] parameter(0), sharding={{mesh[a=2,b=2], [{{}}, {AXES[ax1]}]}}",
            f"%y = s32[8,16] parameter(1), sharding={{mesh[a=2,b=2], [{{}}, {AXES[ax2]}]}}",
            f"%z = s32[] constant({IDENTITY[red]})",
            "%p = s32[8] reduce(%x, %z), dimensions={1}, to_apply=%r",
            "%q = s32[8] reduce(%y, %z), dimensions={1}, to_apply=%r"]
    sh = ", sharding={mesh[a=2,b=2], [{}], unreduced={a,b}}" if annotate else ""
    root = "ROOT %o = s32[] reduce(%c, %z), dimensions={0}, to_apply=%r"
    if cons == "concat":
        body.append(f"%c = s32[16] concatenate(%p, %q), dimensions={{0}}{sh}")
    elif cons == "dus":
        body += ["%i = s32[] parameter(2)", "%q2 = s32[2] slice(%q), slice={[0:2]}",
                 f"%c = s32[8] dynamic-update-slice(%p, %q2, %i){sh}"]
    elif cons == "select":
        body += ["%sp = pred[8] parameter(2)", f"%c = s32[8] select(%sp, %p, %q){sh}"]
    elif cons == "pad":
        body.append(f"%c = s32[12] pad(%p, %z), padding=2_2{sh}")
    elif cons == "bcast_concat":
        body += ["%pb = s32[2,8] broadcast(%p), dimensions={1}", "%qb = s32[2,8] broadcast(%q), dimensions={1}",
                 f"%c = s32[4,8] concatenate(%pb, %qb), dimensions={{0}}{sh}"]
        root = "ROOT %o = s32[] reduce(%c, %z), dimensions={0,1}, to_apply=%r"
    elif cons == "dot":
        body.append(f"%c = s32[] dot(%p, %q), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}{sh}")
        root = "ROOT %o = s32[] copy(%c)"
    else:
        body.append(f"%c = s32[8] {cons}(%p, %q){sh}")
    body.append(root)
    return "HloModule m\n\n" + reducer + "ENTRY %main {\n" + "\n".join("  " + b for b in body) + "\n}\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("spmdc")
    ap.add_argument("--meshes", default="a=2,b=2:a=2,b=3:a=3,b=2", help="meshes separated by ':'")
    ap.add_argument("--keep", help="write the modules to this directory (default: a temporary one)")
    ap.add_argument("--only", default="", help="only modules whose name holds this text")
    args = ap.parse_args()
    out = args.keep or tempfile.mkdtemp(prefix="mixed_partials.")
    os.makedirs(out, exist_ok=True)
    ran = failed = 0
    for red in IDENTITY:
        for ax1, ax2 in PAIRS:
            for cons in CONSUMERS:
                for annotate in (False, True):
                    name = f"{red}__{ax1}_{ax2}__{cons}{'__unreduced' if annotate else ''}"
                    if args.only not in name:
                        continue
                    path = os.path.join(out, name + ".hlo")
                    with open(path, "w") as f:
                        f.write(module(red, ax1, ax2, cons, annotate))
                    ran += 1
                    failed += verify_at_meshes(args.spmdc, path, args.meshes.split(":"))
    return finish("gen_mixed_partials", ran, failed, out, args.keep)


if __name__ == "__main__":
    sys.exit(main())
