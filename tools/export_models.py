#!/usr/bin/env python3
"""export_models.py - export the real-program suites (examples/models/) from JAX:
small models written as XLA sees them on entry to compilation, with a JSON
sidecar per model, and XLA's own partitioner run on each as the baseline.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python3 tools/export_models.py [--out-dir examples/models] [--suite S]...
                                       [--model NAME]... [--no-baseline] [--list]

Suites (one directory each):
  windows   convolutions, reduce-window and select-and-scatter on split data,
            shape ops across shard boundaries, uneven dims (issue 7)
  indexing  gather / scatter on split operands, argmax, top_k, sort, a KV-cache
            dynamic-update-slice, rng (issue 8)
  control   scan over layers, while and conditional with split state, shard_map
            (manual and partially manual regions) (issue 9)
  numerics  pending sums in other element types and reductions: int8 and bf16
            dots with wider accumulation, integer and unsigned reductions with
            max/min/sum/prod, means and variances over split dims, a prefix sum
            along a split dim, cross-entropy over a split vocabulary

For every model the script builds a jax.jit function with in_shardings /
out_shardings (NamedSharding over a jax.sharding.Mesh of 8 CPU devices),
compiles it once so that XLA dumps its input module, and writes

  <suite>/<name>.hlo        GSPMD form (jax_use_shardy_partitioner=False):
                            XLA's *.before_optimizations.txt dump, positional
                            `sharding={devices=[..]<=[..]}` attributes; no
                            sharding propagation or partitioning has run
  <suite>/<name>_sdy.hlo    for the models marked so, the Shardy form (JAX's
                            default): the before_optimizations dump with
                            xla.sdy.* frontend attributes
  <suite>/<name>.json       the sidecar (schema spmdc.model/v1): suite, name,
                            mesh (spmdc's --mesh spelling), devices, files and
                            their forms, how it was made (jax version, the
                            function, arguments with shapes, dtypes and
                            PartitionSpecs, results), flops from XLA's cost
                            analysis of the unpartitioned module, and `expect`:
                            what an engineer who knows XLA's partitioner
                            expects it to do

and then (unless --no-baseline) runs tools/xla_partition.py --json on every
file written and records XLA's collectives after its spmd-partitioning pass in
<out-dir>/baseline.json (schema spmdc.xla-baseline/v1): per file the devices,
the partitioner, the total bytes per device and one row per collective
(loop trips counted, see xla_partition.py); a file XLA rejects when it reads it
back gets an "error" entry instead.  Entries of models not exported in
this run are kept.

All models but the numerics suite's are f32 (indices s32); all are small: the largest (embed_xent_train)
does 2.6e7 flops by XLA's count, so spmdc's simulator (`spmdc verify`) runs
every one of them in well under a second.

Exits 0 with a message when jax is not installed.
"""
import argparse
import atexit
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
COMMAND = ("XLA_FLAGS=--xla_force_host_platform_device_count=8 "
           "python3 tools/export_models.py")


def setup_env(dump_dir):
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        flags += " --xla_force_host_platform_device_count=8"
    flags += " --xla_dump_to=%s --xla_dump_hlo_pass_re=NONE" % dump_dir
    os.environ["XLA_FLAGS"] = flags.strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class Model:
    """One exported program.

    mesh: ((axis, size), ...) major to minor; args: [(shape, dtype, spec)]
    with spec a tuple of PartitionSpec entries (None, "axis" or a tuple of
    axes); outs: one spec per result leaf (a single spec for a single array);
    sdy: also write the Shardy form; what: one line on the program; expect:
    what an expert expects the partitioner to do with it; constrain: apply the
    argument and result shardings with jax.lax.with_sharding_constraint inside
    the function instead of in_shardings / out_shardings (jax.jit refuses
    shardings that do not divide a dim; the constraint accepts them and XLA
    sees `Sharding` custom-calls)."""

    def __init__(self, suite, name, fn, mesh, args, outs, what, expect, sdy=False,
                 constrain=False):
        self.suite, self.name, self.fn, self.mesh = suite, name, fn, mesh
        self.args, self.outs, self.what, self.expect, self.sdy = args, outs, what, expect, sdy
        self.constrain = constrain

    @property
    def mesh_spec(self):
        return ",".join("%s=%d" % a for a in self.mesh)

    @property
    def devices(self):
        n = 1
        for _, s in self.mesh:
            n *= s
        return n


def F(*shape):
    return (shape, "float32")


def I(*shape):
    return (shape, "int32")


