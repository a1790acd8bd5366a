#!/usr/bin/env python3
"""export_jax.py - write real-model HLO (unpartitioned, with sharding
annotations) from JAX, for spmdc's examples.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python3 tools/export_jax.py --out-dir examples

Builds two small Megatron-style blocks, shards their parameters with
jax.sharding.Mesh + NamedSharding + PartitionSpec, lowers them with
jax.jit(f, in_shardings=..., out_shardings=...).lower(...) and writes the HLO
module *before* any of XLA's passes ran (no sharding propagation, no SPMD
partitioning), in two flavours:

  jax_mlp.hlo, jax_attention.hlo
      GSPMD mode (jax_use_shardy_partitioner=False): the module exactly as XLA
      dumps it on entry to compilation (--xla_dump_to, *.before_optimizations.txt):
      %-names, `sharding={devices=[..]<=[..]}` on parameters and the root,
      num_partitions in the header, metadata and stack-frame tables.
  jax_mlp_sdy.hlo
      Shardy mode (JAX's default): `lowered.as_text(dialect="hlo")`, the other
      printing style (bare names), with Shardy's frontend_attributes
      (xla.sdy.meshes, xla.sdy.sharding) and the xla.sdy.FuncResultSharding
      custom-call next to the positional `sharding=` attributes.
  jax_attention_sdy.hlo
      Shardy mode, XLA's before_optimizations dump.

Models (f32, small so the files stay readable):
  mlp        x[8,128] -> gelu(x.W1 + b1).W2 + b2, W1[128,512] column-parallel,
             W2[512,128] row-parallel over mesh axis `model` (8 devices).
  attention  x[8,16,128] batch-split over `data`, 8 heads of 16 split over `model`
             (mesh data=2 x model=4): q/k/v projections, causal softmax(q.k/4),
             p.v, output projection, residual add.
  moe        x[64,32] tokens in 4 expert groups (group_sizes s32[4]) ->
             ragged_dot(gelu(ragged_dot(x, W1, gs)), W2, gs), W1[4,32,128] split
             on its hidden dim, W2[4,128,32] on its rows over `model` (8 devices);
             jax_moe.hlo is lowered for TPU, since XLA:CPU expands ragged_dot.

`--only FILE` writes just that file.

Exits 0 with a message when jax is not installed.
"""
import argparse
import atexit
import glob
import os
import shutil
import sys
import tempfile

COMMAND = ("XLA_FLAGS=--xla_force_host_platform_device_count=8 "
           "python3 tools/export_jax.py --out-dir examples")


