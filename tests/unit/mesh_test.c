/* mesh_test.c - meshes: prime atoms, --mesh specs, coordinates, replica
 * groups and their iota form (checked by expanding it back), axis names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/arena.h"
#include "spmdc/mesh.h"
#include "spmdc/sharding.h"

static Mesh parse_ok(const char *spec)
{
    Mesh m;
    char err[256] = "";
    bool ok = mesh_parse_spec(spec, &m, err, sizeof err);
    if (!ok)
        fail_msg("mesh_parse_spec(%s): %s", spec, err);
    return m;
}

static void test_init_atoms(void **state)
{
    (void)state;
    Mesh m = parse_ok("x=2,y=4");
    assert_true(m.named);
    assert_int_equal(m.n_axes, 2);
    assert_int_equal(m.n_devices, 8);
    assert_int_equal(m.n_atoms, 3);
    assert_int_equal(m.atom_size[0], 2);
    assert_int_equal(m.atom_size[1], 2);
    assert_int_equal(m.atom_size[2], 2);
    assert_int_equal(m.atom_axis[0], 0);
    assert_int_equal(m.atom_axis[1], 1);
    assert_int_equal(m.atom_axis[2], 1);
    assert_int_equal(m.axes[1].first_atom, 1);
    assert_int_equal(m.axes[1].n_atoms, 2);

    /* 12 = 2*2*3, ascending; 1 has no atoms. */
    Mesh t = parse_ok("a=12,b=1,c=3");
    assert_int_equal(t.n_atoms, 4);
    assert_int_equal(t.atom_size[0], 2);
    assert_int_equal(t.atom_size[1], 2);
    assert_int_equal(t.atom_size[2], 3);
    assert_int_equal(t.atom_size[3], 3);
    assert_int_equal(t.axes[1].n_atoms, 0);
    assert_int_equal(t.axes[2].first_atom, 3);
    assert_int_equal(t.atom_axis[3], 2);
    assert_int_equal(t.n_devices, 36);

    const char *names[] = {"a", "a"};
    int64_t sizes[] = {2, 2};
    char err[128];
    assert_false(mesh_init(&t, 2, names, sizes, err, sizeof err));
    assert_string_equal(err, "mesh axis 'a' is named twice");
}

static void test_parse_spec(void **state)
{
    (void)state;
    Mesh m = parse_ok("8");
    assert_false(m.named);
    assert_int_equal(m.n_axes, 1);
    assert_string_equal(m.axes[0].name, "d0");
    assert_int_equal(m.axes[0].size, 8);

    m = parse_ok("2x4");
    assert_int_equal(m.n_axes, 2);
    assert_string_equal(m.axes[1].name, "d1");
    assert_int_equal(m.axes[0].size, 2);
    assert_int_equal(m.axes[1].size, 4);

    m = parse_ok("model=8");
    assert_string_equal(m.axes[0].name, "model");

    m = parse_ok("1");
    assert_int_equal(m.n_devices, 1);
    assert_int_equal(m.n_atoms, 0);

    m = parse_ok("65536");
    assert_int_equal(m.n_atoms, 16);

    const char *bad[] = {"",      "abc",     "0",       "2x0",     "x=2,x=4", "x=2,y",   "x=",
                         "65537", "256x512", "2x",      "x=2;y=3", "2,4",     "x=0",     "-2",
                         "x=2,",  "2x4y",    "x=2,3=4", "9999999999999999999999", "1x1x1x1x1x1x1x1x1",
                         "x=2,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        if (mesh_parse_spec(bad[i], &m, err, sizeof err))
            fail_msg("'%s' was accepted", bad[i]);
        assert_true(strlen(err) > 0);
    }
    char err[256];
    assert_false(mesh_parse_spec("x=2,x=4", &m, err, sizeof err));
    assert_string_equal(err, "bad --mesh 'x=2,x=4': mesh axis 'x' is named twice");
    assert_false(mesh_parse_spec("4x0", &m, err, sizeof err));
    assert_string_equal(err, "bad --mesh '4x0': axis 'd1' has size 0");
    assert_false(mesh_parse_spec("256x512", &m, err, sizeof err));
    assert_string_equal(err, "bad --mesh '256x512': the mesh has more than 65536 devices");
}

