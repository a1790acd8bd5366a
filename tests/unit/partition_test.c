/* partition_test.c - the SPMD partitioner (src/partition.c,
 * src/partition_ops.c) end to end: HLO text -> parse -> bind -> propagate
 * -> partition, asserting the exact collectives, per-device shapes and
 * report bytes (worked out by hand beside each assertion), the errors, and
 * the numbers: every partitioned module here is run on all its devices by
 * the project's simulator (sim_run_spmd) and every output instruction that
 * carries an input instruction's name must hold that value's shard under
 * the input's sharding (partition.h's naming contract), compared with the
 * unpartitioned run.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "partition_internal.h"
#include "spmdc/driver.h"
#include "spmdc/hlo.h"
#include "spmdc/parse.h"
#include "spmdc/partition.h"
#include "spmdc/pipeline.h"
#include "spmdc/propagate.h"
#include "spmdc/report.h"
#include "spmdc/sim.h"

/* ================================================================ pipeline */

typedef struct Compiled {
    DiagEngine *diag;
    HloModule *in, *out;
    CommReport rep;
    bool ok;
} Compiled;

/* Parses, binds (with mesh_spec if not NULL), propagates, partitions. */
static Compiled compile(const char *text, const char *mesh_spec)
{
    Compiled c;
    memset(&c, 0, sizeof c);
    c.diag = diag_create(NULL);
    diag_set_show_source(c.diag, false);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    if (mesh_spec) {
        char err[200];
        assert_true(mesh_parse_spec(mesh_spec, &opt.mesh, err, sizeof err));
        opt.has_mesh = true;
    }
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, c.diag, &opt};
    uint32_t fid = diag_add_file(c.diag, "t.hlo", text, strlen(text));
    c.in = driver_load_module(text, strlen(text), fid, &cx, true);
    if (c.in) {
        report_init(&c.rep, c.in->name, &c.in->mesh);
        c.ok = partition_module(c.in, &c.out, &c.rep, &cx);
    } else {
        Mesh none;
        memset(&none, 0, sizeof none);
        report_init(&c.rep, "", &none);
    }
    arena_destroy(scratch);
    return c;
}

static void compiled_free(Compiled *c)
{
    hlo_module_free(c->in);
    hlo_module_free(c->out);
    report_free(&c->rep);
    diag_destroy(c->diag);
}

static Compiled compile_ok(const char *text, const char *mesh_spec)
{
    Compiled c = compile(text, mesh_spec);
    if (!c.ok)
        fail_msg("compile failed: %s", diag_text(c.diag));
    return c;
}

static char *print_module(const HloModule *m)
{
    StrBuf b = {0};
    HloPrintOptions po;
    memset(&po, 0, sizeof po);
    hlo_print_module(&b, m, &po);
    char *r = strdup(sb_cstr(&b));
    sb_free(&b);
    return r;
}

static const HloInst *out_inst(const Compiled *c, const char *name)
{
    int32_t i = hlo_find_inst(c->out, c->out->entry, name);
    if (i < 0)
        fail_msg("no instruction %s in the output", name);
    return hlo_inst(c->out, c->out->entry, i);
}

static int32_t count_op(const HloModule *m, HloOpcode op)
{
    const HloComputation *e = &m->comps[m->entry];
    int32_t n = 0;
    for (int32_t i = 0; i < e->n_insts; i++)
        n += e->insts[i].op == op;
    return n;
}

static int32_t count_collectives(const HloModule *m)
{
    const HloComputation *e = &m->comps[m->entry];
    int32_t n = 0;
    for (int32_t i = 0; i < e->n_insts; i++)
        n += hlo_opcode_category(e->insts[i].op) == 'C';
    return n;
}

static void assert_dims(const Shape *s, int32_t rank, int64_t d0, int64_t d1)
{
    assert_int_equal(s->rank, rank);
    if (rank > 0)
        assert_int_equal(s->dims[0], d0);
    if (rank > 1)
        assert_int_equal(s->dims[1], d1);
}

/* ================================================================ numerics */

/* The random program being checked (printed when it fails). */
static const char *g_program_text;
static int g_program_index = -1;

/* Device dev's block of global value g under state s: XLA's ceil layout,
 * tile i holding [i*c, min((i+1)*c, n)); the padding of uneven shards is
 * NaN (poison: no correct program lets it reach a result).  valid (may be
 * NULL) gets 1 for every real element. */
static SimValue block_valid(const Mesh *m, const SimValue *g, const Tiling *s, int64_t dev, uint8_t **valid)
{
    Shape ls = tiling_local_shape(s, m, &g->shape);
    SimValue r = sim_value_new(&ls);
    int64_t start[SPMDC_MAX_RANK], idx[SPMDC_MAX_RANK];
    for (int32_t d = 0; d < ls.rank; d++)
        start[d] = tiling_offset(s, m, &g->shape, d, dev);
    int64_t n = shape_elem_count(&ls);
    if (valid)
        *valid = calloc((size_t)n + 1, 1);
    for (int64_t k = 0; k < n; k++) {
        int64_t lin = k, gl = 0;
        bool in = true;
        for (int32_t d = ls.rank - 1; d >= 0; d--) {
            idx[d] = lin % ls.dims[d] + start[d];
            lin /= ls.dims[d];
            in &= idx[d] < g->shape.dims[d];
        }
        for (int32_t d = 0; d < ls.rank && in; d++)
            gl = gl * g->shape.dims[d] + idx[d];
        if (in)
            sim_value_set_f64(&r, k, sim_value_get_f64(g, gl));
        else if (elem_type_is_float(ls.type))
            sim_value_set_f64(&r, k, NAN);
        else
            sim_value_set_i64(&r, k, ls.type == ET_PRED ? 1 : 0x5A5A5A5A);
        if (valid)
            (*valid)[k] = in;
    }
    return r;
}

static SimValue block(const Mesh *m, const SimValue *g, const Tiling *s, int64_t dev)
{
    return block_valid(m, g, s, dev, NULL);
}

typedef struct Check {
    const HloModule *in, *out;
    SimValue *global;   /* per input entry instruction (unpartitioned run) */
    int32_t *in_of_out; /* output entry inst -> input entry inst or -1 */
    int32_t checked;
    int32_t mismatches;
    char first[512];
} Check;

static void observe_global(void *user, int32_t inst, const SimValue *vals, int64_t n)
{
    Check *c = user;
    (void)n;
    c->global[inst] = sim_value_share(&vals[0]);
}

static void observe_local(void *user, int32_t inst, const SimValue *vals, int64_t n)
{
    Check *c = user;
    int32_t vi = c->in_of_out[inst];
    if (vi < 0)
        return;
    const HloInst *in = hlo_inst(c->in, c->in->entry, vi);
    if (!shape_is_array(in->shape) || in->shape->type == ET_TOKEN)
        return;
    Tiling s;
    if (!sharding_to_tiling(in->sharding, in->shape->rank, &s) || s.partial)
        return;
    c->checked++;
    for (int64_t d = 0; d < n; d++) {
        uint8_t *valid;
        SimValue want = block_valid(&c->in->mesh, &c->global[vi], &s, d, &valid);
        int64_t ne = shape_elem_count(&want.shape);
        bool same = vals[d].shape.rank == want.shape.rank && shape_elem_count(&vals[d].shape) == ne;
        for (int64_t k = 0; same && k < ne; k++) {
            if (!valid[k])
                continue;
            double a = sim_value_get_f64(&vals[d], k), b = sim_value_get_f64(&want, k);
            double tol = 1e-3 * (1 + (b < 0 ? -b : b));
            if (a - b > tol || b - a > tol)
                same = false;
        }
        if (!same && c->mismatches++ == 0)
            snprintf(c->first, sizeof c->first, "%s differs on device %lld", in->name, (long long)d);
        free(valid);
        sim_value_release(&want);
    }
}

/* Small integers (exact in every float type used here). */
static SimValue random_value(const Shape *s, uint64_t *seed)
{
    SimValue v = sim_value_new(s);
    int64_t n = shape_elem_count(s);
    for (int64_t k = 0; k < n; k++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        int64_t x = (int64_t)((*seed >> 33) % 7) - 3;
        if (s->type == ET_PRED)
            x = x > 0;
        sim_value_set_f64(&v, k, (double)x);
    }
    return v;
}

/* Runs the input on one device and the output on all devices; every named
 * output value must be its input value's block. Returns #values checked. */