def T(dtype, *shape):
    return (shape, dtype)


# ----------------------------------------------------------------- the models

def cnn_params(cin, c1, c2, hw, classes):
    """Parameter shapes of the small CNN: two 3x3 convolutions, a dense head
    on the twice-pooled map (hw/4 x hw/4 x c2)."""
    return [F(3, 3, cin, c1), F(c1), F(3, 3, c1, c2), F(c2), F((hw // 4) * (hw // 4) * c2, classes),
            F(classes)]


def build_models():
    import jax
    import jax.numpy as jnp
    from jax import lax

    dn = ("NHWC", "HWIO", "NHWC")

    def conv(x, w, stride=1, dilation=1, groups=1, padding="SAME"):
        return lax.conv_general_dilated(x, w, (stride, stride), padding,
                                        rhs_dilation=(dilation, dilation), dimension_numbers=dn,
                                        feature_group_count=groups)

    def maxpool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def cnn(x, w1, b1, w2, b2, wd, bd):
        h = maxpool(jax.nn.relu(conv(x, w1) + b1))
        h = maxpool(jax.nn.relu(conv(h, w2) + b2))
        return h.reshape(h.shape[0], -1) @ wd + bd

    def xent(logits, onehot):
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * onehot, axis=-1))

    def cnn_train(x, onehot, *params):
        def loss(p):
            return xent(cnn(x, *p), onehot)
        l, g = jax.value_and_grad(loss)(params)
        return tuple(p - 0.1 * d for p, d in zip(params, g)) + (l,)

    R = ()                                     # replicated spec
    models = []
    W = "windows"

    # --- windows (issue 7)
    pb = cnn_params(3, 8, 16, 16, 10)
    models.append(Model(W, "cnn_batch", cnn, (("data", 8),),
                        [F(16, 16, 16, 3) + (("data",),)] + [p + (R,) for p in pb], ("data",),
                        "CNN forward (conv3x3 3->8, relu, maxpool 2x2, conv3x3 8->16, relu, "
                        "maxpool, dense 256->10) on x[16,16,16,3] split on batch",
                        "everything local: batch-split convolutions, pools and dense need no "
                        "collective", sdy=True))
    ph = cnn_params(3, 8, 16, 32, 10)
    models.append(Model(W, "cnn_height", cnn, (("space", 8),),
                        [F(4, 32, 32, 3) + ((None, "space"),)] + [p + (R,) for p in ph], R,
                        "the same CNN on x[4,32,32,3] with activations split on height "
                        "(4 rows a device, 2 after the first pool)",
                        "one-row halos by collective-permute before each 3x3 convolution "
                        "(pools of 2 on even shards need none); the dense head contracts "
                        "over the split rows: a partial sum all-reduced (or the map gathered)",
                        sdy=True))
    models.append(Model(W, "cnn_batch_train", cnn_train, (("data", 8),),
                        [F(16, 16, 16, 3) + (("data",),), F(16, 10) + (("data",),)]
                        + [p + (R,) for p in pb], [R] * 7,
                        "training step of cnn_batch: softmax cross-entropy, backward "
                        "(input and kernel gradient convolutions, select-and-scatter of the "
                        "max-pool gradient), SGD update of the replicated parameters",
                        "forward and backward local on the batch shards; one all-reduce per "
                        "parameter gradient (or one fused), nothing gathers the batch"))
    models.append(Model(W, "cnn_height_train", cnn_train, (("space", 8),),
                        [F(4, 32, 32, 3) + ((None, "space"),), F(4, 10) + (R,)]
                        + [p + (R,) for p in ph], [R] * 7,
                        "training step of cnn_height (height-split activations)",
                        "halo exchanges forward and backward (the input-gradient convolution "
                        "and select-and-scatter need halos too), kernel gradients as partial "
                        "sums all-reduced over the height shards"))
    models.append(Model(W, "roll", lambda x: jnp.roll(x, 3, axis=1), (("model", 8),),
                        [F(16, 64) + ((None, "model"),)], (None, "model"),
                        "jnp.roll(x, 3, axis=1) on x[16,64] split on the rolled dim (8 columns "
                        "a device)",
                        "each device sends its last 3 columns to its right neighbour: one "
                        "collective-permute of f32[16,3] (192 bytes), the slice+concatenate "
                        "seen as one shift", sdy=True))
    models.append(Model(W, "cumsum", lambda x: jnp.cumsum(x, axis=1), (("model", 8),),
                        [F(16, 64) + ((None, "model"),)], (None, "model"),
                        "jnp.cumsum(x, axis=1) on x[16,64] split on the summed dim: a "
                        "reduce-window of size 64 with padding 63 on the left",
                        "a window as wide as the dim: gather the prefix (XLA all-gathers or "
                        "exchanges the whole left part) or a local scan plus an exclusive "
                        "scan of the 8 shard totals"))

    def uneven(t, x, w1, h, wv):
        return (jnp.sum(jnp.tanh(t), axis=0), jnp.max(x @ w1, axis=0),
                jnp.sum(jnp.exp(jax.nn.log_softmax(h @ wv, axis=-1)), axis=-1))
    models.append(Model(W, "uneven", uneven, (("data", 8),),
                        [F(17, 64) + (("data",),), F(100, 32) + (("data",),), F(32, 16) + (R,),
                         F(8, 32) + (R,), F(32, 100) + ((None, "data"),)],
                        [R, R, R],
                        "dims that do not divide by 8, each reduced over its padded dim: the "
                        "column sums of tanh(t), t[17,64] split on its 17 rows; the column max "
                        "of x @ w, x[100,32] a batch of 100 split 8 ways; the row sums of "
                        "exp(log_softmax(h @ wv)) over a vocabulary of 100 split 8 ways "
                        "(jax.jit refuses such shardings as in_shardings, so they are "
                        "with_sharding_constraint annotations on the arguments)",
                        "shards padded to the ceiling (3, 13 and 13), the padding masked with "
                        "each reduction's identity (0 for the sums, -inf for the maxes): "
                        "small all-reduces of f32[64], f32[16] and f32[8] (the softmax max "
                        "and sum and the final sum), no gather", constrain=True))

    def depthwise(x, wd, wg):
        return conv(conv(x, wd, groups=16), wg, groups=8)
    models.append(Model(W, "depthwise", depthwise, (("model", 8),),
                        [F(8, 16, 16, 16) + ((None, None, None, "model"),),
                         F(3, 3, 1, 16) + ((None, None, None, "model"),),
                         F(3, 3, 2, 16) + ((None, None, None, "model"),)],
                        (None, None, None, "model"),
                        "a depthwise 3x3 convolution (feature_group_count=16) then a grouped "
                        "one (8 groups of 2 channels) on x[8,16,16,16] split on channels",
                        "both local: every device holds whole groups (2 channels = 1 group of "
                        "the depthwise conv's 16, 1 of the grouped conv's 8)"))
    models.append(Model(W, "conv_strided", lambda x, w: conv(x, w, stride=2), (("space", 8),),
                        [F(8, 32, 32, 4) + ((None, "space"),), F(3, 3, 4, 8) + (R,)],
                        (None, "space"),
                        "3x3 convolution with stride 2 (SAME) on x[8,32,32,4] split on height "
                        "(4 rows a device, 2 output rows)",
                        "a one-row halo from one neighbour (SAME with stride 2 pads 0 above, "
                        "1 below): one collective-permute of f32[8,1,32,4] (4 KiB)"))
    models.append(Model(W, "conv_dilated", lambda x, w: conv(x, w, dilation=2), (("space", 8),),
                        [F(8, 32, 32, 4) + ((None, "space"),), F(3, 3, 4, 8) + (R,)],
                        (None, "space"),
                        "3x3 convolution with rhs dilation 2 (SAME) on x[8,32,32,4] split on "
                        "height",
                        "two-row halos on each side: two collective-permutes of "
                        "f32[8,2,32,4] (8 KiB each)"))

    def pad_slice(x):
        return jnp.pad(x, ((0, 0), (3, 5)))[:, 2:66], x[:, 1::2]
    models.append(Model(W, "pad_slice", pad_slice, (("model", 8),),
                        [F(16, 64) + ((None, "model"),)], [(None, "model"), (None, "model")],
                        "pad x[16,64] (split on columns) by 3 left / 5 right, slice columns "
                        "2..66, and the strided slice x[:, 1::2]",
                        "the pad+slice is a shift by one column: a collective-permute of "
                        "f32[16,1]; the strided slice x[:,1::2] is local (8 columns a device, "
                        "4 kept)"))

    # --- indexing (issue 8)
    X = "indexing"

    def embed_xent(table, wout, ids, labels):
        h = jnp.tanh(jnp.take(table, ids, axis=0))
        logp = jax.nn.log_softmax(h @ wout, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[..., None], axis=-1))

    def embed_xent_train(table, wout, ids, labels):
        l, (gt, gw) = jax.value_and_grad(embed_xent, argnums=(0, 1))(table, wout, ids, labels)
        return table - 0.1 * gt, wout - 0.1 * gw, l
    emb_args = [F(512, 64) + (("model", None),), F(64, 512) + ((None, "model"),),
                I(16, 8) + (R,), I(16, 8) + (R,)]
    models.append(Model(X, "embed_xent", embed_xent, (("model", 8),), emb_args, R,
                        "embedding lookup in a vocabulary-split table[512,64], tanh, logits "
                        "over a vocabulary-split wout[64,512], softmax cross-entropy against "
                        "integer labels (ids, labels s32[16,8] replicated)",
                        "masked local gather of the table rows each device holds and one "
                        "all-reduce of f32[16,8,64]; the softmax max and sum and the label "
                        "pick reduced across the vocabulary shards with small all-reduces "
                        "(f32[16,8]); never a gather of the table or the logits", sdy=True))
    models.append(Model(X, "embed_xent_train", embed_xent_train, (("model", 8),), emb_args,
                        [("model", None), (None, "model"), R],
                        "training step of embed_xent: backward scatter-add into the split "
                        "table, SGD update",
                        "the forward as in embed_xent; the table gradient as a masked local "
                        "scatter-add (no gather of the table), wout's gradient local"))
    models.append(Model(X, "take", lambda x, i: jnp.take(x, i, axis=0), (("model", 8),),
                        [F(64, 32) + (("model", None),), I(16) + (R,)], R,
                        "jnp.take(x, idx, axis=0) from x[64,32] split on the indexed axis, "
                        "idx s32[16] replicated",
                        "masked local gather and one all-reduce of f32[16,32] (3,584 bytes), "
                        "cheaper than gathering x (7,168 bytes)"))
    models.append(Model(X, "argmax", lambda x: jnp.argmax(x, axis=1).astype(jnp.int32),
                        (("model", 8),), [F(16, 64) + ((None, "model"),)], R,
                        "jnp.argmax along the split axis of x[16,64]",
                        "local argmax per shard (value, index pairs), then the 8 candidates "
                        "per row combined: an all-gather of f32[16,1]+s32[16,1] or an "
                        "all-reduce with a tuple reducer, not a gather of x"))
    models.append(Model(X, "top_k", lambda x: tuple(lax.top_k(x, 4)), (("model", 8),),
                        [F(16, 64) + ((None, "model"),)], [R, R],
                        "lax.top_k(x, 4) along the split axis of x[16,64] (the topk opcode)",
                        "local top-4 per shard, all-gather of the 8x4 candidates per row "
                        "(values and global indices), final top-4"))
    models.append(Model(X, "kv_cache", lambda c, n, p: lax.dynamic_update_slice(c, n, (0, p, 0)),
                        (("model", 8),),
                        [F(8, 64, 64) + ((None, "model"),), F(8, 1, 64) + (R,), I() + (R,)],
                        (None, "model"),
                        "dynamic_update_slice of a new entry f32[8,1,64] at position p into "
                        "a cache f32[8,64,64] split on its sequence dim",
                        "local: each device clamps p globally and writes the entry only if it "
                        "falls in its slice; no collective"))
    models.append(Model(X, "sort", lambda x: jnp.sort(x, axis=1), (("data", 8),),
                        [F(16, 64) + (("data",),)], ("data",),
                        "jnp.sort along the unsplit axis of x[16,64], batch split",
                        "local: no collective"))

    def rng(seed):
        k = jax.random.PRNGKey(seed)
        return jax.random.uniform(k, (64, 128)) * 2.0 - 1.0
    models.append(Model(X, "rng", rng, (("model", 8),), [I() + (R,)], (None, "model"),
                        "jax.random.uniform(PRNGKey(seed), (64,128)) with the result split on "
                        "columns (threefry, partitionable)",
                        "local: each device generates its own columns from the counters of "
                        "its slice (iota offsets), no collective"))

    # --- control flow (issue 9)
    C = "control"

    def scan_layers(x, w1, w2):
        def body(h, w):
            return h + jnp.tanh(h @ w[0]) @ w[1], None
        return lax.scan(body, x, (w1, w2))[0]

    def scan_train(x, y, w1, w2):
        def loss(w1, w2):
            return jnp.mean((scan_layers(x, w1, w2) - y) ** 2)
        l, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2, l
    scan_args = [F(16, 64) + (R,), F(4, 64, 256) + ((None, None, "model"),),
                 F(4, 256, 64) + ((None, "model", None),)]
    models.append(Model(C, "scan_layers", scan_layers, (("model", 8),), scan_args, R,
                        "lax.scan over 4 residual MLP layers, stacked w1[4,64,256] column-split "
                        "and w2[4,256,64] row-split over model, x[16,64] replicated",
                        "the body partitioned Megatron-style: one all-reduce of f32[16,64] "
                        "per trip (7,168 bytes), 28,672 for the 4 trips; the weights never "
                        "gathered", sdy=True))
    models.append(Model(C, "scan_layers_train", scan_train, (("model", 8),),
                        [scan_args[0], F(16, 64) + (R,)] + scan_args[1:],
                        [(None, None, "model"), (None, "model", None), R],
                        "training step of scan_layers: MSE loss, backward scan, SGD update",
                        "one all-reduce of f32[16,64] per trip forward and one per trip "
                        "backward; weight gradients local to their shards"))

    def while_2d(x, w):
        def cond(c):
            return c[0] < 3

        def body(c):
            i, h = c
            return i + 1, h + 0.1 * jnp.tanh(h @ w)
        return lax.while_loop(cond, body, (jnp.int32(0), x))[1]
    models.append(Model(C, "while_2d", while_2d, (("data", 2), ("model", 4)),
                        [F(16, 64) + (("data", "model"),), F(64, 64) + (("model", None),)],
                        ("data", "model"),
                        "lax.while_loop (3 trips) whose carry h[16,64] is split on both mesh "
                        "axes (rows on data, columns on model); h @ w with w[64,64] row-split "
                        "on model",
                        "per trip the contraction over the split columns gives a partial sum: "
                        "a reduce-scatter back to the carry's column split (or an all-reduce), "
                        "inside the body; the carry stays split"))

    def cond_fn(flag, x, w):
        return lax.cond(flag > 0, lambda x: x @ w, lambda x: x * 2.0, x)
    models.append(Model(C, "cond", cond_fn, (("model", 8),),
                        [I() + (R,), F(16, 64) + ((None, "model"),), F(64, 64) + (("model", None),)],
                        (None, "model"),
                        "lax.cond on a replicated flag: x @ w (x[16,64] column-split, w[64,64] "
                        "row-split) in one branch, x * 2 in the other",
                        "branches partitioned with their operands' shardings: the dot as a "
                        "partial sum reduce-scattered to the column split inside the true "
                        "branch, the other branch local"))

    from jax.sharding import PartitionSpec as P

    def smap(x, w):
        mesh = jax.sharding.get_abstract_mesh()

        def inner(xl, wl):
            y = jax.lax.psum(xl @ wl, "model")
            z = jax.lax.all_gather(xl, "model", axis=1, tiled=True)
            p = jax.lax.ppermute(xl, "model", [(i, (i + 1) % 8) for i in range(8)])
            return y + z, p
        y, p = jax.shard_map(inner, mesh=mesh, in_specs=(P(None, "model"), P("model", None)),
                             out_specs=(P(), P(None, "model")), check_vma=False)(x, w)
        return y * 2.0, p + 1.0
    models.append(Model(C, "shard_map", smap, (("model", 8),),
                        [F(16, 64) + ((None, "model"),), F(64, 64) + (("model", None),)],
                        [R, (None, "model")],
                        "shard_map inside jit over model: psum of x_local @ w_local, "
                        "all_gather of x_local, ppermute of x_local to the next device; auto "
                        "code around it",
                        "the user's three collectives kept as written: all-reduce f32[16,64] "
                        "(7,168), all-gather to f32[16,64] (3,584), collective-permute "
                        "f32[16,8] (512): 11,264 bytes; nothing else", sdy=True))

    def partial_manual(x, w):
        mesh = jax.sharding.get_abstract_mesh()

        def inner(xl, wl):
            return jax.lax.psum(xl @ wl, "model")
        y = jax.shard_map(inner, mesh=mesh, in_specs=(P(None, "model"), P("model", None)),
                          out_specs=P(), axis_names={"model"})(x, w)
        return jnp.tanh(y)
    models.append(Model(C, "partial_manual", partial_manual, (("data", 2), ("model", 4)),
                        [F(16, 64) + (("data", "model"),), F(64, 64) + (("model", None),)],
                        ("data",),
                        "shard_map over model only on a data=2 x model=4 mesh (data stays "
                        "automatic): psum over model of x_local @ w_local, x[16,64] split "
                        "on data and model",
                        "inside the manual region the user's psum: one all-reduce over model "
                        "of f32[8,64] (3,072 bytes, 2 groups of 4); the data split kept "
                        "automatic, no collective along data", sdy=True))

    N = "numerics"
    M8 = (("model", 8),)
    M24 = (("data", 2), ("model", 4))
    models.append(Model(N, "int8_matmul", lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.int32),
                        M8, [T("int8", 8, 64) + ((None, "model"),), T("int8", 64, 16) + (("model", None),)],
                        R, "s8[8,64] @ s8[64,16] accumulated in s32 (preferred_element_type), the "
                        "contracting dim split over model",
                        "local s8 x s8 -> s32 dots, then one all-reduce of the s32[8,16] partial "
                        "sums: 2 x 7/8 x 512 = 896 bytes; the sum is exact in s32", sdy=True))
    models.append(Model(N, "bf16_dot_f32", lambda a, b: jnp.matmul(a, b, preferred_element_type=jnp.float32),
                        M8, [T("bfloat16", 8, 64) + ((None, "model"),), T("bfloat16", 64, 16) + (("model", None),)],
                        R, "bf16[8,64] @ bf16[64,16] accumulated in f32, the contracting dim split",
                        "one all-reduce of the f32[8,16] partial sums (896 bytes), not of bf16", sdy=True))
    models.append(Model(N, "bf16_mean", lambda x: x.mean(axis=1), M8,
                        [T("bfloat16", 8, 256) + ((None, "model"),)], R,
                        "mean over the split dim of bf16[8,256] (JAX sums in f32)",
                        "one all-reduce of the f32[8] partial sums: 2 x 7/8 x 32 = 56 bytes", sdy=True))
    models.append(Model(N, "u8_minmax_sum",
                        lambda x: x.max(axis=1) - x.min(axis=1) + x.sum(axis=1, dtype=jnp.uint8), M8,
                        [T("uint8", 4, 64) + ((None, "model"),)], R,
                        "max, min and a wrapping u8 sum over the split dim of u8[4,64]",
                        "three all-reduces of u8[4] (maximum, minimum, add; 7 bytes each): 21 bytes",
                        sdy=True))
    models.append(Model(N, "s8_sum_wrap", lambda x: x.sum(axis=1, dtype=jnp.int8) * 3, M8,
                        [T("int8", 8, 64) + ((None, "model"),)], R,
                        "an s8 sum over the split dim that wraps around, times 3",
                        "one all-reduce of s8[8] (14 bytes): modular sums of the shards give the "
                        "same wrapped result", sdy=True))
    models.append(Model(N, "s32_max_sum_div",
                        lambda x: x - x.max(axis=1, keepdims=True) + x.sum(axis=1, keepdims=True) // 7,
                        M8, [I(8, 64) + ((None, "model"),)], (None, "model"),
                        "s32[8,64] split on dim 1: x - max(x) + sum(x) // 7 along the split dim",
                        "two all-reduces of s32[8] (max, add; 56 bytes each): 112 bytes; the "
                        "integer division comes after the sum is complete", sdy=True))
    models.append(Model(N, "prod_rows", lambda x: jnp.prod(x * 0.1 + 1.0, axis=0), M8,
                        [F(16, 4) + (("model", None),)], R,
                        "product over the split rows of f32[16,4]",
                        "one all-reduce (multiply) of f32[4]: 28 bytes", sdy=True))
    models.append(Model(N, "var_2d", lambda x: jnp.var(x, ddof=1), M24,
                        [F(16, 32) + (("data", "model"),)], R,
                        "unbiased variance of all of f32[16,32] split over data and model",
                        "scalar partial sums all-reduced over both axes: XLA sends 20 bytes in "
                        "four all-reduces", sdy=True))
    models.append(Model(N, "cumsum_rows", lambda x: jnp.cumsum(x, axis=0), M8,
                        [F(64, 16) + (("model", None),)], ("model", None),
                        "prefix sum along the split rows of f32[64,16]",
                        "XLA all-gathers the rows (3,584 bytes) and sums on every device; the "
                        "shards' totals are all that a device needs from the others", sdy=True))
    models.append(Model(N, "layernorm_seq",
                        lambda x, g: (x - x.mean(-1, keepdims=True))
                        / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + x,
                        M8, [F(4, 64, 32) + ((None, "model", None),), F(32) + ((None,),)],
                        (None, "model", None),
                        "layer norm of f32[4,64,32] split along the sequence, over the unsplit "
                        "features", "no collective", sdy=True))
    models.append(Model(N, "onehot_xent",
                        lambda lg, lb: jnp.mean(jax.nn.logsumexp(lg, axis=-1)
                                                - (jax.nn.one_hot(lb, 64) * lg).sum(-1)),
                        M24, [F(16, 64) + (("data", "model"),), I(16) + (("data",),)], R,
                        "cross-entropy with the vocabulary split over model and the batch over "
                        "data: logsumexp and a one-hot pick of the logits",
                        "all-reduces of the row max and the row sums over model and of the "
                        "mean over data: XLA sends 148 bytes", sdy=True))
    return models


