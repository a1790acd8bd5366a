/* parse_test.c - parse_hlo: HLO text -> IR.
 *
 * Both printing styles, shapes and layouts, constants, every typed attribute
 * with its exact values, verbatim attributes, every sharding form (positional,
 * iota, tuple, named/mesh), and the exact text (with line:col) of the errors.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"
#include "spmdc/parse.h"

typedef struct Parsed {
    DiagEngine *diag;
    HloModule *m;
} Parsed;

static Parsed parse(const char *text)
{
    Parsed p;
    p.diag = diag_create(NULL);
    diag_set_show_source(p.diag, false);
    uint32_t fid = diag_add_file(p.diag, "t.hlo", text, strlen(text));
    p.m = parse_hlo(text, strlen(text), fid, p.diag);
    return p;
}

static void parsed_free(Parsed *p)
{
    hlo_module_free(p->m);
    diag_destroy(p->diag);
}

/* Parses text that must be valid. */
static Parsed parse_ok(const char *text)
{
    Parsed p = parse(text);
    if (!p.m) fprintf(stderr, "unexpected errors:\n%s", diag_text(p.diag));
    assert_non_null(p.m);
    assert_string_equal(diag_text(p.diag), "");
    return p;
}

/* Parses text that must fail with exactly the messages want. */
static void expect_errors(const char *text, const char *want)
{
    Parsed p = parse(text);
    assert_null(p.m);
    assert_string_equal(diag_text(p.diag), want);
    parsed_free(&p);
}

/* Wraps instruction lines into `HloModule m` + `ENTRY e { ... }` (line 3 is the first). */
static char *entry(const char *body)
{
    static char buf[8192];
    snprintf(buf, sizeof buf, "HloModule m\nENTRY e {\n%s\n}\n", body);
    return buf;
}

static HloInst *find(const HloModule *m, const char *comp, const char *name)
{
    int32_t c = hlo_find_computation(m, comp);
    assert_true(c >= 0);
    int32_t i = hlo_find_inst(m, c, name);
    assert_true(i >= 0);
    return hlo_inst(m, c, i);
}

static void assert_ints(IntList l, int32_t n, const int64_t *want)
{
    assert_int_equal(l.n, n);
    for (int32_t i = 0; i < n; i++) assert_int_equal(l.v[i], want[i]);
}
#define INTS(l, ...)                                                              \
    do {                                                                          \
        static const int64_t w_[] = {__VA_ARGS__};                                \
        assert_ints((l), (int32_t)(sizeof w_ / sizeof w_[0]), w_);                \
    } while (0)

static void assert_shape(const Shape *s, const char *want)
{
    StrBuf b = {0};
    shape_print(&b, s, true);
    assert_string_equal(sb_cstr(&b), want);
    sb_free(&b);
}

/* ---------------------------------------------------------------- module structure */

static void test_spec_example(void **state)
{
    (void)state;
    Parsed p = parse_ok("HloModule module\n\n"
                        "sum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT add = f32[] add(a, b)\n}\n\n"
                        "ENTRY entry {\n"
                        "  p = f32[3,3]{1,0} parameter(0), sharding={devices=[2,1]0,1}\n"
                        "  c = f32[] constant(0), sharding={replicated}\n"
                        "  ROOT r = f32[] reduce(p, c), dimensions={0,1}, to_apply=sum, sharding={replicated}\n}\n");
    HloModule *m = p.m;
    assert_string_equal(m->name, "module");
    assert_int_equal(m->n_comps, 2);
    assert_int_equal(m->entry, 1);
    assert_false(m->comps[0].is_entry);
    assert_true(m->comps[1].is_entry);
    assert_string_equal(m->comps[0].name, "sum");
    assert_int_equal(m->comps[0].n_insts, 3);
    assert_int_equal(m->comps[0].root, 2);
    assert_int_equal(m->num_partitions, 0);
    HloInst *r = find(m, "entry", "r");
    assert_int_equal(r->op, HLO_REDUCE);
    assert_int_equal(r->n_operands, 2);
    assert_int_equal(r->operands[0], 0);
    assert_int_equal(r->operands[1], 1);
    INTS(hlo_attrs(r)->dimensions, 0, 1);
    assert_int_equal(hlo_attrs(r)->to_apply, 0);
    assert_int_equal(r->span.begin.line, 12);
    assert_int_equal(r->span.begin.col, 3);
    assert_int_equal(r->span.end.line, 12);
    HloInst *pi = find(m, "entry", "p");
    assert_int_equal(pi->op, HLO_PARAMETER);
    assert_int_equal(pi->param_number, 0);
    assert_shape(pi->shape, "f32[3,3]{1,0}");
    assert_non_null(pi->sharding_src);
    assert_null(pi->sharding);
    assert_int_equal(pi->sharding_src->kind, SSYN_TILED);
    assert_int_equal(find(m, "sum", "b")->param_number, 1);
    parsed_free(&p);
}

static void test_verbose_style(void **state)
{
    (void)state;
    Parsed p = parse_ok("HloModule jit_f, num_partitions=8, replica_count=2\n\n"
                        "ENTRY %main.4 (x.1: f32[4,8], y.2: f32[4,8]) -> f32[4,8] {\n"
                        "  %x.1 = f32[4,8]{1,0} parameter(0)\n"
                        "  %y.2 = f32[4,8]{0,1} parameter(1)\n"
                        "  ROOT %add.3 = f32[4,8]{1,0} add(f32[4,8]{1,0} %x.1, f32[4,8]{0,1} %y.2)\n"
                        "}\n");
    assert_string_equal(p.m->name, "jit_f");
    assert_int_equal(p.m->num_partitions, 8);
    assert_int_equal(p.m->replica_count, 2);
    assert_string_equal(p.m->comps[0].name, "main.4");
    HloInst *add = find(p.m, "main.4", "add.3");
    assert_int_equal(add->op, HLO_ADD);
    assert_int_equal(add->operands[0], 0);
    assert_int_equal(add->operands[1], 1);
    HloInst *y = find(p.m, "main.4", "y.2");
    assert_true(y->shape->has_layout);
    assert_int_equal(y->shape->minor_to_major[0], 0);
    assert_int_equal(y->shape->minor_to_major[1], 1);
    parsed_free(&p);
}

static void test_no_header_last_computation_is_entry(void **state)
{
    (void)state;
    Parsed p = parse_ok("c1 {\n  a = s32[] parameter(0)\n}\n"
                        "c2 {\n  x = s32[] parameter(0)\n  ROOT y = s32[] negate(x)\n  z = s32[] copy(y)\n}\n");
    assert_string_equal(p.m->name, "module");
    assert_int_equal(p.m->entry, 1);
    assert_true(p.m->comps[1].is_entry);
    assert_int_equal(p.m->comps[1].root, 1); /* ROOT need not be last */
    assert_int_equal(p.m->comps[0].root, 0); /* no ROOT: the last one */
    parsed_free(&p);
}

/* A computation's instruction array is reserved at the lines between its
 * head and the next line that starts with '}'; a computation closed some
 * other way grows by doubling from 4. */
