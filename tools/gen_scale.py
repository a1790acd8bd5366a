#!/usr/bin/env python3
"""gen_scale.py - write HLO modules that stress one dimension of scale.

    python3 tools/gen_scale.py SHAPE N > module.hlo

SHAPE is one of
  tuple        a root tuple of N operands: N f32[8] parameters, split over 8
               devices, each negated, all returned in one N-operand tuple
               (2N + 1 instructions).
  computations N computations: N called functions (x * 2 + 1), each called
               once from the entry on its own sharded parameter (4N + 2N + 2
               instructions in all).
  while        one while loop whose body is a chain N ops deep (negate,
               split over 8 devices), 10 trips (N + 9 instructions).
  loop-state   one while loop carrying an (s32[], N x f32[64]) tuple: N
               parameters split over 8 devices, the body reads each element
               with get-tuple-element and negates it, 2 trips (3N + 13
               instructions).
  call-chain   N computations nested N deep: f.0 negates, f.i calls
               f.(i-1), the entry calls f.(N-1) on a parameter split over 8
               devices (2N + 2 instructions; N + 2 once inlined).
  collectives  N collectives in the report: N sums of one f32[1024]
               parameter split over 8 devices, folded by a chain of maximum
               (not linear in a sum, so every sum is all-reduced first: N
               all-reduces, 2N + 3 instructions).
  call-sites   one computation (negate) called from N sites, each call on
               the one before, from a parameter split over 8 devices (N + 3
               instructions; N + 1 once inlined).
  device-orders N annotated values with distinct device orders: N f32[64]
               parameters, each split over 8 devices listed in its own order
               (the permutations of 0..7 in lexicographic order, the
               identity's first, cycling after 40,320), each negated, all
               returned in one tuple (2N + 1 instructions).
Output is deterministic.  tools/bench_scale.py times these at two sizes
10x apart and prints the growth (linear time: about 10x).
"""
import itertools
import sys

SPLIT = "{devices=[8]<=[8]}"


def tuple_root(n, w):
    w("HloModule scale_tuple_%d\n\nENTRY %%main {\n" % n)
    for i in range(n):
        w("  %%p.%d = f32[8] parameter(%d), sharding=%s\n" % (i, i, SPLIT))
    for i in range(n):
        w("  %%n.%d = f32[8] negate(%%p.%d)\n" % (i, i))
    w("  ROOT %%t = (%s) tuple(%s)\n}\n" % (", ".join(["f32[8]"] * n),
                                          ", ".join("%%n.%d" % i for i in range(n))))


def computations(n, w):
    w("HloModule scale_computations_%d\n\n" % n)
    for i in range(n):
        w("%%f.%d (a: f32[64]) -> f32[64] {\n  %%a = f32[64] parameter(0)\n  %%two = f32[] constant(2)\n"
          "  %%twos = f32[64] broadcast(%%two), dimensions={}\n  %%m = f32[64] multiply(%%a, %%twos)\n"
          "  ROOT %%r = f32[64] add(%%m, %%twos)\n}\n\n" % i)
    w("ENTRY %main {\n")
    for i in range(n):
        w("  %%x.%d = f32[64] parameter(%d), sharding=%s\n" % (i, i, SPLIT))
        w("  %%c.%d = f32[64] call(%%x.%d), to_apply=%%f.%d\n" % (i, i, i))
    w("  ROOT %%t = (%s) tuple(%s)\n}\n" % (", ".join(["f32[64]"] * n),
                                          ", ".join("%%c.%d" % i for i in range(n))))


def while_chain(n, w):
    st = "(s32[], f32[1024])"
    w("HloModule scale_while_%d\n\n" % n)
    w("%%body (p: %s) -> %s {\n  %%p = %s parameter(0)\n  %%i = s32[] get-tuple-element(%%p), index=0\n"
      "  %%one = s32[] constant(1)\n  %%i1 = s32[] add(%%i, %%one)\n"
      "  %%v.0 = f32[1024] get-tuple-element(%%p), index=1\n" % (st, st, st))
    for i in range(1, n + 1):
        w("  %%v.%d = f32[1024] negate(%%v.%d)\n" % (i, i - 1))
    w("  ROOT %%t = %s tuple(%%i1, %%v.%d)\n}\n\n" % (st, n))
    w("%%cond (p: %s) -> pred[] {\n  %%p = %s parameter(0)\n  %%i = s32[] get-tuple-element(%%p), index=0\n"
      "  %%n = s32[] constant(10)\n  ROOT %%lt = pred[] compare(%%i, %%n), direction=LT\n}\n\n" % (st, st))
    w("ENTRY %%main {\n  %%x = f32[1024] parameter(0), sharding=%s\n  %%z = s32[] constant(0)\n"
      "  %%t = %s tuple(%%z, %%x)\n  %%w = %s while(%%t), condition=%%cond, body=%%body\n"
      "  ROOT %%r = f32[1024] get-tuple-element(%%w), index=1, sharding=%s\n}\n" % (SPLIT, st, st, SPLIT))


