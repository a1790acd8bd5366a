/* oprule_test.c - the op-rule registry (src/oprule.c): every opcode of
 * hlo_opcodes.def has a rule, the factors of each op family are the ones
 * docs/op-rules.md gives, projections between tilings and factor shardings
 * are exact (reshape splits and merges, compound dims, uneven single-factor
 * dims), and the opcode algebra closes pending sums exactly where an op is
 * not linear in them in the same element type.
 *
 * Modules are written as HLO text and loaded through the front end with a
 * mesh (`a=2,b=2`: atoms a0=0, b0=1; `model=8`: atoms 0, 1, 2).
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
#include "spmdc/hlo.h"
#include "spmdc/oprule.h"
#include "spmdc/propagate.h"

typedef struct Loaded {
    DiagEngine *diag;
    HloModule *m;
    Arena *arena;
    int32_t entry;
} Loaded;

static Loaded load(const char *text, const char *mesh)
{
    Loaded l;
    memset(&l, 0, sizeof l);
    l.diag = diag_create(NULL);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    char err[200];
    assert_true(mesh_parse_spec(mesh, &opt.mesh, err, sizeof err));
    opt.has_mesh = true;
    l.arena = arena_create();
    PassCtx cx = {l.arena, l.diag, &opt};
    uint32_t fid = diag_add_file(l.diag, "t.hlo", text, strlen(text));
    l.m = driver_load_module(text, strlen(text), fid, &cx, false);
    if (!l.m)
        fail_msg("load failed: %s", diag_text(l.diag));
    l.entry = l.m->entry;
    return l;
}

static void unload(Loaded *l)
{
    hlo_module_free(l->m);
    arena_destroy(l->arena);
    diag_destroy(l->diag);
}

static int32_t find(const Loaded *l, const char *name)
{
    int32_t i = hlo_find_inst(l->m, l->entry, name);
    assert_true(i >= 0);
    return i;
}

/* The rule of `name`, written as an einsum-like string: tensors separated by
 * ", " (operands) and " -> " (results), dims as factor letters (a = factor
 * 0), a compound dim in parentheses, a scalar as "_"; then " |" and each
 * factor's kind letter (p pass, r reduction, n need-replication, m
 * permutation, w window). */
static void rule_text(const OpRule *r, char *buf, size_t cap)
{
    size_t n = 0;
    for (int32_t k = 0; k < r->n_in + r->n_out; k++) {
        const char *sep = k == 0 ? "" : k == r->n_in ? " -> " : ", ";
        n += (size_t)snprintf(buf + n, cap - n, "%s", sep);
        if (r->t[k].rank == 0)
            n += (size_t)snprintf(buf + n, cap - n, "_");
        for (int32_t d = 0; d < r->t[k].rank; d++) {
            int32_t nf = oprule_dim_n(r, k, d);
            if (nf > 1)
                n += (size_t)snprintf(buf + n, cap - n, "(");
            for (int32_t j = 0; j < nf; j++)
                n += (size_t)snprintf(buf + n, cap - n, "%c", 'a' + oprule_dim_factor(r, k, d, j));
            if (nf > 1)
                n += (size_t)snprintf(buf + n, cap - n, ")");
        }
    }
    n += (size_t)snprintf(buf + n, cap - n, " |");
    for (int32_t f = 0; f < r->n_factors; f++)
        n += (size_t)snprintf(buf + n, cap - n, "%c", "prnmw"[r->factors[f].kind]);
}

static void expect_rule(const Loaded *l, const char *name, const char *want)
{
    OpRule r;
    Arena *a = arena_create();
    if (!oprule_build(l->m, l->entry, find(l, name), a, &r))
        fail_msg("%s: no rule", name);
    char buf[512];
    rule_text(&r, buf, sizeof buf);
    arena_destroy(a);
    if (strcmp(buf, want) != 0)
        fail_msg("%s: rule %s, want %s", name, buf, want);
}

/* ================================================================ coverage */

/* Every opcode of hlo_opcodes.def has a registry entry (a rule or a class
 * that says who handles it). */