static void test_instruction_array_reserved(void **state)
{
    (void)state;
    Parsed p = parse_ok("HloModule m\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
                        "  ROOT s = f32[] add(x, y)\n}\n\nENTRY e {\n  p0 = f32[8] parameter(0)\n"
                        "  n1 = f32[8] negate(p0)\n  n2 = f32[8] negate(n1)\n\n  n3 = f32[8] negate(n2)\n"
                        "  n4 = f32[8] negate(n3)\n  ROOT n5 = f32[8] negate(n4)\n}\n");
    assert_int_equal(p.m->comps[0].n_insts, 3);
    assert_int_equal(p.m->comps[0].cap_insts, 3);
    assert_int_equal(p.m->comps[1].n_insts, 6);
    assert_int_equal(p.m->comps[1].cap_insts, 7); /* 6 instructions and a blank line */
    parsed_free(&p);
    /* closing braces indented: no hint, 4 then 8 */
    p = parse_ok("HloModule m\n  ENTRY e {\n    p0 = f32[8] parameter(0)\n    n1 = f32[8] negate(p0)\n"
                 "    n2 = f32[8] negate(n1)\n    n3 = f32[8] negate(n2)\n    ROOT n4 = f32[8] negate(n3)\n  }\n");
    assert_int_equal(p.m->comps[0].n_insts, 5);
    assert_int_equal(p.m->comps[0].cap_insts, 8);
    parsed_free(&p);
}

static void test_header_attrs_kept_verbatim(void **state)
{
    (void)state;
    Parsed p = parse_ok("HloModule m, is_scheduled=true, entry_computation_layout={(f32[32,96]{1,0})->f32[32,96]{1,0}},"
                        "\n    num_partitions=4, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=4]>}}\n"
                        "ENTRY e {\n  ROOT p = f32[32,96] parameter(0)\n}\n");
    assert_int_equal(p.m->num_partitions, 4);
    assert_int_equal(p.m->n_raw, 3);
    assert_string_equal(p.m->raw[0].name, "is_scheduled");
    assert_string_equal(p.m->raw[0].text, "true");
    assert_string_equal(p.m->raw[1].name, "entry_computation_layout");
    assert_string_equal(p.m->raw[1].text, "{(f32[32,96]{1,0})->f32[32,96]{1,0}}");
    assert_string_equal(p.m->raw[2].name, "frontend_attributes");
    assert_string_equal(p.m->raw[2].text, "{xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=4]>}}");
    parsed_free(&p);
}

/* Newer XLA prints a stack frame index between the header and the computations. */
static void test_stack_frame_sections_skipped(void **state)
{
    (void)state;
    Parsed p = parse_ok("HloModule m, num_partitions=2\n\nFileNames\n1 \"export.py\"\n\nFunctionNames\n1 \"<module>\"\n\n"
                        "FileLocations\n1 {file_name_id=1 function_name_id=1 line=172 end_line=172 column=13}\n\n"
                        "StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n2 {file_location_id=1}\n\n"
                        "ENTRY %main {\n  ROOT %x = f32[2] parameter(0), metadata={op_name=\"x\" stack_frame_id=2}\n}\n");
    assert_int_equal(p.m->num_partitions, 2);
    assert_int_equal(p.m->n_comps, 1);
    assert_string_equal(hlo_attrs(find(p.m, "main", "x"))->raw[0].text, "{op_name=\"x\" stack_frame_id=2}");
    parsed_free(&p);
}

static void test_execution_thread_and_comments(void **state)
{
    (void)state;
    Parsed p = parse_ok("HloModule m\n/* a comment */\nENTRY e {\n  // a line comment\n"
                        "  p = (f32[2], /*index=1*/ s32[]) parameter(0)\n}, execution_thread=\"main\" // e\n");
    assert_string_equal(p.m->comps[0].execution_thread, "main");
    assert_shape(find(p.m, "e", "p")->shape, "(f32[2], s32[])");
    parsed_free(&p);
}

static void test_inferred_shapes(void **state)
{
    (void)state;
    Parsed p = parse_ok(entry("  a = f32[2,3] parameter(0)\n  b = s32[] parameter(1)\n  c = add(a, a)\n"
                              "  d = compare(a, a), direction=LT\n  t = tuple(c, b)\n"
                              "  ROOT g = get-tuple-element(t), index=1"));
    assert_shape(find(p.m, "e", "c")->shape, "f32[2,3]");
    assert_shape(find(p.m, "e", "d")->shape, "pred[2,3]");
    assert_shape(find(p.m, "e", "t")->shape, "(f32[2,3], s32[])");
    assert_shape(find(p.m, "e", "g")->shape, "s32[]");
    parsed_free(&p);
}

/* ---------------------------------------------------------------- shapes */

static void test_shapes_and_layouts(void **state)
{
    (void)state;
    Parsed p = parse_ok(entry("  a = bf16[2,3,4]{2,1,0:T(8,128)(2,1)S(1)} parameter(0)\n"
                              "  b = f32[]{:T(256)} parameter(1)\n"
                              "  c = ((f32[1], pred[]), token[], ()) parameter(2)\n"
                              "  d = u4[7] parameter(3)\n"
                              "  e = f8e4m3fn[1,1,1,1,1,1,1,1] parameter(4)"));
    HloInst *a = find(p.m, "e", "a");
    assert_int_equal(a->shape->type, ET_BF16);
    assert_int_equal(a->shape->rank, 3);
    assert_int_equal(a->shape->dims[2], 4);
    assert_string_equal(a->shape->layout_tail, "T(8,128)(2,1)S(1)");
    assert_shape(a->shape, "bf16[2,3,4]{2,1,0:T(8,128)(2,1)S(1)}");
    HloInst *b = find(p.m, "e", "b");
    assert_true(b->shape->has_layout);
    assert_string_equal(b->shape->layout_tail, "T(256)");
    HloInst *c = find(p.m, "e", "c");
    assert_int_equal(c->shape->type, ET_TUPLE);
    assert_int_equal(c->shape->n_elems, 3);
    assert_int_equal(c->shape->elems[0].n_elems, 2);
    assert_int_equal(c->shape->elems[1].type, ET_TOKEN);
    assert_int_equal(c->shape->elems[2].n_elems, 0);
    assert_shape(c->shape, "((f32[1], pred[]), token[], ())");
    assert_int_equal(find(p.m, "e", "e")->shape->rank, 8);
    parsed_free(&p);
    /* a shape the scanner reads whole (no blanks) lowers to the bytes of one
     * read token by token */
    p = parse_ok(entry("  f = f32[2,3]{0,1} parameter(0)\n"
                       "  g = f32[2, 3]{0, 1} parameter(1)\n"
                       "  h = s8[] parameter(2)\n"
                       "  i = s8[ ] parameter(3)\n"
                       "  j = f32[2,3]{0,1} add(f32[2,3]{0,1} f, f32[2, 3]{0,1} g)"));
    assert_memory_equal(find(p.m, "e", "f")->shape, find(p.m, "e", "g")->shape, sizeof(Shape));
    assert_memory_equal(find(p.m, "e", "h")->shape, find(p.m, "e", "i")->shape, sizeof(Shape));
    /* identical shapes are one record of the module's (hlo_shape) */
    assert_ptr_equal(find(p.m, "e", "f")->shape, find(p.m, "e", "g")->shape);
    assert_ptr_equal(find(p.m, "e", "f")->shape, find(p.m, "e", "j")->shape);
    assert_ptr_not_equal(find(p.m, "e", "f")->shape, find(p.m, "e", "h")->shape);
    assert_shape(find(p.m, "e", "j")->shape, "f32[2,3]{0,1}");
    parsed_free(&p);
}

