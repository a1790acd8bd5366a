#!/usr/bin/env python3
"""gen_transformer.py - write an L-layer transformer training step as HLO text.

    python3 tools/gen_transformer.py L [--batch B] [--seq S] [--model D] [--heads H]
                                       [--ffn F] [--dtype f32] [--data 2] [--model-par 4]
                                       [--lr 0.01] [--positional] > step.hlo

One training step of a pre-norm transformer stack, written out op by op:

  forward, layer i = 1..L (x.0 the input, [B,S,D] batch-split over `data`):
      xn = x * rsqrt(mean_D(x*x) + 1e-6)                    RMSNorm
      q, k, v = xn . wq, xn . wk, xn . wv                   [B,S,H,D/H], heads over `model`
      p = softmax_k(q.k / sqrt(D/H));  c = p.v              attention
      x1 = x + c . wo                                       wo [H,D/H,D], rows over `model`
      h = max(x1 . w1, 0);  x.i = x1 + h . w2               MLP, w1 columns / w2 rows over `model`
  loss = sum(x.L * x.L) / 2, so the gradient entering the last layer is x.L;
  backward, layer i = L..1: the gradients of every matmul, the ReLU, the
      softmax and the RMSNorm, accumulating the residual gradient;
  update: every weight w.i - lr * dw.i (SGD).

Parameters: x and the six weights of every layer; results: the loss and every
updated weight (in their input shardings).  89 instructions a layer plus 16
(L = 11,236 gives 1,000,020); named shardings over the mesh `data=N,model=M`
(rebind with `--mesh`), or with --positional XLA's device-list form of the
same shardings (`devices=[1,4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate`),
which XLA's own GSPMD partitioner reads.
Expected plan per layer (Megatron + data parallel): the forward's attention
output and MLP output, the backward's input gradients of both blocks and the
RMSNorm's three partial input gradients all-reduced over `model`, every weight
gradient all-reduced over `data`.  Output is deterministic.
"""
import argparse
import math
import sys


class W:
    def __init__(self, out):
        self.out = out
        self.n = 0

    def line(self, s):
        self.out.append("  " + s)
        self.n += 1


