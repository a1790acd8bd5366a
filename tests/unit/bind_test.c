/* bind_test.c - bind_shardings: which mesh is chosen (--mesh, named meshes in
 * the file, num_partitions, positional device counts, one device), rebinding
 * named files at other sizes, errors at the sharding's span, {unknown}. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/parse.h"

typedef struct Fx {
    HloModule *m;
    DiagEngine *diag;
    Arena *scratch;
    SpmdcOptions opt;
    PassCtx cx;
    int32_t comp;
    uint32_t file;
} Fx;

static const char SRC[] = "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n";

static int setup(void **state)
{
    Fx *f = calloc(1, sizeof *f);
    f->m = hlo_module_new("m");
    f->diag = diag_create(NULL);
    diag_set_show_source(f->diag, false);
    f->file = diag_add_file(f->diag, "in.hlo", SRC, sizeof SRC - 1);
    f->scratch = arena_create();
    f->cx.scratch = f->scratch;
    f->cx.diag = f->diag;
    f->cx.opt = &f->opt;
    f->comp = hlo_add_computation(f->m, "main", true);
    f->m->entry = f->comp;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fx *f = *state;
    hlo_module_free(f->m);
    diag_destroy(f->diag);
    arena_destroy(f->scratch);
    free(f);
    return 0;
}

static void set_mesh(Fx *f, const char *spec)
{
    char err[200];
    if (!mesh_parse_spec(spec, &f->opt.mesh, err, sizeof err))
        fail_msg("%s", err);
    f->opt.has_mesh = true;
}

/* A parameter f32[16,16] of computation c carrying syn (may be NULL). */
static HloInst *param(Fx *f, int32_t c, const char *name, ShardingSyntax *syn)
{
    Shape s = shape_array(ET_F32, 2, (int64_t[]){16, 16});
    int32_t i = hlo_add_inst(f->m, c, HLO_PARAMETER, name, &s, NULL, 0);
    HloInst *inst = hlo_inst(f->m, c, i);
    inst->sharding_src = syn;
    return inst;
}

static ShardingSyntax *named(Fx *f, uint32_t line, const char *mesh, const char *dim0, const char *dim1)
{
    Arena *a = f->m->arena;
    ShardingSyntax *s = ARENA_NEW(a, ShardingSyntax);
    s->kind = SSYN_NAMED;
    s->span = src_span_at(f->file, line, 5);
    char buf[64];
    snprintf(buf, sizeof buf, "%s", mesh);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = '\0';
        s->mesh_axis_names[s->n_mesh_axes] = arena_strdup(a, tok);
        s->mesh_axis_sizes[s->n_mesh_axes++] = strtoll(eq + 1, NULL, 10);
    }
    s->n_dims = 2;
    s->dim_n_axes = ARENA_ARRAY(a, int32_t, 2);
    s->dim_axes = ARENA_ARRAY(a, AxisRefSyntax *, 2);
    const char *dims[2] = {dim0, dim1};
    for (int d = 0; d < 2; d++) {
        s->dim_axes[d] = ARENA_ARRAY(a, AxisRefSyntax, 1);
        if (dims[d]) {
            s->dim_axes[d][0].name = arena_strdup(a, dims[d]);
            s->dim_n_axes[d] = 1;
        }
    }
    return s;
}

static ShardingSyntax *iota(Fx *f, uint32_t line, int64_t t0, int64_t t1, int64_t n)
{
    ShardingSyntax *s = ARENA_NEW(f->m->arena, ShardingSyntax);
    s->kind = SSYN_TILED;
    s->span = src_span_at(f->file, line, 5);
    s->n_tile_dims = 2;
    s->tile_dims[0] = t0;
    s->tile_dims[1] = t1;
    s->n_iota_dims = 1;
    s->iota_dims[0] = n;
    return s;
}

static ShardingSyntax *plain(Fx *f, ShardingSyntaxKind k)
{
    ShardingSyntax *s = ARENA_NEW(f->m->arena, ShardingSyntax);
    s->kind = k;
    return s;
}