# ------------------------------------------------------------------ exporting

def spec_of(s):
    from jax.sharding import PartitionSpec as P
    return P(*s)


def spec_text(s):
    return "P(%s)" % ", ".join(repr(e) if not isinstance(e, tuple) else repr(e) for e in s)


def lower(model, shardy):
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding

    jax.config.update("jax_use_shardy_partitioner", shardy)
    devs = np.array(jax.devices()[:model.devices])
    mesh = Mesh(devs.reshape([s for _, s in model.mesh]), tuple(a for a, _ in model.mesh))
    avals = [jax.ShapeDtypeStruct(shape, getattr(jnp, dt)) for shape, dt, _ in model.args]
    in_sh = tuple(NamedSharding(mesh, spec_of(s)) for _, _, s in model.args)
    outs = model.outs
    out_sh = (NamedSharding(mesh, spec_of(outs)) if isinstance(outs, tuple)
              else tuple(NamedSharding(mesh, spec_of(s)) for s in outs))
    with jax.set_mesh(mesh):
        if not model.constrain:
            return jax.jit(model.fn, in_shardings=in_sh, out_shardings=out_sh).lower(*avals)
        wsc = jax.lax.with_sharding_constraint

        def constrained(*xs):
            out = model.fn(*[wsc(x, s) for x, s in zip(xs, in_sh)])
            return wsc(out, out_sh)
        return jax.jit(constrained).lower(*avals)