static int32_t check_numerics(const Compiled *cc)
{
    const HloModule *in = cc->in, *out = cc->out;
    const HloComputation *ie = &in->comps[in->entry], *oe = &out->comps[out->entry];
    int32_t n_params = 0;
    for (int32_t i = 0; i < ie->n_insts; i++)
        if (ie->insts[i].op == HLO_PARAMETER)
            n_params++;
    int32_t *param_inst = calloc((size_t)n_params + 1, sizeof(int32_t));
    for (int32_t i = 0; i < ie->n_insts; i++)
        if (ie->insts[i].op == HLO_PARAMETER)
            param_inst[ie->insts[i].param_number] = i;
    uint64_t seed = 12345;
    SimValue *gargs = calloc((size_t)n_params + 1, sizeof(SimValue));
    for (int32_t k = 0; k < n_params; k++)
        gargs[k] = random_value(ie->insts[param_inst[k]].shape, &seed);
    Check c;
    memset(&c, 0, sizeof c);
    c.in = in;
    c.out = out;
    c.global = calloc((size_t)ie->n_insts, sizeof(SimValue));
    c.in_of_out = calloc((size_t)oe->n_insts, sizeof(int32_t));
    for (int32_t i = 0; i < oe->n_insts; i++)
        c.in_of_out[i] = hlo_find_inst(in, in->entry, oe->insts[i].name);
    DiagEngine *diag = diag_create(NULL);
    SimOptions o1 = {1, 1, observe_global, &c, 0};
    SimValue gout;
    if (!sim_run_spmd(in, &o1, gargs, n_params, &gout, diag))
        fail_msg("simulating the input failed: %s", diag_text(diag));
    int64_t nd = in->mesh.n_devices;
    SimValue *largs = calloc((size_t)(nd * n_params) + 1, sizeof(SimValue));
    for (int64_t d = 0; d < nd; d++)
        for (int32_t k = 0; k < n_params; k++) {
            Tiling s;
            const HloInst *pi = &ie->insts[param_inst[k]];
            assert_true(sharding_to_tiling(pi->sharding, pi->shape->rank, &s));
            largs[d * n_params + k] = block(&in->mesh, &gargs[k], &s, d);
        }
    SimOptions on = {nd, 1, observe_local, &c, 0};
    SimValue *louts = calloc((size_t)nd, sizeof(SimValue));
    if (!sim_run_spmd(out, &on, largs, n_params, louts, diag)) {
        char *txt = print_module(out);
        fail_msg("simulating the output failed: %s\n%s\n--- input:\n%s", diag_text(diag), txt,
                 g_program_text ? g_program_text : "");
    }
    if (c.mismatches) {
        char *txt = print_module(out);
        fail_msg("%d mismatches, first: %s\n%s\n--- input (random program %d):\n%s", c.mismatches, c.first, txt,
                 g_program_index, g_program_text ? g_program_text : "");
    }
    /* the root is always named like the input root */
    assert_int_equal(c.in_of_out[oe->root], ie->root);
    for (int64_t d = 0; d < nd; d++)
        sim_value_release(&louts[d]);
    for (int64_t k = 0; k < nd * n_params; k++)
        sim_value_release(&largs[k]);
    for (int32_t k = 0; k < n_params; k++)
        sim_value_release(&gargs[k]);
    for (int32_t i = 0; i < ie->n_insts; i++)
        sim_value_release(&c.global[i]);
    sim_value_release(&gout);
    free(louts);
    free(largs);
    free(gargs);
    free(c.global);
    free(c.in_of_out);
    free(param_inst);
    diag_destroy(diag);
    return c.checked;
}

static int32_t check_numerics_or_print(const Compiled *c, const char *text, int k)
{
    g_program_text = text;
    g_program_index = k;
    int32_t r = check_numerics(c);
    g_program_text = NULL;
    return r;
}

/* compile + numerics check; returns the compiled module (caller frees). */
static Compiled compile_checked(const char *text, const char *mesh_spec)
{
    Compiled c = compile_ok(text, mesh_spec);
    assert_true(check_numerics(&c) > 0);
    return c;
}

/* ================================================================ the MLP */

static char *read_example(const char *name)
{
    const char *dir = getenv("SPMDC_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/%s", dir ? dir : "..", name);
    size_t len;
    char *t = driver_read_file(path, &len);
    assert_non_null(t);
    return t;
}

/* examples/mlp.hlo at model=n: exactly one collective, the all-reduce of the
 * partial Y (bf16[8192,8192] = 134,217,728 B per device). */
static void check_mlp(const char *mesh, int64_t n, int64_t bytes)
{
    char *text = read_example("mlp.hlo");
    Compiled c = compile_ok(text, mesh);
    assert_int_equal(c.rep.n_records, 1);
    const CommRecord *r = &c.rep.records[0];
    assert_int_equal(r->kind, COLL_ALL_REDUCE);
    assert_int_equal(r->bytes_per_device, bytes);
    assert_int_equal(r->group_size, n);
    assert_int_equal(r->num_groups, 1);
    assert_int_equal(r->dtype, ET_BF16);
    assert_int_equal(r->operand_dims[0], 8192);
    assert_int_equal(r->result_dims[1], 8192);
    assert_int_equal(r->multiplier, 1);
    assert_string_equal(r->instruction, "y");
    assert_string_equal(r->cause_instruction, "y");
    /* traced back to the annotations: h's split of dim 1 came from a (line
     * 34) through h = dot(x, a); b (line 35) and y (line 37) are annotated */
    assert_string_equal(r->reason, "y: contracting dim 1 of lhs h sharded on 'model' (from the annotation on a, line 34) "
                                   "and dim 0 of rhs b (annotated, line 35); y is annotated replicated (line 37)");
    assert_int_equal(r->cause_line, 37);
    assert_int_equal(c.rep.n_warnings, 0);
    assert_int_equal(count_collectives(c.out), 1);
    /* H = X . A_local stays split on dim 1: bf16[8192, 8192/n], no reshard */
    assert_dims(out_inst(&c, "h")->shape, 2, 8192, 8192 / n);
    assert_dims(out_inst(&c, "a")->shape, 2, 8192, 8192 / n);
    assert_dims(out_inst(&c, "b")->shape, 2, 8192 / n, 8192);
    assert_dims(out_inst(&c, "y.partial")->shape, 2, 8192, 8192);
    assert_int_equal(out_inst(&c, "y")->op, HLO_ALL_REDUCE);
    assert_int_equal(count_op(c.out, HLO_DYNAMIC_SLICE), 0);
    assert_int_equal(hlo_attrs(out_inst(&c, "y"))->channel_id, 1);
    assert_int_equal(c.out->num_partitions, n);
    /* parameters: X 134,217,728 + A and B 134,217,728/n each */
    assert_int_equal(c.rep.parameter_bytes_per_device, 134217728 + 2 * 134217728 / n);
    assert_int_equal(c.rep.parameter_bytes_unpartitioned, 3 * 134217728LL);
    compiled_free(&c);
    free(text);
}

static void test_mlp_model8(void **state)
{
    (void)state;
    check_mlp(NULL, 8, 234881024); /* 2*7/8 * 134,217,728 */
}

static void test_mlp_model4(void **state)
{
    (void)state;
    check_mlp("model=4", 4, 201326592); /* 2*3/4 * 134,217,728 */
}

static void test_mlp_model2(void **state)
{
    (void)state;
    check_mlp("model=2", 2, 134217728); /* 2*1/2 * 134,217,728 */
}

static const char MLP_Y_SPLIT[] =
    "HloModule mlp_rs\n"
    "\n"
    "ENTRY %main (x: bf16[8192,8192], a: bf16[8192,8192], b: bf16[8192,8192]) -> bf16[8192,8192] {\n"
    "  %x = bf16[8192,8192] parameter(0), sharding={mesh[model=8], [{}, {}]}\n"
    "  %a = bf16[8192,8192] parameter(1), sharding={mesh[model=8], [{}, {model}]}\n"
    "  %b = bf16[8192,8192] parameter(2), sharding={mesh[model=8], [{model}, {}]}\n"
    "  %h = bf16[8192,8192] dot(%x, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT %y = bf16[8192,8192] dot(%h, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding={mesh[model=8], [{model}, {}]}\n"
    "}\n";

static void test_mlp_y_split_reduce_scatter(void **state)
{
    (void)state;
    Compiled c = compile_ok(MLP_Y_SPLIT, NULL);
    assert_int_equal(c.rep.n_records, 1);
    const CommRecord *r = &c.rep.records[0];
    assert_int_equal(r->kind, COLL_REDUCE_SCATTER);
    /* 7/8 * 134,217,728 = 117,440,512: half the all-reduce */
    assert_int_equal(r->bytes_per_device, 117440512);
    assert_int_equal(r->operand_dims[0], 8192);
    assert_int_equal(r->result_dims[0], 1024);
    const HloInst *y = out_inst(&c, "y");
    assert_int_equal(y->op, HLO_REDUCE_SCATTER);
    assert_int_equal(hlo_attrs(y)->dimensions.v[0], 0);
    assert_dims(y->shape, 2, 1024, 8192);
    compiled_free(&c);
}

static void test_mlp_misaligned(void **state)
{
    (void)state;
    /* A arrives split on its rows: the cheapest plan moves the small A shard
     * by all-to-all (7/8 * bf16[1024,8192] 16,777,216 B = 14,680,064) and then
     * it is the Megatron plan: all-reduce of Y 234,881,024.  Total
     * 249,561,088 bytes per device (what XLA emits too). */
    char *text = read_example("mlp_misaligned.hlo");
    Compiled c = compile_ok(text, NULL);
    assert_int_equal(c.rep.n_records, 2);
    assert_int_equal(c.rep.records[0].kind, COLL_ALL_TO_ALL);
    assert_int_equal(c.rep.records[0].bytes_per_device, 14680064);
    assert_string_equal(c.rep.records[0].cause_instruction, "h");
    assert_int_equal(c.rep.records[1].kind, COLL_ALL_REDUCE);
    assert_int_equal(c.rep.records[1].bytes_per_device, 234881024);
    assert_int_equal(report_total_bytes(&c.rep), 249561088);
    compiled_free(&c);
    free(text);
    /* at model=4: 3/4 * 33,554,432 = 25,165,824 + 201,326,592 = 226,492,416 */
    text = read_example("mlp_misaligned.hlo");
    c = compile_ok(text, "model=4");
    assert_int_equal(report_total_bytes(&c.rep), 226492416);
    compiled_free(&c);
    free(text);
}

static void test_mlp_2d_groups(void **state)
{
    (void)state;
    /* data=2, model=4 (device = 4*data + model): the partial Y f32[32,64]
     * (8,192 B) is summed over `model` in groups {0,1,2,3},{4,5,6,7}:
     * 2*3/4 * 8,192 = 12,288 B. */
    char *text = read_example("mlp_2d_small.hlo");
    Compiled c = compile_checked(text, NULL);
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].bytes_per_device, 12288);
    assert_int_equal(c.rep.records[0].num_groups, 2);
    const ReplicaGroups *g = &hlo_attrs(out_inst(&c, "y"))->replica_groups;
    static const int64_t want[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_int_equal(g->n_groups, 2);
    assert_int_equal(g->group_size, 4);
    assert_memory_equal(g->ids, want, sizeof want);
    compiled_free(&c);
    /* data=4, model=2: f32[16,64] = 4,096 B in groups of 2 ({0,1},{2,3},...):
     * 2*1/2 * 4,096 = 4,096 */
    c = compile_checked(text, "data=4,model=2");
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].bytes_per_device, 4096);
    assert_int_equal(c.rep.records[0].group_size, 2);
    assert_int_equal(c.rep.records[0].num_groups, 4);
    g = &hlo_attrs(out_inst(&c, "y"))->replica_groups;
    static const int64_t want2[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_memory_equal(g->ids, want2, sizeof want2);
    compiled_free(&c);
    free(text);
}