def setup_env(dump_dir):
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        flags += " --xla_force_host_platform_device_count=8"
    flags += " --xla_dump_to=%s --xla_dump_hlo_pass_re=NONE" % dump_dir
    os.environ["XLA_FLAGS"] = flags.strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def models():
    """(name, fn, mesh axes, arg specs [(shape, pspec)], out pspec)."""
    import jax
    import jax.numpy as jnp

    def mlp_block(x, w1, b1, w2, b2):
        h = jax.nn.gelu(x @ w1 + b1, approximate=True)
        return h @ w2 + b2

    def attention_block(x, wq, wk, wv, wo):
        q = jnp.einsum("bsd,dhk->bshk", x, wq)
        k = jnp.einsum("bsd,dhk->bshk", x, wk)
        v = jnp.einsum("bsd,dhk->bshk", x, wv)
        scores = jnp.einsum("bqhk,bshk->bhqs", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
        seq = x.shape[1]
        causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
        scores = jnp.where(causal, scores, jnp.float32(-1e9))
        p = jax.nn.softmax(scores, axis=-1)
        o = jnp.einsum("bhqs,bshk->bqhk", p, v)
        return x + jnp.einsum("bqhk,hkd->bqd", o, wo)

    P = jax.sharding.PartitionSpec
    mlp = ("mlp", mlp_block, (("model", 8),),
           [((8, 128), P()), ((128, 512), P(None, "model")), ((512,), P("model")),
            ((512, 128), P("model", None)), ((128,), P())], P())
    attn = ("attention", attention_block, (("data", 2), ("model", 4)),
            [((8, 16, 128), P("data", None, None)),
             ((128, 8, 16), P(None, "model", None)), ((128, 8, 16), P(None, "model", None)),
             ((128, 8, 16), P(None, "model", None)), ((8, 16, 128), P("model", None, None))],
            P("data", None, None))
    # Training steps (loss, then gradients; SGD updates where named).
    def mlp_train(x, w1, b1, w2, b2, y):
        def loss_fn(x, w1, b1, w2, b2):
            return jnp.mean((mlp_block(x, w1, b1, w2, b2) - y) ** 2)
        loss, grads = jax.value_and_grad(loss_fn, argnums=(0, 1, 2, 3, 4))(x, w1, b1, w2, b2)
        return (loss,) + grads

    def dp_loss(x, y, w1, b1, w2, b2):
        h = jnp.tanh(x @ w1 + b1)
        return jnp.mean((h @ w2 + b2 - y) ** 2)

    def dp_train(x, y, w1, b1, w2, b2):
        loss, (g1, gb1, g2, gb2) = jax.value_and_grad(dp_loss, argnums=(2, 3, 4, 5))(x, y, w1, b1, w2, b2)
        lr = jnp.float32(0.1)
        return loss, w1 - lr * g1, b1 - lr * gb1, w2 - lr * g2, b2 - lr * gb2

    mlp_tr = ("mlp_train", mlp_train, (("model", 8),),
              [((8, 128), P()), ((128, 512), P(None, "model")), ((512,), P("model")),
               ((512, 128), P("model", None)), ((128,), P()), ((8, 128), P())],
              (P(), P(), P(None, "model"), P("model"), P("model", None), P()))
    dp = ("dp_train", dp_train, (("data", 8),),
          [((64, 32), P("data", None)), ((64, 16), P("data", None)), ((32, 64), P()), ((64,), P()),
           ((64, 16), P()), ((16,), P())],
          (P(), P(), P(), P(), P()))
    # Mixture of experts: 4 experts' FFNs over token groups (jax.lax.ragged_dot), each expert's
    # hidden dim split over `model` (column- then row-parallel, as the MLP).
    def moe_block(x, w1, w2, group_sizes):
        h = jax.nn.gelu(jax.lax.ragged_dot(x, w1, group_sizes), approximate=True)
        return jax.lax.ragged_dot(h, w2, group_sizes)

    moe = ("moe", moe_block, (("model", 8),),
           [((64, 32), P()), ((4, 32, 128), P(None, None, "model")), ((4, 128, 32), P(None, "model", None)),
            ((4,), P(), "int32")], P())
    # ZeRO-3 style: parameters (and so their updates) sharded over `data` on their rows.
    zero = ("dp_train_zero", dp_train, (("data", 8),),
            [((64, 32), P("data", None)), ((64, 16), P("data", None)), ((32, 64), P("data", None)),
             ((64,), P("data")), ((64, 16), P("data", None)), ((16,), P())],
            (P(), P("data", None), P("data"), P("data", None), P()))
    return [mlp, attn, mlp_tr, dp, zero, moe]


def lower(model, shardy, platform=None):
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding

    name, fn, axes, args, out_spec = model
    jax.config.update("jax_use_shardy_partitioner", shardy)
    devs = np.array(jax.devices()[:int(np.prod([s for _, s in axes]))])
    mesh = Mesh(devs.reshape([s for _, s in axes]), tuple(a for a, _ in axes))
    avals = [jax.ShapeDtypeStruct(a[0], a[2] if len(a) > 2 else jnp.float32) for a in args]
    in_sh = tuple(NamedSharding(mesh, a[1]) for a in args)
    if isinstance(out_spec, tuple) and not isinstance(out_spec, jax.sharding.PartitionSpec):
        out_sh = tuple(NamedSharding(mesh, s) for s in out_spec)
    else:
        out_sh = NamedSharding(mesh, out_spec)
    jitted = jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh)
    if platform:  # lowered for another backend (XLA:CPU expands ragged_dot into masked dots)
        return jitted.trace(*avals).lower(lowering_platforms=(platform,))
    return jitted.lower(*avals)