static void test_shape_errors(void **state)
{
    (void)state;
    expect_errors(entry("  a = f32[<=4] parameter(0)"),
                  "t.hlo:3:11: error: bounded dynamic dimension '<=4' is not supported: spmdc needs static shapes\n");
    expect_errors(entry("  a = f32[?,2] parameter(0)"),
                  "t.hlo:3:11: error: dynamic dimension '?' is not supported: spmdc needs static shapes\n");
    expect_errors(entry("  a = f32[2,2]{0} parameter(0)"),
                  "t.hlo:3:15: error: layout lists 1 dimension but the shape has rank 2\n");
    expect_errors(entry("  a = f32[2,2]{1,1} parameter(0)"),
                  "t.hlo:3:18: error: layout {...} must be a permutation of 0..1, found 1\n");
    expect_errors(entry("  a = f32[1,1,1,1,1,1,1,1,1] parameter(0)"),
                  "t.hlo:3:27: error: shape has more than 8 dimensions (spmdc's limit)\n");
    expect_errors(entry("  a = f32[-1] parameter(0)"),
                  "t.hlo:3:11: error: dimension size -1 is negative or too large\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[3] negate(f32[2,1] a)"),
                  "t.hlo:4:21: error: operand 'a' is written with shape f32[2,1] but is defined as f32[2]\n"
                  "t.hlo:3:3: note: 'a' is defined here\n");
}

/* ---------------------------------------------------------------- constants */

static void test_constants(void **state)
{
    (void)state;
    Parsed p = parse_ok(entry("  a = s32[3] constant({1, -2, 3})\n"
                              "  b = f32[2,2] constant({ { 1.5, -2 }, { inf, -inf } })\n"
                              "  c = pred[2] constant({true, 0})\n"
                              "  d = u64[] constant(18446744073709551615)\n"
                              "  e = f32[1000,1000] constant({...})\n"
                              "  f = (s32[], f32[2]) constant((7, {0.25, 1e3}))\n"
                              "  g = c64[2] constant({(1, 2), (3.5, -4)})\n"
                              "  h = f16[] constant(nan)\n"
                              "  i = bf16[] constant(-nan(0x7f))\n"
                              "  j = s8[2] constant({-128, 127})"));
    const Literal *a = hlo_attrs(find(p.m, "e", "a"))->literal;
    assert_int_equal(a->n, 3);
    assert_int_equal(a->i[0], 1);
    assert_int_equal(a->i[1], -2);
    assert_int_equal(a->i[2], 3);
    const Literal *b = hlo_attrs(find(p.m, "e", "b"))->literal;
    assert_int_equal(b->n, 4);
    assert_true(b->f[0] == 1.5 && b->f[1] == -2.0 && isinf(b->f[2]) && b->f[2] > 0 && isinf(b->f[3]) && b->f[3] < 0);
    const Literal *c = hlo_attrs(find(p.m, "e", "c"))->literal;
    assert_int_equal(c->i[0], 1);
    assert_int_equal(c->i[1], 0);
    assert_int_equal(hlo_attrs(find(p.m, "e", "d"))->literal->i[0], -1); /* u64 bit pattern */
    const Literal *e = hlo_attrs(find(p.m, "e", "e"))->literal;
    assert_true(e->elided);
    assert_int_equal(e->n, 1000000);
    const Literal *f = hlo_attrs(find(p.m, "e", "f"))->literal;
    assert_int_equal(f->n_elems, 2);
    assert_int_equal(f->elems[0].i[0], 7);
    assert_true(f->elems[1].f[0] == 0.25 && f->elems[1].f[1] == 1000.0);
    const Literal *g = hlo_attrs(find(p.m, "e", "g"))->literal;
    assert_true(g->f[0] == 1 && g->f[1] == 2 && g->f[2] == 3.5 && g->f[3] == -4);
    assert_true(isnan(hlo_attrs(find(p.m, "e", "h"))->literal->f[0]));
    double i = hlo_attrs(find(p.m, "e", "i"))->literal->f[0];
    assert_true(isnan(i) && signbit(i));
    assert_int_equal(hlo_attrs(find(p.m, "e", "j"))->literal->i[0], -128);
    parsed_free(&p);
}

static void test_constant_errors(void **state)
{
    (void)state;
    expect_errors(entry("  a = f32[2,3] constant({{1,2,3},{4,5}})"),
                  "t.hlo:3:34: error: this group of a f32[2,3] constant has 2 values, expected 3\n");
    expect_errors(entry("  a = f32[2] constant({1,2,3})"),
                  "t.hlo:3:23: error: this group of a f32[2] constant has 3 values, expected 2\n");
    expect_errors(entry("  a = f32[2,2] constant({1,2})"),
                  "t.hlo:3:26: error: expected '{' (a f32[2,2] constant nests 2 levels of braces), found integer '1'\n");
    expect_errors(entry("  a = s8[] constant(128)"), "t.hlo:3:21: error: 128 does not fit in s8\n");
    expect_errors(entry("  a = u8[] constant(-1)"), "t.hlo:3:21: error: -1 does not fit in u8\n");
    expect_errors(entry("  a = s32[] constant(1.5)"),
                  "t.hlo:3:22: error: expected an integer for a s32 constant, found number '1.5'\n");
    expect_errors(entry("  a = f32[] constant(x)"), "t.hlo:3:22: error: expected a number, found identifier 'x'\n");
    expect_errors(entry("  a = constant(1)"),
                  "t.hlo:3:7: error: constant needs a result shape, like f32[2] constant({1, 2})\n");
}

/* ---------------------------------------------------------------- attributes */

static void test_dot_conv_window_attrs(void **state)
{
    (void)state;
    Parsed p = parse_ok(
        "HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
        "ENTRY e {\n"
        "  a = f32[2,3,4] parameter(0)\n  b = f32[2,4,5] parameter(1)\n"
        "  d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
        "rhs_contracting_dims={1}, operand_precision={HIGH,DEFAULT}\n"
        "  x = f32[8,32,32,3] parameter(2)\n  k = f32[3,3,3,16] parameter(3)\n"
        "  c = f32[8,16,16,16] convolution(x, k), window={size=3x3 stride=2x2 pad=1_1x0_-1 lhs_dilate=1x1 "
        "rhs_dilate=2x1 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f, feature_group_count=1, batch_group_count=2\n"
        "  r = f32[8,16,16,16] reduce-window(c, a), window={size=1x2x2x1}, to_apply=add\n}\n");
    const HloAttrs *d = hlo_attrs(find(p.m, "e", "d"));
    INTS(d->lhs_batch, 0);
    INTS(d->lhs_contracting, 2);
    INTS(d->rhs_batch, 0);
    INTS(d->rhs_contracting, 1);
    assert_int_equal(d->n_raw, 1);
    assert_string_equal(d->raw[0].name, "operand_precision");
    assert_string_equal(d->raw[0].text, "{HIGH,DEFAULT}");
    const HloAttrs *c = hlo_attrs(find(p.m, "e", "c"));
    assert_non_null(c->window);
    assert_int_equal(c->window->rank, 2);
    const WindowDim *w0 = &c->window->dims[0], *w1 = &c->window->dims[1];
    assert_true(w0->size == 3 && w0->stride == 2 && w0->pad_lo == 1 && w0->pad_hi == 1 && w0->lhs_dilate == 1 &&
                w0->rhs_dilate == 2 && !w0->reversal);
    assert_true(w1->size == 3 && w1->stride == 2 && w1->pad_lo == 0 && w1->pad_hi == -1 && w1->rhs_dilate == 1 &&
                w1->reversal);
    assert_string_equal(c->dim_labels, "b01f_01io->b01f");
    const ConvDims *cd = c->conv;
    assert_int_equal(cd->n_spatial, 2);
    assert_true(cd->in_batch == 0 && cd->in_feature == 3 && cd->in_spatial[0] == 1 && cd->in_spatial[1] == 2);
    assert_true(cd->k_in == 2 && cd->k_out == 3 && cd->k_spatial[0] == 0 && cd->k_spatial[1] == 1);
    assert_true(cd->out_batch == 0 && cd->out_feature == 3 && cd->out_spatial[0] == 1 && cd->out_spatial[1] == 2);
    assert_int_equal(c->feature_group_count, 1);
    assert_int_equal(c->batch_group_count, 2);
    parsed_free(&p);
}

