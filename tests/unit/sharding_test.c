/* sharding_test.c - Sharding: tile geometry, binding of every syntax form
 * (checked against brute-force expansion of the tile assignment), printing
 * (XLA positional and named forms), errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/sharding.h"

static Mesh mk_mesh(const char *spec)
{
    Mesh m;
    char err[256];
    if (!mesh_parse_spec(spec, &m, err, sizeof err))
        fail_msg("%s", err);
    return m;
}

static Shape arr(int32_t rank, const int64_t *dims) { return shape_array(ET_F32, rank, dims); }

/* ------------------------------------------------------------ syntax builders */

static ShardingSyntax syn_iota(int32_t nt, const int64_t *tdims, int32_t ni, const int64_t *idims,
                               const int32_t *perm, bool ltdr)
{
    ShardingSyntax s;
    memset(&s, 0, sizeof s);
    s.kind = SSYN_TILED;
    s.n_tile_dims = nt;
    memcpy(s.tile_dims, tdims, sizeof(int64_t) * (size_t)nt);
    s.n_iota_dims = ni;
    memcpy(s.iota_dims, idims, sizeof(int64_t) * (size_t)ni);
    if (perm) {
        s.has_perm = true;
        memcpy(s.iota_perm, perm, sizeof(int32_t) * (size_t)ni);
    }
    s.last_tile_dim_replicate = ltdr;
    return s;
}

static ShardingSyntax syn_list(int32_t nt, const int64_t *tdims, int64_t n, int64_t *devs, bool ltdr)
{
    ShardingSyntax s;
    memset(&s, 0, sizeof s);
    s.kind = SSYN_TILED;
    s.n_tile_dims = nt;
    memcpy(s.tile_dims, tdims, sizeof(int64_t) * (size_t)nt);
    s.n_devices = n;
    s.devices = devs;
    s.last_tile_dim_replicate = ltdr;
    return s;
}

/* Named syntax from text pieces: mesh "x=2,y=4"; dims like "x", "x,y:(2)2",
 * "" or "?" (open); unreduced "z" or NULL.  Storage comes from arena. */
static AxisRefSyntax *refs_of(Arena *a, const char *text, int32_t *n, bool *open)
{
    char buf[128];
    AxisRefSyntax *r = ARENA_ARRAY(a, AxisRefSyntax, 8);
    *n = 0;
    if (open)
        *open = false;
    snprintf(buf, sizeof buf, "%s", text);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (strcmp(tok, "?") == 0) {
            *open = true;
            continue;
        }
        char *colon = strchr(tok, ':');
        if (colon) {
            *colon = '\0';
            r[*n].pre_size = strtoll(colon + 2, &colon, 10);
            r[*n].size = strtoll(colon + 1, NULL, 10);
        }
        r[*n].name = arena_strdup(a, tok);
        (*n)++;
    }
    return r;
}

static ShardingSyntax syn_named(Arena *a, const char *mesh, int32_t n_dims, const char *const *dims,
                                const char *unreduced)
{
    ShardingSyntax s;
    memset(&s, 0, sizeof s);
    s.kind = SSYN_NAMED;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", mesh);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = '\0';
        s.mesh_axis_names[s.n_mesh_axes] = arena_strdup(a, tok);
        s.mesh_axis_sizes[s.n_mesh_axes++] = strtoll(eq + 1, NULL, 10);
    }
    s.n_dims = n_dims;
    s.dim_n_axes = ARENA_ARRAY(a, int32_t, n_dims + 1);
    s.dim_axes = ARENA_ARRAY(a, AxisRefSyntax *, n_dims + 1);
    for (int32_t d = 0; d < n_dims; d++) {
        bool open;
        s.dim_axes[d] = refs_of(a, dims[d], &s.dim_n_axes[d], &open);
        if (open)
            s.open_dims |= 1u << d;
    }
    if (unreduced)
        s.unreduced_axes = refs_of(a, unreduced, &s.n_unreduced_axes, NULL);
    return s;
}

/* ------------------------------------------------------------ helpers */

typedef struct Fx {
    Arena *arena;
    DiagEngine *diag;
} Fx;

static int setup(void **state)
{
    Fx *f = calloc(1, sizeof *f);
    f->arena = arena_create();
    f->diag = diag_create(NULL);
    diag_set_show_source(f->diag, false);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fx *f = *state;
    arena_destroy(f->arena);
    diag_destroy(f->diag);
    free(f);
    return 0;
}

static Sharding bind_ok(Fx *f, const ShardingSyntax *syn, const Mesh *m, const Shape *shape)
{
    Sharding s;
    if (!sharding_bind(syn, m, shape, &s, f->arena, f->diag))
        fail_msg("bind failed: %s", diag_text(f->diag));
    return s;
}

static void bind_err(Fx *f, const ShardingSyntax *syn, const Mesh *m, const Shape *shape, const char *want)
{
    Sharding s;
    DiagEngine *d = diag_create(NULL);
    diag_set_show_source(d, false);
    assert_false(sharding_bind(syn, m, shape, &s, f->arena, d));
    assert_string_equal(diag_text(d), want);
    diag_destroy(d);
}

