/* report_test.c - the cost model, the text table and the JSON form (src/report.c).
 *
 * Byte counts are worked out by hand in the comments beside them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "spmdc/mesh.h"
#include "spmdc/report.h"

#define MiB (1024 * 1024)

/* ------------------------------------------------------------- cost model */

static void test_kind_names(void **state)
{
    (void)state;
    assert_string_equal(collective_kind_name(COLL_ALL_REDUCE), "all-reduce");
    assert_string_equal(collective_kind_name(COLL_ALL_GATHER), "all-gather");
    assert_string_equal(collective_kind_name(COLL_REDUCE_SCATTER), "reduce-scatter");
    assert_string_equal(collective_kind_name(COLL_ALL_TO_ALL), "all-to-all");
    assert_string_equal(collective_kind_name(COLL_COLLECTIVE_PERMUTE), "collective-permute");
}

static void test_all_reduce_worked_example(void **state)
{
    (void)state;
    const int64_t b = 134217728; /* bf16[8192,8192]: 8192 * 8192 * 2 */
    /* 2 * 7/8 * 134,217,728 = 234,881,024 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 8, b, b), 234881024);
    /* 2 * 3/4 * 134,217,728 = 201,326,592 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 4, b, b), 201326592);
    /* 2 * 1/2 * B = B */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 2, b, b), 134217728);
}

static void test_all_gather_uses_result_bytes(void **state)
{
    (void)state;
    /* result 8 MiB per device (operand 2 MiB), n = 4: 3/4 * 8,388,608 = 6,291,456 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_GATHER, 4, 2 * MiB, 8 * MiB), 6291456);
    /* n = 8, operand 1 MiB, result 8 MiB: 7/8 * 8 MiB = 7 MiB = 7,340,032 (= (n-1) * operand) */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_GATHER, 8, 1 * MiB, 8 * MiB), 7340032);
}

static void test_reduce_scatter_uses_operand_bytes(void **state)
{
    (void)state;
    /* operand 8 MiB (result 2 MiB), n = 4: 3/4 * 8,388,608 = 6,291,456 */
    assert_int_equal(comm_bytes_per_device(COLL_REDUCE_SCATTER, 4, 8 * MiB, 2 * MiB), 6291456);
    /* worked example as reduce-scatter, n = 8: 7/8 * 134,217,728 = 117,440,512 */
    assert_int_equal(comm_bytes_per_device(COLL_REDUCE_SCATTER, 8, 134217728, 16777216), 117440512);
}

static void test_all_to_all_and_permute(void **state)
{
    (void)state;
    /* all-to-all, B = 1000, n = 8: floor(7 * 1000 / 8) = 875 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_TO_ALL, 8, 1000, 1000), 875);
    /* all-to-all, B = 4 MiB, n = 2: 1/2 * 4,194,304 = 2,097,152 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_TO_ALL, 2, 4 * MiB, 4 * MiB), 2097152);
    /* collective-permute: a sending device sends its whole buffer, 4,096 */
    assert_int_equal(comm_bytes_per_device(COLL_COLLECTIVE_PERMUTE, 2, 4096, 4096), 4096);
    assert_int_equal(comm_bytes_per_device(COLL_COLLECTIVE_PERMUTE, 8, 4096, 4096), 4096);
}

static void test_single_device_moves_nothing(void **state)
{
    (void)state;
    for (int k = COLL_ALL_REDUCE; k <= COLL_COLLECTIVE_PERMUTE; k++) {
        assert_int_equal(comm_bytes_per_device((CollectiveKind)k, 1, 1000, 1000), 0);
        assert_int_equal(comm_bytes_per_device((CollectiveKind)k, 0, 1000, 1000), 0);
    }
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 8, 0, 0), 0);
}

static void test_odd_group_sizes_floor(void **state)
{
    (void)state;
    /* all-reduce n = 3, B = 10: floor(2 * 2 * 10 / 3) = floor(13.33) = 13 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 3, 10, 10), 13);
    /* all-gather n = 3, B_result = 10: floor(2 * 10 / 3) = 6 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_GATHER, 3, 4, 10), 6);
    /* all-reduce n = 7, B = 100: floor(2 * 6 * 100 / 7) = floor(171.43) = 171 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 7, 100, 100), 171);
}

static void test_no_overflow(void **state)
{
    (void)state;
    const int64_t big = ((int64_t)1 << 62) - 1; /* 4,611,686,018,427,387,903 */
    /* n = 2: 2 * 1 * B / 2 = B exactly, although 2 * B exceeds int64 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 2, big, big), big);
    /* B = 2^61, n = 8: 2 * 7 * 2^61 / 8 = 7 * 2^59 = 4,035,225,266,123,964,416 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 8, (int64_t)1 << 61, 0), 4035225266123964416LL);
    /* n = 65536 = 2^16 devices, B = 2^40: 2 * 65535 * 2^40 / 2^16 = 131,070 * 2^24 = 2,198,989,701,120 */
    assert_int_equal(comm_bytes_per_device(COLL_ALL_REDUCE, 65536, (int64_t)1 << 40, 0), 2198989701120LL);
}