static void test_dim_labels_permuted(void **state)
{
    (void)state;
    Parsed p = parse_ok(entry("  x = f32[4,8] parameter(0)\n  k = f32[8,5] parameter(1)\n"
                              "  c = f32[4,5] convolution(x, k), dim_labels=0bf_0oi->0bf, window={size=1}\n"
                              "  d = f32[4,5] convolution(x, k), dim_labels=bf_io->bf"));
    const ConvDims *cd = hlo_attrs(find(p.m, "e", "c"))->conv;
    assert_int_equal(cd->n_spatial, 1);
    assert_true(cd->in_spatial[0] == 0 && cd->in_batch == 1 && cd->in_feature == 2);
    assert_true(cd->k_spatial[0] == 0 && cd->k_out == 1 && cd->k_in == 2);
    assert_int_equal(hlo_attrs(find(p.m, "e", "c"))->window->dims[0].size, 1);
    assert_int_equal(hlo_attrs(find(p.m, "e", "d"))->conv->n_spatial, 0);
    parsed_free(&p);
}

static void test_slice_pad_gather_scatter_attrs(void **state)
{
    (void)state;
    Parsed p = parse_ok(
        "HloModule m\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
        "ENTRY e {\n  x = f32[8,16] parameter(0)\n  z = f32[] constant(0)\n"
        "  s = f32[4,8] slice(x), slice={[2:8:2], [0:16:2]}\n"
        "  p = f32[9,21] pad(x, z), padding=0_1x2_-1_2\n"
        "  i = s32[5,1] parameter(1)\n"
        "  g = f32[5,16] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
        "index_vector_dim=1, slice_sizes={1,16}, indices_are_sorted=true\n"
        "  u = f32[5,16] parameter(2)\n"
        "  t = f32[8,16] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, "
        "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add, unique_indices=false\n"
        "  ds = f32[2,16] dynamic-slice(x, i, i), dynamic_slice_sizes={2,16}\n}\n");
    const HloAttrs *s = hlo_attrs(find(p.m, "e", "s"));
    INTS(s->slice_start, 2, 0);
    INTS(s->slice_limit, 8, 16);
    INTS(s->slice_stride, 2, 2);
    const HloAttrs *pd = hlo_attrs(find(p.m, "e", "p"));
    INTS(pd->pad_lo, 0, 2);
    INTS(pd->pad_hi, 1, -1);
    INTS(pd->pad_interior, 0, 2);
    const HloAttrs *g = hlo_attrs(find(p.m, "e", "g"));
    INTS(g->offset_dims, 1);
    INTS(g->collapsed_slice_dims, 0);
    INTS(g->start_index_map, 0);
    INTS(g->slice_sizes, 1, 16);
    assert_int_equal(g->index_vector_dim, 1);
    assert_true(g->indices_are_sorted);
    const HloAttrs *t = hlo_attrs(find(p.m, "e", "t"));
    INTS(t->update_window_dims, 1);
    INTS(t->inserted_window_dims, 0);
    INTS(t->scatter_dims_to_operand_dims, 0);
    assert_int_equal(t->to_apply, 0);
    assert_false(t->unique_indices);
    INTS(hlo_attrs(find(p.m, "e", "ds"))->dynamic_slice_sizes, 2, 16);
    parsed_free(&p);
}

static void test_collective_attrs(void **state)
{
    (void)state;
    Parsed p = parse_ok(
        "HloModule m\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n"
        "ENTRY e {\n  x = f32[8] parameter(0)\n"
        "  a = f32[8] all-reduce(x), channel_id=3, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, "
        "to_apply=sum\n"
        "  b = f32[32] all-gather(x), dimensions={0}, replica_groups=[2,4]<=[4,2]T(1,0)\n"
        "  c = f32[8] all-reduce(x), replica_groups=[4,4]<=[4,2,2]T(1,0,2), to_apply=%sum\n"
        "  d = f32[8] collective-permute(x), source_target_pairs={{0,1},{1,2},{2,0}}\n"
        "  f = f32[8] all-reduce(x), replica_groups={}, to_apply=sum\n"
        "  g = f32[8] all-reduce(x), replica_groups=[1,8]<=[8], to_apply=sum\n}\n");
    const HloAttrs *a = hlo_attrs(find(p.m, "e", "a"));
    assert_int_equal(a->channel_id, 3);
    assert_true(a->use_global_device_ids);
    assert_int_equal(a->replica_groups.n_groups, 2);
    assert_int_equal(a->replica_groups.group_size, 2);
    static const int64_t want_a[] = {0, 1, 2, 3};
    assert_memory_equal(a->replica_groups.ids, want_a, sizeof want_a);
    /* hlo-input.md 4.3: [2,4]<=[4,2]T(1,0) == {{0,2,4,6},{1,3,5,7}} */
    const HloAttrs *b = hlo_attrs(find(p.m, "e", "b"));
    static const int64_t want_b[] = {0, 2, 4, 6, 1, 3, 5, 7};
    assert_int_equal(b->replica_groups.n_groups, 2);
    assert_int_equal(b->replica_groups.group_size, 4);
    assert_memory_equal(b->replica_groups.ids, want_b, sizeof want_b);
    INTS(b->dimensions, 0);
    /* [4,4,1]<=[4,2,2]T(1,0,2) == 0,1,4,5,8,9,12,13,2,3,6,7,10,11,14,15 (same device order, 4x4 groups) */
    const HloAttrs *c = hlo_attrs(find(p.m, "e", "c"));
    static const int64_t want_c[] = {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15};
    assert_memory_equal(c->replica_groups.ids, want_c, sizeof want_c);
    assert_int_equal(c->to_apply, 0);
    const HloAttrs *d = hlo_attrs(find(p.m, "e", "d"));
    assert_int_equal(d->n_pairs, 3);
    static const int64_t want_d[] = {0, 1, 1, 2, 2, 0};
    assert_memory_equal(d->pairs, want_d, sizeof want_d);
    assert_int_equal(hlo_attrs(find(p.m, "e", "f"))->replica_groups.n_groups, 0);
    const HloAttrs *g = hlo_attrs(find(p.m, "e", "g"));
    static const int64_t want_g[] = {0, 1, 2, 3, 4, 5, 6, 7};
    assert_int_equal(g->replica_groups.n_groups, 1);
    assert_memory_equal(g->replica_groups.ids, want_g, sizeof want_g);
    parsed_free(&p);
}