static void expect_print(const Sharding *s, const Mesh *m, const char *want)
{
    StrBuf b = {0};
    sharding_print(&b, s, m);
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

static void expect_describe(const Sharding *s, const Mesh *m, const char *want)
{
    StrBuf b = {0};
    sharding_describe(&b, s, m);
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

/* ------------------------------------------------------------ core */

static void test_core_geometry(void **state)
{
    (void)state;
    Mesh m = mk_mesh("x=2,y=4"); /* atoms x0=0, y0=1, y1=2 */
    Sharding s = sharding_tiled(2);
    int8_t x[] = {0}, y[] = {1, 2};
    sharding_set_dim(&s, 0, x, 1);
    sharding_set_dim(&s, 1, y, 2);
    assert_int_equal(sharding_dim_n(&s, 0), 1);
    assert_int_equal(sharding_dim_n(&s, 1), 2);
    assert_int_equal(sharding_dim_atoms(&s, 1)[0], 1);
    assert_int_equal(sharding_dim_atoms(&s, 1)[1], 2);
    assert_int_equal(sharding_tiled_atoms(&s), 7);
    assert_int_equal(sharding_dim_tiles(&s, &m, 0), 2);
    assert_int_equal(sharding_dim_tiles(&s, &m, 1), 4);
    assert_int_equal(sharding_num_tiles(&s, &m), 8);
    /* device 5 = (x=1, y=1) */
    assert_int_equal(sharding_tile_index(&s, &m, 0, 5), 1);
    assert_int_equal(sharding_tile_index(&s, &m, 1, 5), 1);
    assert_int_equal(sharding_tile_index(&s, &m, 1, 3), 3);
    /* f32[3,10]: local [ceil(3/2), ceil(10/4)] = [2,3]; device 5 starts at row 2, col 3 */
    Shape g = arr(2, (int64_t[]){3, 10}), l;
    sharding_shard_shape(&s, &m, &g, &l, NULL);
    assert_int_equal(l.rank, 2);
    assert_int_equal(l.dims[0], 2);
    assert_int_equal(l.dims[1], 3);
    assert_false(sharding_is_even(&s, &m, &g));
    assert_int_equal(sharding_offset(&s, &m, &g, 0, 5), 2);
    assert_int_equal(sharding_offset(&s, &m, &g, 1, 5), 3);
    assert_int_equal(sharding_offset(&s, &m, &g, 1, 7), 9);
    Shape even = arr(2, (int64_t[]){4, 8});
    assert_true(sharding_is_even(&s, &m, &even));

    /* Replacing dims moves the flat atom array. */
    int8_t y1[] = {2}, xy0[] = {0, 1};
    sharding_set_dim(&s, 0, y1, 1);
    assert_int_equal(sharding_dim_n(&s, 1), 2);
    assert_int_equal(sharding_dim_atoms(&s, 1)[0], 1);
    sharding_set_dim(&s, 1, xy0, 2);
    assert_int_equal(s.tile.atoms[0], 2);
    assert_int_equal(s.tile.atoms[1], 0);
    assert_int_equal(s.tile.atoms[2], 1);
    assert_int_equal(sharding_dim_tiles(&s, &m, 0), 2);
    assert_int_equal(sharding_tile_index(&s, &m, 1, 6), 3); /* device 6 = x0 1, y0 1, y1 0 */
    assert_int_equal(sharding_tile_index(&s, &m, 0, 6), 0);

    Sharding r = sharding_replicated();
    assert_null(sharding_dim_atoms(&r, 0));
    assert_int_equal(sharding_dim_n(&r, 0), 0);
    assert_int_equal(sharding_num_tiles(&r, &m), 1);
    assert_int_equal(sharding_tile_index(&r, &m, 0, 5), 0);
    sharding_shard_shape(&r, &m, &g, &l, NULL);
    assert_int_equal(l.dims[1], 10);
}

static void test_core_normalize_equal(void **state)
{
    (void)state;
    Sharding t = sharding_tiled(2);
    assert_true(sharding_is_replicated(&t));
    assert_false(sharding_is_tiled(&t));
    Sharding r = sharding_replicated();
    assert_true(sharding_equal(&t, &r));
    sharding_normalize(&t);
    assert_int_equal(t.kind, SHARDING_REPLICATED);
    assert_int_equal(t.tile.rank, 2);

    Sharding p = sharding_tiled(1);
    p.tile.partial = 4;
    p.tile.kind = REDUCE_SUM;
    assert_false(sharding_is_replicated(&p));
    assert_false(sharding_is_tiled(&p));
    sharding_normalize(&p);
    assert_int_equal(p.kind, SHARDING_TILED);
    Sharding q = p;
    q.tile.kind = REDUCE_MAX;
    assert_false(sharding_equal(&p, &q));
    q.tile.kind = REDUCE_SUM;
    q.named_form = true;
    assert_true(sharding_equal(&p, &q));
    assert_false(sharding_equal(&p, &r));

    Sharding a = sharding_tiled(2), b = sharding_tiled(2);
    sharding_set_dim(&a, 0, (int8_t[]){0, 1}, 2);
    sharding_set_dim(&b, 0, (int8_t[]){1, 0}, 2);
    assert_false(sharding_equal(&a, &b));
    sharding_set_dim(&b, 0, (int8_t[]){0, 1}, 2);
    assert_true(sharding_equal(&a, &b));
    sharding_set_dim(&b, 0, NULL, 0);
    sharding_set_dim(&b, 1, (int8_t[]){0, 1}, 2);
    assert_false(sharding_equal(&a, &b));

    Sharding m0 = sharding_maximal(0), m1 = sharding_maximal(1);
    assert_false(sharding_equal(&m0, &m1));
    assert_true(sharding_equal(&m0, &m0));
    assert_false(sharding_equal(&m0, &r));

    Sharding elems[2] = {a, r};
    Sharding tup = sharding_replicated();
    tup.kind = SHARDING_TUPLE;
    tup.n_elems = 2;
    tup.elems = elems;
    assert_ptr_equal(sharding_leaf(&tup, 1), &elems[1]);
    assert_ptr_equal(sharding_leaf(&a, 3), &a);
    assert_true(sharding_is_tiled(&tup));
    assert_false(sharding_is_replicated(&tup));
    assert_true(sharding_equal(&tup, &tup));
}

static void test_core_transpose_replicate(void **state)
{
    (void)state;
    Sharding s = sharding_tiled(3), t;
    sharding_set_dim(&s, 0, (int8_t[]){0}, 1);
    sharding_set_dim(&s, 2, (int8_t[]){1, 2}, 2);
    s.tile.partial = 8;
    s.tile.kind = REDUCE_SUM;
    sharding_transpose(&s, (int64_t[]){2, 0, 1}, 3, &t);
    assert_int_equal(t.tile.rank, 3);
    assert_int_equal(sharding_dim_n(&t, 0), 2);
    assert_int_equal(sharding_dim_atoms(&t, 0)[0], 1);
    assert_int_equal(sharding_dim_atoms(&t, 0)[1], 2);
    assert_int_equal(sharding_dim_atoms(&t, 1)[0], 0);
    assert_int_equal(sharding_dim_n(&t, 2), 0);
    assert_int_equal(t.tile.partial, 8);

    Sharding u = sharding_replicate_dims(&s, 1);
    assert_int_equal(u.kind, SHARDING_TILED);
    assert_int_equal(sharding_dim_n(&u, 0), 0);
    assert_int_equal(sharding_dim_n(&u, 2), 2);
    assert_int_equal(sharding_tiled_atoms(&u), 6);
    s.tile.partial = 0;
    s.tile.kind = REDUCE_NONE;
    u = sharding_replicate_dims(&s, 5);
    assert_int_equal(u.kind, SHARDING_REPLICATED);
    assert_int_equal(u.tile.rank, 3);

    Sharding r = sharding_replicated();
    sharding_transpose(&r, (int64_t[]){1, 0}, 2, &t);
    assert_int_equal(t.kind, SHARDING_REPLICATED);
    assert_int_equal(t.tile.rank, 2);
}

static void test_iota_expand_examples(void **state)
{
    (void)state;
    int64_t out[30];
    sharding_iota_expand(1, (int64_t[]){8}, NULL, out);
    for (int i = 0; i < 8; i++)
        assert_int_equal(out[i], i);
    sharding_iota_expand(2, (int64_t[]){4, 2}, (int32_t[]){1, 0}, out);
    int64_t w1[] = {0, 2, 4, 6, 1, 3, 5, 7};
    assert_memory_equal(out, w1, sizeof w1);
    sharding_iota_expand(3, (int64_t[]){2, 2, 2}, (int32_t[]){0, 2, 1}, out);
    int64_t w2[] = {0, 2, 1, 3, 4, 6, 5, 7};
    assert_memory_equal(out, w2, sizeof w2);
    sharding_iota_expand(3, (int64_t[]){4, 2, 2}, (int32_t[]){1, 0, 2}, out);
    int64_t w3[] = {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15};
    assert_memory_equal(out, w3, sizeof w3);
    sharding_iota_expand(2, (int64_t[]){6, 5}, (int32_t[]){1, 0}, out);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 5);
    assert_int_equal(out[6], 1);
}

/* ------------------------------------------------------------ binding: worked examples */

static void test_bind_worked_examples(void **state)
{
    Fx *f = *state;
    Mesh m8 = mk_mesh("8"), m16 = mk_mesh("16");
    Shape s2 = arr(2, (int64_t[]){8, 8}), s3 = arr(3, (int64_t[]){8, 4, 8});

    /* [2,4]<=[4,2]T(1,0) == [2,4]0,2,4,6,1,3,5,7 */
    ShardingSyntax a = syn_iota(2, (int64_t[]){2, 4}, 2, (int64_t[]){4, 2}, (int32_t[]){1, 0}, false);
    ShardingSyntax b = syn_list(2, (int64_t[]){2, 4}, 8, (int64_t[]){0, 2, 4, 6, 1, 3, 5, 7}, false);
    Sharding sa = bind_ok(f, &a, &m8, &s2), sb = bind_ok(f, &b, &m8, &s2);
    assert_true(sharding_equal(&sa, &sb));
    /* atoms of 8: a0 (stride 4), a1 (2), a2 (1); dim 0 = a2, dim 1 = a0,a1 */
    assert_int_equal(sharding_dim_n(&sa, 0), 1);
    assert_int_equal(sharding_dim_atoms(&sa, 0)[0], 2);
    assert_int_equal(sharding_dim_atoms(&sa, 1)[0], 0);
    assert_int_equal(sharding_dim_atoms(&sa, 1)[1], 1);
    expect_print(&sa, &m8, "{devices=[2,4]<=[4,2]T(1,0)}");
    expect_print(&sb, &m8, "{devices=[2,4]<=[4,2]T(1,0)}");

    /* [2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate == 0,2,1,3,4,6,5,7 */
    ShardingSyntax c = syn_iota(4, (int64_t[]){2, 1, 2, 2}, 3, (int64_t[]){2, 2, 2}, (int32_t[]){0, 2, 1}, true);
    ShardingSyntax d = syn_list(4, (int64_t[]){2, 1, 2, 2}, 8, (int64_t[]){0, 2, 1, 3, 4, 6, 5, 7}, true);
    Sharding sc = bind_ok(f, &c, &m8, &s3), sd = bind_ok(f, &d, &m8, &s3);
    assert_true(sharding_equal(&sc, &sd));
    expect_print(&sc, &m8, "{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dim_replicate}");
    expect_describe(&sc, &m8, "[{d0:(1)2}, {}, {d0:(4)2}]");

    /* [4,4,1]<=[4,2,2]T(1,0,2) == 0,1,4,5,8,9,12,13,2,3,6,7,10,11,14,15 */
    ShardingSyntax e = syn_iota(3, (int64_t[]){4, 4, 1}, 3, (int64_t[]){4, 2, 2}, (int32_t[]){1, 0, 2}, false);
    ShardingSyntax g = syn_list(3, (int64_t[]){4, 4, 1}, 16,
                                (int64_t[]){0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15}, false);
    Sharding se = bind_ok(f, &e, &m16, &s3), sg = bind_ok(f, &g, &m16, &s3);
    assert_true(sharding_equal(&se, &sg));
    expect_print(&se, &m16, "{devices=[4,4,1]<=[4,2,2]T(1,0,2)}");

    /* [4,2]<=[8] == [4,2]0..7 */
    ShardingSyntax h = syn_iota(2, (int64_t[]){4, 2}, 1, (int64_t[]){8}, NULL, false);
    Sharding sh = bind_ok(f, &h, &m8, &s2);
    expect_print(&sh, &m8, "{devices=[4,2]<=[8]}");
    expect_describe(&sh, &m8, "[{d0:(1)4}, {d0:(4)2}]");
}

static void test_bind_tile_locations(void **state)
{
    Fx *f = *state;
    /* f32[24,100] with {devices=[1,2,2]<=[4] last_tile_dim_replicate}: devices
     * 0,1 hold columns 0..49, devices 2,3 hold 50..99 (local f32[24,50]). */
    Mesh m4 = mk_mesh("4");
    Shape g = arr(2, (int64_t[]){24, 100}), l;
    ShardingSyntax a = syn_iota(3, (int64_t[]){1, 2, 2}, 1, (int64_t[]){4}, NULL, true);
    Sharding sa = bind_ok(f, &a, &m4, &g);
    sharding_shard_shape(&sa, &m4, &g, &l, NULL);
    assert_int_equal(l.dims[0], 24);
    assert_int_equal(l.dims[1], 50);
    int64_t col[] = {0, 0, 50, 50};
    for (int d = 0; d < 4; d++) {
        assert_int_equal(sharding_offset(&sa, &m4, &g, 1, d), col[d]);
        assert_int_equal(sharding_offset(&sa, &m4, &g, 0, d), 0);
    }
    expect_print(&sa, &m4, "{devices=[1,2,2]<=[4] last_tile_dim_replicate}");

    /* {devices=[2,2]0,2,1,3} on f32[8,8]: rows 0-3/cols 0-3 -> 0, rows 0-3/cols
     * 4-7 -> 2, rows 4-7/cols 0-3 -> 1, rows 4-7/cols 4-7 -> 3. */
    Shape g8 = arr(2, (int64_t[]){8, 8});
    ShardingSyntax b = syn_list(2, (int64_t[]){2, 2}, 4, (int64_t[]){0, 2, 1, 3}, false);
    Sharding sb = bind_ok(f, &b, &m4, &g8);
    int64_t row[] = {0, 4, 0, 4}, cl[] = {0, 0, 4, 4};
    for (int d = 0; d < 4; d++) {
        assert_int_equal(sharding_offset(&sb, &m4, &g8, 0, d), row[d]);
        assert_int_equal(sharding_offset(&sb, &m4, &g8, 1, d), cl[d]);
    }
    expect_print(&sb, &m4, "{devices=[2,2]<=[2,2]T(1,0)}");

    /* {devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}: rows 0-3 on {0,2}, rows 4-7 on {1,3}. */
    ShardingSyntax c = syn_list(3, (int64_t[]){2, 1, 2}, 4, (int64_t[]){0, 2, 1, 3}, true);
    Sharding sc = bind_ok(f, &c, &m4, &g8);
    int64_t r2[] = {0, 4, 0, 4};
    for (int d = 0; d < 4; d++)
        assert_int_equal(sharding_offset(&sc, &m4, &g8, 0, d), r2[d]);
    expect_print(&sc, &m4, "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");

    /* Uneven: f32[3,3] with [2,1] -> local f32[2,3]; device 1 holds row 2 (+1 junk row). */
    Mesh m2 = mk_mesh("2");
    Shape g3 = arr(2, (int64_t[]){3, 3});
    ShardingSyntax d = syn_list(2, (int64_t[]){2, 1}, 2, (int64_t[]){0, 1}, false);
    Sharding sd = bind_ok(f, &d, &m2, &g3);
    sharding_shard_shape(&sd, &m2, &g3, &l, NULL);
    assert_int_equal(l.dims[0], 2);
    assert_int_equal(l.dims[1], 3);
    assert_int_equal(sharding_offset(&sd, &m2, &g3, 0, 1), 2);
    expect_print(&sd, &m2, "{devices=[2,1]<=[2]}");
}

/* ------------------------------------------------------------ brute force */

/* A tiny reader for the positional text the printer writes, so printed
 * shardings can be bound again. */
static ShardingSyntax read_positional(const char *t, int64_t *dev_storage)
{
    ShardingSyntax s;
    memset(&s, 0, sizeof s);
    char *e;
    (void)dev_storage;
    if (strcmp(t, "{replicated}") == 0) {
        s.kind = SSYN_REPLICATED;
        return s;
    }
    if (strcmp(t, "{unreduced}") == 0) {
        s.kind = SSYN_UNREDUCED;
        return s;
    }
    s.kind = SSYN_TILED;
    assert_true(strncmp(t, "{devices=[", 10) == 0);
    t += 9;
    do {
        s.tile_dims[s.n_tile_dims++] = strtoll(t + 1, &e, 10);
        t = e;
    } while (*t == ',');
    assert_true(strncmp(t, "]<=[", 4) == 0);
    t += 3;
    do {
        s.iota_dims[s.n_iota_dims++] = strtoll(t + 1, &e, 10);
        t = e;
    } while (*t == ',');
    t++;
    if (*t == 'T') {
        s.has_perm = true;
        int32_t k = 0;
        t++;
        do {
            s.iota_perm[k++] = (int32_t)strtol(t + 1, &e, 10);
            t = e;
        } while (*t == ',');
        assert_int_equal(k, s.n_iota_dims);
        t++;
    } else {
        assert_int_equal(s.n_iota_dims, 1);
    }
    if (strcmp(t, " last_tile_dim_replicate}") == 0) {
        s.last_tile_dim_replicate = true;
    } else if (strcmp(t, " last_tile_dims={unreduced}") == 0) {
        s.n_subgroups = 1;
        s.subgroups[0] = SUBGROUP_UNREDUCED;
    } else if (strcmp(t, " last_tile_dims={unreduced, replicated}") == 0) {
        s.n_subgroups = 2;
        s.subgroups[0] = SUBGROUP_UNREDUCED;
        s.subgroups[1] = SUBGROUP_REPLICATED;
    } else {
        assert_string_equal(t, "}");
    }
    return s;
}

/* Checks one sharding against its expanded tile assignment ta (tile dims
 * tdims, the first rank of them data dims): every device's tile index on
 * every dim is its position in ta, and its offset that times the shard size;
 * printing and binding again gives an equal sharding. */
static void check_against_ta(Fx *f, const Mesh *m, const Sharding *s, int32_t rank, const int64_t *tdims,
                             int32_t nt, const int64_t *ta)
{
    Shape g = arr(rank, (int64_t[]){13, 8, 9, 16, 5, 7, 3, 2});
    for (int64_t L = 0; L < m->n_devices; L++) {
        int64_t dev = ta[L], rem = L;
        int64_t idx[SPMDC_MAX_TILE_DIMS];
        for (int32_t k = nt - 1; k >= 0; k--) {
            idx[k] = rem % tdims[k];
            rem /= tdims[k];
        }
        for (int32_t d = 0; d < rank; d++) {
            assert_int_equal(sharding_tile_index(s, m, d, dev), idx[d]);
            int64_t c = (g.dims[d] + tdims[d] - 1) / tdims[d];
            assert_int_equal(sharding_offset(s, m, &g, d, dev), idx[d] * c);
        }
    }
    StrBuf b = {0};
    sharding_print(&b, s, m);
    ShardingSyntax back = read_positional(sb_cstr(&b), NULL);
    Sharding s2 = bind_ok(f, &back, m, &g);
    if (!sharding_equal(s, &s2))
        fail_msg("%s does not bind back to the same sharding", sb_cstr(&b));
    sb_free(&b);
}

/* For every permutation of the mesh atoms and every way to cut it into
 * consecutive runs (one run per tile dim, optionally the last replicated),
 * builds the iota and explicit syntaxes and checks them. */
static int64_t brute(Fx *f, const Mesh *m, int8_t *perm, int32_t n, uint32_t used)
{
    int64_t count = 0;
    if (n < m->n_atoms) {
        for (int32_t a = 0; a < m->n_atoms; a++) {
            if (used & (1u << a))
                continue;
            perm[n] = (int8_t)a;
            count += brute(f, m, perm, n + 1, used | (1u << a));
        }
        return count;
    }
    int64_t sizes[SPMDC_MAX_ATOMS], ta[64];
    int32_t p32[SPMDC_MAX_ATOMS];
    for (int32_t a = 0; a < n; a++) {
        sizes[a] = m->atom_size[a];
        p32[a] = perm[a];
    }
    sharding_iota_expand(n, sizes, p32, ta);
    for (uint32_t cuts = 0; cuts < (1u << (n - 1)); cuts++) {
        int64_t tdims[SPMDC_MAX_TILE_DIMS];
        int32_t nt = 0;
        tdims[nt++] = m->atom_size[perm[0]];
        for (int32_t i = 1; i < n; i++) {
            if (cuts & (1u << (i - 1)))
                tdims[nt++] = m->atom_size[perm[i]];
            else
                tdims[nt - 1] *= m->atom_size[perm[i]];
        }
        for (int ltdr = 0; ltdr < 2; ltdr++) {
            int32_t rank = nt - ltdr;
            ShardingSyntax si = syn_iota(nt, tdims, n, sizes, p32, ltdr);
            ShardingSyntax sl = syn_list(nt, tdims, m->n_devices, ta, ltdr);
            Shape g = arr(rank, (int64_t[]){13, 8, 9, 16, 5, 7, 3, 2});
            Sharding a = bind_ok(f, &si, m, &g), b = bind_ok(f, &sl, m, &g);
            assert_true(sharding_equal(&a, &b));
            check_against_ta(f, m, &a, rank, tdims, nt, ta);
            count++;
        }
    }
    return count;
}

static void test_bind_brute_force(void **state)
{
    Fx *f = *state;
    const char *specs[] = {"8", "x=2,y=4", "2x2x2", "12", "3x4", "16", "2x3x2"};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        Mesh m = mk_mesh(specs[i]);
        int8_t perm[SPMDC_MAX_ATOMS];
        total += brute(f, &m, perm, 0, 0);
    }
    /* 3 atoms: 6 perms * 4 cuts * 2 (ltdr or not) = 48 each, six meshes = 288;
     * "16" has 4 atoms: 24 perms * 8 cuts * 2 = 384. */
    assert_int_equal(total, 288 + 384);
}