/* ---------------------------------------------------------------- report */

static Mesh mesh_xy(void)
{
    Mesh m;
    const char *names[2] = {"x", "y"};
    int64_t sizes[2] = {2, 4};
    char err[128];
    assert_true(mesh_init(&m, 2, names, sizes, err, sizeof err)); /* atoms x0=2, y0=2, y1=2 */
    m.named = true;
    return m;
}

static Mesh mesh_model8(void)
{
    Mesh m;
    const char *names[1] = {"model"};
    int64_t sizes[1] = {8};
    char err[128];
    assert_true(mesh_init(&m, 1, names, sizes, err, sizeof err)); /* atoms model0..2, each 2 */
    m.named = true;
    return m;
}

static void set_dims(CommRecord *c, ElemType t, int32_t rank, const int64_t *op, const int64_t *res)
{
    c->dtype = t;
    c->operand_rank = c->result_rank = rank;
    memcpy(c->operand_dims, op, sizeof(int64_t) * (size_t)rank);
    memcpy(c->result_dims, res, sizeof(int64_t) * (size_t)rank);
}

static void set_atoms(CommRecord *c, int32_t n, const int8_t *atoms, int64_t group, int64_t groups)
{
    c->n_atoms = n;
    memcpy(c->atoms, atoms, (size_t)n);
    c->group_size = group;
    c->num_groups = groups;
}

/* The worked example: Y = X.A, contracting dim sharded 8 ways on 'model'. */
static void worked_example(CommReport *r)
{
    Mesh m = mesh_model8();
    report_init(r, "matmul", &m);
    CommRecord *c = report_add(r, COLL_ALL_REDUCE, "all-reduce.1", "dot.7", 7,
                               "contracting dim 1 of lhs sharded on 'model'");
    int64_t d[2] = {8192, 8192};
    set_dims(c, ET_BF16, 2, d, d);
    int8_t atoms[3] = {0, 1, 2};
    set_atoms(c, 3, atoms, 8, 1);
    c->bytes_per_device = comm_bytes_per_device(COLL_ALL_REDUCE, 8, 134217728, 134217728);
    r->parameter_bytes_per_device = 33554432;     /* X and A shards: 2 x 8192*1024*2 = 32 MiB */
    r->parameter_bytes_unpartitioned = 268435456; /* 2 x 8192*8192*2 = 256 MiB */
}

/* Three collectives on x=2,y=4, one in a loop, and a warning. */
static void mixed_report(CommReport *r)
{
    Mesh m = mesh_xy();
    report_init(r, "mlp", &m);
    /* all-reduce over y (n = 4, 2 groups): 2 * 3/4 * 134,217,728 = 201,326,592 */
    CommRecord *c = report_add(r, COLL_ALL_REDUCE, "all-reduce.1", "dot.7", 7, "contracting dim 1 of lhs sharded on 'y'");
    int64_t d[2] = {8192, 8192};
    set_dims(c, ET_BF16, 2, d, d);
    int8_t y[2] = {1, 2};
    set_atoms(c, 2, y, 4, 2);
    c->bytes_per_device = comm_bytes_per_device(COLL_ALL_REDUCE, 4, 134217728, 134217728);
    /* all-gather over x (n = 2, 4 groups): f32[256,1024] (1 MiB) -> f32[512,1024] (2 MiB): 1/2 * 2 MiB = 1,048,576 */
    c = report_add(r, COLL_ALL_GATHER, "all-gather.2", "add.3", 9, "operand 1 needs dim 0 replicated along 'x'");
    int64_t go[2] = {256, 1024}, gr[2] = {512, 1024};
    set_dims(c, ET_F32, 2, go, gr);
    int8_t x[1] = {0};
    set_atoms(c, 1, x, 2, 4);
    c->bytes_per_device = comm_bytes_per_device(COLL_ALL_GATHER, 2, MiB, 2 * MiB);
    /* halo exchange in a loop of 3 trips along y's minor half: f32[16] = 64 B per trip, 192 B */
    c = report_add(r, COLL_COLLECTIVE_PERMUTE, "collective-permute.3", "while.4", 0, "while.4: halo of 1 row");
    int64_t h[1] = {16};
    set_dims(c, ET_F32, 1, h, h);
    int8_t y1[1] = {2};
    set_atoms(c, 1, y1, 2, 4);
    c->multiplier = 3;
    c->bytes_per_device = comm_bytes_per_device(COLL_COLLECTIVE_PERMUTE, 2, 64, 64) * c->multiplier;
    report_warn(r, "uneven-padding", "dot.7", 7, "dim 0 of size 10 split 4 ways is padded to 12");
    r->parameter_bytes_per_device = 1536;
    r->parameter_bytes_unpartitioned = 4096;
}