def loop_state(n, w):
    st = "(s32[], %s)" % ", ".join(["f32[64]"] * n)
    w("HloModule scale_loop_state_%d\n\n" % n)
    w("%%cond (p: %s) -> pred[] {\n  %%p = %s parameter(0)\n  %%i = s32[] get-tuple-element(%%p), index=0\n"
      "  %%n = s32[] constant(2)\n  ROOT %%lt = pred[] compare(%%i, %%n), direction=LT\n}\n\n" % (st, st))
    w("%%body (p: %s) -> %s {\n  %%p = %s parameter(0)\n  %%i = s32[] get-tuple-element(%%p), index=0\n"
      "  %%one = s32[] constant(1)\n  %%i1 = s32[] add(%%i, %%one)\n" % (st, st, st))
    for k in range(n):
        w("  %%x.%d = f32[64] get-tuple-element(%%p), index=%d\n  %%y.%d = f32[64] negate(%%x.%d)\n" % (k, k + 1, k, k))
    w("  ROOT %%t = %s tuple(%%i1, %s)\n}\n\n" % (st, ", ".join("%%y.%d" % k for k in range(n))))
    w("ENTRY %main {\n  %z = s32[] constant(0)\n")
    for k in range(n):
        w("  %%p.%d = f32[64] parameter(%d), sharding=%s\n" % (k, k, SPLIT))
    w("  %%t = %s tuple(%%z, %s)\n  %%w = %s while(%%t), condition=%%cond, body=%%body\n"
      "  ROOT %%r = f32[64] get-tuple-element(%%w), index=1\n}\n" % (st, ", ".join("%%p.%d" % k for k in range(n)), st))


def call_chain(n, w):
    w("HloModule scale_call_chain_%d\n\n" % n)
    w("%f.0 (a: f32[1024]) -> f32[1024] {\n  %a = f32[1024] parameter(0)\n"
      "  ROOT %r = f32[1024] negate(%a)\n}\n\n")
    for i in range(1, n):
        w("%%f.%d (a: f32[1024]) -> f32[1024] {\n  %%a = f32[1024] parameter(0)\n"
          "  ROOT %%r = f32[1024] call(%%a), to_apply=%%f.%d\n}\n\n" % (i, i - 1))
    w("ENTRY %%main {\n  %%x = f32[1024] parameter(0), sharding=%s\n"
      "  ROOT %%r = f32[1024] call(%%x), to_apply=%%f.%d\n}\n" % (SPLIT, n - 1))


def collectives(n, w):
    w("HloModule scale_collectives_%d\n\n" % n)
    w("%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
      "  ROOT %r = f32[] add(%a, %b)\n}\n\nENTRY %main {\n")
    w("  %%x = f32[1024] parameter(0), sharding=%s\n  %%zero = f32[] constant(0)\n" % SPLIT)
    w("  %m.0 = f32[] constant(1)\n")
    for i in range(1, n + 1):
        w("  %%s.%d = f32[] reduce(%%x, %%zero), dimensions={0}, to_apply=%%add\n" % i)
        root = "ROOT " if i == n else ""
        w("  %s%%m.%d = f32[] maximum(%%m.%d, %%s.%d)\n" % (root, i, i - 1, i))
    w("}\n")


def call_sites(n, w):
    w("HloModule scale_call_sites_%d\n\n%%f (a: f32[1024]) -> f32[1024] {\n  %%a = f32[1024] parameter(0)\n"
      "  ROOT %%r = f32[1024] negate(%%a)\n}\n\nENTRY %%main {\n  %%x.0 = f32[1024] parameter(0), sharding=%s\n" % (n, SPLIT))
    for i in range(1, n + 1):
        w("  %s%%x.%d = f32[1024] call(%%x.%d), to_apply=%%f\n" % ("ROOT " if i == n else "", i, i - 1))
    w("}\n")


def device_orders(n, w):
    w("HloModule scale_device_orders_%d\n\nENTRY %%main {\n" % n)
    orders = itertools.cycle(itertools.permutations(range(8)))
    for i in range(n):
        w("  %%p.%d = f32[64] parameter(%d), sharding={devices=[8]%s}\n" % (i, i, ",".join(map(str, next(orders)))))
    for i in range(n):
        w("  %%n.%d = f32[64] negate(%%p.%d)\n" % (i, i))
    w("  ROOT %%t = (%s) tuple(%s)\n}\n" % (", ".join(["f32[64]"] * n),
                                          ", ".join("%%n.%d" % i for i in range(n))))


SHAPES = {"tuple": tuple_root, "computations": computations, "while": while_chain,
          "loop-state": loop_state, "call-chain": call_chain, "collectives": collectives,
          "call-sites": call_sites, "device-orders": device_orders}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SHAPES or not sys.argv[2].isdigit() or int(sys.argv[2]) < 1:
        sys.stderr.write("usage: gen_scale.py {%s} N\n" % ",".join(SHAPES))
        return 2
    out = []
    SHAPES[sys.argv[1]](int(sys.argv[2]), out.append)
    sys.stdout.write("".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