static void test_mlp_small_numerics(void **state)
{
    (void)state;
    char *text = read_example("mlp_small.hlo");
    static const char *meshes[] = {"model=2", "model=4", "model=8", NULL};
    for (int k = 0; k < 4; k++) {
        Compiled c = compile_checked(text, meshes[k]);
        compiled_free(&c);
    }
    free(text);
    text = read_example("positional_small.hlo");
    Compiled c = compile_checked(text, NULL);
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].bytes_per_device, 12288); /* as mlp_2d_small */
    compiled_free(&c);
    free(text);
}

/* ================================================================ errors */

/* ================================================================ uneven shapes */

/* A dim that does not divide by its shards is padded to the ceiling on every
 * device (XLA's layout): f32[10,4] over 4 shards holds 3 rows a device, the
 * last device 1 real row and 2 of padding.  Elementwise ops need nothing;
 * the report lists the padding: 2 padding rows of 4 f32 = 8 elements,
 * 32 B, all on device 3. */
static void test_uneven_elementwise(void **state)
{
    (void)state;
    Compiled c = compile_checked("HloModule u\n"
                                 "\n"
                                 "ENTRY %main (x: f32[10,4]) -> f32[10,4] {\n"
                                 "  %x = f32[10,4] parameter(0), sharding={mesh[d=4], [{d}, {}]}\n"
                                 "  ROOT %n = f32[10,4] negate(%x)\n"
                                 "}\n",
                                 NULL);
    assert_dims(out_inst(&c, "x")->shape, 2, 3, 4);
    assert_dims(out_inst(&c, "n")->shape, 2, 3, 4);
    assert_int_equal(c.rep.n_records, 0);
    assert_int_equal(c.rep.n_warnings, 2);
    assert_string_equal(c.rep.warnings[0].kind, "uneven-padding");
    assert_string_equal(c.rep.warnings[0].instruction, "x");
    assert_string_equal(c.rep.warnings[0].message,
                        "x: f32[10,4] split [{d}, {}] pads dim 0 from 10 to 12 (4 shards of 3; the last real one "
                        "holds 1): 8 padding elements (32 B) over all devices, 32 B on the device with the most");
    assert_int_equal(c.rep.n_padding, 2);
    assert_int_equal(c.rep.padding[0].elements, 8);
    assert_int_equal(c.rep.padding[0].bytes, 32);
    compiled_free(&c);
}

/* Reductions over a padded split dim mask the padding with the reducer's
 * identity before the local reduce (the simulator feeds NaN padding, so a
 * leak fails the numbers).  s32[17,6] rows over 8 shards: 3 rows a
 * device, devices 6 and 7 hold only padding.  The partial sums are
 * all-reduced: s32[6] = 24 B, 2 * 7/8 * 24 = 42 B per device; the max
 * likewise (42 B); the f32 dot contracts the 17 rows, both operands masked,
 * all-reduce of f32[6,5] (120 B): 2 * 7/8 * 120 = 210 B. */
static void test_uneven_reductions(void **state)
{
    (void)state;
    Compiled c = compile_checked("HloModule u\n"
                                 "\n"
                                 "%add (a: s32[], b: s32[]) -> s32[] {\n"
                                 "  %a = s32[] parameter(0)\n"
                                 "  %b = s32[] parameter(1)\n"
                                 "  ROOT %s = s32[] add(%a, %b)\n"
                                 "}\n"
                                 "\n"
                                 "%max (a: s32[], b: s32[]) -> s32[] {\n"
                                 "  %a = s32[] parameter(0)\n"
                                 "  %b = s32[] parameter(1)\n"
                                 "  ROOT %m = s32[] maximum(%a, %b)\n"
                                 "}\n"
                                 "\n"
                                 "ENTRY %main {\n"
                                 "  %x = s32[17,6] parameter(0), sharding={mesh[d=8], [{d}, {}]}\n"
                                 "  %z = s32[] constant(0)\n"
                                 "  %s = s32[6] reduce(%x, %z), dimensions={0}, to_apply=%add, sharding={replicated}\n"
                                 "  %lo = s32[] constant(-100)\n"
                                 "  %m = s32[6] reduce(%x, %lo), dimensions={0}, to_apply=%max, sharding={replicated}\n"
                                 "  %a = f32[17,6] parameter(1), sharding={mesh[d=8], [{d}, {}]}\n"
                                 "  %b = f32[17,5] parameter(2), sharding={mesh[d=8], [{d}, {}]}\n"
                                 "  %y = f32[6,5] dot(%a, %b), lhs_contracting_dims={0}, rhs_contracting_dims={0}, "
                                 "sharding={replicated}\n"
                                 "  ROOT %t = (s32[6], s32[6], f32[6,5]) tuple(%s, %m, %y)\n"
                                 "}\n",
                                 NULL);
    assert_int_equal(c.rep.n_records, 3);
    assert_int_equal(c.rep.records[0].bytes_per_device, 42);
    assert_int_equal(c.rep.records[1].bytes_per_device, 42);
    assert_int_equal(c.rep.records[2].bytes_per_device, 210);
    for (int k = 0; k < 3; k++)
        assert_int_equal(c.rep.records[k].kind, COLL_ALL_REDUCE);
    assert_dims(out_inst(&c, "x")->shape, 2, 3, 6);
    /* the max's init is not its identity but max is idempotent: no mask
     * step, only the padding mask (-inf for s32: INT_MIN) */
    assert_int_equal(count_op(c.out, HLO_SELECT), 4);
    compiled_free(&c);
}

/* Dims smaller than the number of shards and a reshard between uneven
 * layouts: f32[3,5] over 8 shards (1 row each, devices 3..7 padding only)
 * resharded to [{}, {d}] (5 columns over 8: 1 each): an all-to-all of the
 * padded f32[1,8] pieces.  Checked on every device. */
static void test_uneven_small_dims(void **state)
{
    (void)state;
    Compiled c = compile_checked("HloModule u\n"
                                 "\n"
                                 "ENTRY %main {\n"
                                 "  %x = f32[3,5] parameter(0), sharding={mesh[d=8], [{d}, {}]}\n"
                                 "  %e = f32[3,5] exponential(%x)\n"
                                 "  ROOT %r = f32[3,5] custom-call(%e), custom_call_target=\"Sharding\", "
                                 "sharding={mesh[d=8], [{}, {d}]}\n"
                                 "}\n",
                                 NULL);
    assert_dims(out_inst(&c, "r")->shape, 2, 3, 1);
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].kind, COLL_ALL_TO_ALL);
    /* operand f32[1,8] (the 5 columns padded to 8 first): 7/8 * 32 = 28 B */
    assert_int_equal(c.rep.records[0].bytes_per_device, 28);
    compiled_free(&c);
}

static void test_manual_parameter_kept(void **state)
{
    (void)state;
    Compiled c = compile("HloModule u, num_partitions=2\n"
                         "\n"
                         "ENTRY %main (x: f32[8]) -> f32[8] {\n"
                         "  ROOT %x = f32[8] parameter(0), sharding={manual}\n"
                         "}\n",
                         NULL);
    /* a manual value is per device as written: kept, shape unchanged */
    assert_true(c.ok);
    const HloComputation *e = &c.out->comps[c.out->entry];
    assert_int_equal(e->n_insts, 1);
    assert_int_equal(e->insts[0].shape->dims[0], 8);
    assert_int_equal(c.rep.n_records, 0);
    compiled_free(&c);
}

/* ================================================================ determinism */

static const char CHAIN[] =
    "HloModule chain\n"
    "\n"
    "%add (p: f32[], q: f32[]) -> f32[] {\n"
    "  %p = f32[] parameter(0)\n"
    "  %q = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%p, %q)\n"
    "}\n"
    "\n"
    "ENTRY %main (x: f32[16,32], w: f32[32,16]) -> f32[16] {\n"
    "  %x = f32[16,32] parameter(0), sharding={mesh[m=4], [{m}, {}]}\n"
    "  %w = f32[32,16] parameter(1), sharding={mesh[m=4], [{}, {m}]}\n"
    "  %d = f32[16,16] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %t = f32[16,16] transpose(%d), dimensions={1,0}\n"
    "  %e = f32[16,16] exponential(%t)\n"
    "  %z = f32[] constant(0)\n"
    "  ROOT %r = f32[16] reduce(%e, %z), dimensions={1}, to_apply=%add, sharding={mesh[m=4], [{}]}\n"
    "}\n";

static void test_determinism(void **state)
{
    (void)state;
    Compiled a = compile_ok(CHAIN, NULL), b = compile_ok(CHAIN, NULL);
    char *ta = print_module(a.out), *tb = print_module(b.out);
    assert_string_equal(ta, tb);
    StrBuf ra = {0}, rb = {0};
    report_print_json(&ra, &a.rep);
    report_print_json(&rb, &b.rep);
    assert_string_equal(sb_cstr(&ra), sb_cstr(&rb));
    /* Across mesh sizes the instruction names are the same, in the same order. */
    Compiled c = compile_ok(CHAIN, "m=2");
    const HloComputation *ea = &a.out->comps[a.out->entry], *ec = &c.out->comps[c.out->entry];
    assert_int_equal(ea->n_insts, ec->n_insts);
    for (int32_t i = 0; i < ea->n_insts; i++)
        assert_string_equal(ea->insts[i].name, ec->insts[i].name);
    sb_free(&ra);
    sb_free(&rb);
    free(ta);
    free(tb);
    compiled_free(&a);
    compiled_free(&b);
    compiled_free(&c);
}

static void test_chain_numerics(void **state)
{
    (void)state;
    Compiled c = compile_checked(CHAIN, NULL);
    compiled_free(&c);
    c = compile_checked(CHAIN, "m=2");
    compiled_free(&c);
}

/* ================================================================ partial states */

