/* memory_test.c - the per-device memory estimate (src/memory.c): the peak
 * of live buffers in program order on hand-written per-device programs and
 * on a partitioned one, and the padding of uneven shards.  Every figure is
 * worked out beside its assertion.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/driver.h"
#include "spmdc/memory.h"
#include "spmdc/parse.h"
#include "spmdc/partition.h"
#include "spmdc/report.h"
#include "spmdc/verify.h"

/* A per-device program as written (parsed and checked, no partitioning). */
static HloModule *parse_ok(const char *text)
{
    DiagEngine *d = diag_create(NULL);
    uint32_t fid = diag_add_file(d, "t.hlo", text, strlen(text));
    HloModule *m = parse_hlo(text, strlen(text), fid, d);
    if (!m || !verify_module(m, d))
        fail_msg("parse failed: %s", diag_text(d));
    diag_destroy(d);
    return m;
}

static const char *peak_name(const HloModule *m, const MemoryEstimate *e)
{
    return e->peak_inst >= 0 ? m->comps[e->peak_comp].insts[e->peak_inst].name : "";
}

/* Buffers live from definition to last use; operands and result together. */
static void test_straight_line(void **state)
{
    (void)state;
    HloModule *m = parse_ok("HloModule m\n"
                            "ENTRY e {\n"
                            "  p0 = f32[4,8] parameter(0)\n"
                            "  p1 = f32[8] parameter(1)\n"
                            "  a = f32[4,8] add(p0, p0)\n"
                            "  b = f32[4,8] multiply(a, a)\n"
                            "  ROOT t = (f32[4,8], f32[8]) tuple(b, p1)\n"
                            "}\n");
    MemoryEstimate e = memory_estimate(m);
    /* parameters: 4*8*4 + 8*4 = 128 + 32 = 160 */
    assert_int_equal(e.parameter_bytes, 160);
    /* at b: a (128) and b (128) live, a freed after b; the tuple names b and
     * p1: 160 + 256 = 416 */
    assert_int_equal(e.peak_bytes, 416);
    assert_string_equal(peak_name(m, &e), "b");
    hlo_module_free(m);
}

/* A get-tuple-element keeps the whole tuple alive: a and b live until d. */
static void test_tuple_alias(void **state)
{
    (void)state;
    HloModule *m = parse_ok("HloModule m\n"
                            "ENTRY e {\n"
                            "  p = f32[8] parameter(0)\n"
                            "  a = f32[8] negate(p)\n"
                            "  b = f32[8] exponential(p)\n"
                            "  t = (f32[8], f32[8]) tuple(a, b)\n"
                            "  g = f32[8] get-tuple-element(t), index=0\n"
                            "  ROOT d = f32[8,8] broadcast(g), dimensions={1}\n"
                            "}\n");
    MemoryEstimate e = memory_estimate(m);
    /* p 32; at d: a 32 + b 32 + d 8*8*4 = 256 -> 32 + 320 = 352 */
    assert_int_equal(e.parameter_bytes, 32);
    assert_int_equal(e.peak_bytes, 352);
    assert_string_equal(peak_name(m, &e), "d");
    hlo_module_free(m);
}

/* A loop body counts once, inside the while; the loop state is updated in
 * place (the while names its operand's buffers). */
static void test_while_body_counts_once(void **state)
{
    (void)state;
    HloModule *m = parse_ok("HloModule loop\n"
                            "cond {\n"
                            "  s = (s32[], f32[16]) parameter(0)\n"
                            "  i = s32[] get-tuple-element(s), index=0\n"
                            "  n = s32[] constant(3)\n"
                            "  ROOT lt = pred[] compare(i, n), direction=LT\n"
                            "}\n"
                            "body {\n"
                            "  s = (s32[], f32[16]) parameter(0)\n"
                            "  i = s32[] get-tuple-element(s), index=0\n"
                            "  x = f32[16] get-tuple-element(s), index=1\n"
                            "  one = s32[] constant(1)\n"
                            "  j = s32[] add(i, one)\n"
                            "  y = f32[16] multiply(x, x)\n"
                            "  z = f32[16] add(y, x)\n"
                            "  ROOT t = (s32[], f32[16]) tuple(j, z)\n"
                            "}\n"
                            "ENTRY e {\n"
                            "  p = f32[16] parameter(0)\n"
                            "  zero = s32[] constant(0)\n"
                            "  init = (s32[], f32[16]) tuple(zero, p)\n"
                            "  w = (s32[], f32[16]) while(init), condition=cond, body=body\n"
                            "  ROOT r = f32[16] get-tuple-element(w), index=1\n"
                            "}\n");
    MemoryEstimate e = memory_estimate(m);
    /* body: one 4, j 4 (one freed), y 64, z 64 -> peak at z: 4 + 64 + 64 =
     * 132; cond: n 4 + lt 1 = 5.  entry: p 64 (parameter), zero 4 lives to
     * the end through init, w and r; at w: 4 + max(132, 5) = 136.
     * 64 + 136 = 200, reached at the while. */
    assert_int_equal(e.parameter_bytes, 64);
    assert_int_equal(e.peak_bytes, 200);
    assert_string_equal(peak_name(m, &e), "w");
    hlo_module_free(m);
}