static void test_every_opcode_has_a_rule(void **state)
{
    (void)state;
    for (int op = 0; op < HLO_OPCODE_COUNT; op++)
        if (!oprule_name((HloOpcode)op))
            fail_msg("opcode '%s' has no entry in the op-rule registry", hlo_opcode_name((HloOpcode)op));
}

/* ================================================================ families */

static const char *FAMILIES =
    "HloModule m\n"
    "%add (x: f32[], y: f32[]) -> f32[] {\n"
    "  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n"
    "%max (x: f32[], y: f32[]) -> f32[] {\n"
    "  %x = f32[] parameter(0)\n  %y = f32[] parameter(1)\n  ROOT %s = f32[] maximum(%x, %y)\n}\n"
    "ENTRY %main {\n"
    "  %x = f32[8,16] parameter(0)\n"
    "  %w = f32[16,32] parameter(1)\n"
    "  %z = f32[] constant(0)\n"
    "  %e = f32[8,16] add(%x, %x)\n"
    "  %d = f32[8,32] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  %bd = f32[4,8,32] parameter(2)\n"
    "  %be = f32[4,32,16] parameter(3)\n"
    "  %bdot = f32[4,8,16] dot(%bd, %be), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
    "rhs_contracting_dims={1}\n"
    "  %r = f32[2,4,16] reshape(%x)\n"
    "  %m = f32[128] reshape(%x)\n"
    "  %q = f32[16,8] reshape(%x)\n"
    "  %t = f32[16,8] transpose(%x), dimensions={1,0}\n"
    "  %b = f32[4,8,16] broadcast(%x), dimensions={1,2}\n"
    "  %red = f32[8] reduce(%x, %z), dimensions={1}, to_apply=%add\n"
    "  %mx = f32[16] reduce(%x, %z), dimensions={0}, to_apply=%max\n"
    "  %sl = f32[8,4] slice(%x), slice={[0:8], [2:6]}\n"
    "  %cat = f32[16,16] concatenate(%x, %x), dimensions={0}\n"
    "  %rev = f32[8,16] reverse(%x), dimensions={0}\n"
    "  %pd = f32[8,18] pad(%x, %z), padding=0_0x1_1\n"
    "  %rw = f32[8,8] reduce-window(%x, %z), window={size=1x2 stride=1x2}, to_apply=%add\n"
    "  %img = f32[2,10,10,4] parameter(4)\n"
    "  %k = f32[3,3,4,6] parameter(5)\n"
    "  %conv = f32[2,8,8,6] convolution(%img, %k), window={size=3x3}, dim_labels=b01f_01io->b01f\n"
    "  %dk = f32[3,3,1,4] parameter(6)\n"
    "  %dw = f32[2,8,8,4] convolution(%img, %dk), window={size=3x3}, dim_labels=b01f_01io->b01f, "
    "feature_group_count=4\n"
    "  %tab = f32[100,16] parameter(7)\n"
    "  %ids = s32[8] parameter(8)\n"
    "  %emb = f32[8,16] gather(%tab, %ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
    "index_vector_dim=1, slice_sizes={1,16}\n"
    "  %srt = f32[8,16] sort(%x), dimensions={1}, to_apply=%lt\n"
    "  %io = s32[8,16] iota(), iota_dimension=1\n"
    "}\n";