static void test_add_copies_strings(void **state)
{
    (void)state;
    CommReport r;
    Mesh m = mesh_model8();
    report_init(&r, "m", &m);
    char name[16] = "ar.1";
    CommRecord *c = report_add(&r, COLL_ALL_REDUCE, name, NULL, 0, NULL);
    name[0] = 'X';
    assert_string_equal(r.records[0].instruction, "ar.1");
    assert_null(c->cause_instruction);
    assert_int_equal(c->multiplier, 1);
    for (int i = 0; i < 40; i++) report_add(&r, COLL_ALL_TO_ALL, "a2a", "c", 1, "r")->bytes_per_device = 10;
    assert_int_equal(r.n_records, 41);
    assert_int_equal(report_total_bytes(&r), 400);
    report_free(&r);
    assert_int_equal(r.n_records, 0);
}

static void test_total_bytes(void **state)
{
    (void)state;
    CommReport r;
    mixed_report(&r);
    /* 201,326,592 + 1,048,576 + 192 = 202,375,360 */
    assert_int_equal(report_total_bytes(&r), 202375360);
    report_free(&r);
}

static const char WORKED_TEXT[] =
    "communication report for module matmul on mesh model=8 (8 devices)\n"
    "\n"
    "  #  kind        instruction   dtype  per-device operand -> result  axes               bytes sent per device      cause\n"
    "  1  all-reduce  all-reduce.1  bf16   [8192,8192] -> [8192,8192]    model \xC3\x97" "8, 1 group  234,881,024 B (224.0 MiB)  dot.7 (line 7): contracting dim 1 of lhs sharded on 'model'\n"
    "\n"
    "totals:\n"
    "  kind        count  bytes sent per device\n"
    "  all-reduce      1  234,881,024 B (224.0 MiB)\n"
    "  total           1  234,881,024 B (224.0 MiB)\n"
    "\n"
    "parameter memory per device: 33,554,432 B (32.0 MiB) of 268,435,456 B (256.0 MiB) unpartitioned (12.5%)\n"
    "warnings: none\n";

static void test_text_worked_example(void **state)
{
    (void)state;
    CommReport r;
    worked_example(&r);
    StrBuf b = {0};
    report_print_text(&b, &r);
    assert_string_equal(sb_cstr(&b), WORKED_TEXT);
    sb_free(&b);
    report_free(&r);
}

static const char MIXED_TEXT[] =
    "communication report for module mlp on mesh x=2,y=4 (8 devices)\n"
    "\n"
    "  #  kind                instruction           dtype  per-device operand -> result  axes                 bytes sent per device          cause\n"
    "  1  all-reduce          all-reduce.1          bf16   [8192,8192] -> [8192,8192]    y \xC3\x97" "4, 2 groups       201,326,592 B (192.0 MiB)      dot.7 (line 7): contracting dim 1 of lhs sharded on 'y'\n"
    "  2  all-gather          all-gather.2          f32    [256,1024] -> [512,1024]      x \xC3\x97" "2, 4 groups         1,048,576 B (1.0 MiB)        add.3 (line 9): operand 1 needs dim 0 replicated along 'x'\n"
    "  3  collective-permute  collective-permute.3  f32    [16] -> [16]                  y:(2)2 \xC3\x97" "2, 4 groups          192 B in 3 loop trips  while.4: halo of 1 row\n"
    "\n"
    "totals:\n"
    "  kind                count  bytes sent per device\n"
    "  all-reduce              1  201,326,592 B (192.0 MiB)\n"
    "  all-gather              1    1,048,576 B (1.0 MiB)\n"
    "  collective-permute      1          192 B\n"
    "  total                   3  202,375,360 B (193.0 MiB)\n"
    "\n"
    "parameter memory per device: 1,536 B (1.5 KiB) of 4,096 B (4.0 KiB) unpartitioned (37.5%)\n"
    "warnings (1):\n"
    "  uneven-padding  dot.7 (line 7): dim 0 of size 10 split 4 ways is padded to 12\n";

static void test_text_mixed(void **state)
{
    (void)state;
    CommReport r;
    mixed_report(&r);
    StrBuf b = {0};
    report_print_text(&b, &r);
    assert_string_equal(sb_cstr(&b), MIXED_TEXT);
    sb_free(&b);
    report_free(&r);
}