def dump_text(lowered, dump_dir):
    """Compiles (which makes XLA dump its input module) and returns that dump."""
    before = set(glob.glob(os.path.join(dump_dir, "*before_optimizations.txt")))
    lowered.compile()
    new = sorted(set(glob.glob(os.path.join(dump_dir, "*before_optimizations.txt"))) - before)
    if len(new) != 1:
        raise RuntimeError("expected one new before_optimizations dump, found %d" % len(new))
    with open(new[0]) as f:
        return f.read()


def header(fname, model, form):
    import jax
    lines = [
        "// %s/%s - generated by tools/export_models.py (jax %s); do not edit." % (
            model.suite, fname, jax.__version__),
        "// Command: %s --model %s" % (COMMAND, model.name),
        "// Model: %s." % model.what,
        "// Mesh: %s; %s." % (model.mesh_spec, form),
        "// Arguments and their PartitionSpecs:",
    ]
    for i, (shape, dt, spec) in enumerate(model.args):
        lines.append("//   arg%d %s%s %s" % (i, dt, list(shape), spec_text(spec)))
    outs = [model.outs] if isinstance(model.outs, tuple) else model.outs
    lines.append("//   result%s %s" % ("s" if len(outs) > 1 else "", ", ".join(spec_text(s) for s in outs)))
    lines.append("// Expected: %s." % model.expect)
    lines.append("// Unpartitioned: XLA's sharding propagation and SPMD partitioner have NOT run.")
    return "\n".join(lines) + "\n"


