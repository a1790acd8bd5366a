/* sdy_test.c - Shardy strings: the mesh reader shared by the header's named
 * meshes and inline ones, its faults and their places, the module mesh among
 * declared and inline meshes, and shardings over inline meshes (the same
 * syntax as over the equivalent named mesh; maximal and empty meshes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/sdy.h"

static void test_read_mesh(void **state)
{
    (void)state;
    SdyMesh m;
    const char *t = "<[\\\"data\\\"=2, \\\"model\\\"=4]>, [{}]";
    assert_int_equal(sdy_read_mesh(t, &m), strchr(t, '>') + 1 - t);
    assert_int_equal(m.n_axes, 2);
    assert_string_equal(m.names[1], "model");
    assert_int_equal(m.sizes[1], 4);
    assert_int_equal(m.device, -1);
    SdyMesh same;
    assert_true(sdy_read_mesh("<[\"data\"=2,\"model\"=4], device_ids=[0, 1, 2, 3, 4, 5, 6, 7]>", &same) > 0);
    assert_true(sdy_mesh_equal(&m, &same));
    assert_true(sdy_read_mesh("<[], device_ids=[3]>", &m) > 0);
    assert_int_equal(m.n_axes, 0);
    assert_int_equal(m.device, 3);
    assert_true(sdy_read_mesh("<[]>", &m) > 0);
    assert_int_equal(m.device, -1);
    assert_false(sdy_mesh_equal(&m, &same));
    /* malformed or invalid: not read */
    assert_int_equal(sdy_read_mesh("<[\"a\"=]>", &m), 0);
    assert_int_equal(sdy_read_mesh("<[\"a\"=0]>", &m), 0);
    /* device_ids in another order: read, the list kept for the readers */
    const char *perm = "<[\"a\"=2], device_ids=[1, 0]>";
    assert_int_equal(sdy_read_mesh(perm, &m), strlen(perm));
    assert_ptr_equal(m.device_ids, strstr(perm, "[1, 0]")); /* the list's [ */
    assert_true(sdy_mesh_equal(&m, &m));
    assert_true(sdy_read_mesh("<[\"a\"=2], device_ids=[0, 1]>", &m) > 0);
    assert_null(m.device_ids); /* in order: the default */
}

/* The fault sdy_check_meshes finds in text, which must be at the first
 * occurrence of at (length len) and say why. */
static void expect_fault(const char *text, const char *at, size_t len, const char *why)
{
    Arena *a = arena_create();
    SdyFault f;
    memset(&f, 0, sizeof f);
    if (sdy_check_meshes(text, a, NULL, NULL, &f)) fail_msg("no fault in %s", text);
    arena_destroy(a);
    assert_int_equal(f.at, (size_t)(strstr(text, at) - text));
    assert_int_equal(f.len, len);
    assert_non_null(strstr(f.why, why));
}

static void test_faults(void **state)
{
    (void)state;
    expect_fault("{xla.sdy.sharding=\"#sdy.sharding<mesh<[\\\"a\\\"=4]>, [{\\\"b\\\"}, {}]>\"}", "b\\", 1,
                 "axis 'b' is not an axis of mesh<[\"a\"=4]>");
    expect_fault("{xla.sdy.sharding=\"#sdy.sharding<mesh<[\\\"a\\\"=4]>, [{}], replicated={\\\"z\\\"}>\"}", "z", 1,
                 "axis 'z'");
    expect_fault("{k=\"#sdy.sharding<mesh<[\\\"a\\\"=2, \\\"b\\\"=-3]>, [{}]>\"}", "-3", 2, "size -3");
    expect_fault("{k=\"#sdy.sharding<mesh<[\\\"a\\\"=2, \\\"a\\\"=3]>, [{}]>\"}", "a\\\"=3", 1, "declared twice");
    expect_fault("{k=\"#sdy.sharding<mesh<[\\\"a\\\"=2], device_ids=[0]>, [{}]>\"}", "device_ids", 14,
                 "lists 1 devices but the mesh's axes hold 2");
    expect_fault("{k=\"#sdy.sharding<mesh<[\\\"a\\\"=2], device_ids=[1, 1]>, [{}]>\"}", "1]", 1, "listed twice");
    expect_fault("{k=\"#sdy.sharding<mesh<[], device_ids=[0, 1]>, []>\"}", "device_ids", 17, "one device id");
    /* the header's named meshes, blob and quoted */
    expect_fault("{xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=0]>}}", "0]", 1, "size 0");
    expect_fault("{xla.sdy.meshes=\"{mesh = #sdy.mesh<[\\\"x\\\"=2, \\\"x\\\"=2]>}\"}", "x\\\"=2]", 1,
                 "declared twice");
}

typedef struct Seen {
    int n;
    size_t at[4];
} Seen;

static void each(void *ctx, const SdyMesh *mesh, size_t at, size_t len)
{
    Seen *s = ctx;
    (void)mesh;
    (void)len;
    if (s->n < 4) s->at[s->n] = at;
    s->n++;
}