static void test_control_flow_attrs(void **state)
{
    (void)state;
    Parsed p = parse_ok(
        "HloModule m\n"
        "cond {\n  c = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(c), index=0\n"
        "  n = s32[] constant(10)\n  ROOT lt = pred[] compare(i, n), direction=LT, type=SIGNED\n}\n"
        "body {\n  ROOT b = (s32[], f32[4]) parameter(0)\n}\n"
        "br0 {\n  ROOT x = f32[4] parameter(0)\n}\n"
        "br1 {\n  ROOT y = f32[4] parameter(0)\n}\n"
        "ENTRY e {\n  t = (s32[], f32[4]) parameter(0)\n"
        "  w = (s32[], f32[4]) while(t), condition=cond, body=body\n"
        "  v = f32[4] get-tuple-element(w), index=1\n  pr = pred[] parameter(1)\n  k = s32[] parameter(2)\n"
        "  c1 = f32[4] conditional(pr, v, v), true_computation=br0, false_computation=br1\n"
        "  c2 = f32[4] conditional(k, v, v), branch_computations={%br0, br1}\n"
        "  cc = f32[4] custom-call(v), custom_call_target=\"Sharding\", sharding={replicated}, "
        "backend_config=\"unspecified_dims=[0]\"\n"
        "  io = s32[8] iota(), iota_dimension=0\n"
        "  s = (s32[8], f32[4]) sort(io, v), dimensions={0}, is_stable=true, to_apply=cond\n"
        "  rn = f32[4] rng(v, v), distribution=rng_uniform\n"
        "  cl = f32[4] call(v), to_apply=br0\n}\n");
    const HloAttrs *lt = hlo_attrs(find(p.m, "cond", "lt"));
    assert_int_equal(lt->direction, CMP_LT);
    assert_string_equal(lt->compare_type, "SIGNED");
    assert_int_equal(hlo_attrs(find(p.m, "cond", "i"))->index, 0);
    const HloAttrs *w = hlo_attrs(find(p.m, "e", "w"));
    assert_int_equal(w->condition, 0);
    assert_int_equal(w->body, 1);
    assert_int_equal(hlo_attrs(find(p.m, "e", "v"))->index, 1);
    const HloAttrs *c1 = hlo_attrs(find(p.m, "e", "c1"));
    assert_true(c1->branches_by_pred);
    INTS(c1->branches, 2, 3);
    const HloAttrs *c2 = hlo_attrs(find(p.m, "e", "c2"));
    assert_false(c2->branches_by_pred);
    INTS(c2->branches, 2, 3);
    const HloInst *cc = find(p.m, "e", "cc");
    assert_int_equal(cc->op, HLO_CUSTOM_CALL);
    assert_string_equal(hlo_attrs(cc)->custom_call_target, "Sharding");
    assert_int_equal(cc->sharding_src->kind, SSYN_REPLICATED);
    assert_int_equal(hlo_attrs(cc)->n_raw, 1);
    assert_string_equal(hlo_attrs(cc)->raw[0].text, "\"unspecified_dims=[0]\"");
    assert_int_equal(hlo_attrs(find(p.m, "e", "io"))->iota_dimension, 0);
    const HloAttrs *s = hlo_attrs(find(p.m, "e", "s"));
    assert_true(s->is_stable);
    INTS(s->dimensions, 0);
    assert_string_equal(hlo_attrs(find(p.m, "e", "rn"))->rng_distribution, "rng_uniform");
    assert_int_equal(hlo_attrs(find(p.m, "e", "cl"))->to_apply, 2);
    parsed_free(&p);
}

static void test_raw_attrs_verbatim(void **state)
{
    (void)state;
    Parsed p = parse_ok(entry(
        "  a = f32[2] parameter(0), metadata={op_type=\"Add\" op_name=\"jit(f)/add\" source_line=12}, "
        "frontend_attributes={_xla_compute_type=\"host\",xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\"}]>\"}\n"
        "  b = f32[2] copy(a), backend_config={\"flag_configs\":[],\"x\":{\"y\":\"}\"}}, "
        "control-predecessors={%a}, statistics={visualizing_index=1,stat-val=0.5}\n"
        "  c = f32[2] exponential(b), result_accuracy={tolerance={atol=0,rtol=0,ulps=1}}"));
    const HloAttrs *a = hlo_attrs(find(p.m, "e", "a"));
    assert_int_equal(a->n_raw, 2);
    assert_string_equal(a->raw[0].name, "metadata");
    assert_string_equal(a->raw[0].text, "{op_type=\"Add\" op_name=\"jit(f)/add\" source_line=12}");
    assert_string_equal(a->raw[1].name, "frontend_attributes");
    assert_string_equal(a->raw[1].text,
                        "{_xla_compute_type=\"host\",xla.sdy.sharding=\"#sdy.sharding<@mesh, [{\\\"x\\\"}]>\"}");
    const HloAttrs *b = hlo_attrs(find(p.m, "e", "b"));
    assert_int_equal(b->n_raw, 3);
    assert_string_equal(b->raw[0].name, "backend_config");
    assert_string_equal(b->raw[0].text, "{\"flag_configs\":[],\"x\":{\"y\":\"}\"}}");
    assert_string_equal(b->raw[1].name, "control-predecessors");
    assert_string_equal(b->raw[1].text, "{%a}");
    assert_string_equal(b->raw[2].text, "{visualizing_index=1,stat-val=0.5}");
    const HloAttrs *c = hlo_attrs(find(p.m, "e", "c"));
    assert_int_equal(c->n_raw, 1); /* a name XLA takes on the op and spmdc does not read is kept */
    assert_string_equal(c->raw[0].name, "result_accuracy");
    assert_string_equal(c->raw[0].text, "{tolerance={atol=0,rtol=0,ulps=1}}");
    parsed_free(&p);
}