/* ------------------------------------------------------------ errors */

static void test_bind_errors(void **state)
{
    Fx *f = *state;
    Mesh m8 = mk_mesh("8"), m4 = mk_mesh("4");
    Shape v = arr(1, (int64_t[]){16}), v2 = arr(2, (int64_t[]){16, 16});
    ShardingSyntax a = syn_iota(1, (int64_t[]){4}, 1, (int64_t[]){4}, NULL, false);
    bind_err(f, &a, &m8, &v, "spmdc: error: sharding {devices=[4]<=[4]} uses 4 devices but the mesh has 8\n");
    bind_err(f, &a, &m4, &v2, "spmdc: error: sharding {devices=[4]<=[4]} has 1 data dims but the value has rank 2\n");
    ShardingSyntax z = syn_iota(2, (int64_t[]){0, 4}, 1, (int64_t[]){4}, NULL, false);
    bind_err(f, &z, &m4, &v2, "spmdc: error: sharding {devices=[0,4]<=[4]} has a tile dim < 1\n");
    ShardingSyntax b = syn_list(2, (int64_t[]){2, 2}, 4, (int64_t[]){0, 3, 1, 2}, false);
    bind_err(f, &b, &m4, &v2,
             "spmdc: error: the device order of sharding {devices=[2,2]0,3,1,2} is not a transposed iota over "
             "the mesh d0=4 (every tile dim must be a run of the mesh's prime factors); such device orders are "
             "not supported\n");
    ShardingSyntax c = syn_list(2, (int64_t[]){2, 2}, 4, (int64_t[]){0, 1, 2, 2}, false);
    bind_err(f, &c, &m4, &v2,
             "spmdc: error: the device order of sharding {devices=[2,2]0,1,2,2} is not a transposed iota over "
             "the mesh d0=4 (every tile dim must be a run of the mesh's prime factors); such device orders are "
             "not supported\n");
    ShardingSyntax d = syn_list(2, (int64_t[]){2, 2}, 3, (int64_t[]){0, 1, 2}, false);
    bind_err(f, &d, &m4, &v2, "spmdc: error: sharding {devices=[2,2]0,1,2} lists 3 device ids for 4 tiles\n");
    ShardingSyntax e = syn_list(2, (int64_t[]){2, 2}, 4, (int64_t[]){0, 1, 2, 7}, false);
    bind_err(f, &e, &m4, &v2, "spmdc: error: sharding {devices=[2,2]0,1,2,7} names device 7 but the mesh has 4 devices\n");
    ShardingSyntax g = syn_iota(2, (int64_t[]){2, 2}, 2, (int64_t[]){2, 4}, (int32_t[]){1, 0}, false);
    bind_err(f, &g, &m4, &v2, "spmdc: error: the iota source of sharding {devices=[2,2]<=[2,4]T(1,0)} does not match its 4 tiles\n");
    /* partially manual: dim 0 split over the major atom, manual over the minor one */
    ShardingSyntax h = syn_iota(2, (int64_t[]){2, 2}, 1, (int64_t[]){4}, NULL, false);
    h.n_subgroups = 1;
    h.subgroups[0] = SUBGROUP_MANUAL;
    Sharding pm = bind_ok(f, &h, &m4, &v);
    assert_int_equal(pm.kind, SHARDING_TILED);
    assert_int_equal(pm.manual_atoms, 2u);
    assert_int_equal(sharding_tiled_atoms(&pm), 1u);
    expect_print(&pm, &m4, "{devices=[2,2]<=[4] last_tile_dims={manual}}");
    expect_describe(&pm, &m4, "[{d0:(1)2}] manual over {d0:(2)2}");
    /* a manual subgroup over every device is {manual} */
    ShardingSyntax h2 = syn_iota(2, (int64_t[]){1, 4}, 1, (int64_t[]){4}, NULL, false);
    h2.n_subgroups = 1;
    h2.subgroups[0] = SUBGROUP_MANUAL;
    Sharding sm = bind_ok(f, &h2, &m4, &v);
    assert_int_equal(sm.kind, SHARDING_MANUAL);
    ShardingSyntax mx;
    memset(&mx, 0, sizeof mx);
    mx.kind = SSYN_MAXIMAL;
    mx.device = 4;
    bind_err(f, &mx, &m4, &v, "spmdc: error: sharding {maximal device=4} names device 4 but the mesh has 4 devices\n");
    mx.device = 3;
    Sharding smx = bind_ok(f, &mx, &m4, &v);
    expect_print(&smx, &m4, "{maximal device=3}");
    expect_describe(&smx, &m4, "maximal(device 3)");
    /* the mesh "12" has atoms 2,2,3: [3,4]<=[12] cuts between them */
    Mesh m12 = mk_mesh("12");
    ShardingSyntax k = syn_iota(2, (int64_t[]){3, 4}, 1, (int64_t[]){12}, NULL, false);
    bind_err(f, &k, &m12, &v2,
             "spmdc: error: the device order of sharding {devices=[3,4]<=[12]} is not a transposed iota over the "
             "mesh d0=12 (every tile dim must be a run of the mesh's prime factors); pass a mesh whose axes follow "
             "the tiling, e.g. --mesh 3x4\n");
}