FORMS = {
    False: "GSPMD form (jax_use_shardy_partitioner=False), XLA's before_optimizations dump",
    True: "Shardy form (JAX's default), XLA's before_optimizations dump",
}


def export(model, out_dir, dump_dir):
    import jax
    d = os.path.join(out_dir, model.suite)
    os.makedirs(d, exist_ok=True)
    files = []
    flops = None
    for shardy in ([False, True] if model.sdy else [False]):
        lowered = lower(model, shardy)
        if flops is None:
            ca = lowered.cost_analysis() or {}
            flops = int(ca.get("flops", 0))
        text = dump_text(lowered, dump_dir)
        fname = model.name + ("_sdy" if shardy else "") + ".hlo"
        with open(os.path.join(d, fname), "w") as f:
            f.write(header(fname, model, FORMS[shardy]))
            f.write(text if text.endswith("\n") else text + "\n")
        files.append({"file": fname, "form": "shardy" if shardy else "gspmd"})
        print("wrote %s/%s (%d lines)" % (d, fname, text.count("\n")))
    outs = [model.outs] if isinstance(model.outs, tuple) else model.outs
    side = {
        "schema": "spmdc.model/v1",
        "suite": model.suite,
        "name": model.name,
        "mesh": model.mesh_spec,
        "devices": model.devices,
        "files": files,
        "made_by": {"tool": "tools/export_models.py", "jax": jax.__version__,
                    "command": "%s --model %s" % (COMMAND, model.name),
                    "how": ("jax.jit(f with jax.lax.with_sharding_constraint on the arguments and "
                            "results).lower(...).compile()" if model.constrain else
                            "jax.jit(f, in_shardings, out_shardings).lower(...).compile()")
                           + "; XLA's before_optimizations dump"},
        "program": model.what,
        "args": [{"shape": list(s), "dtype": dt, "spec": spec_text(sp)} for s, dt, sp in model.args],
        "results": [spec_text(s) for s in outs],
        "flops": flops,
        "expect": model.expect,
    }
    with open(os.path.join(d, model.name + ".json"), "w") as f:
        json.dump(side, f, indent=2)
        f.write("\n")
    return [os.path.join(d, x["file"]) for x in files]