static void test_coords(void **state)
{
    (void)state;
    Mesh m = parse_ok("x=2,y=4");
    assert_int_equal(mesh_axis_index(&m, "x"), 0);
    assert_int_equal(mesh_axis_index(&m, "y"), 1);
    assert_int_equal(mesh_axis_index(&m, "z"), -1);
    /* device 5 = x 1, y 1 = (x0=1, y0=0, y1=1) */
    assert_int_equal(mesh_atom_coord(&m, 5, 0), 1);
    assert_int_equal(mesh_atom_coord(&m, 5, 1), 0);
    assert_int_equal(mesh_atom_coord(&m, 5, 2), 1);
    assert_int_equal(mesh_atom_coord(&m, 6, 1), 1);
    assert_int_equal(mesh_mask_size(&m, 0), 1);
    assert_int_equal(mesh_mask_size(&m, 6), 4);
    assert_int_equal(mesh_mask_size(&m, 7), 8);
    Mesh t = parse_ok("3x4");
    /* atoms d0=3, d1: 2, 2; device 11 = (2, 1, 1) */
    assert_int_equal(mesh_atom_coord(&t, 11, 0), 2);
    assert_int_equal(mesh_atom_coord(&t, 11, 1), 1);
    assert_int_equal(mesh_atom_coord(&t, 11, 2), 1);
    assert_int_equal(mesh_mask_size(&t, 1), 3);
}

static void check_groups(const Mesh *m, const int8_t *order, int32_t n, const int64_t *want, int64_t ng,
                         int64_t gs)
{
    int64_t out[64], g, s;
    mesh_groups(m, order, n, out, &g, &s);
    assert_int_equal(g, ng);
    assert_int_equal(s, gs);
    for (int64_t i = 0; i < ng * gs; i++)
        assert_int_equal(out[i], want[i]);
}

static void test_groups(void **state)
{
    (void)state;
    Mesh m = parse_ok("x=2,y=4");
    int8_t y[] = {1, 2}, x[] = {0}, y1[] = {2}, y0[] = {1}, yr[] = {2, 1}, yx[] = {1, 2, 0};
    check_groups(&m, y, 2, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 2, 4);
    check_groups(&m, x, 1, (int64_t[]){0, 4, 1, 5, 2, 6, 3, 7}, 4, 2);
    check_groups(&m, y1, 1, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 4, 2);
    check_groups(&m, y0, 1, (int64_t[]){0, 2, 1, 3, 4, 6, 5, 7}, 4, 2);
    check_groups(&m, yr, 2, (int64_t[]){0, 2, 1, 3, 4, 6, 5, 7}, 2, 4);
    /* all devices, y major then x: member (y,x) = x*4 + y */
    check_groups(&m, yx, 3, (int64_t[]){0, 4, 1, 5, 2, 6, 3, 7}, 1, 8);
    check_groups(&m, NULL, 0, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 8, 1);
}