/* A device list that is no transposed iota binds as the mesh's own tiling
 * held by permuted devices (a device order of the module's table): every
 * device's tile is its position in the list, it prints back as the list,
 * and the same list gets the same order. */
static void test_bind_device_order(void **state)
{
    Fx *f = *state;
    Mesh m4 = mk_mesh("4");
    m4.perms = ARENA_NEW(f->arena, MeshPerms);
    m4.perms->arena = f->arena;
    Shape v2 = arr(2, (int64_t[]){16, 8}), v1 = arr(1, (int64_t[]){16});
    int64_t ta[4] = {0, 3, 1, 2};
    ShardingSyntax b = syn_list(2, (int64_t[]){2, 2}, 4, ta, false);
    Sharding s = bind_ok(f, &b, &m4, &v2);
    assert_int_equal(s.tile.perm, 1);
    /* position L of the list is tile (L/2, L%2) */
    for (int64_t L = 0; L < 4; L++) {
        assert_int_equal(sharding_tile_index(&s, &m4, 0, ta[L]), L / 2);
        assert_int_equal(sharding_tile_index(&s, &m4, 1, ta[L]), L % 2);
        assert_int_equal(sharding_offset(&s, &m4, &v2, 0, ta[L]), (L / 2) * 8);
    }
    expect_print(&s, &m4, "{devices=[2,2]0,3,1,2}");
    expect_describe(&s, &m4, "[{d0:(1)2}, {d0:(2)2}] on devices {0,3,1,2}");
    Sharding s2 = bind_ok(f, &b, &m4, &v2);
    assert_int_equal(s2.tile.perm, 1);
    assert_int_equal(m4.perms->n, 1);
    /* another list, another order; a replicated last dim keeps it */
    int64_t tb[4] = {3, 2, 1, 0};
    ShardingSyntax c = syn_list(2, (int64_t[]){2, 2}, 4, tb, true);
    Sharding r = bind_ok(f, &c, &m4, &v1);
    assert_int_equal(r.tile.perm, 2);
    /* device 3 holds logical device 0's tile: tile 0; device 1 logical 2's: tile 1 */
    assert_int_equal(sharding_tile_index(&r, &m4, 0, 3), 0);
    assert_int_equal(sharding_tile_index(&r, &m4, 0, 1), 1);
    expect_print(&r, &m4, "{devices=[2,2]3,2,1,0 last_tile_dim_replicate}");
    /* a pending sum in a permuted order is refused */
    ShardingSyntax u = syn_list(2, (int64_t[]){2, 2}, 4, tb, false);
    u.n_subgroups = 1;
    u.subgroups[0] = SUBGROUP_UNREDUCED;
    bind_err(f, &u, &m4, &v1,
             "spmdc: error: sharding {devices=[2,2]3,2,1,0 last_tile_dims={unreduced}}: a device order that is no "
             "transposed iota over the mesh d0=4 is not supported with unreduced subgroups\n");
}

