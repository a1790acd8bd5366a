#!/usr/bin/env python3
"""export_control_cases.py - write the shard_map programs of the control-flow
test cases (tests/cases/control/smap_*.hlo, pmanual_*.hlo) from JAX, one file
per mesh, in GSPMD form and in Shardy form.

    XLA_FLAGS=--xla_force_host_platform_device_count=8 \\
        python3 tools/export_control_cases.py --out-dir tests/cases/control

A manual region is written with per-device shapes, so each mesh size needs
its own export.  The programs:

  smap_<mesh>     jax.shard_map over every mesh axis inside jit: psum of
                  x_local @ w_local over `model`, all_gather of x_local along
                  `model`, ppermute of x_local to the next device along
                  `model`; automatic code before and after.
  pmanual_<mesh>  jax.shard_map over `model` only on a data x model mesh
                  (`data` stays automatic): psum over model of x_local @ w_local.
  pmanual_axis_index_<mesh>
                  the same region around cumsum(x_local) + axis_index(model):
                  JAX writes axis_index as a nested manual region with no
                  inputs (partition-id arithmetic in a call).
  a2a_<mesh>      jax.shard_map over model with all_to_all, psum_scatter and
                  axis_index (partition-id arithmetic) inside.
  smap_scan       lax.scan inside jax.shard_map (model=4): a psum per trip.
  scan_smap       jax.shard_map inside the body of lax.scan (model=4).
  scan_layers, scan_layers_train, while_loop, cond
                  the control suite's models of tools/export_models.py (a scan over
                  layers, its training step, a while with a split carry, a
                  conditional), in the Shardy form only: its shardings name the
                  mesh axes, so one file compiles and verifies at every mesh size.

Uses tools/export_models.py for lowering and XLA's before_optimizations dump.
Exits 0 with a message when jax is not installed.
"""
import argparse
import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

COMMAND = ("XLA_FLAGS=--xla_force_host_platform_device_count=8 "
           "python3 tools/export_control_cases.py --out-dir tests/cases/control")

MESHES = [(("model", 2),), (("model", 4),), (("model", 8),), (("data", 2), ("model", 2)),
          (("data", 2), ("model", 4))]


def mesh_name(mesh):
    return "_".join("%s%d" % a for a in mesh)