static void test_check_ok(void **state)
{
    (void)state;
    Arena *a = arena_create();
    SdyFault f;
    Seen s = {0, {0}};
    const char *t = "{xla.sdy.in_shardings=\"#sdy.sharding_per_value<[<mesh<[\\\"a\\\"=4]>, [{\\\"a\\\"}]>, "
                    "<@mesh, [{}]>, <mesh<[]>, []>]>\"}";
    assert_true(sdy_check_meshes(t, a, each, &s, &f));
    assert_int_equal(s.n, 2); /* the two inline meshes, not @mesh */
    assert_int_equal(s.at[0], (size_t)(strstr(t, "mesh<[\\") - t));
    /* malformed text is the readers' business, not a fault */
    assert_true(sdy_check_meshes("{k=\"#sdy.sharding<mesh<[\\\"a\\\"=x]>, [{}]>\"}", a, NULL, NULL, &f));
    assert_true(sdy_check_meshes("{k=\"a mesh<[\\\"a\\\"=0]> in prose\"}", a, NULL, NULL, &f));
    arena_destroy(a);
}

static void test_module_mesh(void **state)
{
    (void)state;
    Mesh m;
    int32_t which;
    const char *hdr = "{xla.sdy.meshes={mesh = #sdy.mesh<[\"a\"=2, \"b\"=2]>, max = #sdy.mesh<[], device_ids=[1]>}}";
    const char *same[2] = {"<[\\\"a\\\"=2,\\\"b\\\"=2]>", NULL};
    const char *other[2] = {"<[\\\"a\\\"=4]>", NULL};
    assert_true(sdy_module_mesh(hdr, NULL, 0, &m, &which));
    assert_int_equal(which, -1);
    assert_int_equal(m.n_devices, 4);
    assert_true(sdy_module_mesh(hdr, same, 2, &m, &which));
    assert_int_equal(which, -1);
    assert_false(sdy_module_mesh(hdr, other, 2, &m, &which)); /* two meshes: no single answer */
    assert_true(sdy_module_mesh(NULL, other, 2, &m, &which));
    assert_int_equal(which, 0);
    assert_string_equal(m.axes[0].name, "a");
    assert_true(m.named);
    assert_false(sdy_module_mesh("{xla.sdy.meshes={m = #sdy.mesh<[]>}}", NULL, 0, &m, &which));
}

static void test_sharding_over_inline_mesh(void **state)
{
    (void)state;
    Mesh mesh;
    char err[200], why[200];
    assert_true(mesh_parse_spec("a=2,b=2", &mesh, err, sizeof err));
    Arena *ar = arena_create();
    ShardingSyntax in, named;
    const char *hdr = "{xla.sdy.meshes={mesh = #sdy.mesh<[\"a\"=2, \"b\"=2]>, max = #sdy.mesh<[], device_ids=[1]>}}";
    assert_int_equal(sdy_sharding_syntax("{xla.sdy.sharding=\"#sdy.sharding<mesh<[\\\"a\\\"=2, \\\"b\\\"=2]>, "
                                         "[{\\\"b\\\", ?}, {\\\"a\\\"}p1]>\"}", NULL, &mesh, ar, &in, why, sizeof why),
                     SDY_OK);
    assert_int_equal(sdy_sharding_syntax("{xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"b\\\", ?}, {\\\"a\\\"}p1]>\"}",
                                         hdr, &mesh, ar, &named, why, sizeof why),
                     SDY_OK);
    assert_int_equal(in.kind, SSYN_NAMED);
    assert_int_equal(in.n_dims, named.n_dims);
    assert_int_equal(in.open_dims, named.open_dims);
    assert_memory_equal(in.dim_priority, named.dim_priority, sizeof in.dim_priority);
    assert_string_equal(in.dim_axes[0][0].name, "b");
    assert_string_equal(in.dim_axes[1][0].name, "a");
    /* maximal meshes, inline and named */
    assert_int_equal(sdy_sharding_syntax("{xla.sdy.sharding=\"#sdy.sharding_per_value<[<mesh<[], device_ids=[1]>, "
                                         "[]>]>\"}", NULL, &mesh, ar, &in, why, sizeof why),
                     SDY_OK);
    assert_int_equal(in.kind, SSYN_MAXIMAL);
    assert_int_equal(in.device, 1);
    assert_int_equal(sdy_sharding_syntax("{xla.sdy.sharding=\"#sdy.sharding<@max, []>\"}", hdr, &mesh, ar, &named,
                                         why, sizeof why),
                     SDY_OK);
    assert_int_equal(named.kind, SSYN_MAXIMAL);
    assert_int_equal(named.device, 1);
    /* the module's mesh lacks the inline mesh's axis: as for a named one */
    assert_int_equal(sdy_sharding_syntax("{xla.sdy.sharding=\"#sdy.sharding<mesh<[\\\"c\\\"=4]>, [{\\\"c\\\"}]>\"}",
                                         NULL, &mesh, ar, &in, why, sizeof why),
                     SDY_UNKNOWN_NAME);
    assert_non_null(strstr(why, "axis 'c' is not in the mesh"));
    /* shard_map borders' lists */
    ShardingSyntax list[2];
    int32_t n;
    assert_int_equal(sdy_sharding_list("{xla.sdy.in_shardings=\"#sdy.sharding_per_value<[<mesh<[\\\"a\\\"=2, "
                                       "\\\"b\\\"=2]>, [{\\\"a\\\"}]>, <@mesh, [{}, {\\\"b\\\"}]>]>\"}",
                                       "xla.sdy.in_shardings", &mesh, ar, list, 2, &n, why, sizeof why),
                     SDY_OK);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].dim_axes[0][0].name, "a");
    assert_string_equal(list[1].dim_axes[1][0].name, "b");
    arena_destroy(ar);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_mesh),   cmocka_unit_test(test_faults),
        cmocka_unit_test(test_check_ok),    cmocka_unit_test(test_module_mesh),
        cmocka_unit_test(test_sharding_over_inline_mesh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