static void test_add_of_partials_stays_partial(void **state)
{
    (void)state;
    /* Two dots contracting over `m` give two partial sums; their add stays
     * partial and ONE all-reduce closes it: f32[8,8] = 256 B, n=4:
     * 2*3/4*256 = 384 B. */
    static const char text[] =
        "HloModule partials\n"
        "\n"
        "ENTRY %main (a: f32[8,16], b: f32[16,8], c: f32[8,16], d: f32[16,8]) -> f32[8,8] {\n"
        "  %a = f32[8,16] parameter(0), sharding={mesh[m=4], [{}, {m}]}\n"
        "  %b = f32[16,8] parameter(1), sharding={mesh[m=4], [{m}, {}]}\n"
        "  %c = f32[8,16] parameter(2), sharding={mesh[m=4], [{}, {m}]}\n"
        "  %d = f32[16,8] parameter(3), sharding={mesh[m=4], [{m}, {}]}\n"
        "  %ab = f32[8,8] dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  %cd = f32[8,8] dot(%c, %d), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  ROOT %s = f32[8,8] add(%ab, %cd), sharding={mesh[m=4], [{}, {}]}\n"
        "}\n";
    Compiled c = compile_checked(text, NULL);
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].kind, COLL_ALL_REDUCE);
    assert_int_equal(c.rep.records[0].bytes_per_device, 384);
    assert_string_equal(c.rep.records[0].instruction, "s");
    assert_int_equal(out_inst(&c, "s.partial")->op, HLO_ADD);
    compiled_free(&c);
}

static void test_partial_flows_through_linear_ops(void **state)
{
    (void)state;
    /* h = x.a contracts over the split dim (partial f32[16,64], 4,096 B);
     * p = h.w with w replicated is linear in h, so the pending sum flows on
     * and only p (f32[16,4] = 256 B) is all-reduced: 2*3/4*256 = 384 B
     * instead of 2*3/4*4,096 = 6,144 B for h plus nothing for p. */
    static const char text[] =
        "HloModule pass\n"
        "\n"
        "ENTRY %main (x: f32[16,64], a: f32[64,64], w: f32[64,4]) -> f32[16,4] {\n"
        "  %x = f32[16,64] parameter(0), sharding={mesh[m=4], [{}, {m}]}\n"
        "  %a = f32[64,64] parameter(1), sharding={mesh[m=4], [{m}, {}]}\n"
        "  %w = f32[64,4] parameter(2), sharding={mesh[m=4], [{}, {}]}\n"
        "  %h = f32[16,64] dot(%x, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  %p = f32[16,4] dot(%h, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
        "  %two = f32[] constant(2)\n"
        "  %b2 = f32[16,4] broadcast(%two), dimensions={}\n"
        "  %n = f32[16,4] negate(%p)\n"
        "  ROOT %s = f32[16,4] multiply(%n, %b2), sharding={mesh[m=4], [{}, {}]}\n"
        "}\n";
    Compiled c = compile_checked(text, NULL);
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].kind, COLL_ALL_REDUCE);
    assert_int_equal(c.rep.records[0].bytes_per_device, 384);
    assert_int_equal(c.rep.records[0].operand_dims[1], 4);
    /* the reduction is blamed on the dot that made the value partial */
    assert_string_equal(c.rep.records[0].cause_instruction, "h");
    assert_string_equal(out_inst(&c, "p.partial")->name, "p.partial");
    assert_int_equal(hlo_find_inst(c.out, c.out->entry, "h"), -1); /* h never exists reduced */
    compiled_free(&c);
}

static void test_reduce_over_split_dim(void **state)
{
    (void)state;
    /* sum over dim 1 split over m: local reduce gives a partial f32[8]
     * (32 B); the replicated result needs one all-reduce: 2*3/4*32 = 48 B.
     * max over the same: the same with a max reducer. */
    static const char text[] =
        "HloModule red\n"
        "\n"
        "%add (p: f32[], q: f32[]) -> f32[] {\n"
        "  %p = f32[] parameter(0)\n"
        "  %q = f32[] parameter(1)\n"
        "  ROOT %s = f32[] add(%p, %q)\n"
        "}\n"
        "\n"
        "%max (p: f32[], q: f32[]) -> f32[] {\n"
        "  %p = f32[] parameter(0)\n"
        "  %q = f32[] parameter(1)\n"
        "  ROOT %s = f32[] maximum(%p, %q)\n"
        "}\n"
        "\n"
        "ENTRY %main (x: f32[8,64]) -> (f32[8], f32[8]) {\n"
        "  %x = f32[8,64] parameter(0), sharding={mesh[m=4], [{}, {m}]}\n"
        "  %z = f32[] constant(0)\n"
        "  %ninf = f32[] constant(-inf)\n"
        "  %r = f32[8] reduce(%x, %z), dimensions={1}, to_apply=%add, sharding={mesh[m=4], [{}]}\n"
        "  %mx = f32[8] reduce(%x, %ninf), dimensions={1}, to_apply=%max, sharding={mesh[m=4], [{}]}\n"
        "  ROOT %t = (f32[8], f32[8]) tuple(%r, %mx)\n"
        "}\n";
    Compiled c = compile_checked(text, NULL);
    assert_int_equal(c.rep.n_records, 2);
    assert_int_equal(c.rep.records[0].bytes_per_device, 48);
    assert_int_equal(c.rep.records[1].bytes_per_device, 48);
    /* x is annotated on line 16; the root tuple t (replicated: no
     * annotation splits it) takes r replicated */
    assert_string_equal(c.rep.records[0].reason, "r: reduced dim 1 of x sharded on 'm' (annotated, line 16); needed "
                                                 "replicated by t as its element {0}, which is replicated by "
                                                 "default (no annotation splits it)");
    int32_t mx = hlo_find_computation(c.out, "maximum.f32");
    assert_true(mx >= 0);
    assert_int_equal(hlo_attrs(out_inst(&c, "mx"))->to_apply, mx);
    compiled_free(&c);
}

static void test_reduce_nonidentity_init_masked(void **state)
{
    (void)state;
    /* init 1 of a sum over a split dim must count once, not on every device */
    static const char text[] =
        "HloModule red\n"
        "\n"
        "%add (p: f32[], q: f32[]) -> f32[] {\n"
        "  %p = f32[] parameter(0)\n"
        "  %q = f32[] parameter(1)\n"
        "  ROOT %s = f32[] add(%p, %q)\n"
        "}\n"
        "\n"
        "ENTRY %main (x: f32[8,64]) -> f32[8] {\n"
        "  %x = f32[8,64] parameter(0), sharding={mesh[m=4], [{}, {m}]}\n"
        "  %one = f32[] constant(1)\n"
        "  ROOT %r = f32[8] reduce(%x, %one), dimensions={1}, to_apply=%add, sharding={mesh[m=4], [{}]}\n"
        "}\n";
    Compiled c = compile_checked(text, NULL);
    /* each device reduces its 16 columns with init 1 on the group's first
     * device and 0 (the identity) on the others, so 1 counts once; the
     * partial f32[8] (32 B) is all-reduced over m: 2 * 3/4 * 32 = 48 B */
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].kind, COLL_ALL_REDUCE);
    assert_int_equal(c.rep.records[0].bytes_per_device, 48);
    assert_int_equal(c.rep.n_warnings, 0);
    assert_int_equal(out_inst(&c, "one.mask")->op, HLO_SELECT);
    compiled_free(&c);
}

/* ================================================================ per-op coverage */

static const char OPS[] =
    "HloModule ops\n"
    "\n"
    "%add (p: f32[], q: f32[]) -> f32[] {\n"
    "  %p = f32[] parameter(0)\n"
    "  %q = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%p, %q)\n"
    "}\n"
    "\n"
    "ENTRY %main (x: f32[8,16], y: f32[16,8], v: f32[8]) -> (f32[8,16], f32[4,8,4], f32[16,8], f32[8,16], f32[8,32]) {\n"
    "  %x = f32[8,16] parameter(0), sharding={mesh[a=2,b=2], [{a}, {b}]}\n"
    "  %y = f32[16,8] parameter(1), sharding={mesh[a=2,b=2], [{b}, {a}]}\n"
    "  %v = f32[8] parameter(2), sharding={mesh[a=2,b=2], [{a}]}\n"
    "  %yt = f32[8,16] transpose(%y), dimensions={1,0}\n"
    "  %s = f32[8,16] subtract(%x, %yt)\n"
    "  %vb = f32[8,16] broadcast(%v), dimensions={0}\n"
    "  %m = f32[8,16] multiply(%s, %vb)\n"
    "  %c = f32[8,16] constant({...})\n"
    "  %io = s32[8,16] iota(), iota_dimension=1, sharding={mesh[a=2,b=2], [{a}, {b}]}\n"
    "  %iof = f32[8,16] convert(%io)\n"
    "  %m2 = f32[8,16] add(%m, %iof)\n"
    "  %cmp = pred[8,16] compare(%m2, %x), direction=GT\n"
    "  %sel = f32[8,16] select(%cmp, %m2, %x)\n"
    "  %rs = f32[4,8,4] reshape(%sel)\n"
    "  %sl = f32[8,16] slice(%yt), slice={[0:8], [0:16]}\n"
    "  %st = f32[16,8] transpose(%sl), dimensions={1,0}, sharding={mesh[a=2,b=2], [{a}, {}]}\n"
    "  %cc = f32[8,32] concatenate(%sel, %x), dimensions={1}\n"
    "  %cs = f32[8,16] custom-call(%m2), custom_call_target=\"Sharding\", sharding={mesh[a=2,b=2], [{}, {a,b}]}\n"
    "  %neg = f32[8,16] negate(%cs)\n"
    "  ROOT %t = (f32[8,16], f32[4,8,4], f32[16,8], f32[8,16], f32[8,32]) tuple(%neg, %rs, %st, %c, %cc)\n"
    "}\n";

static void test_ops_numerics(void **state)
{
    (void)state;
    Compiled c = compile_checked(OPS, NULL);
    /* the transpose runs locally on the transposed shards: no collective for it */
    assert_dims(out_inst(&c, "yt")->shape, 2, 4, 8);
    /* a split iota: local iota plus this device's offset */
    assert_int_equal(out_inst(&c, "io")->op, HLO_ADD);
    assert_dims(out_inst(&c, "io")->shape, 2, 4, 8);
    compiled_free(&c);
    c = compile_checked(OPS, "a=1,b=4");
    compiled_free(&c);
}