static void test_attribute_errors(void **state)
{
    (void)state;
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] broadcast(a), dimensions=0"),
                  "t.hlo:4:39: error: attribute 'dimensions' expects a list of integers like {0,1}, found integer "
                  "'0'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] reverse(a), dimensions={0}, dimensions={0}"),
                  "t.hlo:4:42: error: attribute 'dimensions' is given twice\n"
                  "t.hlo:4:26: note: first given here\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] copy(a), origin=1, origin=2"),
                  "t.hlo:4:33: error: attribute 'origin' is given twice\nt.hlo:4:23: note: first given here\n");
    /* a name XLA does not know: an error, with the nearest name the op takes */
    expect_errors(entry("  a = f32[2] parameter(0), shardng={replicated}"),
                  "t.hlo:3:28: error: unknown attribute 'shardng'\nt.hlo:3:28: note: did you mean 'sharding'?\n");
    expect_errors(entry("  a = f32[2,2] parameter(0)\n  d = f32[2,2] dot(a, a), lhs_contracting_dim={1}"),
                  "t.hlo:4:27: error: unknown attribute 'lhs_contracting_dim'\n"
                  "t.hlo:4:27: note: did you mean 'lhs_contracting_dims'?\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] copy(a), some_new_attr=[1:2]<=[3]"),
                  "t.hlo:4:23: error: unknown attribute 'some_new_attr'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = pred[2] compare(a, a), direction=LESS"),
                  "t.hlo:4:40: error: attribute 'direction' expects one of EQ, NE, LT, LE, GT, GE, found "
                  "identifier 'LESS'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] reduce(a, a), dimensions={}, to_apply=nosuch"),
                  "t.hlo:4:52: error: unknown computation 'nosuch'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n"
                        "  b = f32[2] custom-call(a), custom_call_target=\"x\", window={size=3x3 stride=2}"),
                  "t.hlo:4:71: error: window field 'stride=' has 1 dimension, but earlier fields have 2\n");
    /* XLA's parser: an attribute it knows, on an op that does not take it */
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] negate(a), type=FLOAT"),
                  "t.hlo:4:25: error: negate takes no attribute 'type'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] all-to-all(a), window={size=2}"),
                  "t.hlo:4:29: error: all-to-all takes no attribute 'window'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] custom-call(a), custom_call_target=\"x\", dim_labels=bb_io->bf"),
                  "t.hlo:4:65: error: malformed dim_labels bb_io->bf: each part needs one b/f (i/o for the kernel) "
                  "and the same spatial digits 0..n-1\n");
    expect_errors(entry("  a = f32[8] parameter(0)\n  b = f32[8] all-to-all(a), replica_groups={{0,1},{2}}"),
                  "t.hlo:4:51: error: replica groups must all have the same size: this one has 1 ids, the first "
                  "has 2\n");
    expect_errors(entry("  a = f32[8] parameter(0)\n  b = f32[8] all-to-all(a), replica_groups=[2,3]<=[4]"),
                  "t.hlo:4:44: error: replica_groups [2,3] must hold exactly the 4 devices of its iota source\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] custom-call(a), custom_call_target=\"x\",\n"
                        "    window={size=99999999999999999999x1}"),
                  "t.hlo:5:18: error: window size= expects one number per dimension like 3x3, found size "
                  "'99999999999999999999x1'\n");
    expect_errors(entry("  a = f32[8] parameter(0)\n  b = f32[8] collective-permute(a), source_target_pairs={{0,1,2}}"),
                  "t.hlo:4:58: error: a source_target pair needs exactly 2 ids, found 3\n");
    /* typed attributes an op does not take (XLA's parser rejects them too) */
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] convert(a), direction=LT"),
                  "t.hlo:4:26: error: convert takes no attribute 'direction'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] negate(a), dimensions={0}, index=1"),
                  "t.hlo:4:25: error: negate takes no attribute 'dimensions'\n"
                  "t.hlo:4:41: error: negate takes no attribute 'index'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] reshape(a), dimensions={0}"),
                  "t.hlo:4:26: error: reshape takes no attribute 'dimensions'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = (f32[2]) tuple(a), index=0"),
                  "t.hlo:4:26: error: tuple takes no attribute 'index'\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] get-tuple-element(a), index=0, dimensions={0}"),
                  "t.hlo:4:45: error: get-tuple-element takes no attribute 'dimensions'\n");
}

/* ---------------------------------------------------------------- shardings */

static const ShardingSyntax *sharding_of(const char *sharding, Parsed *p)
{
    char body[1024];
    snprintf(body, sizeof body, "  ROOT a = f32[8,8] parameter(0), sharding=%s", sharding);
    *p = parse_ok(entry(body));
    return find(p->m, "e", "a")->sharding_src;
}

static void test_sharding_simple_kinds(void **state)
{
    (void)state;
    Parsed p;
    assert_int_equal(sharding_of("{replicated}", &p)->kind, SSYN_REPLICATED);
    parsed_free(&p);
    assert_int_equal(sharding_of("{manual}", &p)->kind, SSYN_MANUAL);
    parsed_free(&p);
    assert_int_equal(sharding_of("{unknown shard_as 1}", &p)->kind, SSYN_UNKNOWN);
    parsed_free(&p);
    assert_int_equal(sharding_of("{unreduced}", &p)->kind, SSYN_UNREDUCED);
    parsed_free(&p);
    const ShardingSyntax *s = sharding_of("{maximal device=3 metadata={op_name=\"x\"}}", &p);
    assert_int_equal(s->kind, SSYN_MAXIMAL);
    assert_int_equal(s->device, 3);
    assert_int_equal(s->span.begin.line, 3);
    assert_int_equal(s->span.begin.col, 44);
    parsed_free(&p);
}

static void test_sharding_explicit_devices(void **state)
{
    (void)state;
    Parsed p;
    const ShardingSyntax *s = sharding_of("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}", &p);
    assert_int_equal(s->kind, SSYN_TILED);
    assert_int_equal(s->n_tile_dims, 3);
    assert_true(s->tile_dims[0] == 2 && s->tile_dims[1] == 1 && s->tile_dims[2] == 2);
    assert_int_equal(s->n_iota_dims, 0);
    assert_int_equal(s->n_devices, 4);
    static const int64_t want[] = {0, 2, 1, 3};
    assert_memory_equal(s->devices, want, sizeof want);
    assert_true(s->last_tile_dim_replicate);
    parsed_free(&p);
}

static void test_sharding_iota(void **state)
{
    (void)state;
    Parsed p;
    const ShardingSyntax *s = sharding_of("{devices=[4,2]<=[8]}", &p);
    assert_int_equal(s->kind, SSYN_TILED);
    assert_int_equal(s->n_tile_dims, 2);
    assert_int_equal(s->n_iota_dims, 1);
    assert_int_equal(s->iota_dims[0], 8);
    assert_false(s->has_perm);
    assert_int_equal(s->n_devices, 0);
    parsed_free(&p);
    s = sharding_of("{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}", &p);
    assert_int_equal(s->n_tile_dims, 4);
    assert_int_equal(s->n_iota_dims, 3);
    assert_true(s->has_perm);
    assert_true(s->iota_perm[0] == 0 && s->iota_perm[1] == 2 && s->iota_perm[2] == 1);
    assert_int_equal(s->n_subgroups, 2);
    assert_int_equal(s->subgroups[0], SUBGROUP_MANUAL);
    assert_int_equal(s->subgroups[1], SUBGROUP_REPLICATED);
    assert_false(s->last_tile_dim_replicate);
    parsed_free(&p);
}

static void test_sharding_tuple(void **state)
{
    (void)state;
    Parsed p = parse_ok(entry("  ROOT a = (f32[8], (s32[], f32[2])) parameter(0), sharding={{replicated}, "
                              "{maximal device=1}, /*index=2*/ {devices=[2]<=[2]}}\n"
                              "  b = () parameter(1), sharding={}"));
    const ShardingSyntax *s = find(p.m, "e", "a")->sharding_src;
    assert_int_equal(s->kind, SSYN_TUPLE);
    assert_int_equal(s->n_elems, 3);
    assert_int_equal(s->elems[0].kind, SSYN_REPLICATED);
    assert_int_equal(s->elems[1].kind, SSYN_MAXIMAL);
    assert_int_equal(s->elems[1].device, 1);
    assert_int_equal(s->elems[2].kind, SSYN_TILED);
    assert_int_equal(s->elems[2].span.begin.col, 108);
    const ShardingSyntax *e = find(p.m, "e", "b")->sharding_src;
    assert_int_equal(e->kind, SSYN_TUPLE);
    assert_int_equal(e->n_elems, 0);
    parsed_free(&p);
}