static void test_factor_rules(void **state)
{
    (void)state;
    /* sort needs a comparator: add it before the entry */
    const char *lt = "%lt (a: f32[], b: f32[]) -> pred[] {\n"
                     "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                     "  ROOT %c = pred[] compare(%a, %b), direction=LT\n}\n";
    char text[8192];
    const char *entry = strstr(FAMILIES, "ENTRY");
    snprintf(text, sizeof text, "%.*s%s%s", (int)(entry - FAMILIES), FAMILIES, lt, entry);
    Loaded l = load(text, "a=2,b=2");
    expect_rule(&l, "e", "ab, ab -> ab |pp");
    /* m k, k n -> m n: k (factor 0 here) reduces */
    expect_rule(&l, "d", "ba, ac -> bc |rpp");
    expect_rule(&l, "bdot", "acb, abd -> acd |prpp");
    /* [8,16] -> [2,4,16]: dim 0 splits into factors of 2 and 4 */
    expect_rule(&l, "r", "(ab)c -> abc |ppp");
    expect_rule(&l, "m", "ab -> (ab) |pp");
    /* [8,16] -> [16,8]: 8 and 16 cut at their gcd, then 2x8 -> 8 cut again */
    expect_rule(&l, "q", "a(bc) -> (ab)c |ppp");
    expect_rule(&l, "t", "ab -> ba |pp");
    expect_rule(&l, "b", "bc -> abc |ppp");
    expect_rule(&l, "red", "ab, _ -> a |pr");
    expect_rule(&l, "mx", "ab, _ -> b |rp");
    expect_rule(&l, "sl", "ab -> ab |pm");
    expect_rule(&l, "cat", "ab, ab -> ab |mp");
    expect_rule(&l, "rev", "ab -> ab |mp");
    expect_rule(&l, "pd", "ab, _ -> ab |pm");
    expect_rule(&l, "rw", "ab, _ -> ab |pw");
    /* b01f_01io->b01f: batch, channels c (reduction), out channels, spatial windows;
     * kernel spatial dims stay whole */
    expect_rule(&l, "conv", "adfb, egbc -> adfc |prpwnwn");
    /* depthwise: the feature dim is (group, channel), the kernel's output dim (group, out) */
    expect_rule(&l, "dw", "aeg(bc), fhc(bd) -> aeg(bd) |pprpwnwn");
    expect_rule(&l, "emb", "bc, a -> ac |pnp");
    expect_rule(&l, "srt", "ab -> ab |pn");
    expect_rule(&l, "io", "ab |pp");
    unload(&l);
}

/* The user's collectives: operand k and result leaf k share a pass-through
 * factor per dim; the dims they move data along are need-replication on
 * both sides (an all-gather's dim grows, a reduce-scatter's shrinks). */
static void test_collective_rules(void **state)
{
    (void)state;
    Loaded l = load("HloModule m, num_partitions=4\n"
                    "%add (a: f32[], b: f32[]) -> f32[] {\n"
                    "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(%a, %b)\n}\n"
                    "ENTRY %main {\n"
                    "  %x = f32[8,16] parameter(0)\n"
                    "  %y = f32[4] parameter(1)\n"
                    "  %ar = (f32[8,16], f32[4]) all-reduce(%x, %y), channel_id=1, replica_groups={{0,1},{2,3}}, "
                    "use_global_device_ids=true, to_apply=%add\n"
                    "  %ag = f32[8,32] all-gather(%x), channel_id=2, replica_groups={{0,1},{2,3}}, dimensions={1}, "
                    "use_global_device_ids=true\n"
                    "  %rs = f32[4,16] reduce-scatter(%x), channel_id=3, replica_groups={{0,1},{2,3}}, "
                    "dimensions={0}, use_global_device_ids=true, to_apply=%add\n"
                    "  %a2a = f32[8,16] all-to-all(%x), channel_id=4, replica_groups={{0,1},{2,3}}, dimensions={0}\n"
                    "  %cp = f32[8,16] collective-permute(%x), channel_id=5, source_target_pairs={{0,1},{1,0}}\n"
                    "  ROOT %t = (f32[8,32], f32[4,16], f32[8,16], f32[8,16]) tuple(%ag, %rs, %a2a, %cp)\n"
                    "}\n",
                    "a=2,b=2");
    expect_rule(&l, "ar", "ab, c -> ab, c |ppp");
    expect_rule(&l, "ag", "ab -> ac |pnn");
    expect_rule(&l, "rs", "ab -> cb |npn");
    expect_rule(&l, "a2a", "ab -> cb |npn");
    expect_rule(&l, "cp", "ab -> ab |pp");
    unload(&l);
}

/* ================================================================ projections */