static void test_dot_batch_dims(void **state)
{
    (void)state;
    /* batch dim split alike on both operands -> local batched dot, no comm */
    static const char text[] =
        "HloModule bdot\n"
        "\n"
        "ENTRY %main (l: f32[4,8,16], r: f32[4,16,8]) -> f32[4,8,8] {\n"
        "  %l = f32[4,8,16] parameter(0), sharding={mesh[b=4], [{b}, {}, {}]}\n"
        "  %r = f32[4,16,8] parameter(1), sharding={mesh[b=4], [{b}, {}, {}]}\n"
        "  ROOT %d = f32[4,8,8] dot(%l, %r), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
        "rhs_contracting_dims={1}, sharding={mesh[b=4], [{b}, {}, {}]}\n"
        "}\n";
    Compiled c = compile_checked(text, NULL);
    assert_int_equal(c.rep.n_records, 0);
    assert_dims(out_inst(&c, "d")->shape, 3, 1, 8);
    compiled_free(&c);
}

static void test_default_action_warns(void **state)
{
    (void)state;
    /* A custom-call spmdc knows nothing about runs at full size on every
     * device: its split operand is gathered (f32[8,16] 512 B, 3/4 of it =
     * 384 B) and the replicated result is sliced back locally. */
    static const char text[] =
        "HloModule dflt\n"
        "\n"
        "ENTRY %main (x: f32[8,16]) -> f32[8,16] {\n"
        "  %x = f32[8,16] parameter(0), sharding={mesh[m=4], [{m}, {}]}\n"
        "  ROOT %b = f32[8,16] custom-call(%x), custom_call_target=\"my_kernel\", sharding={mesh[m=4], [{m}, {}]}\n"
        "}\n";
    Compiled c = compile_ok(text, NULL);
    assert_int_equal(c.rep.n_records, 1);
    assert_int_equal(c.rep.records[0].kind, COLL_ALL_GATHER);
    assert_int_equal(c.rep.records[0].bytes_per_device, 384);
    assert_int_equal(c.rep.n_warnings, 1);
    assert_string_equal(c.rep.warnings[0].kind, "full-rematerialization");
    assert_string_equal(c.rep.warnings[0].instruction, "b");
    assert_int_equal(c.rep.warnings[0].line, 5);
    assert_string_equal(c.rep.warnings[0].message,
                        "x: f32[8,16] split [{m}, {}] is all-gathered to its full size on every device for b "
                        "(no partitioning rule for this custom-call yet: it runs at full size on every device)");
    assert_int_equal(out_inst(&c, "b.full")->op, HLO_CUSTOM_CALL);
    compiled_free(&c);
}

/* A width-changing bitcast-convert keeps the split of the dims it does not
 * touch: s16[8,16,2] from f32[8,16] split on rows is local, no bytes. */
static void test_bitcast_convert_width_local(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule bc\n"
        "\n"
        "ENTRY %main (x: f32[8,16]) -> s16[8,16,2] {\n"
        "  %x = f32[8,16] parameter(0), sharding={mesh[m=4], [{m}, {}]}\n"
        "  ROOT %b = s16[8,16,2] bitcast-convert(%x), sharding={mesh[m=4], [{m}, {}, {}]}\n"
        "}\n";
    Compiled c = compile_checked(text, NULL);
    assert_int_equal(c.rep.n_records, 0);
    const Shape *bs = out_inst(&c, "b")->shape;
    assert_int_equal(bs->rank, 3);
    assert_int_equal(bs->dims[0], 2);
    assert_int_equal(bs->dims[2], 2);
    compiled_free(&c);
}

static void test_while_replicated_body(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule loop\n"
        "\n"
        "%cond (c: (s32[], f32[4])) -> pred[] {\n"
        "  %c = (s32[], f32[4]) parameter(0)\n"
        "  %i = s32[] get-tuple-element(%c), index=0\n"
        "  %n = s32[] constant(3)\n"
        "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n"
        "}\n"
        "\n"
        "%body (b: (s32[], f32[4])) -> (s32[], f32[4]) {\n"
        "  %b = (s32[], f32[4]) parameter(0)\n"
        "  %i = s32[] get-tuple-element(%b), index=0\n"
        "  %one = s32[] constant(1)\n"
        "  %j = s32[] add(%i, %one)\n"
        "  %v = f32[4] get-tuple-element(%b), index=1\n"
        "  %w = f32[4] add(%v, %v)\n"
        "  ROOT %t = (s32[], f32[4]) tuple(%j, %w)\n"
        "}\n"
        "\n"
        "ENTRY %main (x: f32[4]) -> f32[4] {\n"
        "  %x = f32[4] parameter(0), sharding={mesh[m=2], [{m}]}\n"
        "  %z = s32[] constant(0)\n"
        "  %init = (s32[], f32[4]) tuple(%z, %x), sharding={{mesh[m=2], []}, {mesh[m=2], [{}]}}\n"
        "  %loop = (s32[], f32[4]) while(%init), condition=%cond, body=%body, sharding={{mesh[m=2], []}, "
        "{mesh[m=2], [{}]}}\n"
        "  ROOT %r = f32[4] get-tuple-element(%loop), index=1, sharding={mesh[m=2], [{m}]}\n"
        "}\n";
    Compiled c = compile(text, NULL);
    if (c.ok) {
        assert_true(check_numerics(&c) > 0);
        assert_int_equal(count_op(c.out, HLO_WHILE), 1);
    } else {
        /* propagation split the loop's values: an error naming the while */
        assert_non_null(strstr(diag_text(c.diag), "loop: computation"));
    }
    compiled_free(&c);
}

/* ================================================================ rematerialization warnings */

/* Lines 1-16; the case's body starts on line 17.  x: f32[16,8] = 512 B,
 * split 4 ways on dim 0 (128 B a device); gathering it whole over the 4
 * devices sends 3/4 * 512 = 384 B per device. */
static const char REMAT_HEAD[] =
    "HloModule remat\n"
    "\n"
    "%add (a: f32[], b: f32[]) -> f32[] {\n"
    "  %a = f32[] parameter(0)\n"
    "  %b = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%a, %b)\n"
    "}\n"
    "\n"
    "%lt (a: f32[], b: f32[]) -> pred[] {\n"
    "  %a = f32[] parameter(0)\n"
    "  %b = f32[] parameter(1)\n"
    "  ROOT %c = pred[] compare(%a, %b), direction=LT\n"
    "}\n"
    "\n"
    "ENTRY %main {\n"
    "  %x = f32[16,8] parameter(0), sharding={mesh[d=4], [{d}, {}]}\n";

typedef struct RematCase {
    const char *body;   /* lines 17... of the entry, without the closing brace */
    int64_t bytes;      /* report total, per device */
    const char *inst;   /* the warnings' instruction ... */
    uint32_t line;      /* ... and its line */
    const char *msg[2]; /* expected messages in order (NULL: fewer) */
} RematCase;

/* Compiles REMAT_HEAD + body, checks the numbers on every device, and
 * asserts exactly the expected full-rematerialization warnings. */
static void check_remat_case(const RematCase *rc)
{
    StrBuf b = {0};
    sb_printf(&b, "%s%s}\n", REMAT_HEAD, rc->body);
    Compiled c = compile_checked(sb_cstr(&b), NULL);
    assert_int_equal(report_total_bytes(&c.rep), rc->bytes);
    int32_t n = rc->msg[0] ? rc->msg[1] ? 2 : 1 : 0;
    if (c.rep.n_warnings != n)
        fail_msg("%d warnings, want %d, for:\n%s\nfirst: %s", (int)c.rep.n_warnings, (int)n, rc->body,
                 c.rep.n_warnings ? c.rep.warnings[0].message : "-");
    for (int32_t k = 0; k < n; k++) {
        assert_string_equal(c.rep.warnings[k].kind, "full-rematerialization");
        assert_string_equal(c.rep.warnings[k].instruction, rc->inst);
        assert_int_equal(c.rep.warnings[k].line, rc->line);
        assert_string_equal(c.rep.warnings[k].message, rc->msg[k]);
    }
    compiled_free(&c);
    sb_free(&b);
}

#define X_WHOLE "x: f32[16,8] split [{d}, {}] is all-gathered to its full size on every device for "

/* An op that cannot keep a split dim gathers its operand whole: warned for
 * every such op, whatever the op's own result sharding is. */