/* Loads (binds and propagates) an input module on a mesh. */
static HloModule *load_ok(const char *text, const char *mesh)
{
    DiagEngine *d = diag_create(NULL);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    char err[200];
    assert_true(mesh_parse_spec(mesh, &opt.mesh, err, sizeof err));
    opt.has_mesh = true;
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, d, &opt};
    uint32_t fid = diag_add_file(d, "t.hlo", text, strlen(text));
    HloModule *m = driver_load_module(text, strlen(text), fid, &cx, true);
    if (!m)
        fail_msg("load failed: %s", diag_text(d));
    arena_destroy(scratch);
    diag_destroy(d);
    return m;
}

/* f32[10,4] split 4 ways on dim 0: shards of ceil(10/4) = 3 rows; the last
 * device holds rows 9..9 (1 real row) and 2 rows of padding. */
static void test_padding_of_uneven_shards(void **state)
{
    (void)state;
    HloModule *m = load_ok("HloModule m\n"
                           "ENTRY e {\n"
                           "  p = f32[10,4] parameter(0), sharding={devices=[4,1]<=[4]}\n"
                           "  ROOT n = f32[10,4] negate(p)\n"
                           "}\n",
                           "4");
    PaddingEstimate p = memory_padding(m);
    /* p and n alike: padding (3 - 1) rows * 4 * 4 B = 32 B each -> 64;
     * local shards 3 * 4 * 4 B = 48 B each -> 96 */
    assert_int_equal(p.padding_bytes, 64);
    assert_int_equal(p.value_bytes, 96);
    assert_string_equal(m->comps[p.first_comp].insts[p.first_inst].name, "p");
    assert_int_equal(p.first_dim, 0);
    hlo_module_free(m);
}

/* The Megatron MLP of examples/mlp.hlo at model=8, end to end. */
static void test_mlp_report(void **state)
{
    (void)state;
    HloModule *m = load_ok("HloModule mlp\n"
                           "ENTRY main {\n"
                           "  x = bf16[8192,8192] parameter(0), sharding={mesh[model=8], [{}, {}]}\n"
                           "  a = bf16[8192,8192] parameter(1), sharding={mesh[model=8], [{}, {model}]}\n"
                           "  b = bf16[8192,8192] parameter(2), sharding={mesh[model=8], [{model}, {}]}\n"
                           "  h = bf16[8192,8192] dot(x, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                           "  ROOT y = bf16[8192,8192] dot(h, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                           "sharding={mesh[model=8], [{}, {}]}\n"
                           "}\n",
                           "model=8");
    DiagEngine *d = diag_create(NULL);
    Arena *scratch = arena_create();
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    PassCtx cx = {scratch, d, &opt};
    CommReport rep;
    report_init(&rep, m->name, &m->mesh);
    HloModule *out = NULL;
    assert_true(partition_module(m, &out, &rep, &cx));
    memory_fill_report(&rep, m, out);
    /* x 8192*8192*2 = 134,217,728; a, b, h 8192*1024*2 = 16,777,216 each;
     * the partial y and the all-reduced y 134,217,728 each.
     * At the all-reduce: x + a + b (parameters) + partial + result
     * = 134,217,728 + 2 * 16,777,216 + 2 * 134,217,728 = 436,207,616 */
    assert_true(rep.has_memory_estimate);
    assert_int_equal(rep.peak_bytes_per_device, 436207616);
    assert_string_equal(rep.peak_instruction, "y");
    /* no uneven shard; values x + a + b + h + y = 134,217,728 * 2 +
     * 16,777,216 * 3 = 318,767,104 */
    assert_int_equal(rep.padding_bytes_per_device, 0);
    assert_int_equal(rep.value_bytes_per_device, 318767104);
    StrBuf b = {0};
    report_print_json(&b, &rep);
    assert_non_null(strstr(sb_cstr(&b), "\"peak_bytes_per_device\": 436207616,\n"
                                        "    \"peak_instruction\": \"y\",\n"
                                        "    \"padding_bytes_per_device\": 0,\n"
                                        "    \"value_bytes_per_device\": 318767104\n"));
    sb_clear(&b);
    report_print_text(&b, &rep);
    assert_non_null(strstr(sb_cstr(&b), "peak memory per device: 436,207,616 B (416.0 MiB) at y "));
    sb_free(&b);
    report_free(&rep);
    hlo_module_free(out);
    hlo_module_free(m);
    arena_destroy(scratch);
    diag_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_straight_line),
        cmocka_unit_test(test_tuple_alias),
        cmocka_unit_test(test_while_body_counts_once),
        cmocka_unit_test(test_padding_of_uneven_shards),
        cmocka_unit_test(test_mlp_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