static void test_sharding_named(void **state)
{
    (void)state;
    Parsed p;
    const ShardingSyntax *s = sharding_of("{mesh[x=2,y=4], [{y}, {x, ?}], replicated={}, unreduced={}}", &p);
    assert_int_equal(s->kind, SSYN_NAMED);
    assert_int_equal(s->n_mesh_axes, 2);
    assert_string_equal(s->mesh_axis_names[0], "x");
    assert_int_equal(s->mesh_axis_sizes[1], 4);
    assert_int_equal(s->n_dims, 2);
    assert_int_equal(s->dim_n_axes[0], 1);
    assert_string_equal(s->dim_axes[0][0].name, "y");
    assert_int_equal(s->dim_axes[0][0].pre_size, 0);
    assert_int_equal(s->dim_axes[0][0].size, 4);
    assert_int_equal(s->dim_n_axes[1], 1);
    assert_string_equal(s->dim_axes[1][0].name, "x");
    assert_int_equal(s->open_dims, 2);
    assert_int_equal(s->n_replicated_axes, 0);
    parsed_free(&p);
    s = sharding_of("{mesh[x=8,y=2], [{x:(2)2}, {}], replicated={y}, manual={x:(1)2}}", &p);
    assert_int_equal(s->dim_axes[0][0].pre_size, 2);
    assert_int_equal(s->dim_axes[0][0].size, 2);
    assert_int_equal(s->dim_n_axes[1], 0);
    assert_int_equal(s->n_replicated_axes, 1);
    assert_string_equal(s->replicated_axes[0].name, "y");
    assert_int_equal(s->n_manual_axes, 1);
    assert_int_equal(s->manual_axes[0].pre_size, 1);
    parsed_free(&p);
    s = sharding_of("{mesh[x=2], replicated}", &p);
    assert_int_equal(s->kind, SSYN_NAMED);
    assert_true(s->named_replicated);
    assert_int_equal(s->n_dims, 0);
    parsed_free(&p);
    /* XLA 0.10 spells axis names quoted, with either quote. */
    s = sharding_of("{mesh['data'=2,\"model\"=4], [{'model'}, {\"data\":(1)2}]}", &p);
    assert_int_equal(s->kind, SSYN_NAMED);
    assert_string_equal(s->mesh_axis_names[0], "data");
    assert_string_equal(s->mesh_axis_names[1], "model");
    assert_int_equal(s->mesh_axis_sizes[1], 4);
    assert_string_equal(s->dim_axes[0][0].name, "model");
    assert_string_equal(s->dim_axes[1][0].name, "data");
    assert_int_equal(s->dim_axes[1][0].pre_size, 1);
    assert_int_equal(s->dim_axes[1][0].size, 2);
    parsed_free(&p);
    s = sharding_of("{maximal_mesh[device_id=3]}", &p);
    assert_int_equal(s->kind, SSYN_MAXIMAL);
    assert_int_equal(s->device, 3);
    parsed_free(&p);
}

static void expect_sharding_error(const char *sharding, const char *want)
{
    char body[1024];
    snprintf(body, sizeof body, "  ROOT a = f32[8,8] parameter(0), sharding=%s", sharding);
    expect_errors(entry(body), want);
}

static void test_sharding_errors(void **state)
{
    (void)state;
    expect_sharding_error("{devices=[2,4]<=[4,2]}",
                          "t.hlo:3:60: error: an iota source with 2 dimensions needs a transpose: write T(...) "
                          "after '[...]', e.g. T(1,0)\n");
    expect_sharding_error("{devices=[2,2]0,1,2}", "t.hlo:3:53: error: devices=[...] needs 4 device ids, but 3 are "
                                                  "listed\n");
    expect_sharding_error("{devices=[2,2]<=[8]}",
                          "t.hlo:3:60: error: iota source has 8 devices but the tile dimensions need 4\n");
    expect_sharding_error("{devices=[2,2]<=[2,2]T(0,0)}", "t.hlo:3:69: error: T(...) must be a permutation of 0..1\n");
    expect_sharding_error("{maximal}", "t.hlo:3:45: error: 'maximal' needs a device, like {maximal device=0}\n");
    expect_sharding_error("{replicated devices=[2]0,1}",
                          "t.hlo:3:56: error: 'replicated' cannot be combined with devices=[...]\n");
    expect_sharding_error("{devices=[1]0}",
                          "t.hlo:3:53: error: a tiled sharding needs at least 2 devices; use {maximal device=N}\n");
    expect_sharding_error("{last_tile_dim_replicate}",
                          "t.hlo:3:45: error: 'last_tile_dim_replicate' needs devices=[...]\n");
    expect_sharding_error("{foo}", "t.hlo:3:45: error: unexpected identifier 'foo' in sharding\n");
    expect_sharding_error("{{replicated}, {{replicated}}}",
                          "t.hlo:3:59: error: nested tuple shardings are not allowed: list one sharding per leaf, "
                          "flat\n");
    expect_sharding_error("{mesh[x=2,y=4], [{x},{z}]}", "t.hlo:3:66: error: axis 'z' is not in the sharding's mesh\n");
    expect_sharding_error("{mesh[x=2], [{x},{x}]}", "t.hlo:3:62: error: axis 'x' is used twice in one sharding\n");
    expect_sharding_error("{mesh[x=8], [{x:(3)2}]}",
                          "t.hlo:3:58: error: sub-axis x:(3)2 does not fit axis 'x' of size 8\n");
    expect_sharding_error("{mesh[x=2], [{?, x}]}", "t.hlo:3:58: error: '?' must come last in a dimension sharding\n");
    expect_sharding_error("replicated",
                          "t.hlo:3:44: error: attribute 'sharding' expects a sharding like {replicated} or "
                          "{devices=[2,1]0,1}, found identifier 'replicated'\n");
}

/* ---------------------------------------------------------------- name errors and syntax */