static Tiling tl(int32_t rank, const char *runs)
{
    /* runs: per dim a run of atom digits, dims separated by '|': "01|" */
    Tiling t;
    tiling_replicated(&t, rank);
    int32_t d = 0;
    int8_t a[SPMDC_MAX_ATOMS];
    int32_t n = 0;
    for (const char *p = runs;; p++) {
        if (*p == '|' || *p == 0) {
            tiling_set_dim(&t, d++, a, n);
            n = 0;
            if (!*p)
                break;
        } else {
            a[n++] = (int8_t)(*p - '0');
        }
    }
    return t;
}

static void expect_tiling(const Tiling *got, const Tiling *want, const char *what)
{
    if (!tiling_equal(got, want)) {
        StrBuf b = {0}, c = {0};
        Mesh m;
        char err[100];
        assert_true(mesh_parse_spec("a=2,b=2,c=2", &m, err, sizeof err));
        tiling_describe(&b, got, &m);
        tiling_describe(&c, want, &m);
        fail_msg("%s: got %s, want %s", what, sb_cstr(&b), sb_cstr(&c));
    }
}

/* Projects tiling `from` of tensor k through the rule onto tensor j. */
static bool through(const Loaded *l, const char *name, int32_t k, const Tiling *from, int32_t j, Tiling *out,
                    uint32_t *unfit)
{
    OpRule r;
    Arena *a = arena_create();
    assert_true(oprule_build(l->m, l->entry, find(l, name), a, &r));
    FactorSharding fs;
    oprule_tiling_to_factors(&r, k, from, &l->m->mesh, &fs, unfit);
    bool ok = oprule_factors_to_tiling(&r, j, &fs, &l->m->mesh, out, NULL);
    arena_destroy(a);
    return ok;
}

static void test_reshape_projections(void **state)
{
    (void)state;
    Loaded l = load("HloModule m\n"
                    "ENTRY %main {\n"
                    "  %x = f32[8,16] parameter(0)\n"
                    "  %r = f32[2,4,16] reshape(%x)\n"
                    "  %s = f32[6,4] parameter(1)\n"
                    "  %u = f32[4,6] reshape(%s)\n"
                    "  %y = f32[7,16] parameter(2)\n"
                    "  %n = f32[7,16] negate(%y)\n"
                    "}\n",
                    "a=2,b=2,c=2");
    Tiling got, want;
    uint32_t unfit;
    /* [8,16] split [{a,b},{}] -> [2,4,16]: a takes the factor of 2, b a part of 4: [{a},{b},{}] */
    Tiling ab = tl(2, "01|");
    assert_true(through(&l, "r", 0, &ab, 1, &got, &unfit));
    want = tl(3, "0|1|");
    expect_tiling(&got, &want, "split");
    assert_int_equal(unfit, 0);
    /* and back: the merge is exact */
    assert_true(through(&l, "r", 1, &want, 0, &got, &unfit));
    expect_tiling(&got, &ab, "merge");
    /* [{},{a},{}] (the minor factor split while the major one is whole) is no tiling of the merged dim */
    Tiling minor = tl(3, "|0|");
    assert_false(through(&l, "r", 1, &minor, 0, &got, &unfit));
    /* [{a,b,c},{}]: 8 = 2 x 4: a fills the 2, b and c the 4 -> [{a},{b,c},{}] */
    Tiling abc = tl(2, "012|");
    assert_true(through(&l, "r", 0, &abc, 1, &got, &unfit));
    want = tl(3, "0|12|");
    expect_tiling(&got, &want, "three atoms");
    /* [6,4] -> [4,6]: 6 = 2 x 3 and 4 = 2 x 2 cut at 2, then 3 and 2 are coprime: only the 2 may split */
    Tiling s0 = tl(2, "0|");
    assert_true(through(&l, "u", 0, &s0, 1, &got, &unfit));
    want = tl(2, "0|");
    expect_tiling(&got, &want, "gcd part");
    Tiling s01 = tl(2, "01|");
    through(&l, "u", 0, &s01, 1, &got, &unfit);
    assert_int_equal(unfit, 1); /* b cannot split the coprime rest of dim 0 */
    want = tl(2, "0|");
    expect_tiling(&got, &want, "coprime rest dropped");
    /* a single-factor dim of 7 takes 4 tiles (uneven: shards of 2, the last one padding) */
    Tiling y = tl(2, "01|");
    assert_true(through(&l, "n", 0, &y, 1, &got, &unfit));
    expect_tiling(&got, &y, "uneven");
    assert_int_equal(unfit, 0);
    unload(&l);
}