def dump_text(lowered, dump_dir):
    """Compiles (which makes XLA dump its input module) and returns that dump."""
    before = set(glob.glob(os.path.join(dump_dir, "*before_optimizations.txt")))
    lowered.compile()
    new = sorted(set(glob.glob(os.path.join(dump_dir, "*before_optimizations.txt"))) - before)
    if len(new) != 1:
        raise RuntimeError("expected one new before_optimizations dump, found %d" % len(new))
    with open(new[0]) as f:
        return f.read()


def header(fname, what, model):
    import jax
    name, _, axes, args, out_spec = model
    mesh = ", ".join("%s=%d" % a for a in axes)
    lines = [
        "// %s - generated by tools/export_jax.py (jax %s); do not edit." % (fname, jax.__version__),
        "// Command: %s" % COMMAND,
        "// Model: %s block, mesh [%s]; %s." % (name, mesh, what),
        "// Arguments (f32 unless named) and their PartitionSpecs:",
    ]
    for i, a in enumerate(args):
        lines.append("//   arg%d %s%s %s" % (i, a[2] + " " if len(a) > 2 else "", list(a[0]), a[1]))
    lines.append("//   result %s" % (out_spec,))
    lines.append("// Unpartitioned: XLA's sharding propagation and SPMD partitioner have NOT run.")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default="examples")
    ap.add_argument("--only", metavar="FILE", help="write only this file (e.g. jax_moe.hlo)")
    args = ap.parse_args()

    dump_dir = tempfile.mkdtemp(prefix="export_jax_")
    atexit.register(shutil.rmtree, dump_dir, True)  # XLA's dumps: read, then not kept
    setup_env(dump_dir)
    try:
        import jax
    except ImportError:
        print("export_jax.py: jax is not installed (pip install jax); nothing exported")
        return 0
    # Stack-frame tables in the dumps name this file without its directory.
    jax.config.update("jax_hlo_source_file_canonicalization_regex", ".*/")

    mlp, attn, mlp_tr, dp, zero, moe = models()
    jobs = [
        ("jax_mlp.hlo", mlp, False, "dump",
         "GSPMD mode (jax_use_shardy_partitioner=False), XLA's before_optimizations dump"),
        ("jax_attention.hlo", attn, False, "dump",
         "GSPMD mode (jax_use_shardy_partitioner=False), XLA's before_optimizations dump"),
        ("jax_mlp_sdy.hlo", mlp, True, "text",
         "Shardy mode (JAX default), lowered.as_text(dialect=\"hlo\")"),
        ("jax_attention_sdy.hlo", attn, True, "dump",
         "Shardy mode (JAX default), XLA's before_optimizations dump"),
        ("jax_mlp_train.hlo", mlp_tr, False, "dump",
         "training step (loss and gradients of every argument but y), GSPMD mode, XLA's before_optimizations dump"),
        ("jax_dp_train.hlo", dp, False, "dump",
         "data-parallel SGD step (batch split, parameters replicated), GSPMD mode, XLA's before_optimizations dump"),
        ("jax_dp_train_zero.hlo", zero, False, "dump",
         "data-parallel SGD step with parameters sharded over data (ZeRO-3), GSPMD mode, before_optimizations dump"),
        ("jax_moe.hlo", moe, False, "tpu",
         "mixture of experts (jax.lax.ragged_dot), GSPMD mode, lowered for TPU (XLA:CPU would expand "
         "ragged_dot into masked dots) and printed by lowered.as_text(dialect=\"hlo\")"),
        ("jax_moe_sdy.hlo", moe, True, "tpu",
         "the same in Shardy mode (JAX default; XLA partitions ragged-dot only with Shardy), lowered for TPU, "
         "lowered.as_text(dialect=\"hlo\")"),
    ]
    os.makedirs(args.out_dir, exist_ok=True)
    for fname, model, shardy, form, what in jobs:
        if args.only and fname != args.only:
            continue
        lowered = lower(model, shardy, form if form not in ("dump", "text") else None)
        text = dump_text(lowered, dump_dir) if form == "dump" else lowered.as_text(dialect="hlo")
        path = os.path.join(args.out_dir, fname)
        with open(path, "w") as f:
            f.write(header(fname, what, model))
            f.write(text if text.endswith("\n") else text + "\n")
        print("wrote %s (%d lines)" % (path, text.count("\n")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