static void test_text_no_communication(void **state)
{
    (void)state;
    CommReport r;
    Mesh m = mesh_model8();
    report_init(&r, "elementwise", &m);
    r.parameter_bytes_per_device = 4096;
    r.parameter_bytes_unpartitioned = 32768;
    StrBuf b = {0};
    report_print_text(&b, &r);
    assert_string_equal(sb_cstr(&b), "communication report for module elementwise on mesh model=8 (8 devices)\n"
                                     "\n"
                                     "no communication: the partitioned program has no collectives\n"
                                     "\n"
                                     "parameter memory per device: 4,096 B (4.0 KiB) of 32,768 B (32.0 KiB) "
                                     "unpartitioned (12.5%)\n"
                                     "warnings: none\n");
    sb_free(&b);
    report_free(&r);
}

static const char WORKED_JSON[] =
    "{\n"
    "  \"schema\": \"spmdc.report/v1\",\n"
    "  \"module\": \"matmul\",\n"
    "  \"mesh\": {\n"
    "    \"devices\": 8,\n"
    "    \"axes\": [\n"
    "      {\n"
    "        \"name\": \"model\",\n"
    "        \"size\": 8\n"
    "      }\n"
    "    ]\n"
    "  },\n"
    "  \"collectives\": [\n"
    "    {\n"
    "      \"kind\": \"all-reduce\",\n"
    "      \"instruction\": \"all-reduce.1\",\n"
    "      \"dtype\": \"bf16\",\n"
    "      \"operand_shape\": [\n"
    "        8192,\n"
    "        8192\n"
    "      ],\n"
    "      \"result_shape\": [\n"
    "        8192,\n"
    "        8192\n"
    "      ],\n"
    "      \"axes\": [\n"
    "        \"model\"\n"
    "      ],\n"
    "      \"group_size\": 8,\n"
    "      \"num_groups\": 1,\n"
    "      \"bytes_per_device\": 234881024,\n"
    "      \"multiplier\": 1,\n"
    "      \"per_trip\": false,\n"
    "      \"source\": \"partitioner\",\n"
    "      \"cause\": {\n"
    "        \"instruction\": \"dot.7\",\n"
    "        \"line\": 7,\n"
    "        \"reason\": \"contracting dim 1 of lhs sharded on 'model'\"\n"
    "      }\n"
    "    }\n"
    "  ],\n"
    "  \"totals\": {\n"
    "    \"count\": 1,\n"
    "    \"bytes_per_device\": 234881024,\n"
    "    \"by_kind\": {\n"
    "      \"all-reduce\": {\n"
    "        \"count\": 1,\n"
    "        \"bytes_per_device\": 234881024\n"
    "      }\n"
    "    }\n"
    "  },\n"
    "  \"memory\": {\n"
    "    \"parameter_bytes_per_device\": 33554432,\n"
    "    \"parameter_bytes_unpartitioned\": 268435456\n"
    "  },\n"
    "  \"warnings\": []\n"
    "}\n";

static void test_json_worked_example_exact(void **state)
{
    (void)state;
    CommReport r;
    worked_example(&r);
    StrBuf b = {0};
    report_print_json(&b, &r);
    assert_string_equal(sb_cstr(&b), WORKED_JSON);
    sb_free(&b);
    report_free(&r);
}