/* Random positional syntaxes (often invalid) never crash; whenever one binds,
 * every device's tile index matches the expanded tile assignment. */
static void test_bind_random(void **state)
{
    Fx *f = *state;
    const char *specs[] = {"8", "x=2,y=4", "12", "3x4", "16", "6", "1"};
    uint64_t seed = 12345;
    int bound = 0, refused = 0;
#define RND(n) ((int64_t)((seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33) % (n))
    for (int iter = 0; iter < 3000; iter++) {
        Mesh m = mk_mesh(specs[RND(7)]);
        int64_t sizes[SPMDC_MAX_TILE_DIMS], ta[64], devs[64];
        int32_t perm[SPMDC_MAX_TILE_DIMS];
        int32_t nt = 1 + (int32_t)RND(4), ni = 1 + (int32_t)RND(3);
        int64_t tdims[SPMDC_MAX_TILE_DIMS];
        for (int32_t t = 0; t < nt; t++)
            tdims[t] = RND(5) == 0 ? 1 + RND(16) : (int64_t[]){1, 2, 3, 4, 2, 6}[RND(6)];
        for (int32_t i = 0; i < ni; i++) {
            sizes[i] = (int64_t[]){2, 4, 3, 2, 8, 1}[RND(6)];
            perm[i] = i;
        }
        if (RND(4) != 0) {
            /* the mesh's prime factors dealt out at random to the tile dims
             * and to the iota source dims: the device count is right */
            for (int32_t t = 0; t < nt; t++)
                tdims[t] = 1;
            for (int32_t i = 0; i < ni; i++)
                sizes[i] = 1;
            for (int32_t a = 0; a < m.n_atoms; a++) {
                tdims[RND(nt)] *= m.atom_size[a];
                sizes[RND(ni)] *= m.atom_size[a];
            }
        }
        for (int32_t i = ni - 1; i > 0; i--) {
            int32_t j = (int32_t)RND(i + 1), tmp = perm[i];
            perm[i] = perm[j];
            perm[j] = tmp;
        }
        bool ltdr = RND(2);
        int32_t rank = nt - ltdr;
        ShardingSyntax syn;
        int64_t P = 1;
        for (int32_t t = 0; t < nt; t++)
            P *= tdims[t];
        if (RND(3) == 0 && P <= 64) {
            for (int64_t k = 0; k < P; k++)
                devs[k] = k;
            for (int64_t k = P - 1; k > 0 && RND(2); k--) {
                int64_t j = RND(k + 1), tmp = devs[k];
                devs[k] = devs[j];
                devs[j] = tmp;
            }
            syn = syn_list(nt, tdims, P, devs, ltdr);
        } else {
            syn = syn_iota(nt, tdims, ni, sizes, perm, ltdr);
        }
        Shape g = arr(rank, (int64_t[]){13, 8, 9, 16, 5, 7, 3, 2});
        Sharding s;
        DiagEngine *d = diag_create(NULL);
        if (!sharding_bind(&syn, &m, &g, &s, f->arena, d)) {
            assert_int_equal(diag_error_count(d), 1);
            refused++;
            diag_destroy(d);
            continue;
        }
        diag_destroy(d);
        bound++;
        if (syn.n_iota_dims)
            sharding_iota_expand(ni, sizes, perm, ta);
        else
            memcpy(ta, devs, sizeof(int64_t) * (size_t)P);
        check_against_ta(f, &m, &s, rank, tdims, nt, ta);
    }
#undef RND
    /* both outcomes occur often (with this seed: 1628 bound, 1372 refused) */
    assert_int_equal(bound + refused, 3000);
    assert_true(bound > 1000);
    assert_true(refused > 1000);
}