def build(em):
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    models = []
    for mesh in MESHES:
        axes = tuple(a for a, _ in mesh)
        nm = dict(mesh)["model"]
        spec_x = ("data" if "data" in axes else None, "model")

        def smap(x, w, nm=nm, axes=axes):
            m = jax.sharding.get_abstract_mesh()

            def inner(xl, wl):
                y = jax.lax.psum(xl @ wl, "model")
                z = jax.lax.all_gather(xl, "model", axis=1, tiled=True)
                p = jax.lax.ppermute(xl, "model", [(i, (i + 1) % nm) for i in range(nm)])
                return y + z, p
            xs = P(*(("data" if "data" in axes else None), "model"))
            y, p = jax.shard_map(inner, mesh=m, in_specs=(xs, P("model", None)),
                                 out_specs=(xs, xs), check_vma=False)(x, w)
            return y * 2.0, p + 1.0
        models.append(em.Model("control", "smap_" + mesh_name(mesh), smap, mesh,
                               [em.F(16, 64) + (spec_x,), em.F(64, 64) + (("model", None),)],
                               [spec_x, spec_x],
                               "shard_map over %s: psum over model of x_local @ w_local, all_gather "
                               "and ppermute of x_local along model" % ",".join(axes),
                               "the user's three collectives kept as written and nothing else",
                               sdy=True))
        if "data" not in axes:
            continue

        def pmanual(x, w):
            m = jax.sharding.get_abstract_mesh()

            def inner(xl, wl):
                return jax.lax.psum(xl @ wl, "model")
            y = jax.shard_map(inner, mesh=m, in_specs=(P(None, "model"), P("model", None)),
                              out_specs=P(), axis_names={"model"})(x, w)
            return jnp.tanh(y)
        models.append(em.Model("control", "pmanual_" + mesh_name(mesh), pmanual, mesh,
                               [em.F(16, 64) + (("data", "model"),), em.F(64, 64) + (("model", None),)],
                               ("data",),
                               "shard_map over model only (data automatic): psum over model of "
                               "x_local @ w_local",
                               "the user's all-reduce over model inside the region; data stays "
                               "automatic", sdy=True))

        def pmanual_axis_index(x):
            m = jax.sharding.get_abstract_mesh()

            def inner(xl):
                return jnp.cumsum(xl, axis=0) + jax.lax.axis_index("model").astype(jnp.float32)
            return jax.shard_map(inner, mesh=m, in_specs=P("model", None), out_specs=P("model", None),
                                 axis_names={"model"})(x)
        models.append(em.Model("control", "pmanual_axis_index_" + mesh_name(mesh), pmanual_axis_index, mesh,
                               [em.F(8, 6) + (("model", "data"),)], ("model", "data"),
                               "shard_map over model only (data automatic): cumsum of x_local plus "
                               "axis_index(model), which JAX writes as a nested region with no inputs",
                               "partition-id kept inside the nested region; one all-gather of x over data "
                               "into the region (its columns are automatic there but the cumsum "
                               "input's sharding is replicated along data)", sdy=True))
    def a2a(x, w):
        m = jax.sharding.get_abstract_mesh()

        def inner(xl, wl):
            a = jax.lax.all_to_all(xl, "model", 0, 1, tiled=True)
            s = jax.lax.psum_scatter(xl @ wl, "model", scatter_dimension=0, tiled=True)
            i = jax.lax.axis_index("model").astype(jnp.float32)
            return a * 2.0, s + i
        return jax.shard_map(inner, mesh=m, in_specs=(P(None, "model"), P("model", None)),
                             out_specs=(P(None, "model"), P("model", None)), check_vma=False)(x, w)
    for mesh in ((("model", 4),), (("data", 2), ("model", 2))):
        models.append(em.Model("control", "a2a_" + mesh_name(mesh), a2a, mesh,
                               [em.F(16, 32) + ((None, "model"),), em.F(32, 16) + (("model", None),)],
                               [(None, "model"), ("model", None)],
                               "shard_map over model: all_to_all, psum_scatter and axis_index",
                               "the user's all-to-all and reduce-scatter kept; axis_index's "
                               "partition-id keeps its meaning", sdy=True))

    def smap_scan(x, w):
        m = jax.sharding.get_abstract_mesh()

        def inner(xl, wl):
            def body(h, wi):
                return jax.lax.psum(jnp.tanh(h @ wi), "model") * 0.5, None
            return jax.lax.scan(body, xl, wl)[0]
        return jax.shard_map(inner, mesh=m, in_specs=(P(None, "model"), P(None, "model", None)),
                             out_specs=P(), check_vma=False)(x, w)

    def scan_smap(x, w):
        m = jax.sharding.get_abstract_mesh()

        def body(h, wi):
            def inner(hl, wl):
                return jax.lax.psum(hl @ wl, "model")
            y = jax.shard_map(inner, mesh=m, in_specs=(P(None, "model"), P("model", None)),
                              out_specs=P(), check_vma=False)(h, wi)
            return jnp.tanh(y), None
        return jax.lax.scan(body, x, w)[0]
    models.append(em.Model("control", "smap_scan", smap_scan, (("model", 4),),
                           [em.F(8, 16) + ((None, "model"),), em.F(3, 16, 4) + ((None, "model", None),)],
                           (), "lax.scan of 3 trips inside shard_map over model: a psum per trip",
                           "the user's all-reduce inside the loop, counted per trip", sdy=True))
    models.append(em.Model("control", "scan_smap", scan_smap, (("model", 4),),
                           [em.F(8, 16) + ((None, "model"),), em.F(3, 16, 16) + ((None, "model", None),)],
                           (), "shard_map over model inside the body of a 3-trip lax.scan",
                           "the region's borders and the user's psum inside the loop body", sdy=True))
    return models


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default="tests/cases/control")
    args = ap.parse_args()
    try:
        import jax  # noqa: F401
    except ImportError:
        print("jax is not installed; nothing exported")
        return 0
    dump_dir = tempfile.mkdtemp(prefix="spmdc-export-")
    atexit.register(shutil.rmtree, dump_dir, True)  # XLA's dumps: read, then not kept
    import export_models as em
    em.setup_env(dump_dir)
    em.COMMAND = COMMAND
    jobs = [(model, (False, True)) for model in build(em)]
    for model in em.build_models():
        if model.suite == "control" and model.name in ("scan_layers", "scan_layers_train", "while_2d", "cond"):
            jobs.append((model, (True,)))
    for model, forms in jobs:
        for shardy in forms:
            lowered = em.lower(model, shardy)
            text = em.dump_text(lowered, dump_dir)
            fname = model.name + ("_sdy" if shardy else "") + ".hlo"
            with open(os.path.join(args.out_dir, fname), "w") as f:
                f.write(em.header(fname, model, em.FORMS[shardy]).replace("tools/export_models.py",
                                                                           "tools/export_control_cases.py"))
                f.write(text if text.endswith("\n") else text + "\n")
            print("wrote %s/%s" % (args.out_dir, fname))
    return 0


if __name__ == "__main__":
    sys.exit(main())