static json_int_t jget_int(json_t *o, const char *path)
{
    json_t *v = o;
    char key[64];
    const char *p = path;
    while (*p) {
        size_t n = strcspn(p, ".");
        memcpy(key, p, n);
        key[n] = 0;
        v = (key[0] >= '0' && key[0] <= '9') ? json_array_get(v, (size_t)atoi(key)) : json_object_get(v, key);
        assert_non_null(v);
        p += n + (p[n] == '.');
    }
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void test_json_parses_back(void **state)
{
    (void)state;
    CommReport r;
    mixed_report(&r);
    StrBuf b = {0};
    report_print_json(&b, &r);
    assert_int_equal(b.data[b.len - 1], '\n');
    json_error_t e;
    json_t *j = json_loads(sb_cstr(&b), 0, &e);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "schema")), "spmdc.report/v1");
    assert_int_equal(jget_int(j, "mesh.devices"), 8);
    assert_int_equal(jget_int(j, "collectives.0.bytes_per_device"), 201326592);
    assert_int_equal(jget_int(j, "collectives.0.group_size"), 4);
    assert_int_equal(jget_int(j, "collectives.0.num_groups"), 2);
    assert_int_equal(jget_int(j, "collectives.1.bytes_per_device"), 1048576);
    assert_int_equal(jget_int(j, "collectives.1.result_shape.0"), 512);
    assert_int_equal(jget_int(j, "collectives.2.bytes_per_device"), 192);
    assert_int_equal(jget_int(j, "collectives.2.multiplier"), 3);
    assert_int_equal(jget_int(j, "collectives.2.cause.line"), 0);
    assert_int_equal(jget_int(j, "totals.count"), 3);
    assert_int_equal(jget_int(j, "totals.bytes_per_device"), 202375360);
    assert_int_equal(jget_int(j, "totals.by_kind.all-gather.bytes_per_device"), 1048576);
    assert_int_equal(jget_int(j, "memory.parameter_bytes_per_device"), 1536);
    assert_int_equal(jget_int(j, "warnings.0.line"), 7);
    json_t *c = json_object_get(j, "collectives");
    assert_string_equal(json_string_value(json_array_get(json_object_get(json_array_get(c, 0), "axes"), 0)), "y");
    assert_string_equal(json_string_value(json_array_get(json_object_get(json_array_get(c, 2), "axes"), 0)),
                        "y:(2)2");
    json_t *cause = json_object_get(json_array_get(c, 2), "cause");
    assert_string_equal(json_string_value(json_object_get(cause, "reason")), "halo of 1 row"); /* prefix dropped */
    /* by_kind lists only present kinds, in the fixed order */
    const char *want[3] = {"all-reduce", "all-gather", "collective-permute"};
    json_t *by = json_object_get(json_object_get(j, "totals"), "by_kind");
    assert_int_equal(json_object_size(by), 3);
    int k = 0;
    for (void *it = json_object_iter(by); it; it = json_object_iter_next(by, it)) {
        assert_true(k < 3);
        assert_string_equal(json_object_iter_key(it), want[k++]);
    }
    json_decref(j);
    sb_free(&b);
    report_free(&r);
}

static void test_json_axes_list_and_nulls(void **state)
{
    (void)state;
    CommReport r;
    Mesh m = mesh_xy();
    report_init(&r, "m", &m);
    CommRecord *c = report_add(&r, COLL_ALL_TO_ALL, "a2a", NULL, 0, NULL);
    int8_t all[3] = {0, 1, 2};
    set_atoms(c, 3, all, 8, 1);
    StrBuf b = {0};
    report_print_json(&b, &r);
    json_t *j = json_loads(sb_cstr(&b), 0, NULL);
    assert_non_null(j);
    json_t *rec = json_array_get(json_object_get(j, "collectives"), 0);
    json_t *axes = json_object_get(rec, "axes");
    assert_int_equal(json_array_size(axes), 2); /* x then y, one entry per axis */
    assert_string_equal(json_string_value(json_array_get(axes, 0)), "x");
    assert_string_equal(json_string_value(json_array_get(axes, 1)), "y");
    assert_true(json_is_null(json_object_get(json_object_get(rec, "cause"), "instruction")));
    json_decref(j);
    sb_free(&b);
    report_free(&r);
}

static void test_output_is_deterministic(void **state)
{
    (void)state;
    CommReport r1, r2;
    mixed_report(&r1);
    mixed_report(&r2);
    StrBuf a = {0}, b = {0};
    report_print_json(&a, &r1);
    report_print_text(&a, &r1);
    report_print_json(&b, &r2);
    report_print_text(&b, &r2);
    assert_string_equal(sb_cstr(&a), sb_cstr(&b));
    sb_free(&a);
    sb_free(&b);
    report_free(&r1);
    report_free(&r2);
}

/* jansson's own dump of the document our writer printed: the same bytes
 * (report.c writes jansson's JSON_INDENT(2) | JSON_PRESERVE_ORDER layout
 * without building a tree). */
static void assert_jansson_bytes(const StrBuf *b)
{
    json_error_t e;
    json_t *j = json_loads(sb_cstr(b), 0, &e);
    assert_non_null(j);
    char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    assert_non_null(s);
    size_t n = strlen(s);
    assert_int_equal(b->len, n + 1);
    assert_memory_equal(sb_cstr(b), s, n);
    assert_int_equal(sb_cstr(b)[n], '\n');
    free(s);
    json_decref(j);
}

/* Every member kind: no mesh, records with and without atoms (an empty
 * axes list), a halo, nulls, escapes, padding, the memory estimate; and an
 * empty report ([] and {} for the empty collectives, by_kind, warnings). */