static void test_name_errors(void **state)
{
    (void)state;
    expect_errors(entry("  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, c)"),
                  "t.hlo:4:26: error: undefined operand 'c': no instruction of that name in computation 'e'\n");
    expect_errors(entry("  ROOT b = f32[2] negate(a)\n  a = f32[2] parameter(0)"),
                  "t.hlo:3:26: error: operand 'a' is used before its definition\nt.hlo:4:3: note: 'a' is defined "
                  "here\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  %a = f32[2] parameter(1)"),
                  "t.hlo:4:3: error: duplicate instruction name 'a' in computation 'e'\n"
                  "t.hlo:3:3: note: 'a' is first defined here\n");
    expect_errors(entry("  ROOT a = f32[2] parameter(0)\n  ROOT b = f32[2] parameter(1)"),
                  "t.hlo:4:3: error: computation 'e' has more than one ROOT\nt.hlo:3:3: note: the first ROOT is "
                  "here\n");
    expect_errors("ENTRY a {\n  x = f32[] parameter(0)\n}\nENTRY b {\n  y = f32[] parameter(0)\n}\n",
                  "t.hlo:4:1: error: more than one ENTRY computation\nt.hlo:1:1: note: the first ENTRY is here\n");
    expect_errors("c {\n  x = f32[] parameter(0)\n}\nc {\n  y = f32[] parameter(0)\n}\n",
                  "t.hlo:4:1: error: duplicate computation name 'c'\nt.hlo:1:1: note: 'c' is first defined here\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] frobnicate(a)"),
                  "t.hlo:4:14: error: unknown opcode 'frobnicate'\n");
    expect_errors("HloModule m\nENTRY e {\n}\n", "t.hlo:2:1: error: computation 'e' has no instructions\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b = f32[2] add(a, f32[] mul(a, a))"),
                  "t.hlo:4:21: error: nested instructions are not supported as operands: give 'mul(...)' its own "
                  "instruction\n");
    /* a parameter list that disagrees is a warning (XLA's parser ignores it), the result must agree */
    Parsed sig = parse("HloModule m\nENTRY e (p: f32[3]) -> f32[2] {\n  ROOT a = f32[2] parameter(0)\n}\n");
    assert_non_null(sig.m);
    assert_string_equal(diag_text(sig.diag), "t.hlo:2:10: warning: the signature declares parameter 0 as f32[3] but "
                                             "'a' is f32[2]; 'a' keeps its own shape (XLA's parser ignores the "
                                             "parameter list too)\n");
    parsed_free(&sig);
    expect_errors("HloModule m\nENTRY e (arg_tuple.1: ()) -> f32[3] {\n  ROOT a = bf16[2] parameter(0)\n}\n",
                  "t.hlo:2:10: warning: the signature declares parameter 0 as () but 'a' is bf16[2]; 'a' keeps its "
                  "own shape (XLA's parser ignores the parameter list too)\nt.hlo:2:30: error: the signature declares "
                  "the result as f32[3] but the root 'a' is bf16[2]\n");
    expect_errors("HloModule m, num_partitions=0\nENTRY e {\n  ROOT a = f32[2] parameter(0)\n}\n",
                  "t.hlo:1:29: error: num_partitions= expects a device count between 1 and 65536, found integer "
                  "'0'\n");
}

static void test_syntax_errors(void **state)
{
    (void)state;
    expect_errors(entry("  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, )"),
                  "t.hlo:4:26: error: unexpected ')', expected a value\n");
    expect_errors(entry("  a = f32[2] parameter(0)\n  b f32[2] copy(a)"),
                  "t.hlo:4:5: error: unexpected element type 'f32', expected '='\n");
    expect_errors(entry("  a=f32[2] parameter(0)"),
                  "t.hlo:3:3: error: unexpected attribute name 'a=', expected '}' or an instruction\n"
                  "t.hlo:3:3: note: 'name=' reads as an attribute name; an instruction needs a space before '=' "
                  "('name = ...')\n");
    expect_errors("HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n",
                  "t.hlo:3:26: error: unexpected end of file, expected ',', '}' or an instruction\n"
                  "t.hlo:2:9: note: '{' opened here is never closed\n");
    expect_errors("", "t.hlo:1:1: error: empty input: expected 'HloModule' or a computation\n");
    expect_errors("HloModule m\n", "t.hlo:1:11: error: module 'm' has no computations\n");
    /* One error per bad instruction: the parser resynchronises at the next one. */
    expect_errors(entry("  a = f32[2] parameter(0))\n  b = f32[2] copy(a)\n  c = f32[2] copy(a]"),
                  "t.hlo:3:26: error: unexpected ')', expected ',', '}' or an instruction\n"
                  "t.hlo:2:9: note: '{' opened here is still open\n"
                  "t.hlo:5:20: error: unexpected ']', expected ',', ')' or a value\n"
                  "t.hlo:5:18: note: '(' opened here is still open\n");
}

static void test_nul_and_limits(void **state)
{
    (void)state;
    const char text[] = "HloModule m\nENTRY e {\n  a\0 = f32[] parameter(0)\n}\n";
    DiagEngine *d = diag_create(NULL);
    diag_set_show_source(d, false);
    uint32_t fid = diag_add_file(d, "t.hlo", text, sizeof text - 1);
    assert_null(parse_hlo(text, sizeof text - 1, fid, d));
    assert_string_equal(diag_text(d), "t.hlo:3:4: error: NUL byte in the input (HLO text must not contain NUL)\n");
    diag_destroy(d);
    /* Text need not be NUL-terminated: parse a prefix of a longer buffer. */
    const char *full = "ENTRY e {\n  a = f32[] parameter(0)\n}\ngarbage here";
    d = diag_create(NULL);
    size_t len = strlen(full) - strlen("garbage here");
    fid = diag_add_file(d, "t.hlo", full, len);
    HloModule *m = parse_hlo(full, len, fid, d);
    assert_non_null(m);
    hlo_module_free(m);
    diag_destroy(d);
}

static void test_error_excerpt(void **state)
{
    (void)state;
    const char *text = "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT b = f32[2] add(a, zz)\n}\n";
    DiagEngine *d = diag_create(NULL);
    uint32_t fid = diag_add_file(d, "dir/t.hlo", text, strlen(text));
    assert_null(parse_hlo(text, strlen(text), fid, d));
    assert_string_equal(diag_text(d),
                        "dir/t.hlo:4:26: error: undefined operand 'zz': no instruction of that name in computation "
                        "'e'\n    ROOT b = f32[2] add(a, zz)\n                           ^~\n");
    diag_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_example),
        cmocka_unit_test(test_verbose_style),
        cmocka_unit_test(test_no_header_last_computation_is_entry),
        cmocka_unit_test(test_instruction_array_reserved),
        cmocka_unit_test(test_header_attrs_kept_verbatim),
        cmocka_unit_test(test_stack_frame_sections_skipped),
        cmocka_unit_test(test_execution_thread_and_comments),
        cmocka_unit_test(test_inferred_shapes),
        cmocka_unit_test(test_shapes_and_layouts),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_constants),
        cmocka_unit_test(test_constant_errors),
        cmocka_unit_test(test_dot_conv_window_attrs),
        cmocka_unit_test(test_dim_labels_permuted),
        cmocka_unit_test(test_slice_pad_gather_scatter_attrs),
        cmocka_unit_test(test_collective_attrs),
        cmocka_unit_test(test_control_flow_attrs),
        cmocka_unit_test(test_raw_attrs_verbatim),
        cmocka_unit_test(test_attribute_errors),
        cmocka_unit_test(test_sharding_simple_kinds),
        cmocka_unit_test(test_sharding_explicit_devices),
        cmocka_unit_test(test_sharding_iota),
        cmocka_unit_test(test_sharding_tuple),
        cmocka_unit_test(test_sharding_named),
        cmocka_unit_test(test_sharding_errors),
        cmocka_unit_test(test_name_errors),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_nul_and_limits),
        cmocka_unit_test(test_error_excerpt),
    };
    /* every case twice: as the inputs are (small: scanned on the parser's
     * thread), then with every input scanned on a thread of its own */
    int failed = cmocka_run_group_tests_name("parse", tests, NULL, NULL);
    parse_set_thread_min(1);
    failed += cmocka_run_group_tests_name("parse, scanner on its own thread", tests, NULL, NULL);
    return failed;
}