/* ------------------------------------------------------------ named */

static void test_bind_named(void **state)
{
    Fx *f = *state;
    Mesh xy = mk_mesh("x=2,y=4");
    Shape v2 = arr(2, (int64_t[]){16, 16}), v1 = arr(1, (int64_t[]){16});
    ShardingSyntax a = syn_named(f->arena, "x=2,y=4", 2, (const char *[]){"x", ""}, NULL);
    Sharding sa = bind_ok(f, &a, &xy, &v2);
    assert_true(sa.named_form);
    assert_int_equal(sharding_dim_n(&sa, 0), 1);
    assert_int_equal(sharding_dim_atoms(&sa, 0)[0], 0);
    expect_print(&sa, &xy, "{mesh[x=2,y=4], [{x}, {}]}");
    expect_describe(&sa, &xy, "[{x}, {}]");
    sa.named_form = false;
    expect_print(&sa, &xy, "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");

    ShardingSyntax b = syn_named(f->arena, "x=2,y=4", 2, (const char *[]){"y", "x,?"}, NULL);
    Sharding sb = bind_ok(f, &b, &xy, &v2);
    expect_print(&sb, &xy, "{mesh[x=2,y=4], [{y}, {x}]}");
    sb.named_form = false;
    expect_print(&sb, &xy, "{devices=[4,2]<=[2,4]T(1,0)}");

    /* sub-axes */
    ShardingSyntax c = syn_named(f->arena, "x=2,y=4", 2, (const char *[]){"y:(2)2", "x,y:(1)2"}, NULL);
    Sharding sc = bind_ok(f, &c, &xy, &v2);
    expect_print(&sc, &xy, "{mesh[x=2,y=4], [{y:(2)2}, {x, y:(1)2}]}");
    expect_describe(&sc, &xy, "[{y:(2)2}, {x, y:(1)2}]");
    sc.named_form = false;
    /* positions y1, x0, y0: source atoms x0,y0 stay adjacent -> [4,2]T(1,0) */
    expect_print(&sc, &xy, "{devices=[2,4]<=[4,2]T(1,0)}");

    /* unreduced -> partial sum */
    Mesh xyz = mk_mesh("x=2,y=2,z=2");
    ShardingSyntax d = syn_named(f->arena, "x=2,y=2,z=2", 2, (const char *[]){"x", "y"}, "z");
    Sharding sd = bind_ok(f, &d, &xyz, &v2);
    assert_int_equal(sd.tile.partial, 4);
    assert_int_equal(sd.tile.kind, REDUCE_SUM);
    expect_print(&sd, &xyz, "{mesh[x=2,y=2,z=2], [{x}, {y}], unreduced={z}}");
    expect_describe(&sd, &xyz, "[{x}, {y}] partial(sum) over {z}");
    sd.named_form = false;
    expect_print(&sd, &xyz, "{devices=[2,2,2]<=[8] last_tile_dims={unreduced}}");
    ShardingSyntax d2 = syn_named(f->arena, "x=2,y=2,z=2", 2, (const char *[]){"x", ""}, "y");
    Sharding sd2 = bind_ok(f, &d2, &xyz, &v2);
    sd2.named_form = false;
    expect_print(&sd2, &xyz, "{devices=[2,1,2,2]<=[8] last_tile_dims={unreduced, replicated}}");
    ShardingSyntax d3 = syn_named(f->arena, "x=2,y=2,z=2", 1, (const char *[]){"y"}, "x");
    Sharding sd3 = bind_ok(f, &d3, &xyz, &v1);
    sd3.named_form = false;
    expect_print(&sd3, &xyz, "{devices=[2,2,2]<=[2,2,2]T(1,0,2) last_tile_dims={unreduced, replicated}}");

    /* Shardy export examples (hlo-input.md 5.3) */
    Mesh x8y4 = mk_mesh("x=8,y=4");
    ShardingSyntax e = syn_named(f->arena, "x=8,y=4", 2, (const char *[]){"?", "y"}, NULL);
    Sharding se = bind_ok(f, &e, &x8y4, &v2);
    se.named_form = false;
    expect_print(&se, &x8y4, "{devices=[1,4,8]<=[8,4]T(1,0) last_tile_dim_replicate}");
    Mesh ab = mk_mesh("a=2,b=2");
    ShardingSyntax g = syn_named(f->arena, "a=2,b=2", 1, (const char *[]){"a"}, NULL);
    Sharding sg = bind_ok(f, &g, &ab, &v1);
    sg.named_form = false;
    expect_print(&sg, &ab, "{devices=[2,2]<=[4] last_tile_dim_replicate}");

    /* Rebinding by name: a file written for model=8 at model=2 and model=4. */
    ShardingSyntax h = syn_named(f->arena, "model=8", 2, (const char *[]){"", "model"}, NULL);
    for (int64_t n = 2; n <= 8; n *= 2) {
        char spec[32];
        snprintf(spec, sizeof spec, "model=%lld", (long long)n);
        Mesh mm = mk_mesh(spec);
        Sharding sh = bind_ok(f, &h, &mm, &v2);
        assert_int_equal(sharding_dim_tiles(&sh, &mm, 1), n);
        Shape l;
        sharding_shard_shape(&sh, &mm, &v2, &l, NULL);
        assert_int_equal(l.dims[1], 16 / n);
        char want[64];
        snprintf(want, sizeof want, "{mesh[model=%lld], [{}, {model}]}", (long long)n);
        expect_print(&sh, &mm, want);
    }
    /* replicated named prints its dims */
    ShardingSyntax r = syn_named(f->arena, "x=2,y=4", 2, (const char *[]){"", "?"}, NULL);
    Sharding sr = bind_ok(f, &r, &xy, &v2);
    assert_int_equal(sr.kind, SHARDING_REPLICATED);
    expect_print(&sr, &xy, "{mesh[x=2,y=4], [{}, {}]}");
    expect_describe(&sr, &xy, "replicated");
}