static void test_json_is_janssons_layout(void **state)
{
    (void)state;
    CommReport r;
    mixed_report(&r);
    r.records[2].halo_dim = 0;
    r.records[2].halo_lo = 1;
    r.records[2].halo_hi = 2;
    CommRecord *c = report_add(&r, COLL_ALL_TO_ALL, NULL, NULL, 0, "quote \" back \\ slash / tab \t nl \n cr \r "
                               "bs \b ff \f bell \x07 us \x1f del \x7f");
    c->operand_rank = c->result_rank = 0;
    c->per_trip = true;
    c->from_input = true;
    report_warn(&r, "w", NULL, 0, NULL);
    report_pad(&r, "pad.1", 3, 0, 6, 24, 8);
    report_pad(&r, "pad.2", 4, 1, 2, 4, 4);
    r.has_memory_estimate = true;
    r.peak_bytes_per_device = 123456789012345;
    r.peak_instruction = strdup("dot.7");
    r.padding_bytes_per_device = 12;
    r.value_bytes_per_device = -1;
    StrBuf b = {0};
    report_print_json(&b, &r);
    assert_jansson_bytes(&b);
    /* \u00XX in upper case for the control bytes jansson has no short form for */
    assert_non_null(strstr(sb_cstr(&b), "bell \\u0007 us \\u001F del \x7f\""));
    report_free(&r);

    report_init(&r, NULL, NULL);
    sb_clear(&b);
    report_print_json(&b, &r);
    assert_jansson_bytes(&b);
    assert_non_null(strstr(sb_cstr(&b), "\"collectives\": [],\n"));
    assert_non_null(strstr(sb_cstr(&b), "\"by_kind\": {}\n"));
    assert_non_null(strstr(sb_cstr(&b), "\"axes\": []\n"));
    sb_free(&b);
    report_free(&r);
}

/* report_print_json_with: members a hook adds to every record (nested 12
 * deep in the document, scalars of every kind, empty containers) and a
 * pre-dumped value at the document's end: jansson's layout, and the
 * members where they belong. */