/* ================================================================ algebra */

static void test_partial_algebra(void **state)
{
    (void)state;
    Loaded l = load("HloModule m\n"
                    "%add8 (a: s8[], b: s8[]) -> s8[] {\n"
                    "  %a = s8[] parameter(0)\n  %b = s8[] parameter(1)\n  ROOT %s = s8[] add(%a, %b)\n}\n"
                    "ENTRY %main {\n"
                    "  %x = f32[8] parameter(0)\n"
                    "  %y = f32[8] parameter(1)\n"
                    "  %i = s32[8] parameter(2)\n"
                    "  %j = s32[8] parameter(3)\n"
                    "  %h = s8[4,8] parameter(4)\n"
                    "  %w = s8[8,2] parameter(5)\n"
                    "  %f = f16[4,8] parameter(6)\n"
                    "  %g = f16[8,2] parameter(7)\n"
                    "  %add = f32[8] add(%x, %y)\n"
                    "  %mul = f32[8] multiply(%x, %y)\n"
                    "  %fdiv = f32[8] divide(%x, %y)\n"
                    "  %idiv = s32[8] divide(%i, %j)\n"
                    "  %neg = f32[8] negate(%x)\n"
                    "  %mx = f32[8] maximum(%x, %y)\n"
                    "  %cv = s32[8] convert(%x)\n"
                    "  %ex = f32[8] exponential(%x)\n"
                    "  %wide = s32[4,2] dot(%h, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                    "  %same = s8[4,2] dot(%h, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                    "  %half = f32[4,2] dot(%f, %g), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                    "  %z8 = s8[] constant(0)\n"
                    "  %one8 = s8[] constant(1)\n"
                    "  %r0 = s8[4] reduce(%h, %z8), dimensions={1}, to_apply=%add8\n"
                    "  %r1 = s8[4] reduce(%h, %one8), dimensions={1}, to_apply=%add8\n"
                    "}\n",
                    "4");
    const HloModule *m = l.m;
    int32_t e = l.entry;
#define PASSES(nm, k, car) op_partial_passes(m, e, find(&l, nm), k, car)
    assert_true(PASSES("add", REDUCE_SUM, 3));
    assert_false(PASSES("add", REDUCE_SUM, 1));  /* sum(a) + b: b would be added n times */
    assert_true(PASSES("mul", REDUCE_SUM, 1));
    assert_false(PASSES("mul", REDUCE_SUM, 3));  /* sum(a) * sum(b) is not sum(a * b) */
    assert_true(PASSES("fdiv", REDUCE_SUM, 1));
    assert_false(PASSES("fdiv", REDUCE_SUM, 2)); /* a / sum(b) */
    assert_false(PASSES("idiv", REDUCE_SUM, 1)); /* integer division rounds every share */
    assert_true(PASSES("neg", REDUCE_SUM, 1));
    assert_false(PASSES("mx", REDUCE_SUM, 3));
    assert_true(PASSES("mx", REDUCE_MAX, 3));
    assert_false(PASSES("cv", REDUCE_SUM, 1));   /* a convert closes the sum */
    assert_false(PASSES("ex", REDUCE_SUM, 1));
    assert_false(PASSES("wide", REDUCE_SUM, 1)); /* s8 x s8 -> s32: the s8 sum would not wrap */
    assert_true(PASSES("same", REDUCE_SUM, 1));
    assert_false(PASSES("half", REDUCE_SUM, 1)); /* f16 -> f32 */
    assert_true(PASSES("r0", REDUCE_SUM, 1));
    assert_false(PASSES("r1", REDUCE_SUM, 1));   /* init 1 would be counted n times */
    assert_false(PASSES("r0", REDUCE_MAX, 1));   /* another reduction */
#undef PASSES
    double id;
    assert_true(reduce_identity(REDUCE_MAX, ET_S8, &id));
    assert_true(id == -128);
    assert_true(reduce_identity(REDUCE_MIN, ET_U16, &id));
    assert_true(id == 65535);
    unload(&l);
}

/* ================================================================ propagation */

/* The op tiers and factor flows propagation follows (Shardy's op-priority
 * schedule: phase 0 pass-through ops, 1 pass-through factors (broadcast
 * backward), 2 everything), and the identity-map query. */
static void test_propagation_flow(void **state)
{
    (void)state;
    Loaded l = load("HloModule m\n"
                    "ENTRY %main {\n"
                    "  %x = f32[8,16] parameter(0)\n"
                    "  %w = f32[16,32] parameter(1)\n"
                    "  %v = f32[16] parameter(2)\n"
                    "  %s = f32[] parameter(3)\n"
                    "  %e = f32[8,16] add(%x, %x)\n"
                    "  %cl = f32[8,16] clamp(%s, %x, %s)\n"
                    "  %d = f32[8,32] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                    "  %b = f32[8,16] broadcast(%v), dimensions={1}\n"
                    "  %i = s32[] parameter(4)\n"
                    "  %z = s32[] constant(0)\n"
                    "  %ds = f32[4,16] dynamic-slice(%x, %i, %z), dynamic_slice_sizes={4,16}\n"
                    "  %t = f32[16,8] transpose(%x), dimensions={1,0}\n"
                    "}\n",
                    "a=2,b=2");
    assert_int_equal(oprule_tier(HLO_ADD), TIER_PASS_OP);
    assert_int_equal(oprule_tier(HLO_TRANSPOSE), TIER_PASS_OP);
    assert_int_equal(oprule_tier(HLO_RESHAPE), TIER_PASS_OP);
    assert_int_equal(oprule_tier(HLO_DYNAMIC_SLICE), TIER_FORWARD_OP);
    assert_int_equal(oprule_tier(HLO_BROADCAST), TIER_BROADCAST);
    assert_int_equal(oprule_tier(HLO_DOT), TIER_NORMAL);
    assert_int_equal(oprule_tier(HLO_TUPLE), TIER_PASS_OP); /* identities are edges */
    OpRule r;
    Arena *a = arena_create();
    bool g, t;
    /* dot b a, a c -> b c (factor 0 the contraction): the contraction flows
     * between the operands in phase 2 only, the free dims from phase 1 */
    assert_true(oprule_build(l.m, l.entry, find(&l, "d"), a, &r));
    oprule_factor_flow(&r, 0, 0, TIER_NORMAL, 0, &g, &t);
    assert_false(g || t);
    oprule_factor_flow(&r, 0, 0, TIER_NORMAL, 1, &g, &t);
    assert_false(g || t);
    oprule_factor_flow(&r, 0, 0, TIER_NORMAL, 2, &g, &t);
    assert_true(g && t);
    oprule_factor_flow(&r, 0, 1, TIER_NORMAL, 1, &g, &t); /* lhs free dim */
    assert_true(g && t);
    oprule_factor_flow(&r, 2, 1, TIER_NORMAL, 0, &g, &t); /* result, phase 0: nothing */
    assert_false(g || t);
    /* broadcast: phase 1 result -> operand only, phase 2 both ways */
    assert_true(oprule_build(l.m, l.entry, find(&l, "b"), a, &r));
    int32_t f1 = oprule_dim_factor(&r, 0, 0, 0); /* the operand's dim: result dim 1 */
    oprule_factor_flow(&r, 0, f1, TIER_BROADCAST, 1, &g, &t);
    assert_true(!g && t);
    oprule_factor_flow(&r, 1, f1, TIER_BROADCAST, 1, &g, &t);
    assert_true(g && !t);
    oprule_factor_flow(&r, 0, f1, TIER_BROADCAST, 2, &g, &t);
    assert_true(g && t);
    /* dynamic-slice: forward from phase 0 (operand gives, result takes);
     * its sliced dim is a permutation factor */
    assert_true(oprule_build(l.m, l.entry, find(&l, "ds"), a, &r));
    int32_t fs = oprule_dim_factor(&r, 0, 0, 0), fp = oprule_dim_factor(&r, 0, 1, 0);
    assert_int_equal(r.factors[fs].kind, FACTOR_PERMUTATION);
    oprule_factor_flow(&r, 0, fp, TIER_FORWARD_OP, 0, &g, &t);
    assert_true(g && !t);
    oprule_factor_flow(&r, 3, fp, TIER_FORWARD_OP, 0, &g, &t);
    assert_true(!g && t);
    oprule_factor_flow(&r, 0, fp, TIER_FORWARD_OP, 1, &g, &t); /* pass-through: both ways from phase 1 */
    assert_true(g && t);
    /* the masks say what the per-factor query says, for every op, tier,
     * phase and side */
    const char *ops[] = {"d", "b", "ds", "t", "e"};
    for (size_t q = 0; q < sizeof ops / sizeof *ops; q++) {
        assert_true(oprule_build(l.m, l.entry, find(&l, ops[q]), a, &r));
        for (int tier = TIER_PASS_OP; tier <= TIER_NORMAL; tier++)
            for (int32_t phase = 0; phase < 3; phase++) {
                uint64_t gm[2], tm[2];
                oprule_flow_masks(&r, (PropTier)tier, phase, gm, tm);
                for (int32_t k = 0; k < r.n_in + r.n_out; k++)
                    for (int32_t f = 0; f < r.n_factors; f++) {
                        oprule_factor_flow(&r, k, f, (PropTier)tier, phase, &g, &t);
                        assert_int_equal(g, (gm[k >= r.n_in] >> f) & 1u);
                        assert_int_equal(t, (tm[k >= r.n_in] >> f) & 1u);
                    }
            }
    }
    arena_destroy(a);
    assert_true(oprule_identity_map(l.m, l.entry, find(&l, "e")));
    assert_true(oprule_identity_map(l.m, l.entry, find(&l, "cl"))); /* scalar bounds */
    assert_false(oprule_identity_map(l.m, l.entry, find(&l, "d")));
    assert_false(oprule_identity_map(l.m, l.entry, find(&l, "b")));
    assert_false(oprule_identity_map(l.m, l.entry, find(&l, "t")));
    unload(&l);
}

/* A permutation that names a dim twice, a broadcast that maps two dims to
 * one: no rule (the verifier rejects both; the registry must not make a
 * factor appear twice in one tensor). */
static void test_malformed_maps_have_no_rule(void **state)
{
    (void)state;
    Loaded l = load("HloModule m\n"
                    "ENTRY %main {\n"
                    "  %x = f32[8,8] parameter(0)\n"
                    "  %v = f32[8] parameter(1)\n"
                    "  %t = f32[8,8] transpose(%x), dimensions={1,0}\n"
                    "  %b = f32[8,8] broadcast(%v), dimensions={0}\n"
                    "}\n",
                    "4");
    OpRule r;
    Arena *a = arena_create();
    HloInst *t = hlo_inst(l.m, l.entry, find(&l, "t"));
    hlo_attrs_mut(l.m, t)->dimensions.v[1] = 1; /* {1,1} */
    assert_false(oprule_build(l.m, l.entry, find(&l, "t"), a, &r));
    HloInst *b = hlo_inst(l.m, l.entry, find(&l, "b"));
    int64_t twice[2] = {0, 0};
    hlo_attrs_mut(l.m, b)->dimensions = hlo_intlist(l.m, twice, 2);
    HloInst *v = hlo_inst(l.m, l.entry, find(&l, "v"));
    Shape vs = *v->shape; /* v: f32[8,8] */
    vs.rank = 2;
    vs.dims[1] = 8;
    v->shape = hlo_shape(l.m, &vs);
    assert_false(oprule_build(l.m, l.entry, find(&l, "b"), a, &r));
    arena_destroy(a);
    unload(&l);
}

/* Reducers of (value, index) pairs: selections (the result is one of the
 * two arguments), and which of them are argmax / argmin by their behaviour
 * on probe pairs (ties to the smaller index, NaN first). */
static void test_arg_reducers(void **state)
{
    (void)state;
#define ARG_REDUCER(name, vt, cmp, nan_first, tie)                                                                 \
    "%" name " (a: " vt "[], ai: s32[], b: " vt "[], bi: s32[]) -> (" vt "[], s32[]) {\n"                         \
    "  %a = " vt "[] parameter(0)\n  %ai = s32[] parameter(1)\n  %b = " vt "[] parameter(2)\n"                     \
    "  %bi = s32[] parameter(3)\n"                                                                                   \
    "  %c = pred[] compare(%a, %b), direction=" cmp "\n"                                                             \
    "  %n = pred[] compare(%a, %a), direction=NE\n"                                                                  \
    "  %p = pred[] or(%c, " nan_first ")\n"                                                                         \
    "  %v = " vt "[] select(%p, %a, %b)\n"                                                                           \
    "  %eq = pred[] compare(%a, %b), direction=EQ\n"                                                                 \
    "  %lt = pred[] compare(%ai, %bi), direction=" tie "\n"                                                          \
    "  %t = pred[] and(%eq, %lt)\n  %q = pred[] or(%p, %t)\n"                                                       \
    "  %w = s32[] select(%q, %ai, %bi)\n  ROOT %r = (" vt "[], s32[]) tuple(%v, %w)\n}\n"
    Loaded l = load("HloModule m\n" ARG_REDUCER("amax", "f32", "GT", "%n", "LT") ARG_REDUCER("amin", "f32", "LT", "%n", "LT")
                        ARG_REDUCER("imax", "s32", "GT", "%n", "LT") ARG_REDUCER("nonan", "f32", "GT", "%c", "LT")
                            ARG_REDUCER("lastidx", "f32", "GT", "%n", "GT")
                    "%sum (a: f32[], ai: s32[], b: f32[], bi: s32[]) -> (f32[], s32[]) {\n"
                    "  %a = f32[] parameter(0)\n  %ai = s32[] parameter(1)\n  %b = f32[] parameter(2)\n"
                    "  %bi = s32[] parameter(3)\n  %s = f32[] add(%a, %b)\n  %t = s32[] add(%ai, %bi)\n"
                    "  ROOT %r = (f32[], s32[]) tuple(%s, %t)\n}\n"
                    "ENTRY %main {\n  ROOT %x = f32[8] parameter(0)\n}\n",
                    "1");
    const char *names[] = {"amax", "amin", "imax", "nonan", "lastidx", "sum"};
    const ReduceKind want[] = {REDUCE_MAX, REDUCE_MIN, REDUCE_MAX, REDUCE_NONE, REDUCE_NONE, REDUCE_NONE};
    const bool sel[] = {true, true, true, true, true, false};
    for (int k = 0; k < 6; k++) {
        int32_t c = hlo_find_computation(l.m, names[k]);
        assert_true(c >= 0);
        if (reducer_arg_kind(l.m, c) != want[k])
            fail_msg("%s: arg kind %d, want %d", names[k], (int)reducer_arg_kind(l.m, c), (int)want[k]);
        assert_int_equal(reducer_is_selection(l.m, c, 2), sel[k]);
    }
    unload(&l);
#undef ARG_REDUCER
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_opcode_has_a_rule),
        cmocka_unit_test(test_factor_rules),
        cmocka_unit_test(test_collective_rules),
        cmocka_unit_test(test_reshape_projections),
        cmocka_unit_test(test_partial_algebra),
        cmocka_unit_test(test_propagation_flow),
        cmocka_unit_test(test_malformed_maps_have_no_rule),
        cmocka_unit_test(test_arg_reducers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