static void test_bind_named_errors(void **state)
{
    Fx *f = *state;
    Mesh xy = mk_mesh("x=2,y=4");
    Shape v2 = arr(2, (int64_t[]){16, 16});
    ShardingSyntax a = syn_named(f->arena, "x=2,z=4", 2, (const char *[]){"x", ""}, NULL);
    bind_err(f, &a, &xy, &v2,
             "spmdc: error: axis 'z' of sharding {mesh[x=2,z=4], [{x}, {}]} is not in the mesh x=2,y=4\n");
    ShardingSyntax b = syn_named(f->arena, "x=2,y=4", 2, (const char *[]){"x", "x"}, NULL);
    bind_err(f, &b, &xy, &v2, "spmdc: error: axis 'x' is used twice in sharding {mesh[x=2,y=4], [{x}, {x}]}\n");
    ShardingSyntax c = syn_named(f->arena, "x=2,y=4", 1, (const char *[]){"x"}, NULL);
    bind_err(f, &c, &xy, &v2, "spmdc: error: sharding {mesh[x=2,y=4], [{x}]} has 1 dims but the value has rank 2\n");
    ShardingSyntax d = syn_named(f->arena, "x=2,y=4", 2, (const char *[]){"y:(2)4", ""}, NULL);
    bind_err(f, &d, &xy, &v2,
             "spmdc: error: sub-axis y:(2)4 of sharding {mesh[x=2,y=4], [{y:(2)4}, {}]} does not fit axis y=4 of "
             "the mesh\n");
    ShardingSyntax e = syn_named(f->arena, "x=2,y=4", 2, (const char *[]){"y", "y:(2)2"}, NULL);
    bind_err(f, &e, &xy, &v2, "spmdc: error: axis 'y' is used twice in sharding {mesh[x=2,y=4], [{y}, {y:(2)2}]}\n");
    ShardingSyntax g = syn_named(f->arena, "x=2,y=4", 2, (const char *[]){"y", ""}, NULL);
    g.manual_axes = refs_of(f->arena, "x", &g.n_manual_axes, NULL);
    Sharding gm = bind_ok(f, &g, &xy, &v2);
    assert_int_equal(gm.manual_atoms, 1u); /* x is atom 0 */
    gm.named_form = true;
    expect_print(&gm, &xy, "{mesh[x=2,y=4], [{y}, {}], manual={x}}");
    gm.named_form = false;
    expect_print(&gm, &xy, "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dims={manual}}");
}

/* ------------------------------------------------------------ tuples, misc kinds */