static void hook_members(JsonOut *j, int32_t record, void *ctx)
{
    json_t *tail = ctx;
    if (record < 0) {
        char *s = json_dumps(tail, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        report_json_key(j, "tail");
        report_json_raw(j, s);
        free(s);
        return;
    }
    report_json_key(j, "extra");
    report_json_open(j, '{');
    report_json_key(j, "record");
    report_json_int(j, record);
    report_json_key(j, "deep");
    for (int d = 0; d < 8; d++) {
        report_json_open(j, '[');
        report_json_open(j, '{');
        report_json_key(j, "d");
        report_json_int(j, d);
        report_json_close(j, '}');
    }
    report_json_str(j, "a \"b\"");
    report_json_null(j);
    for (int d = 0; d < 8; d++) report_json_close(j, ']');
    report_json_key(j, "flags");
    report_json_open(j, '[');
    report_json_bool(j, true);
    report_json_bool(j, false);
    report_json_str(j, NULL);
    report_json_close(j, ']');
    report_json_key(j, "none");
    report_json_open(j, '[');
    report_json_close(j, ']');
    report_json_close(j, '}');
}

static void test_json_hook_as_jansson(void **state)
{
    (void)state;
    CommReport r;
    mixed_report(&r);
    json_t *tail = json_pack("{s:[i,f,s],s:{},s:n}", "list", 3, 0.5, "x\ty", "empty", "null");
    StrBuf b = {0};
    report_print_json_with(&b, &r, hook_members, tail);
    assert_jansson_bytes(&b); /* 12 deep: root, collectives, record, extra, 8 arrays */
    /* the member texts, as jansson dumps them */
    assert_non_null(strstr(sb_cstr(&b), "\"extra\": {\n        \"record\": 0,\n        \"deep\": [\n"));
    assert_non_null(strstr(sb_cstr(&b), "\"flags\": [\n          true,\n          false,\n          null\n        ],\n"
                                        "        \"none\": []\n"));
    assert_non_null(strstr(sb_cstr(&b), "  \"tail\": {\n    \"list\": [\n      3,\n      0.5,\n      \"x\\ty\"\n    ],\n"
                                        "    \"empty\": {},\n    \"null\": null\n  }\n}\n"));
    json_decref(tail);
    sb_free(&b);
    report_free(&r);
}

/* Rows that repeat their fields from "dtype" to "source" (a layer's
 * collective is the next one's) print them from a memo (TextMemo, 32
 * sets of two slots): 400 rows over 40 variants, each differing from a base in one field (dtype,
 * a dim, a rank, an axis, the group counts, bytes, multiplier, per_trip,
 * source), in runs and interleaved so slots are reused and evicted, must
 * still be jansson's bytes, and the rows of each variant must print the
 * variant's own fields. */
static void test_json_repeated_rows_as_jansson(void **state)
{
    (void)state;
    CommReport r;
    Mesh m = mesh_xy();
    report_init(&r, "rows", &m);
    for (int i = 0; i < 400; i++) {
        int v = i < 100 ? i / 25 : (i * 7) % 40; /* runs, then interleaved */
        char name[32], cause[32];
        snprintf(name, sizeof name, "ar.%d", i);
        snprintf(cause, sizeof cause, "dot.%d", i);
        CommRecord *c = report_add(&r, v % 3 ? COLL_ALL_REDUCE : COLL_ALL_GATHER, name, cause, (uint32_t)i + 1,
                                   "contracting dim 1 of lhs sharded on 'y'");
        int64_t d[3] = {8, 1024, 4};
        set_dims(c, v == 1 ? ET_F32 : ET_BF16, v == 2 ? 3 : 2, d, d);
        if (v == 3) c->result_dims[0] = 64;
        if (v == 4) c->operand_dims[1] = 512;
        int8_t y[2] = {1, 2}, x[1] = {0};
        if (v == 5) set_atoms(c, 1, x, 2, 4);
        else set_atoms(c, 2, y, 4, 2);
        if (v == 6) c->group_size = 8;
        if (v == 7) c->num_groups = 1;
        c->bytes_per_device = 28672 + (v == 8 ? 1 : 0) + (v >= 12 ? v : 0);
        c->multiplier = v == 9 ? 3 : 1;
        c->per_trip = v == 10;
        c->from_input = v == 11;
        if (v == 13) c->halo_dim = 0;
    }
    StrBuf b = {0};
    report_print_json(&b, &r);
    assert_jansson_bytes(&b);
    /* every row's fields are its record's */
    json_error_t e;
    json_t *doc = json_loads(sb_cstr(&b), 0, &e);
    assert_non_null(doc);
    json_t *rows = json_object_get(doc, "collectives");
    assert_int_equal(json_array_size(rows), 400);
    for (int i = 0; i < 400; i++) {
        const CommRecord *c = &r.records[i];
        json_t *o = json_array_get(rows, (size_t)i);
        assert_string_equal(json_string_value(json_object_get(o, "dtype")), elem_type_name(c->dtype));
        json_t *os = json_object_get(o, "operand_shape"), *rs = json_object_get(o, "result_shape");
        assert_int_equal(json_array_size(os), c->operand_rank);
        assert_int_equal(json_array_size(rs), c->result_rank);
        for (int d = 0; d < c->operand_rank; d++) {
            assert_int_equal(json_integer_value(json_array_get(os, (size_t)d)), c->operand_dims[d]);
            assert_int_equal(json_integer_value(json_array_get(rs, (size_t)d)), c->result_dims[d]);
        }
        /* axes: x is atom 0, y atoms 1 and 2 */
        json_t *ax = json_object_get(o, "axes");
        assert_int_equal(json_array_size(ax), 1);
        assert_string_equal(json_string_value(json_array_get(ax, 0)), c->n_atoms == 1 ? "x" : "y");
        assert_int_equal(jget_int(o, "group_size"), c->group_size);
        assert_int_equal(jget_int(o, "num_groups"), c->num_groups);
        assert_int_equal(jget_int(o, "bytes_per_device"), c->bytes_per_device);
        assert_int_equal(jget_int(o, "multiplier"), c->multiplier);
        assert_int_equal(json_is_true(json_object_get(o, "per_trip")), c->per_trip);
        assert_string_equal(json_string_value(json_object_get(o, "source")), c->from_input ? "input" : "partitioner");
        assert_int_equal(json_object_get(o, "halo") != NULL, c->halo_dim >= 0);
    }
    json_decref(doc);
    /* row 0 is variant 0 and row 100 variant 20 (bytes 28,692); rows 25 and 103 (7 * 103 = 721 = 18 * 40 + 1) are variant 1 (f32) */
    const char *t = sb_cstr(&b);
    const char *r100 = strstr(t, "\"instruction\": \"ar.100\"");
    assert_non_null(r100);
    assert_true(strncmp(strstr(r100, "\"bytes_per_device\": "), "\"bytes_per_device\": 28692,", 26) == 0);
    const char *r25 = strstr(t, "\"instruction\": \"ar.25\"");
    assert_non_null(r25);
    assert_true(strncmp(strstr(r25, "\"dtype\": "), "\"dtype\": \"f32\"", 14) == 0);
    const char *r103 = strstr(t, "\"instruction\": \"ar.103\"");
    assert_non_null(r103);
    assert_true(strncmp(strstr(r103, "\"dtype\": "), "\"dtype\": \"f32\"", 14) == 0);
    sb_free(&b);
    report_free(&r);
}

/* A string is printed as it is when jansson's json_string accepts it (valid
 * UTF-8: no overlong forms, surrogates or code points past U+10FFFF), else
 * with every byte >= 0x80 as '?'.  Random strings over the bytes that
 * matter, each compared with jansson's verdict. */
static void test_json_utf8_as_jansson_judges_it(void **state)
{
    (void)state;
    static const unsigned char alphabet[] = {'a',  0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2,
                                             0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
    static const char *const fixed[] = {"caf\xc3\xa9", "\xf0\x9f\x98\x80", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf",
                                        "\xc0\x80", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                        "\xc3", "\xe2\x82", "\x80", "\xf8\x88\x80\x80\x80"};
    uint32_t seed = 12345;
    for (int t = 0; t < 4000; t++) {
        char s[8] = {0};
        if (t < (int)(sizeof fixed / sizeof fixed[0])) {
            strcpy(s, fixed[t]);
        } else {
            int n = 1 + t % 6;
            for (int i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                s[i] = (char)alphabet[(seed >> 16) % sizeof alphabet];
            }
        }
        json_t *ref = json_string(s);
        char want[8];
        strcpy(want, s);
        if (!ref)
            for (char *p = want; *p; p++)
                if ((unsigned char)*p >= 0x80) *p = '?';
        json_decref(ref);
        CommReport r;
        report_init(&r, s, NULL);
        StrBuf b = {0};
        report_print_json(&b, &r);
        json_t *j = json_loads(sb_cstr(&b), 0, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "module")), want);
        json_decref(j);
        sb_free(&b);
        report_free(&r);
    }
}