def shp(dt, dims):
    return "%s[%s]" % (dt, ",".join(str(d) for d in dims))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("layers", type=int, metavar="L")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--model", type=int, default=64, help="model width D")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=0, help="default 4 * D")
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16", "f64"])
    ap.add_argument("--data", type=int, default=2, help="size of the `data` axis")
    ap.add_argument("--model-par", type=int, default=4, help="size of the `model` axis")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--positional", action="store_true",
                    help="XLA's device-list shardings instead of named ones")
    a = ap.parse_args()
    L, B, S, D, H, dt = a.layers, a.batch, a.seq, a.model, a.heads, a.dtype
    F = a.ffn or 4 * D
    if L < 1 or D % H:
        ap.error("L must be >= 1 and D divisible by H")
    K = D // H
    mesh = "mesh[data=%d,model=%d]" % (a.data, a.model_par)
    sizes = {"data": a.data, "model": a.model_par}

    def spec(dims):
        """One array's sharding: named, or positional over devices d*M + m."""
        if not a.positional:
            return "{%s, [%s]}" % (mesh, ", ".join("{%s}" % d for d in dims))
        used = [d for d in dims if d]
        if not used:
            return "{replicated}"
        tile = [sizes[d] if d else 1 for d in dims]
        rest = [ax for ax in ("data", "model") if ax not in used]
        order = [d for d in dims if d] + rest  # tile-assignment axes, major to minor
        perm = [("data", "model").index(ax) for ax in order]
        n = a.data * a.model_par
        iota = "<=[%d]" % n if perm == [0, 1] else "<=[%d,%d]T(%s)" % (
            a.data, a.model_par, ",".join(str(k) for k in perm))
        if rest:
            return "{devices=[%s,%d]%s last_tile_dim_replicate}" % (
                ",".join(map(str, tile)), sizes[rest[0]], iota)
        return "{devices=[%s]%s}" % (",".join(map(str, tile)), iota)

    def sh(*dims):
        return "sharding=" + spec(dims)

    out = ["// gen_transformer.py %d --batch %d --seq %d --model %d --heads %d --ffn %d --dtype %s "
           "--data %d --model-par %d%s: one training step of a %d-layer transformer (forward, "
           "backward, SGD update)." % (L, B, S, D, H, F, dt, a.data, a.model_par, " --positional" if a.positional else "", L),
           "HloModule transformer_train", ""]
    for red, op in (("add", "add"), ("max", "maximum")):
        out += ["%%%s (a: %s[], b: %s[]) -> %s[] {" % (red, dt, dt, dt),
                "  %%a = %s[] parameter(0)" % dt, "  %%b = %s[] parameter(1)" % dt,
                "  ROOT %%r = %s[] %s(%%a, %%b)" % (dt, op), "}", ""]
    out.append("ENTRY %main {")
    w = W(out)
    X = [B, S, D]
    QK = [B, S, H, K]
    P = [B, H, S, S]
    HF = [B, S, F]
    t = lambda dims: shp(dt, dims)

    pn = [0]

    def param(name, dims, sharding):
        w.line("%%%s = %s parameter(%d), %s" % (name, t(dims), pn[0], sharding))
        pn[0] += 1

    def const(name, v):
        w.line("%%%s = %s[] constant(%s)" % (name, dt, repr(float(v))))

    def bc(name, src, dims, bdims=""):
        w.line("%%%s = %s broadcast(%%%s), dimensions={%s}" % (name, t(dims), src, bdims))

    def ew(name, op, dims, *ops):
        w.line("%%%s = %s %s(%s)" % (name, t(dims), op, ", ".join("%" + o for o in ops)))

    def dot(name, dims, l, r, lb, rb, lc, rc):
        attrs = []
        if lb:
            attrs.append("lhs_batch_dims={%s}" % lb)
        attrs.append("lhs_contracting_dims={%s}" % lc)
        if rb:
            attrs.append("rhs_batch_dims={%s}" % rb)
        attrs.append("rhs_contracting_dims={%s}" % rc)
        w.line("%%%s = %s dot(%%%s, %%%s), %s" % (name, t(dims), l, r, ", ".join(attrs)))

    def reduce(name, dims, src, rdims, init, red):
        w.line("%%%s = %s reduce(%%%s, %%%s), dimensions={%s}, to_apply=%%%s" % (name, t(dims), src, init,
                                                                               rdims, red))

    def tr(name, dims, src, perm):
        w.line("%%%s = %s transpose(%%%s), dimensions={%s}" % (name, t(dims), src, perm))

    # shared constants
    const("zero", 0)
    const("ninf", -math.inf)
    const("half", 0.5)
    const("eps", 1e-6)
    const("invd", 1.0 / D)
    const("scale", 1.0 / math.sqrt(K))
    const("lr", a.lr)
    bc("zero_hf", "zero", HF)
    bc("eps_bs", "eps", [B, S])
    bc("invd_bs", "invd", [B, S])
    bc("scale_p", "scale", P)
    param("x.0", X, sh("data", "", ""))
    for i in range(1, L + 1):
        param("wq.%d" % i, [D, H, K], sh("", "model", ""))
        param("wk.%d" % i, [D, H, K], sh("", "model", ""))
        param("wv.%d" % i, [D, H, K], sh("", "model", ""))
        param("wo.%d" % i, [H, K, D], sh("model", "", ""))
        param("w1.%d" % i, [D, F], sh("", "model"))
        param("w2.%d" % i, [F, D], sh("model", ""))
    # ---- forward
    for i in range(1, L + 1):
        x = "x.%d" % (i - 1)
        n = lambda s: "%s.%d" % (s, i)
        ew(n("sq"), "multiply", X, x, x)
        reduce(n("ss"), [B, S], n("sq"), "2", "zero", "add")
        ew(n("ms"), "multiply", [B, S], n("ss"), "invd_bs")
        ew(n("mse"), "add", [B, S], n("ms"), "eps_bs")
        ew(n("r"), "rsqrt", [B, S], n("mse"))
        bc(n("rb"), n("r"), X, "0,1")
        ew(n("xn"), "multiply", X, x, n("rb"))
        for m in "qkv":
            dot(n(m), QK, n("xn"), n("w" + m), "", "", "2", "0")
        dot(n("s0"), P, n("q"), n("k"), "0,2", "0,2", "3", "3")
        ew(n("s"), "multiply", P, n("s0"), "scale_p")
        reduce(n("smax"), [B, H, S], n("s"), "3", "ninf", "max")
        bc(n("smaxb"), n("smax"), P, "0,1,2")
        ew(n("sc"), "subtract", P, n("s"), n("smaxb"))
        ew(n("e"), "exponential", P, n("sc"))
        reduce(n("esum"), [B, H, S], n("e"), "3", "zero", "add")
        bc(n("esumb"), n("esum"), P, "0,1,2")
        ew(n("p"), "divide", P, n("e"), n("esumb"))
        dot(n("ct"), [B, H, S, K], n("p"), n("v"), "0,1", "0,2", "3", "1")
        tr(n("c"), QK, n("ct"), "0,2,1,3")
        dot(n("o"), X, n("c"), n("wo"), "", "", "2,3", "0,1")
        ew(n("x1"), "add", X, x, n("o"))
        dot(n("hp"), HF, n("x1"), n("w1"), "", "", "2", "0")
        ew(n("h"), "maximum", HF, n("hp"), "zero_hf")
        dot(n("y"), X, n("h"), n("w2"), "", "", "2", "0")
        ew("x.%d" % i, "add", X, n("x1"), n("y"))
    # ---- loss = sum(x.L^2) / 2; its gradient is x.L
    xl = "x.%d" % L
    ew("lsq", "multiply", X, xl, xl)
    reduce("lsum", [], "lsq", "0,1,2", "zero", "add")
    ew("loss", "multiply", [], "lsum", "half")
    # ---- backward
    g = xl
    for i in range(L, 0, -1):
        n = lambda s: "%s.%d" % (s, i)
        x = "x.%d" % (i - 1)
        # MLP
        dot(n("dw2"), [F, D], n("h"), g, "", "", "0,1", "0,1")
        dot(n("dh"), HF, g, n("w2"), "", "", "2", "1")
        w.line("%%%s = pred[%s] compare(%%%s, %%zero_hf), direction=GT" % (n("relu"), ",".join(map(str, HF)),
                                                                            n("hp")))
        w.line("%%%s = %s select(%%%s, %%%s, %%zero_hf)" % (n("dhp"), t(HF), n("relu"), n("dh")))
        dot(n("dw1"), [D, F], n("x1"), n("dhp"), "", "", "0,1", "0,1")
        dot(n("dx1m"), X, n("dhp"), n("w1"), "", "", "2", "1")
        ew(n("dx1"), "add", X, g, n("dx1m"))
        # attention output projection
        dot(n("dwo"), [H, K, D], n("c"), n("dx1"), "", "", "0,1", "0,1")
        dot(n("dc"), QK, n("dx1"), n("wo"), "", "", "2", "2")
        # p.v
        dot(n("dp"), P, n("dc"), n("v"), "0,2", "0,2", "3", "3")
        dot(n("dvt"), [B, H, S, K], n("p"), n("dc"), "0,1", "0,2", "2", "1")
        tr(n("dv"), QK, n("dvt"), "0,2,1,3")
        # softmax: ds = p * (dp - sum_k(dp * p)), then the 1/sqrt(K) scale
        ew(n("dpp"), "multiply", P, n("dp"), n("p"))
        reduce(n("dsum"), [B, H, S], n("dpp"), "3", "zero", "add")
        bc(n("dsumb"), n("dsum"), P, "0,1,2")
        ew(n("dd"), "subtract", P, n("dp"), n("dsumb"))
        ew(n("ds0"), "multiply", P, n("p"), n("dd"))
        ew(n("ds"), "multiply", P, n("ds0"), "scale_p")
        dot(n("dqt"), [B, H, S, K], n("ds"), n("k"), "0,1", "0,2", "3", "1")
        tr(n("dq"), QK, n("dqt"), "0,2,1,3")
        dot(n("dkt"), [B, H, S, K], n("ds"), n("q"), "0,1", "0,2", "2", "1")
        tr(n("dk"), QK, n("dkt"), "0,2,1,3")
        # projections
        for m in "qkv":
            dot(n("dw" + m), [D, H, K], n("xn"), n("d" + m), "", "", "0,1", "0,1")
            dot(n("dxn" + m), X, n("d" + m), n("w" + m), "", "", "2,3", "1,2")
        ew(n("dxn0"), "add", X, n("dxnq"), n("dxnk"))
        ew(n("dxn"), "add", X, n("dxn0"), n("dxnv"))
        # RMSNorm: dx = r * (dxn - xn * mean_D(dxn * xn))
        ew(n("gx"), "multiply", X, n("dxn"), n("xn"))
        reduce(n("gs"), [B, S], n("gx"), "2", "zero", "add")
        ew(n("gm"), "multiply", [B, S], n("gs"), "invd_bs")
        bc(n("gmb"), n("gm"), X, "0,1")
        ew(n("gxn"), "multiply", X, n("xn"), n("gmb"))
        ew(n("gd"), "subtract", X, n("dxn"), n("gxn"))
        ew(n("dxa"), "multiply", X, n("gd"), n("rb"))
        ew("dx.%d" % (i - 1), "add", X, n("dx1"), n("dxa"))
        g = "dx.%d" % (i - 1)
    # ---- SGD update
    results = [("loss", "f32[]" if dt == "f32" else "%s[]" % dt, spec([]) if a.positional else "{%s, []}" % mesh)]
    shapes = {"wq": ([D, H, K], ("", "model", "")), "wk": ([D, H, K], ("", "model", "")),
              "wv": ([D, H, K], ("", "model", "")), "wo": ([H, K, D], ("model", "", "")),
              "w1": ([D, F], ("", "model")), "w2": ([F, D], ("model", ""))}
    for i in range(1, L + 1):
        for m in ("wq", "wk", "wv", "wo", "w1", "w2"):
            dims, sp = shapes[m]
            bc("lrb.%s.%d" % (m, i), "lr", dims)
            ew("step.%s.%d" % (m, i), "multiply", dims, "lrb.%s.%d" % (m, i), "d%s.%d" % (m, i))
            ew("new.%s.%d" % (m, i), "subtract", dims, "%s.%d" % (m, i), "step.%s.%d" % (m, i))
            results.append(("new.%s.%d" % (m, i), t(dims), spec(sp)))
    w.line("ROOT %%result = (%s) tuple(%s), sharding={%s}" % (
        ", ".join(r[1] for r in results), ", ".join("%" + r[0] for r in results),
        ", ".join(r[2] for r in results)))
    out.append("}")
    out.insert(1, "// %d instructions in the entry computation." % w.n)
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