static void iota_text(const Mesh *m, const int8_t *order, int32_t n, const char *want)
{
    StrBuf b = {0};
    assert_true(mesh_groups_iota(&b, m, order, n));
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

static void test_groups_iota_text(void **state)
{
    (void)state;
    Mesh m = parse_ok("x=2,y=4");
    int8_t y[] = {1, 2}, x[] = {0}, y0[] = {1}, y1[] = {2}, yx[] = {1, 2, 0};
    iota_text(&m, y, 2, "[2,4]<=[8]");
    iota_text(&m, x, 1, "[4,2]<=[2,4]T(1,0)");
    iota_text(&m, y1, 1, "[4,2]<=[8]");
    iota_text(&m, y0, 1, "[4,2]<=[2,2,2]T(0,2,1)");
    iota_text(&m, yx, 3, "[1,8]<=[2,4]T(1,0)");
    iota_text(&m, NULL, 0, "[8,1]<=[8]");
    Mesh one = parse_ok("1");
    StrBuf b = {0};
    assert_false(mesh_groups_iota(&b, &one, NULL, 0));
    assert_int_equal(b.len, 0);
    sb_free(&b);
}

/* Parses "[G,S]<=[d..]T(p..)" and expands it (the inverse of the printer). */
static void expand_iota_text(const char *s, int64_t *out, int64_t *g, int64_t *sz)
{
    int64_t dims[SPMDC_MAX_TILE_DIMS];
    int32_t perm[SPMDC_MAX_TILE_DIMS], nd = 0, np = 0;
    char *e;
    assert_int_equal(*s, '[');
    *g = strtoll(s + 1, &e, 10);
    assert_int_equal(*e, ',');
    *sz = strtoll(e + 1, &e, 10);
    assert_true(strncmp(e, "]<=[", 4) == 0);
    s = e + 3;
    do {
        dims[nd++] = strtoll(s + 1, &e, 10);
        s = e;
    } while (*s == ',');
    assert_int_equal(*s, ']');
    s++;
    if (*s == 'T') {
        s++;
        do {
            perm[np++] = (int32_t)strtol(s + 1, &e, 10);
            s = e;
        } while (*s == ',');
        assert_int_equal(*s, ')');
        assert_int_equal(np, nd);
        s++;
    } else {
        assert_int_equal(nd, 1); /* no T when the source is 1-D */
    }
    assert_int_equal(*s, '\0');
    sharding_iota_expand(nd, dims, np ? perm : NULL, out);
}

/* Every ordered subset of atoms of several meshes: the iota text expands to
 * exactly mesh_groups' output. */
static int64_t check_all_orders(const Mesh *m, int8_t *order, int32_t n, uint32_t used)
{
    int64_t checked = 0;
    if (m->n_devices > 1) {
        int64_t want[4096], got[4096], g, s, g2, s2;
        StrBuf b = {0};
        mesh_groups(m, order, n, want, &g, &s);
        assert_true(mesh_groups_iota(&b, m, order, n));
        expand_iota_text(sb_cstr(&b), got, &g2, &s2);
        assert_int_equal(g2, g);
        assert_int_equal(s2, s);
        for (int64_t i = 0; i < m->n_devices; i++)
            if (got[i] != want[i])
                fail_msg("%s: id %lld is %lld, want %lld", sb_cstr(&b), (long long)i, (long long)got[i],
                         (long long)want[i]);
        sb_free(&b);
        checked++;
    }
    for (int32_t a = 0; a < m->n_atoms; a++) {
        if (used & (1u << a))
            continue;
        order[n] = (int8_t)a;
        checked += check_all_orders(m, order, n + 1, used | (1u << a));
    }
    return checked;
}

static void test_groups_iota_roundtrip(void **state)
{
    (void)state;
    const char *specs[] = {"x=2,y=4", "8", "2x2x2", "3x4", "a=4,b=2,c=2", "12", "2x3x2", "x=16"};
    int64_t total = 0;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        Mesh m = parse_ok(specs[i]);
        int8_t order[SPMDC_MAX_ATOMS];
        total += check_all_orders(&m, order, 0, 0);
    }
    /* Ordered subsets of n atoms: 16 for n = 3 (six meshes), 65 for n = 4
     * (a=4,b=2,c=2 and x=16): 6*16 + 2*65 = 226. */
    assert_int_equal(total, 226);
}