static void test_bind_tuples(void **state)
{
    Fx *f = *state;
    Mesh m2 = mk_mesh("2");
    Shape leaves[3] = {arr(2, (int64_t[]){4, 4}), arr(1, (int64_t[]){6}), shape_scalar(ET_S32)};
    Shape inner = {.type = ET_TUPLE, .n_elems = 2, .elems = leaves + 1};
    Shape outer_elems[2] = {leaves[0], inner};
    Shape tup = {.type = ET_TUPLE, .n_elems = 2, .elems = outer_elems};

    ShardingSyntax el[3];
    el[0] = syn_iota(2, (int64_t[]){2, 1}, 1, (int64_t[]){2}, NULL, false);
    memset(&el[1], 0, sizeof el[1]);
    el[1].kind = SSYN_REPLICATED;
    memset(&el[2], 0, sizeof el[2]);
    el[2].kind = SSYN_MAXIMAL;
    el[2].device = 1;
    ShardingSyntax t;
    memset(&t, 0, sizeof t);
    t.kind = SSYN_TUPLE;
    t.n_elems = 3;
    t.elems = el;
    Sharding s = bind_ok(f, &t, &m2, &tup);
    assert_int_equal(s.kind, SHARDING_TUPLE);
    assert_int_equal(s.n_elems, 3);
    expect_print(&s, &m2, "{{devices=[2,1]<=[2]}, {replicated}, {maximal device=1}}");
    expect_describe(&s, &m2, "([{d0}, {}], replicated, maximal(device 1))");
    /* a tuple of 18 leaves: its first SHARDING_DESCRIBE_LEAVES (16) and the count */
    Sharding many[18];
    for (int k = 0; k < 18; k++) many[k] = k == 16 ? s.elems[0] : sharding_replicated();
    Sharding big = s;
    big.n_elems = 18;
    big.elems = many;
    expect_describe(&big, &m2, "(replicated, replicated, replicated, replicated, replicated, replicated, replicated, "
                               "replicated, replicated, replicated, replicated, replicated, replicated, replicated, "
                               "replicated, replicated, ... (18 in all))");
    big.n_elems = 17;
    expect_describe(&big, &m2, "(replicated, replicated, replicated, replicated, replicated, replicated, replicated, "
                               "replicated, replicated, replicated, replicated, replicated, replicated, replicated, "
                               "replicated, replicated, ... (17 in all))");
    big.n_elems = 16;
    big.elems = many + 1;
    expect_describe(&big, &m2, "(replicated, replicated, replicated, replicated, replicated, replicated, replicated, "
                               "replicated, replicated, replicated, replicated, replicated, replicated, replicated, "
                               "replicated, [{d0}, {}])");
    Shape l;
    sharding_shard_shape(&s, &m2, &tup, &l, f->arena);
    assert_int_equal(l.elems[0].dims[0], 2);
    assert_int_equal(l.elems[1].elems[0].dims[0], 6);

    /* a single tiled sharding on a tuple applies to every leaf */
    Shape two_elems[2] = {arr(1, (int64_t[]){8}), arr(1, (int64_t[]){4})};
    Shape two = {.type = ET_TUPLE, .n_elems = 2, .elems = two_elems};
    ShardingSyntax one = syn_iota(1, (int64_t[]){2}, 1, (int64_t[]){2}, NULL, false);
    Sharding s1 = bind_ok(f, &one, &m2, &two);
    assert_int_equal(s1.kind, SHARDING_TUPLE);
    sharding_shard_shape(&s1, &m2, &two, &l, f->arena);
    assert_int_equal(l.elems[0].dims[0], 4);
    assert_int_equal(l.elems[1].dims[0], 2);
    ShardingSyntax rep;
    memset(&rep, 0, sizeof rep);
    rep.kind = SSYN_REPLICATED;
    Sharding sr = bind_ok(f, &rep, &m2, &two);
    assert_int_equal(sr.kind, SHARDING_REPLICATED);

    /* element count mismatch; tuple on an array */
    t.n_elems = 2;
    bind_err(f, &t, &m2, &tup,
             "spmdc: error: tuple sharding {{devices=[2,1]<=[2]}, {replicated}} has 2 elements but the shape "
             "(f32[4,4], (f32[6], s32[])) has 3 leaves\n");
    bind_err(f, &t, &m2, &leaves[0],
             "spmdc: error: tuple sharding {{devices=[2,1]<=[2]}, {replicated}} has 2 elements but the shape "
             "f32[4,4] has 1 array (not a tuple)\n");

    /* XLA puts a comment before every 5th tuple element */
    Sharding six[6];
    for (int i = 0; i < 6; i++)
        six[i] = sharding_replicated();
    Sharding st = sharding_replicated();
    st.kind = SHARDING_TUPLE;
    st.n_elems = 6;
    st.elems = six;
    expect_print(&st, &m2,
                 "{{replicated}, {replicated}, {replicated}, {replicated}, {replicated}, /*index=5*/{replicated}}");
    st.n_elems = 0;
    expect_print(&st, &m2, "{}");
}

static void test_bind_plain_kinds(void **state)
{
    Fx *f = *state;
    Mesh m = mk_mesh("x=2,y=2");
    Shape v = arr(1, (int64_t[]){8});
    ShardingSyntax s;
    memset(&s, 0, sizeof s);
    s.kind = SSYN_UNREDUCED;
    Sharding u = bind_ok(f, &s, &m, &v);
    assert_int_equal(u.kind, SHARDING_TILED);
    assert_int_equal(u.tile.partial, 3);
    expect_print(&u, &m, "{unreduced}");
    expect_describe(&u, &m, "[{}] partial(sum) over {x, y}");
    s.kind = SSYN_MANUAL;
    Sharding mn = bind_ok(f, &s, &m, &v);
    assert_int_equal(mn.kind, SHARDING_MANUAL);
    expect_print(&mn, &m, "{manual}");
    mn.named_form = true;
    expect_print(&mn, &m, "{mesh[x=2,y=2], manual}");
    s.kind = SSYN_REPLICATED;
    Sharding r = bind_ok(f, &s, &m, &v);
    expect_print(&r, &m, "{replicated}");
    r.named_form = true;
    expect_print(&r, &m, "{mesh[x=2,y=2], [{}]}");
    r.tile.rank = 0;
    expect_print(&r, &m, "{mesh[x=2,y=2], replicated}");
    /* positional tile dims of 1 everywhere with last_tile_dim_replicate: replicated */
    ShardingSyntax t = syn_iota(2, (int64_t[]){1, 4}, 1, (int64_t[]){4}, NULL, true);
    Sharding tr = bind_ok(f, &t, &m, &v);
    assert_int_equal(tr.kind, SHARDING_REPLICATED);
    expect_print(&tr, &m, "{replicated}");
    /* syntax printer for each kind */
    StrBuf b = {0};
    s.kind = SSYN_UNKNOWN;
    sharding_syntax_print(&b, &s);
    assert_string_equal(sb_cstr(&b), "{unknown}");
    sb_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_core_geometry),
        cmocka_unit_test(test_core_normalize_equal),
        cmocka_unit_test(test_core_transpose_replicate),
        cmocka_unit_test(test_iota_expand_examples),
        cmocka_unit_test_setup_teardown(test_bind_worked_examples, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_tile_locations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_brute_force, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_device_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_random, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_named_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_tuples, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_plain_kinds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