def baseline(paths, out_dir):
    """Runs xla_partition.py --json on paths and merges into baseline.json."""
    import jax
    res = subprocess.run([sys.executable, os.path.join(HERE, "xla_partition.py"), "--json"] + paths,
                         stdout=subprocess.PIPE, universal_newlines=True)
    if res.returncode != 0:
        sys.stderr.write("export_models.py: XLA's partitioner failed on some files\n")
    results = json.loads(res.stdout)
    path = os.path.join(out_dir, "baseline.json")
    base = {"schema": "spmdc.xla-baseline/v1", "models": {}}
    if os.path.exists(path):
        with open(path) as f:
            base = json.load(f)
    base["jax"] = jax.__version__
    base["command"] = "python3 tools/xla_partition.py --json FILE.hlo (run by tools/export_models.py)"
    base["note"] = ("collectives of XLA's module right after its spmd-partitioning pass, bytes per "
                    "device by spmdc's cost model (docs/report.md), collectives in loop bodies "
                    "counted once per trip")
    for r in results:
        key = os.path.relpath(r["file"], out_dir).replace(os.sep, "/")
        if "error" in r:
            base["models"][key] = {"error": "XLA rejected it: " + r["error"]}
            continue
        rows = r["after_spmd_partitioning"]
        for row in rows:
            row.pop("groups", None)
        base["models"][key] = {
            "devices": r["devices"], "partitioner": r["partitioner"],
            "bytes_per_device": sum(x["bytes_per_device"] for x in rows),
            "collectives": rows,
            "bytes_per_device_after_optimizations": sum(
                x["bytes_per_device"] for x in r["after_optimizations"]),
        }
    base["models"] = dict(sorted(base["models"].items()))
    with open(path, "w") as f:
        json.dump(base, f, indent=1, sort_keys=False)
        f.write("\n")
    print("wrote %s (%d files)" % (path, len(base["models"])))
    return res.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=os.path.join(HERE, "..", "examples", "models"))
    ap.add_argument("--suite", action="append", help="only this suite (repeatable)")
    ap.add_argument("--model", action="append", help="only this model (repeatable)")
    ap.add_argument("--no-baseline", action="store_true", help="do not run XLA's partitioner")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    args = ap.parse_args()

    dump_dir = tempfile.mkdtemp(prefix="export_models_")
    atexit.register(shutil.rmtree, dump_dir, True)  # XLA's dumps: read, then not kept
    setup_env(dump_dir)
    try:
        import jax
    except ImportError:
        print("export_models.py: jax is not installed (pip install jax); nothing exported")
        return 0
    jax.config.update("jax_hlo_source_file_canonicalization_regex", ".*/")
    out_dir = os.path.normpath(args.out_dir)
    models = [m for m in build_models()
              if (not args.suite or m.suite in args.suite) and (not args.model or m.name in args.model)]
    if args.list:
        for m in models:
            print("%-9s %-18s %-18s %s" % (m.suite, m.name, m.mesh_spec, m.what))
        return 0
    if not models:
        print("export_models.py: no model matches", file=sys.stderr)
        return 2
    paths = []
    for m in models:
        paths += export(m, out_dir, dump_dir)
    if args.no_baseline:
        return 0
    return baseline(paths, out_dir)


if __name__ == "__main__":
    sys.exit(main())