static void test_remat_warning_per_op(void **state)
{
    (void)state;
    static const RematCase cases[] = {
        /* sort along the split dim of a rank-1 value (no other dim can take
         * the split): x1 f32[128] gathered, 3/4 * 512 = 384 B */
        {"  %x1 = f32[128] reshape(%x)\n"
         "  ROOT %r = f32[128] sort(%x1), dimensions={0}, to_apply=%lt, sharding={mesh[d=4], [{d}]}\n",
         384, "r", 18,
         {"x1: f32[128] split [{d}] is all-gathered to its full size on every device for r (sorting along its "
          "split dim 0 is not partitioned yet)",
          NULL}},
        /* reduce-window whose init value is not the reducer's identity (the
         * halo's padding would count it twice): f32[8,8], 2 rows a device */
        {"  %z = f32[] constant(1)\n"
         "  ROOT %r = f32[8,8] reduce-window(%x, %z), window={size=2x1 stride=2x1}, to_apply=%add, "
         "sharding={mesh[d=4], [{d}, {}]}\n",
         384, "r", 18, {X_WHOLE "r (windowing its split dim 0 is not partitioned yet)", NULL}},
        /* reshape [8,16] split on dim 1 -> [128]: a device's columns are not
         * a contiguous piece of the result, so x2 (512 B) is gathered whole */
        {"  %x2 = f32[8,16] parameter(1), sharding={mesh[d=4], [{}, {d}]}\n"
         "  ROOT %r = f32[128] reshape(%x2)\n",
         384, "r", 18,
         {"x2: f32[8,16] split [{}, {d}] is all-gathered to its full size on every device for r (reshaping its "
          "split dim 1 to f32[128] is not partitioned yet: the shards are not contiguous pieces of the result)",
          NULL}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        check_remat_case(&cases[k]);
}

/* A gather that a sharding asked for is not a warning. */
static void test_remat_intended_no_warning(void **state)
{
    (void)state;
    static const RematCase cases[] = {
        /* the result annotated replicated: computed on shards, all-gathered
         * at the end (384 B), as asked */
        {"  ROOT %n = f32[16,8] negate(%x), sharding={replicated}\n", 384, NULL, 0, {NULL, NULL}},
        /* an explicit reshard to replicated (Sharding custom-call), then the
         * slice runs on the whole value: the gather is the user's */
        {"  %c = f32[16,8] custom-call(%x), custom_call_target=\"Sharding\", sharding={replicated}\n"
         "  ROOT %s = f32[12,8] slice(%c), slice={[1:13], [0:8]}\n",
         384, NULL, 0, {NULL, NULL}},
        /* n is annotated replicated but computed split (no consumer needs it
         * whole: the slice takes its split state and a 2-row halo, 64 B) */
        {"  %n = f32[16,8] negate(%x), sharding={replicated}\n"
         "  ROOT %s = f32[12,8] slice(%n), slice={[1:13], [0:8]}, sharding={mesh[d=4], [{d}, {}]}\n",
         64, NULL, 0, {NULL, NULL}},
        /* shape ops along the split dim exchange halos instead of gathering
         * (x: 4 rows a device, a row 32 B):
         * slice [1:13] -> 12 rows, 3 a device: shard t reads rows
         * [3t+1, 3t+4), at most 2 below its [4t, 4t+4): 64 B */
        {"  ROOT %s = f32[12,8] slice(%x), slice={[1:13], [0:8]}, sharding={mesh[d=4], [{d}, {}]}\n", 64, NULL, 0,
         {NULL, NULL}},
        /* the same slice unannotated: propagation gives it x's split (12
         * rows divide into 4), so it costs the same 64 B */
        {"  ROOT %s = f32[12,8] slice(%x), slice={[1:13], [0:8]}\n", 64, NULL, 0, {NULL, NULL}},
        /* pad 2_2 -> 20 rows, 5 a device: shard t reads [5t-2, 5t+3): 1 row
         * from below (t=1) and 1 from above (t=2): 2 x 32 = 64 B */
        {"  %z = f32[] constant(0)\n"
         "  ROOT %p = f32[20,8] pad(%x, %z), padding=2_2x0_0, sharding={mesh[d=4], [{d}, {}]}\n",
         64, NULL, 0, {NULL, NULL}},
        /* concatenate along the split dim -> 32 rows, 8 a device: shard t
         * holds x's shards 2t, 2t+1 (t < 2) or y's 2t-4, 2t-3: two hops of a
         * whole shard (128 B) for each operand: 512 B (gathering both: 768) */
        {"  %y = f32[16,8] parameter(1), sharding={mesh[d=4], [{d}, {}]}\n"
         "  ROOT %c = f32[32,8] concatenate(%x, %y), dimensions={0}, sharding={mesh[d=4], [{d}, {}]}\n",
         512, NULL, 0, {NULL, NULL}},
        /* reverse of the split dim: shard t comes from device 3-t by one
         * collective-permute of the whole shard (128 B), reversed locally */
        {"  ROOT %r = f32[16,8] reverse(%x), dimensions={0}, sharding={mesh[d=4], [{d}, {}]}\n", 128, NULL, 0,
         {NULL, NULL}},
        /* sort along the split dim 0: the split moves to dim 1 by an
         * all-to-all (f32[4,8] -> [16,2]: 3/4 * 128 = 96 B), each device
         * sorts its 2 columns whole, an all-to-all moves it back (96 B) */
        {"  ROOT %r = f32[16,8] sort(%x), dimensions={0}, to_apply=%lt, sharding={mesh[d=4], [{d}, {}]}\n", 192,
         NULL, 0, {NULL, NULL}},
        /* slicing the unsplit dim only: no communication at all */
        {"  ROOT %s = f32[16,4] slice(%x), slice={[0:16], [2:6]}, sharding={mesh[d=4], [{d}, {}]}\n", 0, NULL, 0,
         {NULL, NULL}},
        /* a sum over the split dim (identity init): a partial result, one
         * all-reduce of f32[8] = 32 B (2 * 3/4 * 32 = 48 B), nothing gathered */
        {"  %z = f32[] constant(0)\n"
         "  ROOT %r = f32[8] reduce(%x, %z), dimensions={0}, to_apply=%add\n",
         48, NULL, 0, {NULL, NULL}},
        /* dynamic-slice of 8 rows at a runtime index, f32[8,8] split 4 ways
         * (2 rows a device): each device slices what of the window lies in
         * its shard, a pending sum f32[8,8] = 256 B reduce-scattered to the
         * result's split: 3/4 * 256 = 192 B, nothing gathered (x whole:
         * 384 B) */
        {"  %i = s32[] parameter(1)\n"
         "  %z = s32[] constant(0)\n"
         "  ROOT %r = f32[8,8] dynamic-slice(%x, %i, %z), dynamic_slice_sizes={8,8}, "
         "sharding={mesh[d=4], [{d}, {}]}\n",
         192, NULL, 0, {NULL, NULL}},
        /* dynamic-update-slice of 4 replicated rows into the split x: each
         * device writes its part, no communication */
        {"  %u = f32[4,8] parameter(1)\n"
         "  %i = s32[] parameter(2)\n"
         "  %z = s32[] constant(0)\n"
         "  ROOT %r = f32[16,8] dynamic-update-slice(%x, %u, %i, %z), sharding={mesh[d=4], [{d}, {}]}\n",
         0, NULL, 0, {NULL, NULL}},
        /* a one-to-one reshape keeps the split: [16,8] on dim 0 -> [128] */
        {"  ROOT %r = f32[128] reshape(%x), sharding={mesh[d=4], [{d}]}\n", 0, NULL, 0, {NULL, NULL}},
        /* pad on the unsplit dim 1: propagation gives p x's split through the
         * pad's pass-through dim 0, so nothing moves */
        {"  %z = f32[] constant(0)\n"
         "  %p = f32[16,40] pad(%x, %z), padding=0_0x16_16\n"
         "  ROOT %n = f32[16,40] negate(%p), sharding={mesh[d=4], [{d}, {}]}\n",
         0, NULL, 0, {NULL, NULL}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        check_remat_case(&cases[k]);
}

/* A tuple operand is gathered leaf by leaf: the warning names the leaf.
 * The while has no rule; its operand's leaf 0 (x, 384 B to gather) is whole
 * on every device, the result sliced back locally for r. */
static void test_remat_warning_tuple_leaf(void **state)
{
    (void)state;
    static const char text[] =
        "HloModule tup\n"
        "\n"
        "ENTRY %main {\n"
        "  %x = f32[16,8] parameter(0), sharding={mesh[d=4], [{d}, {}]}\n"
        "  %z = s32[] constant(0)\n"
        "  %init = (f32[16,8], s32[]) tuple(%x, %z)\n"
        "  %opaque = (f32[16,8], s32[]) custom-call(%init), custom_call_target=\"opaque\"\n"
        "  ROOT %r = f32[16,8] get-tuple-element(%opaque), index=0, sharding={mesh[d=4], [{d}, {}]}\n"
        "}\n";
    Compiled c = compile(text, NULL);
    assert_true(c.ok);
    /* all-gather of the f32[4,8] shard (128 B) to f32[16,8] (512 B) over 4: 3/4 * 512 = 384 */
    assert_int_equal(report_total_bytes(&c.rep), 384);
    assert_int_equal(c.rep.n_warnings, 1);
    assert_string_equal(c.rep.warnings[0].instruction, "opaque");
    assert_int_equal(c.rep.warnings[0].line, 7);
    assert_string_equal(c.rep.warnings[0].message,
                        "leaf 0 of init: f32[16,8] split [{d}, {}] is all-gathered to its full size on every device "
                        "for opaque (no partitioning rule for this custom-call yet: it runs at full size on every "
                        "device)");
    compiled_free(&c);
}

/* The example programs gather nothing whole: no warning on any of them, at
 * the meshes of their golden cases. */
static void test_remat_examples_silent(void **state)
{
    (void)state;
    static const struct {
        const char *file, *mesh;
    } ex[] = {
        {"mlp.hlo", "model=8"},          {"mlp.hlo", "model=2"},
        {"mlp_small.hlo", "model=4"},    {"mlp_2d_small.hlo", NULL},
        {"mlp_2d_small.hlo", "data=4,model=2"}, {"mlp_misaligned.hlo", "model=8"},
        {"jax_mlp.hlo", NULL},           {"jax_mlp_sdy.hlo", NULL},
        {"jax_attention.hlo", NULL},     {"jax_attention_sdy.hlo", NULL},
        {"named_quoted_small.hlo", NULL}, {"positional_small.hlo", NULL},
        {"positional_1d_small.hlo", NULL},
    };
    for (size_t k = 0; k < sizeof ex / sizeof ex[0]; k++) {
        char *text = read_example(ex[k].file);
        Compiled c = compile_ok(text, ex[k].mesh);
        if (c.rep.n_warnings != 0)
            fail_msg("%s: %s", ex[k].file, c.rep.warnings[0].message);
        compiled_free(&c);
        free(text);
    }
}

/* ================================================================ scale */

/* A chain of n dots over `model`, Megatron style (column- then
 * row-parallel): one all-reduce per pair. */
static char *mlp_chain(int n)
{
    StrBuf b = {0};
    sb_puts(&b, "HloModule deep\n\nENTRY %main (x: f32[64,64]");
    for (int k = 0; k < n; k++)
        sb_printf(&b, ", w%d: f32[64,64]", k);
    sb_puts(&b, ") -> f32[64,64] {\n  %x = f32[64,64] parameter(0), sharding={mesh[model=8], [{}, {}]}\n");
    for (int k = 0; k < n; k++)
        sb_printf(&b, "  %%w%d = f32[64,64] parameter(%d), sharding={mesh[model=8], [%s]}\n", k, k + 1,
                  k % 2 ? "{model}, {}" : "{}, {model}");
    char prev[32] = "x", name[32];
    for (int k = 0; k < n; k++) {
        snprintf(name, sizeof name, "h%d", k);
        sb_printf(&b, "  %s%%%s = f32[64,64] dot(%%%s, %%w%d), lhs_contracting_dims={1}, rhs_contracting_dims={0}%s\n",
                  k == n - 1 ? "ROOT " : "", name, prev, k,
                  k % 2 ? ", sharding={mesh[model=8], [{}, {}]}" : "");
        snprintf(prev, sizeof prev, "%s", name);
    }
    sb_puts(&b, "}\n");
    char *r = strdup(sb_cstr(&b));
    sb_free(&b);
    return r;
}

static void test_deep_chain(void **state)
{
    (void)state;
    char *text = mlp_chain(200);
    Compiled c = compile_ok(text, NULL);
    /* 100 pairs, each one all-reduce of f32[64,64] (16,384 B): 2*7/8*16,384 =
     * 28,672 B each */
    assert_int_equal(c.rep.n_records, 100);
    assert_int_equal(report_total_bytes(&c.rep), 100 * 28672);
    compiled_free(&c);
    free(text);
}


/* The entry's input names gathered on a second thread while propagation
 * runs (partition_names_start, what the pipeline does for an entry of 16,384
 * instructions and more) give the program and report partition_module gives
 * with the names gathered in place: the chain of 8,200 layers is 16,401
 * instructions plus the extra parameters, two of which take the names the
 * partitioner derives for layers 1 and 3 ("h1.partial", "h3.partial"), so
 * those become "h1.partial.1" and "h3.partial.1" only if the set gathered
 * ahead holds every input name. */
static void test_names_gathered_ahead(void **state)
{
    (void)state;
    enum { LAYERS = 8200 };
    char *chain = mlp_chain(LAYERS);
    /* two more parameters, unused, named like derived values */
    StrBuf b = {0};
    const char *body = strstr(chain, "  %x = ");
    assert_non_null(body);
    sb_printf(&b, "%.*s", (int)(body - chain), chain);
    sb_printf(&b, "  %%h1.partial = f32[4] parameter(%d)\n  %%h3.partial = f32[4] parameter(%d)\n", LAYERS + 1,
              LAYERS + 2);
    sb_puts(&b, body);
    char *text = strdup(sb_cstr(&b));
    sb_free(&b);
    /* the signature lists them too */
    char *sig = strstr(text, ") -> f32[64,64] {");
    assert_non_null(sig);
    StrBuf t = {0};
    sb_printf(&t, "%.*s, h1.partial: f32[4], h3.partial: f32[4]%s", (int)(sig - text), text, sig);
    free(text);
    text = strdup(sb_cstr(&t));
    sb_free(&t);

    Compiled in_place = compile_ok(text, NULL);
    assert_int_equal(in_place.rep.n_records, LAYERS / 2);

    DiagEngine *diag = diag_create(NULL);
    diag_set_show_source(diag, false);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, diag, &opt};
    PipelineState st;
    memset(&st, 0, sizeof st);
    st.text = text;
    st.len = strlen(text);
    st.file_id = diag_add_file(diag, "t.hlo", text, st.len);
    st.text_fd = -1;
    assert_true(pipeline_run(&st, &cx, PASS_PARSE, PASS_CANONICALIZE));
    assert_int_equal(st.m->comps[st.m->entry].n_insts, 2 * LAYERS + 3);
    /* a small entry is not worth the thread; this one is */
    Compiled small = compile_ok(CHAIN, NULL);
    assert_null(partition_names_start(small.in));
    compiled_free(&small);
    PartNames *probe = partition_names_start(st.m);
    assert_non_null(probe);
    partition_names_free(probe);
    /* the pipeline starts it with propagate, when partition follows */
    assert_true(pipeline_run(&st, &cx, PASS_PROPAGATE, PASS_PARTITION));
    assert_null(st.names_ahead); /* taken and freed by partition */

    char *pa = print_module(in_place.out), *pb = print_module(st.out);
    assert_string_equal(pa, pb);
    assert_non_null(strstr(pb, "%h1.partial.1 = f32[64,64] dot(%h0, %w1)"));
    assert_non_null(strstr(pb, "%h3.partial.1 = f32[64,64] dot(%h2, %w3)"));
    StrBuf ra = {0}, rb = {0};
    report_print_json(&ra, &in_place.rep);
    report_print_json(&rb, &st.report);
    assert_string_equal(sb_cstr(&ra), sb_cstr(&rb));
    /* layer by layer, one all-reduce of f32[64,64] per pair: 4,100 x 28,672 B */
    assert_int_equal(report_total_bytes(&st.report), (int64_t)(LAYERS / 2) * 28672);

    /* a pipeline that stops before partition frees the set it started */
    PipelineState st2;
    memset(&st2, 0, sizeof st2);
    st2.text = text;
    st2.len = st.len;
    st2.file_id = st.file_id;
    st2.text_fd = -1;
    assert_true(pipeline_run(&st2, &cx, PASS_PARSE, PASS_PROPAGATE));
    assert_null(st2.names_ahead);
    pipeline_state_free(&st2);

    sb_free(&ra);
    sb_free(&rb);
    free(pa);
    free(pb);
    pipeline_state_free(&st);
    arena_destroy(scratch);
    diag_destroy(diag);
    compiled_free(&in_place);
    free(text);
    free(chain);
}

/* ================================================================ random programs */

typedef struct RVal {
    char name[16];
    int32_t rank;
    int64_t dims[4];
} RVal;

typedef struct RGen {
    uint64_t seed;
    StrBuf b;
    RVal vals[64];
    int32_t n;
    int32_t n_params;
    StrBuf params;
} RGen;

static uint32_t rnd(RGen *g, uint32_t n)
{
    g->seed = g->seed * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((g->seed >> 33) % n);
}

static void put_shape(StrBuf *b, const RVal *v)
{
    sb_puts(b, "f32[");
    for (int32_t d = 0; d < v->rank; d++)
        sb_printf(b, "%s%lld", d ? "," : "", (long long)v->dims[d]);
    sb_puts(b, "]");
}

/* A random named sharding over mesh x=2,y=4 for v (axes at most once). */
static void put_sharding(RGen *g, StrBuf *b, const RVal *v)
{
    static const char *axes[2] = {"x", "y"};
    static const int64_t size[2] = {2, 4};
    int32_t where[2];
    int64_t tiles[4] = {1, 1, 1, 1};
    for (int k = 0; k < 2; k++) {
        where[k] = (int32_t)rnd(g, (uint32_t)v->rank + 1) - 1; /* -1: unused */
        if (where[k] >= 0 && v->dims[where[k]] % (tiles[where[k]] * size[k]) != 0)
            where[k] = -1; /* keep it even */
        if (where[k] >= 0)
            tiles[where[k]] *= size[k];
    }
    bool swap = rnd(g, 2);
    sb_puts(b, ", sharding={mesh[x=2,y=4], [");
    for (int32_t d = 0; d < v->rank; d++) {
        sb_puts(b, d ? ", {" : "{");
        bool first = true;
        for (int k0 = 0; k0 < 2; k0++) {
            int k = swap ? 1 - k0 : k0;
            if (where[k] == d) {
                sb_printf(b, "%s%s", first ? "" : ", ", axes[k]);
                first = false;
            }
        }
        sb_puts(b, "}");
    }
    sb_puts(b, "]}");
}

static RVal *new_val(RGen *g, int32_t rank, const int64_t *dims)
{
    RVal *v = &g->vals[g->n];
    snprintf(v->name, sizeof v->name, "v%d", (int)g->n);
    g->n++;
    v->rank = rank;
    memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
    return v;
}

static RVal *new_param(RGen *g, int32_t rank, const int64_t *dims)
{
    RVal *v = new_val(g, rank, dims);
    sb_printf(&g->params, "%s%s: ", g->n_params ? ", " : "", v->name);
    put_shape(&g->params, v);
    sb_printf(&g->b, "  %%%s = ", v->name);
    put_shape(&g->b, v);
    sb_printf(&g->b, " parameter(%d)", (int)g->n_params++);
    put_sharding(g, &g->b, v);
    sb_puts(&g->b, "\n");
    return v;
}

static int64_t rdim(RGen *g) { return rnd(g, 2) ? 8 : 16; }

/* Begins the line of a new value: "  %vN = f32[..] ". */
static RVal *begin(RGen *g, int32_t rank, const int64_t *dims)
{
    RVal *v = new_val(g, rank, dims);
    sb_printf(&g->b, "  %%%s = ", v->name);
    put_shape(&g->b, v);
    sb_puts(&g->b, " ");
    return v;
}

static void end(RGen *g, RVal *v)
{
    if (rnd(g, 3) == 0)
        put_sharding(g, &g->b, v);
    sb_puts(&g->b, "\n");
}

static RVal *pick(RGen *g) { return &g->vals[rnd(g, (uint32_t)g->n)]; }

static void gen_op(RGen *g)
{
    RVal a = *pick(g);
    int64_t d[4];
    memcpy(d, a.dims, sizeof d);
    RVal *v;
    switch (rnd(g, 9)) {
    case 0: { /* binary elementwise with a same-shape value */
        RVal b = a;
        for (int32_t k = 0; k < g->n; k++)
            if (g->vals[k].rank == a.rank && !memcmp(g->vals[k].dims, a.dims, sizeof(int64_t) * (size_t)a.rank) &&
                rnd(g, 2))
                b = g->vals[k];
        static const char *ops[] = {"add", "multiply", "subtract", "maximum"};
        v = begin(g, a.rank, d);
        sb_printf(&g->b, "%s(%%%s, %%%s)", ops[rnd(g, 4)], a.name, b.name);
        break;
    }
    case 1: { /* transpose */
        int64_t perm[4] = {0, 1, 2, 3};
        for (int32_t k = a.rank - 1; k > 0; k--) {
            int32_t j = (int32_t)rnd(g, (uint32_t)k + 1);
            int64_t t = perm[k];
            perm[k] = perm[j];
            perm[j] = t;
        }
        for (int32_t k = 0; k < a.rank; k++)
            d[k] = a.dims[perm[k]];
        v = begin(g, a.rank, d);
        sb_printf(&g->b, "transpose(%%%s), dimensions=", a.name);
        sb_int_list(&g->b, perm, a.rank, "{", ",", "}");
        break;
    }
    case 2: { /* broadcast: a new dim of 8 somewhere */
        if (a.rank >= 3)
            return;
        int32_t at = (int32_t)rnd(g, (uint32_t)a.rank + 1);
        int64_t nd[4], map[4];
        for (int32_t k = 0, o = 0; o <= a.rank; o++) {
            if (o == at) {
                nd[o] = 8;
            } else {
                nd[o] = a.dims[k];
                map[k++] = o;
            }
        }
        v = begin(g, a.rank + 1, nd);
        sb_printf(&g->b, "broadcast(%%%s), dimensions=", a.name);
        sb_int_list(&g->b, map, a.rank, "{", ",", "}");
        break;
    }
    case 3: { /* reshape: merge two dims or split one in two */
        int64_t nd[4];
        int32_t r;
        if (a.rank >= 2 && rnd(g, 2)) {
            int32_t k = (int32_t)rnd(g, (uint32_t)a.rank - 1);
            r = 0;
            for (int32_t j = 0; j < a.rank; j++) {
                if (j == k + 1)
                    nd[r - 1] *= a.dims[j];
                else
                    nd[r++] = a.dims[j];
            }
        } else if (a.rank < 3) {
            int32_t k = (int32_t)rnd(g, (uint32_t)a.rank);
            r = 0;
            for (int32_t j = 0; j < a.rank; j++) {
                if (j == k) {
                    nd[r++] = a.dims[j] / 4;
                    nd[r++] = 4;
                } else {
                    nd[r++] = a.dims[j];
                }
            }
        } else {
            return;
        }
        for (int32_t k = 0; k < r; k++)
            if (nd[k] > 64 || nd[k] < 2)
                return;
        v = begin(g, r, nd);
        sb_printf(&g->b, "reshape(%%%s)", a.name);
        break;
    }
    case 4: { /* dot with a fresh or existing rhs: contract a's last dim */
        if (a.rank < 2 || a.rank > 3)
            return;
        int64_t k = a.dims[a.rank - 1], n = rdim(g);
        RVal *b = NULL;
        int64_t bd[3];
        int32_t br = a.rank;
        if (a.rank == 2) {
            bd[0] = k;
            bd[1] = n;
        } else {
            bd[0] = a.dims[0];
            bd[1] = k;
            bd[2] = n;
        }
        for (int32_t j = 0; j < g->n && !b; j++)
            if (g->vals[j].rank == br && !memcmp(g->vals[j].dims, bd, sizeof(int64_t) * (size_t)br) && rnd(g, 2))
                b = &g->vals[j];
        RVal bb = b ? *b : *new_param(g, br, bd);
        int64_t od[3];
        if (a.rank == 2) {
            od[0] = a.dims[0];
            od[1] = bb.dims[1];
        } else {
            od[0] = a.dims[0];
            od[1] = a.dims[1];
            od[2] = bb.dims[2];
        }
        v = begin(g, a.rank, od);
        if (a.rank == 2)
            sb_printf(&g->b, "dot(%%%s, %%%s), lhs_contracting_dims={1}, rhs_contracting_dims={0}", a.name, bb.name);
        else
            sb_printf(&g->b, "dot(%%%s, %%%s), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                      "rhs_contracting_dims={1}", a.name, bb.name);
        break;
    }
    case 5: { /* reduce over one dim, sum or max */
        if (a.rank < 2)
            return;
        int32_t k = (int32_t)rnd(g, (uint32_t)a.rank);
        int64_t nd[4];
        for (int32_t j = 0, o = 0; j < a.rank; j++)
            if (j != k)
                nd[o++] = a.dims[j];
        bool mx = rnd(g, 2);
        v = begin(g, a.rank - 1, nd);
        sb_printf(&g->b, "reduce(%%%s, %%%s), dimensions={%d}, to_apply=%%%s", a.name, mx ? "ninf" : "zero", (int)k,
                  mx ? "max" : "add");
        break;
    }
    case 6: { /* slice the first half of a dim */
        int32_t k = (int32_t)rnd(g, (uint32_t)a.rank);
        d[k] = a.dims[k] / 2;
        v = begin(g, a.rank, d);
        sb_printf(&g->b, "slice(%%%s), slice={", a.name);
        for (int32_t j = 0; j < a.rank; j++)
            sb_printf(&g->b, "%s[0:%lld]", j ? ", " : "", (long long)d[j]);
        sb_puts(&g->b, "}");
        break;
    }
    case 7: { /* concatenate with itself */
        int32_t k = (int32_t)rnd(g, (uint32_t)a.rank);
        d[k] = a.dims[k] * 2;
        if (d[k] > 32)
            return;
        v = begin(g, a.rank, d);
        sb_printf(&g->b, "concatenate(%%%s, %%%s), dimensions={%d}", a.name, a.name, (int)k);
        break;
    }
    default: { /* a sharding annotation */
        v = begin(g, a.rank, d);
        sb_printf(&g->b, "custom-call(%%%s), custom_call_target=\"Sharding\"", a.name);
        put_sharding(g, &g->b, v);
        sb_puts(&g->b, "\n");
        return;
    }
    }
    end(g, v);
}

static char *random_program(uint64_t seed)
{
    RGen g;
    memset(&g, 0, sizeof g);
    g.seed = seed * 7919 + 17;
    StrBuf body = {0};
    g.b = body;
    int64_t d[3] = {rdim(&g), rdim(&g), rdim(&g)};
    new_param(&g, 2 + (int32_t)rnd(&g, 2), d);
    sb_puts(&g.b, "  %zero = f32[] constant(0)\n  %ninf = f32[] constant(-inf)\n");
    int32_t steps = 4 + (int32_t)rnd(&g, 8);
    for (int32_t s = 0; s < steps && g.n < 40; s++)
        gen_op(&g);
    StrBuf t = {0};
    sb_puts(&t, "HloModule rnd\n\n%add (p: f32[], q: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n"
                "  %q = f32[] parameter(1)\n  ROOT %s = f32[] add(%p, %q)\n}\n\n"
                "%max (p: f32[], q: f32[]) -> f32[] {\n  %p = f32[] parameter(0)\n  %q = f32[] parameter(1)\n"
                "  ROOT %s = f32[] maximum(%p, %q)\n}\n\nENTRY %main (");
    sb_puts(&t, sb_cstr(&g.params));
    sb_puts(&t, ") -> ");
    RVal *last = &g.vals[g.n - 1];
    put_shape(&t, last);
    sb_puts(&t, " {\n");
    sb_puts(&t, sb_cstr(&g.b));
    sb_printf(&t, "  ROOT %%out = ");
    put_shape(&t, last);
    sb_printf(&t, " copy(%%%s)", last->name);
    put_sharding(&g, &t, last);
    sb_puts(&t, "\n}\n");
    char *r = strdup(sb_cstr(&t));
    sb_free(&t);
    sb_free(&g.b);
    sb_free(&g.params);
    return r;
}

/* Every opcode is partitioned by its rule (the generic path) or has a
 * handler; none falls through to nothing. */
static void test_every_opcode_partitions(void **state)
{
    (void)state;
    for (int op = 0; op < HLO_OPCODE_COUNT; op++)
        if (!part_handler_name((HloOpcode)op))
            fail_msg("opcode '%s' has neither a sharding rule nor a partitioner handler",
                     hlo_opcode_name((HloOpcode)op));
}

static void test_random_programs(void **state)
{
    (void)state;
    const char *env = getenv("SPMDC_RANDOM_PROGRAMS");
    int n = env ? atoi(env) : 150;
    int checked = 0;
    for (int k = 0; k < n; k++) {
        char *text = random_program((uint64_t)k);
        const char *dump = getenv("SPMDC_RANDOM_DUMP"); /* a directory: write the programs there */
        if (dump) {
            char path[512];
            snprintf(path, sizeof path, "%s/rnd%03d.hlo", dump, k);
            FILE *f = fopen(path, "w");
            if (f) {
                fputs(text, f);
                fclose(f);
            }
        }
        Compiled c = compile(text, NULL);
        if (!c.ok) {
            fail_msg("program %d does not compile: %s\n%s", k, diag_text(c.diag), text);
        }
        checked += check_numerics_or_print(&c, text, k);
        compiled_free(&c);
        free(text);
    }
    assert_true(checked > n); /* every program checks several named values */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_model8),
        cmocka_unit_test(test_mlp_model4),
        cmocka_unit_test(test_mlp_model2),
        cmocka_unit_test(test_mlp_y_split_reduce_scatter),
        cmocka_unit_test(test_mlp_misaligned),
        cmocka_unit_test(test_mlp_2d_groups),
        cmocka_unit_test(test_mlp_small_numerics),
        cmocka_unit_test(test_uneven_elementwise),
        cmocka_unit_test(test_uneven_reductions),
        cmocka_unit_test(test_uneven_small_dims),
        cmocka_unit_test(test_manual_parameter_kept),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_chain_numerics),
        cmocka_unit_test(test_add_of_partials_stays_partial),
        cmocka_unit_test(test_partial_flows_through_linear_ops),
        cmocka_unit_test(test_reduce_over_split_dim),
        cmocka_unit_test(test_reduce_nonidentity_init_masked),
        cmocka_unit_test(test_ops_numerics),
        cmocka_unit_test(test_dot_batch_dims),
        cmocka_unit_test(test_default_action_warns),
        cmocka_unit_test(test_bitcast_convert_width_local),
        cmocka_unit_test(test_while_replicated_body),
        cmocka_unit_test(test_remat_warning_per_op),
        cmocka_unit_test(test_remat_intended_no_warning),
        cmocka_unit_test(test_remat_warning_tuple_leaf),
        cmocka_unit_test(test_remat_examples_silent),
        cmocka_unit_test(test_deep_chain),
        cmocka_unit_test(test_names_gathered_ahead),
        cmocka_unit_test(test_every_opcode_partitions),
        cmocka_unit_test(test_random_programs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