static void name_of(const Mesh *m, const int8_t *a, int32_t n, const char *want)
{
    StrBuf b = {0};
    mesh_atoms_name(&b, m, a, n);
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

static void test_atoms_name(void **state)
{
    (void)state;
    Mesh m = parse_ok("model=8");
    name_of(&m, (int8_t[]){0, 1, 2}, 3, "model");
    name_of(&m, (int8_t[]){1, 2}, 2, "model:(2)4");
    name_of(&m, (int8_t[]){0}, 1, "model:(1)2");
    name_of(&m, (int8_t[]){1, 0}, 2, "model:(2)2,model:(1)2");
    name_of(&m, NULL, 0, "");
    Mesh xy = parse_ok("x=2,y=4");
    name_of(&xy, (int8_t[]){0, 1, 2}, 3, "x,y");
    name_of(&xy, (int8_t[]){1}, 1, "y:(1)2");
    name_of(&xy, (int8_t[]){2}, 1, "y:(2)2");
    name_of(&xy, (int8_t[]){1, 2, 0}, 3, "y,x");
    StrBuf b = {0};
    mesh_print(&b, &xy);
    assert_string_equal(sb_cstr(&b), "x=2,y=4");
    sb_free(&b);
}

static void test_factor_order(void **state)
{
    (void)state;
    Mesh m = parse_ok("x=2,y=4"); /* atoms x0 (stride 4), y0 (2), y1 (1) */
    int8_t order[SPMDC_MAX_ATOMS];
    int64_t ident[] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_true(mesh_factor_order(&m, ident, order));
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 1);
    assert_int_equal(order[2], 2);
    /* [2,4]<=[4,2]T(1,0) = 0,2,4,6,1,3,5,7: y1 major, then x0, y0 */
    int64_t t[] = {0, 2, 4, 6, 1, 3, 5, 7};
    assert_true(mesh_factor_order(&m, t, order));
    assert_int_equal(order[0], 2);
    assert_int_equal(order[1], 0);
    assert_int_equal(order[2], 1);
    StrBuf b = {0};
    mesh_iota_src(&b, &m, order);
    assert_string_equal(sb_cstr(&b), "<=[4,2]T(1,0)");
    sb_free(&b);
    int64_t bad1[] = {0, 3, 1, 2, 4, 5, 6, 7}; /* stride 3 is no atom's */
    int64_t bad2[] = {0, 1, 2, 3, 4, 5, 7, 6}; /* strides fit, the tail does not */
    int64_t bad3[] = {1, 0, 2, 3, 4, 5, 6, 7};
    assert_false(mesh_factor_order(&m, bad1, order));
    assert_false(mesh_factor_order(&m, bad2, order));
    assert_false(mesh_factor_order(&m, bad3, order));
    Mesh one = parse_ok("1");
    int64_t zero[] = {0};
    assert_true(mesh_factor_order(&one, zero, order));
    mesh_iota_src(&b, &one, order);
    assert_string_equal(sb_cstr(&b), "<=[1]");
    sb_free(&b);
}

/* Device orders are interned through a hash index: 720 orders of 6 devices
 * get ids 1..720 in the order they were first seen, each id maps back to its
 * order both ways, and interning an order again (after the index has been
 * rebuilt several times) finds the id it was given. */
static void test_perm_intern_many(void **state)
{
    (void)state;
    MeshPerms perms = {0};
    Arena *a = arena_create();
    perms.arena = a;
    Mesh m = parse_ok("6");
    m.perms = &perms;
    static int64_t all[720][6];
    int32_t n = 0;
    int64_t p[6] = {0, 1, 2, 3, 4, 5};
    for (;;) { /* lexicographic order of the permutations of 0..5 */
        memcpy(all[n++], p, sizeof p);
        int i = 4;
        while (i >= 0 && p[i] > p[i + 1]) i--;
        if (i < 0) break;
        int j = 5;
        while (p[j] < p[i]) j--;
        int64_t t = p[i]; p[i] = p[j]; p[j] = t;
        for (int l = i + 1, r = 5; l < r; l++, r--) { t = p[l]; p[l] = p[r]; p[r] = t; }
    }
    assert_int_equal(n, 720);
    /* all[0] is the identity: id 0, never stored */
    assert_int_equal(mesh_perm_intern(&perms, all[0], 6), 0);
    for (int32_t k = 1; k < n; k++)
        assert_int_equal(mesh_perm_intern(&perms, all[k], 6), k);
    assert_int_equal(perms.n, 719);
    for (int32_t k = n - 1; k >= 1; k--) {
        assert_int_equal(mesh_perm_intern(&perms, all[k], 6), k);
        for (int64_t L = 0; L < 6; L++) {
            assert_int_equal(mesh_physical_device(&m, k, L), all[k][L]);
            assert_int_equal(mesh_logical_device(&m, k, all[k][L]), L);
        }
    }
    assert_int_equal(perms.n, 719);
    /* not a permutation, and another device count: refused, nothing added */
    assert_int_equal(mesh_perm_intern(&perms, (int64_t[]){0, 1, 1, 3, 4, 5}, 6), -1);
    assert_int_equal(mesh_perm_intern(&perms, (int64_t[]){1, 0}, 2), -1);
    assert_int_equal(perms.n, 719);
    arena_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_atoms),       cmocka_unit_test(test_parse_spec),
        cmocka_unit_test(test_coords),           cmocka_unit_test(test_groups),
        cmocka_unit_test(test_groups_iota_text), cmocka_unit_test(test_groups_iota_roundtrip),
        cmocka_unit_test(test_atoms_name),       cmocka_unit_test(test_factor_order),
        cmocka_unit_test(test_perm_intern_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