static void expect_mesh(Fx *f, const char *want)
{
    StrBuf b = {0};
    assert_true(f->m->has_mesh);
    mesh_print(&b, &f->m->mesh);
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

static void expect_sharding(Fx *f, const HloInst *inst, const char *want)
{
    StrBuf b = {0};
    assert_non_null(inst->sharding);
    assert_true(inst->sharding_from_user);
    sharding_print(&b, inst->sharding, &f->m->mesh);
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

static void bind_ok(Fx *f)
{
    if (!bind_shardings(f->m, &f->cx))
        fail_msg("bind failed: %s", diag_text(f->diag));
}

static void bind_fails(Fx *f, const char *want)
{
    assert_false(bind_shardings(f->m, &f->cx));
    assert_string_equal(diag_text(f->diag), want);
}

/* ------------------------------------------------------------ mesh choice */

static void test_mesh_from_named_file(void **state)
{
    Fx *f = *state;
    HloInst *a = param(f, f->comp, "a", named(f, 1, "x=2,y=4", "x", NULL));
    HloInst *b = param(f, f->comp, "b", named(f, 2, "x=2,y=4", "y", "x"));
    HloInst *c = param(f, f->comp, "c", NULL);
    bind_ok(f);
    expect_mesh(f, "x=2,y=4");
    assert_true(f->m->mesh.named);
    expect_sharding(f, a, "{mesh[x=2,y=4], [{x}, {}]}");
    expect_sharding(f, b, "{mesh[x=2,y=4], [{y}, {x}]}");
    assert_null(c->sharding);
    assert_false(c->sharding_from_user);
}

static void test_rebind_by_name(void **state)
{
    Fx *f = *state;
    set_mesh(f, "model=2");
    f->m->num_partitions = 8; /* the file's count is replaced by --mesh */
    HloInst *a = param(f, f->comp, "a", named(f, 1, "model=8", NULL, "model"));
    bind_ok(f);
    expect_mesh(f, "model=2");
    expect_sharding(f, a, "{mesh[model=2], [{}, {model}]}");
    assert_int_equal(sharding_dim_tiles(a->sharding, &f->m->mesh, 1), 2);
}

static void test_numeric_mesh_adopts_file_names(void **state)
{
    Fx *f = *state;
    /* --mesh 4x2 on a file written for mesh[x=2,y=4]: axes become x=4, y=2. */
    set_mesh(f, "4x2");
    HloInst *a = param(f, f->comp, "a", named(f, 1, "x=2,y=4", "y", "x"));
    bind_ok(f);
    expect_mesh(f, "x=4,y=2");
    expect_sharding(f, a, "{mesh[x=4,y=2], [{y}, {x}]}");
    a->sharding->named_form = false;
    expect_sharding(f, a, "{devices=[2,4]<=[4,2]T(1,0)}");
}

static void test_numeric_mesh_axis_count_mismatch(void **state)
{
    Fx *f = *state;
    set_mesh(f, "8");
    param(f, f->comp, "a", named(f, 2, "x=2,y=4", "y", "x"));
    bind_fails(f, "in.hlo:2:5: error: the shardings use mesh[x=2,y=4] (2 axes) but --mesh d0=8 has 1; name the "
                  "axes, e.g. --mesh x=2,y=4\n");
}

static void test_named_meshes_disagree(void **state)
{
    Fx *f = *state;
    param(f, f->comp, "a", named(f, 1, "x=2,y=4", "x", NULL));
    param(f, f->comp, "b", named(f, 3, "x=2,z=4", "x", NULL));
    bind_fails(f, "in.hlo:3:5: error: sharding uses mesh[x=2,z=4] but the sharding at line 1 uses mesh[x=2,y=4]; "
                  "all named shardings must use the same mesh\n");
}

static void test_named_axis_not_in_mesh(void **state)
{
    Fx *f = *state;
    set_mesh(f, "data=2,model=4");
    param(f, f->comp, "a", named(f, 4, "model=8,seq=2", "model", NULL));
    param(f, f->comp, "b", named(f, 5, "model=8,seq=2", NULL, "seq"));
    /* reported once, at the first named sharding */
    bind_fails(f, "in.hlo:4:5: error: axis 'seq' of the shardings' mesh[model=8,seq=2] is not in --mesh "
                  "data=2,model=4\n");
}

static void test_num_partitions_vs_named(void **state)
{
    Fx *f = *state;
    f->m->num_partitions = 4;
    param(f, f->comp, "a", named(f, 2, "model=8", "model", NULL));
    bind_fails(f, "in.hlo:2:5: error: the module says num_partitions=4 but the sharding's mesh[model=8] has 8 "
                  "devices\n");
}

static void test_num_partitions_mesh(void **state)
{
    Fx *f = *state;
    f->m->num_partitions = 8;
    HloInst *a = param(f, f->comp, "a", iota(f, 1, 2, 4, 8));
    bind_ok(f);
    expect_mesh(f, "d0=8");
    assert_false(f->m->mesh.named);
    expect_sharding(f, a, "{devices=[2,4]<=[8]}");
    StrBuf b = {0};
    sharding_describe(&b, a->sharding, &f->m->mesh);
    assert_string_equal(sb_cstr(&b), "[{d0:(1)2}, {d0:(2)4}]");
    sb_free(&b);
}

static void test_positional_count_mesh(void **state)
{
    Fx *f = *state;
    HloInst *a = param(f, f->comp, "a", iota(f, 1, 4, 1, 4));
    param(f, f->comp, "b", iota(f, 5, 4, 2, 8));
    bind_fails(f, "in.hlo:5:5: error: sharding {devices=[4,2]<=[8]} uses 8 devices but the mesh has 4\n");
    expect_mesh(f, "d0=4");
    expect_sharding(f, a, "{devices=[4,1]<=[4]}");
}

static void test_positional_vs_named_mesh(void **state)
{
    Fx *f = *state;
    set_mesh(f, "x=2,y=4");
    HloInst *a = param(f, f->comp, "a", iota(f, 1, 2, 4, 8));
    HloInst *b = param(f, f->comp, "b", iota(f, 2, 8, 1, 8));
    bind_ok(f);
    StrBuf s = {0};
    sharding_describe(&s, a->sharding, &f->m->mesh);
    assert_string_equal(sb_cstr(&s), "[{x}, {y}]");
    sb_clear(&s);
    sharding_describe(&s, b->sharding, &f->m->mesh);
    assert_string_equal(sb_cstr(&s), "[{x, y}, {}]");
    sb_free(&s);
    /* binding released the syntax of what it bound */
    assert_null(a->sharding_src);
    assert_null(f->m->syntax_arena);
    /* the same shardings on a mesh of 4 devices, in a fresh module */
    teardown(state);
    setup(state);
    f = *state;
    set_mesh(f, "x=2,y=2");
    param(f, f->comp, "a", iota(f, 1, 2, 4, 8));
    param(f, f->comp, "b", iota(f, 2, 8, 1, 8));
    bind_fails(f, "in.hlo:1:5: error: sharding {devices=[2,4]<=[8]} uses 8 devices but the mesh has 4\n"
                  "in.hlo:2:5: error: sharding {devices=[8,1]<=[8]} uses 8 devices but the mesh has 4\n");
}

static void test_one_device_default(void **state)
{
    Fx *f = *state;
    HloInst *a = param(f, f->comp, "a", plain(f, SSYN_REPLICATED));
    bind_ok(f);
    expect_mesh(f, "d0=1");
    assert_int_equal(f->m->mesh.n_devices, 1);
    expect_sharding(f, a, "{replicated}");
}

/* Maximal shardings alone do not say how many devices there are: device 3
 * is an error asking for --mesh (no mesh of 4 made up from it); with
 * num_partitions=4 they bind. */
static void test_maximal_only(void **state)
{
    Fx *f = *state;
    ShardingSyntax *a = plain(f, SSYN_MAXIMAL), *b = plain(f, SSYN_MAXIMAL);
    a->device = 3;
    b->device = 1;
    param(f, f->comp, "a", a);
    param(f, f->comp, "b", b);
    bind_fails(f, "spmdc: error: sharding {maximal device=3} names a device, but nothing says how many devices "
                  "there are (no --mesh, mesh in a sharding, num_partitions or positional sharding): give --mesh, "
                  "e.g. --mesh 4\n");
}

static void test_maximal_with_num_partitions(void **state)
{
    Fx *f = *state;
    ShardingSyntax *a = plain(f, SSYN_MAXIMAL);
    a->device = 3;
    f->m->num_partitions = 4;
    HloInst *pa = param(f, f->comp, "a", a);
    bind_ok(f);
    expect_mesh(f, "d0=4");
    expect_sharding(f, pa, "{maximal device=3}");
}

/* Device 0 alone fits the one-device default. */
static void test_maximal_device0(void **state)
{
    Fx *f = *state;
    ShardingSyntax *a = plain(f, SSYN_MAXIMAL);
    a->device = 0;
    param(f, f->comp, "a", a);
    bind_ok(f);
    expect_mesh(f, "d0=1");
}

/* ------------------------------------------------------------ what gets bound */

static void test_unknown_and_nested(void **state)
{
    Fx *f = *state;
    int32_t body = hlo_add_computation(f->m, "body", false);
    HloInst *inner = param(f, body, "p", iota(f, 1, 1, 2, 2));
    int32_t main = hlo_add_computation(f->m, "main2", true);
    f->m->entry = main;
    HloInst *u = param(f, main, "u", plain(f, SSYN_UNKNOWN));
    /* a tuple with an unknown leaf is left to propagation as a whole */
    ShardingSyntax *t = plain(f, SSYN_TUPLE);
    t->n_elems = 2;
    t->elems = ARENA_ARRAY(f->m->arena, ShardingSyntax, 2);
    t->elems[0].kind = SSYN_REPLICATED;
    t->elems[1].kind = SSYN_UNKNOWN;
    HloInst *tu = param(f, main, "t", t);
    bind_ok(f);
    expect_mesh(f, "d0=2");
    expect_sharding(f, inner, "{devices=[1,2]<=[2]}");
    assert_null(u->sharding);
    assert_false(u->sharding_from_user);
    assert_null(tu->sharding);
    /* the unbound syntax stays (a copy: the printer shows it), the bound one goes */
    assert_non_null(u->sharding_src);
    assert_int_equal(u->sharding_src->kind, SSYN_UNKNOWN);
    assert_non_null(tu->sharding_src);
    assert_int_equal(tu->sharding_src->n_elems, 2);
    assert_int_equal(tu->sharding_src->elems[1].kind, SSYN_UNKNOWN);
    assert_null(inner->sharding_src);
}

static void test_errors_are_all_reported(void **state)
{
    Fx *f = *state;
    set_mesh(f, "4");
    param(f, f->comp, "a", iota(f, 2, 2, 1, 2));
    HloInst *ok = param(f, f->comp, "b", iota(f, 3, 2, 2, 4));
    ShardingSyntax *mx = plain(f, SSYN_MAXIMAL);
    mx->device = 9;
    mx->span = src_span_at(f->file, 4, 2);
    param(f, f->comp, "c", mx);
    bind_fails(f, "in.hlo:2:5: error: sharding {devices=[2,1]<=[2]} uses 2 devices but the mesh has 4\n"
                  "in.hlo:4:2: error: sharding {maximal device=9} names device 9 but the mesh has 4 devices\n");
    expect_sharding(f, ok, "{devices=[2,2]<=[4]}");
}

int main(void)
{
#define T(x) cmocka_unit_test_setup_teardown(x, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_mesh_from_named_file),   T(test_rebind_by_name),
        T(test_numeric_mesh_adopts_file_names), T(test_numeric_mesh_axis_count_mismatch),
        T(test_named_meshes_disagree),  T(test_named_axis_not_in_mesh),
        T(test_num_partitions_vs_named), T(test_num_partitions_mesh),
        T(test_positional_count_mesh),  T(test_positional_vs_named_mesh),
        T(test_one_device_default),     T(test_maximal_only),  T(test_maximal_with_num_partitions),
        T(test_maximal_device0),
        T(test_unknown_and_nested),
        T(test_errors_are_all_reported),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
