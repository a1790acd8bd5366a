#!/usr/bin/env python3
"""fuzz_partition.py - random programs of windowed ops, shape ops and uneven
dims, partitioned and checked numerically by `spmdc verify` on several meshes.

    python3 tools/fuzz_partition.py SPMDC [--seeds A:B] [--keep DIR]

Every seed makes one module: up to three f32 parameters with sizes drawn from
{1, 2, 3, 5, 7, 9, 17, 31} (dims smaller than, and not divisible by, their
shard counts), each split over a random part of the mesh x=2,y=4 (named axes,
so the file rebinds to every mesh below), then 3 to 8 random steps among
elementwise ops, reductions (sum, max) over a random dim, transpose, slices
(strided, with a start), pads (negative and interior too), concatenates,
reverses, reduce-windows (strides, padding), dots, convolutions (window
dilation, padding), cumulative windows (scans), select-and-scatter,
dynamic-slices (starts clamped at
both ends), gathers of rows, sorts, iota offsets and reshapes that merge and
split dims, each result annotated with a
random sharding or left to propagation.  The last three values are the
outputs.  Each module is verified at x=2,y=4, x=2,y=2, x=3,y=2, x=1,y=4 and
x=4,y=1: the simulator feeds poison in the padding of every uneven input
shard, so a program that lets padding reach a result fails.

Exit status: 0 every module verified, 1 a failure (the module is kept and
named, with spmdc's output), 2 usage.  Needs only python3.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

MESHES = ["x=2,y=4", "x=2,y=2", "x=3,y=2", "x=1,y=4", "x=4,y=1"]
SIZES = [1, 2, 3, 5, 7, 9, 17, 31]
HEADER = """HloModule fuzz{seed}
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
max {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
ge {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}}
lt {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}}
ENTRY main {{
"""


def sharding(rank, r):
    """A random split of a rank-`rank` value over the axes x and y."""
    axes = ["x", "y"]
    r.shuffle(axes)
    spec = [[] for _ in range(rank)]
    for a in axes:
        if r.random() < 0.6:
            spec[r.randrange(rank)].append(a)
    return "sharding={mesh[x=2,y=4], [%s]}" % ", ".join("{%s}" % ",".join(s) for s in spec)


class Program:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.lines = []
        self.pool = []  # rank-2 values: (name, dims)
        self.n = 0

    def add(self, dims, expr, annotate=True, pool=True):
        name = "v%d" % self.n
        self.n += 1
        ann = ", " + sharding(len(dims), self.r) if annotate and self.r.random() < 0.7 else ""
        self.lines.append("  %s = f32[%s] %s%s" % (name, ",".join(map(str, dims)), expr, ann))
        if pool:
            self.pool.append((name, dims))
        return name

    def window(self, dims, d, size, stride, lo, hi):
        win, strd, pad = ["1", "1"], ["1", "1"], ["0_0", "0_0"]
        win[d], strd[d], pad[d] = str(size), str(stride), "%d_%d" % (lo, hi)
        return "size=%s stride=%s pad=%s" % ("x".join(win), "x".join(strd), "x".join(pad))

    def step(self):
        r = self.r
        a, ad = r.choice(self.pool)
        op = r.randrange(19)
        d = r.randrange(2)
        if op == 0:
            self.add(ad, "exponential(%s)" % a)
        elif op == 1:
            b, _ = r.choice([v for v in self.pool if v[1] == ad])
            self.add(ad, "add(%s, %s)" % (a, b))
        elif op == 2:
            red, init = ("add", "z") if r.random() < 0.5 else ("max", "ni")
            v = self.add([ad[1 - d]], "reduce(%s, %s), dimensions={%d}, to_apply=%s" % (a, init, d, red), pool=False)
            self.add(ad, "broadcast(%s), dimensions={%d}" % (v, 1 - d))
        elif op == 3:
            self.add([ad[1], ad[0]], "transpose(%s), dimensions={1,0}" % a)
        elif op == 4:
            start, stride = r.randrange(ad[d]), r.choice([1, 2])
            limit = r.randint(start + 1, ad[d])
            nd = list(ad)
            nd[d] = (limit - start + stride - 1) // stride
            sl = ["[0:%d]" % ad[0], "[0:%d]" % ad[1]]
            sl[d] = "[%d:%d:%d]" % (start, limit, stride)
            self.add(nd, "slice(%s), slice={%s}" % (a, ", ".join(sl)))
        elif op == 5:
            lo, hi, it = r.randint(-1, 3), r.randint(-1, 3), r.choice([0, 0, 1])
            n = ad[d] + lo + hi + max(ad[d] - 1, 0) * it
            if n < 1:
                return
            nd, pd = list(ad), ["0_0", "0_0"]
            nd[d] = n
            pd[d] = "%d_%d_%d" % (lo, hi, it) if it else "%d_%d" % (lo, hi)
            self.add(nd, "pad(%s, z), padding=%s" % (a, "x".join(pd)))
        elif op == 6:
            b, bd = r.choice([v for v in self.pool if v[1][1 - d] == ad[1 - d]])
            nd = list(ad)
            nd[d] = ad[d] + bd[d]
            self.add(nd, "concatenate(%s, %s), dimensions={%d}" % (a, b, d))
        elif op == 7:
            self.add(ad, "reverse(%s), dimensions={%d}" % (a, d))
        elif op == 8:
            k, s, lo, hi = r.randint(1, 4), r.randint(1, 2), r.randint(0, 2), r.randint(0, 2)
            n = (ad[d] + lo + hi - k) // s + 1
            if n < 1:
                return
            nd = list(ad)
            nd[d] = n
            red, init = ("add", "z") if r.random() < 0.5 else ("max", "ni")
            self.add(nd, "reduce-window(%s, %s), window={%s}, to_apply=%s" % (a, init, self.window(ad, d, k, s, lo, hi),
                                                                              red))
        elif op == 9:
            rhs = [v for v in self.pool if v[1][0] == ad[1]]
            if not rhs:
                return
            b, bd = r.choice(rhs)
            self.add([ad[0], bd[1]], "dot(%s, %s), lhs_contracting_dims={1}, rhs_contracting_dims={0}" % (a, b))
        elif op == 10:
            k, lo, hi, rd = r.randint(1, 3), r.randint(0, 2), r.randint(0, 2), r.choice([1, 2])
            n = ad[0] + lo + hi - (k - 1) * rd
            if n < 1:
                return
            x = self.add([1, ad[0], ad[1], 1], "reshape(%s)" % a, annotate=False, pool=False)
            w = "w%d" % self.n
            self.lines.append("  %s = f32[%d,1,1,1] constant({%s})" % (w, k, ", ".join(["{{{0.5}}}"] * k)))
            c = self.add([1, n, ad[1], 1], "convolution(%s, %s), window={size=%dx1 pad=%d_%dx0_0 rhs_dilate=%dx1}, "
                         "dim_labels=b01f_01io->b01f" % (x, w, k, lo, hi, rd), pool=False)
            self.add([n, ad[1]], "reshape(%s)" % c)
        elif op == 12:
            start = r.randrange(-2, ad[d] + 2)
            size = r.randint(1, ad[d])
            nd = list(ad)
            nd[d] = size
            idx = ["zi", "zi"]
            idx[d] = "i%d" % self.n
            self.lines.append("  %s = s32[] constant(%d)" % (idx[d], start))
            self.add(nd, "dynamic-slice(%s, %s), dynamic_slice_sizes={%d,%d}" % (a, ", ".join(idx), nd[0], nd[1]))
        elif op == 13:
            n = r.randint(1, 5)
            ids = "g%d" % self.n
            self.lines.append("  %s = s32[%d,1] constant({%s})" % (
                ids, n, ", ".join("{%d}" % r.randrange(-1, ad[0] + 1) for _ in range(n))))
            self.add([n, ad[1]], "gather(%s, %s), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
                     "index_vector_dim=1, slice_sizes={1,%d}" % (a, ids, ad[1]))
        elif op == 14:
            self.add(ad, "sort(%s), dimensions={%d}, to_apply=lt" % (a, d))
        elif op == 15:
            io = self.add(ad, "iota(), iota_dimension=%d" % d, pool=False)
            self.add(ad, "add(%s, %s)" % (a, io))
        elif op == 17:
            red, init = ("add", "z") if r.random() < 0.5 else ("max", "ni")
            n = ad[d] + r.randint(0, 2)
            self.add(ad, "reduce-window(%s, %s), window={%s}, to_apply=%s" % (a, init, self.window(ad, d, n, 1, n - 1, 0),
                                                                             red))
        elif op == 16:
            if ad[0] * ad[1] == 0:
                return
            m = self.add([ad[0] * ad[1]], "reshape(%s)" % a, pool=False)
            self.add([ad[1], ad[0]], "reshape(%s)" % m)
        else:
            k, s, lo, hi = r.randint(1, 3), r.randint(1, 2), r.randint(0, 1), r.randint(0, 1)
            n = (ad[d] + lo + hi - k) // s + 1
            if n < 1:
                return
            nd = list(ad)
            nd[d] = n
            w = self.window(ad, d, k, s, lo, hi)
            m = self.add(nd, "reduce-window(%s, ni), window={%s}, to_apply=max" % (a, w), pool=False)
            src = self.add(nd, "exponential(%s)" % m, pool=False)
            self.add(ad, "select-and-scatter(%s, %s, z), window={%s}, select=ge, scatter=add" % (a, src, w))

    def text(self, seed):
        r = self.r
        for k in range(r.randint(1, 3)):
            dims = [r.choice(SIZES), r.choice(SIZES)]
            self.lines.append("  p%d = f32[%d,%d] parameter(%d), %s" % (k, dims[0], dims[1], k, sharding(2, r)))
            self.pool.append(("p%d" % k, dims))
        self.lines.append("  z = f32[] constant(0)")
        self.lines.append("  ni = f32[] constant(-inf)")
        self.lines.append("  zi = s32[] constant(0)")
        for _ in range(r.randint(3, 8)):
            self.step()
        outs = self.pool[-3:]
        self.lines.append("  ROOT out = (%s) tuple(%s)" % (", ".join("f32[%d,%d]" % tuple(d) for _, d in outs),
                                                          ", ".join(n for n, _ in outs)))
        return HEADER.format(seed=seed) + "\n".join(self.lines) + "\n}\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spmdc")
    ap.add_argument("--seeds", default="0:200", help="A:B, the seeds A..B-1 (default 0:200)")
    ap.add_argument("--keep", help="write every module here (default: only failing ones, to a temp dir)")
    args = ap.parse_args()
    try:
        a, b = (int(x) for x in args.seeds.split(":"))
    except ValueError:
        print("fuzz_partition.py: --seeds takes A:B", file=sys.stderr)
        return 2
    if not os.access(args.spmdc, os.X_OK):
        print("fuzz_partition.py: %s is not executable" % args.spmdc, file=sys.stderr)
        return 2
    out = args.keep or tempfile.mkdtemp(prefix="fuzz_partition_")
    os.makedirs(out, exist_ok=True)
    for seed in range(a, b):
        path = os.path.join(out, "fuzz%d.hlo" % seed)
        with open(path, "w") as f:
            f.write(Program(seed).text(seed))
        for mesh in MESHES:
            p = subprocess.run([args.spmdc, "verify", path, "--mesh", mesh], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True)
            if p.returncode != 0:
                print("FAIL seed %d at --mesh %s: %s" % (seed, mesh, path))
                print(p.stdout)
                return 1
        if not args.keep:
            os.remove(path)
    if not args.keep:
        os.rmdir(out)  # empty: nothing failed
    print("ok: %d programs verified at %d meshes each" % (b - a, len(MESHES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