typedef struct Collect {
    StrBuf all;
    int writes;
    size_t largest;
} Collect;

static bool collect(void *ctx, const char *data, size_t len)
{
    Collect *c = ctx;
    sb_putn(&c->all, data, len);
    c->writes++;
    if (len > c->largest) c->largest = len;
    return true;
}

/* Through a sink (strbuf.h) the document arrives in chunks of about
 * SB_SINK_CHUNK bytes, the same bytes as printed into one buffer. */
static void test_json_streams_through_a_sink(void **state)
{
    (void)state;
    CommReport r;
    mixed_report(&r);
    for (int i = 0; i < 4000; i++) { /* ~600 B each: about 2.4 MB, ~9 chunks of 256 KiB */
        CommRecord *c = report_add(&r, COLL_ALL_REDUCE, "all-reduce.9", "dot.9", 9, "a reason long enough");
        int64_t d[2] = {i, 2 * i};
        set_dims(c, ET_F32, 2, d, d);
    }
    StrBuf whole = {0};
    report_print_json(&whole, &r);
    Collect col = {{0}, 0, 0};
    StrSink sink = {collect, &col, false};
    StrBuf b = {0};
    b.sink = &sink;
    report_print_json(&b, &r);
    assert_true(b.len < SB_SINK_CHUNK); /* never the whole document */
    sb_flush(&b);
    assert_int_equal(b.len, 0);
    assert_int_equal(col.all.len, whole.len);
    assert_memory_equal(col.all.data, whole.data, whole.len);
    assert_true(col.writes >= (int)(whole.len / (SB_SINK_CHUNK + 1024)));
    assert_true(col.largest < SB_SINK_CHUNK + 4096); /* a chunk ends at the first record past the mark */
    sb_free(&b);
    sb_free(&whole);
    sb_free(&col.all);
    report_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kind_names),
        cmocka_unit_test(test_all_reduce_worked_example),
        cmocka_unit_test(test_all_gather_uses_result_bytes),
        cmocka_unit_test(test_reduce_scatter_uses_operand_bytes),
        cmocka_unit_test(test_all_to_all_and_permute),
        cmocka_unit_test(test_single_device_moves_nothing),
        cmocka_unit_test(test_odd_group_sizes_floor),
        cmocka_unit_test(test_no_overflow),
        cmocka_unit_test(test_add_copies_strings),
        cmocka_unit_test(test_total_bytes),
        cmocka_unit_test(test_text_worked_example),
        cmocka_unit_test(test_text_mixed),
        cmocka_unit_test(test_text_no_communication),
        cmocka_unit_test(test_json_worked_example_exact),
        cmocka_unit_test(test_json_parses_back),
        cmocka_unit_test(test_json_axes_list_and_nulls),
        cmocka_unit_test(test_output_is_deterministic),
        cmocka_unit_test(test_json_is_janssons_layout),
        cmocka_unit_test(test_json_hook_as_jansson),
        cmocka_unit_test(test_json_repeated_rows_as_jansson),
        cmocka_unit_test(test_json_utf8_as_jansson_judges_it),
        cmocka_unit_test(test_json_streams_through_a_sink),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
