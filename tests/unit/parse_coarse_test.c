/* parse_coarse_test.c - the parser without LAC (whole shapes, integer lists
 * and instruction heads as one token each) against the LAC parser alone.
 *
 * parse_hlo keeps the first parse's module only when it reported nothing,
 * so the coarse tokens must never make an input the LAC parser rejects
 * pass, nor read one it accepts differently.  For every .hlo file under
 * tests/ and examples/, and for instruction heads with every kind of text
 * right after them or inside them, both parses must give the same
 * messages, the same printed module (shardings, layouts and verbatim
 * attributes included) and the same source span for every computation and
 * instruction, and on input the LAC parser takes without a word the first
 * parse's module must be the one kept; then again with the scanner on a
 * thread of its own.
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
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
#include "spmdc/pass.h"
#include "spmdc/sharding.h"
#include "spmdc/strbuf.h"

typedef struct Parse {
    DiagEngine *d;
    HloModule *m;
    StrBuf text;
} Parse;

static Parse parse_with(const char *text, size_t len, bool fast_first)
{
    Parse p = {diag_create(NULL), NULL, {0}};
    uint32_t fid = diag_add_file(p.d, "t.hlo", text, len);
    parse_set_fast_first(fast_first);
    p.m = parse_hlo(text, len, fid, p.d);
    parse_set_fast_first(true);
    if (p.m) {
        HloPrintOptions all = {true, true, true};
        hlo_print_module(&p.text, p.m, &all);
    }
    return p;
}

static void parse_free(Parse *p)
{
    hlo_module_free(p->m);
    diag_destroy(p->d);
    sb_free(&p->text);
}

static bool same_span(SrcSpan a, SrcSpan b)
{
    return a.begin.line == b.begin.line && a.begin.col == b.begin.col && a.end.line == b.end.line &&
           a.end.col == b.end.col;
}

static bool same_refs(const AxisRefSyntax *a, const AxisRefSyntax *b, int32_t n)
{
    for (int32_t k = 0; k < n; k++)
        if (!same_span(a[k].span, b[k].span)) return false;
    return true;
}

/* The two syntaxes have their spans in the same places (bind's messages point there). */
static bool same_syntax_spans(const ShardingSyntax *a, const ShardingSyntax *b)
{
    if (!a || !b) return a == b;
    if (!same_span(a->span, b->span) || a->kind != b->kind || a->n_dims != b->n_dims || a->n_elems != b->n_elems ||
        !same_refs(a->replicated_axes, b->replicated_axes, a->n_replicated_axes) ||
        !same_refs(a->unreduced_axes, b->unreduced_axes, a->n_unreduced_axes) ||
        !same_refs(a->manual_axes, b->manual_axes, a->n_manual_axes))
        return false;
    for (int32_t d = 0; a->dim_axes && d < a->n_dims; d++)
        if (!same_refs(a->dim_axes[d], b->dim_axes[d], a->dim_n_axes[d])) return false;
    for (int32_t k = 0; k < a->n_elems; k++)
        if (!same_syntax_spans(&a->elems[k], &b->elems[k])) return false;
    return true;
}

/* Both parses of text[0..len), then bound (bind_shardings), agree: the
 * same messages (bind's point into the syntax: the first parse shares one
 * syntax between the instructions of one sharding text and moves its spans
 * only where a message may need them, hlo_sharding_syntax) and the same
 * bound module. */
static void check_bind(const char *what, const char *text, size_t len)
{
    Parse a = parse_with(text, len, true), b = parse_with(text, len, false);
    if (!a.m || !b.m) {
        parse_free(&a);
        parse_free(&b);
        return;
    }
    PassCtx pa = {arena_create(), a.d, NULL}, pb = {arena_create(), b.d, NULL};
    bool oka = bind_shardings(a.m, &pa), okb = bind_shardings(b.m, &pb);
    StrBuf ta = {0}, tb = {0};
    HloPrintOptions all = {true, true, true};
    hlo_print_module(&ta, a.m, &all);
    hlo_print_module(&tb, b.m, &all);
    bool ok = oka == okb && strcmp(diag_text(a.d), diag_text(b.d)) == 0 && strcmp(sb_cstr(&ta), sb_cstr(&tb)) == 0;
    if (!ok)
        fail_msg("%s: bound, the two parsers differ\n--- without LAC first:\n%s%s\n--- LAC alone:\n%s%s", what,
                 diag_text(a.d), sb_cstr(&ta), diag_text(b.d), sb_cstr(&tb));
    sb_free(&ta);
    sb_free(&tb);
    arena_destroy(pa.scratch);
    arena_destroy(pb.scratch);
    parse_free(&a);
    parse_free(&b);
}

/* Both parses of text[0..len) agree; what is the text: for the message. */
static void check_same(const char *what, const char *text, size_t len)
{
    uint64_t kept = parse_fast_kept();
    Parse a = parse_with(text, len, true);
    bool fast = parse_fast_kept() > kept;
    Parse b = parse_with(text, len, false);
    /* an input the LAC parser takes without a word: the first parse's module is kept */
    bool ok = strcmp(diag_text(a.d), diag_text(b.d)) == 0 && (a.m != NULL) == (b.m != NULL) &&
              (fast || !b.m || diag_text(b.d)[0] != 0);
    if (ok && a.m) {
        ok = a.text.len == b.text.len && memcmp(sb_cstr(&a.text), sb_cstr(&b.text), a.text.len) == 0 &&
             a.m->n_comps == b.m->n_comps;
        for (int32_t c = 0; ok && c < a.m->n_comps; c++) {
            const HloComputation *x = &a.m->comps[c], *y = &b.m->comps[c];
            ok = x->n_insts == y->n_insts && same_span(x->span, y->span);
            for (int32_t i = 0; ok && i < x->n_insts; i++)
                ok = same_span(x->insts[i].span, y->insts[i].span) &&
                     same_syntax_spans(hlo_sharding_syntax(a.m, c, i), hlo_sharding_syntax(b.m, c, i));
        }
    }
    if (!ok)
        fail_msg("%s: the two parsers differ\n--- without LAC first:\n%s%s\n--- LAC alone:\n%s%s\n--- input:\n%.*s", what,
                 diag_text(a.d), a.m ? sb_cstr(&a.text) : "(no module)\n", diag_text(b.d),
                 b.m ? sb_cstr(&b.text) : "(no module)\n", (int)(len > 2000 ? 2000 : len), text);
    bool both = a.m && b.m;
    parse_free(&a);
    parse_free(&b);
    if (both) check_bind(what, text, len);
}

static int g_files;

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    size_t n = strlen(path);
    if (type != FTW_F || n < 4 || strcmp(path + n - 4, ".hlo") != 0) return 0;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    StrBuf b = {0};
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) sb_putn(&b, buf, got);
    fclose(f);
    check_same(path, sb_cstr(&b), b.len);
    sb_free(&b);
    g_files++;
    return 0;
}

static void test_every_hlo_file(void **state)
{
    (void)state;
    const char *src = getenv("SPMDC_SOURCE_DIR");
    if (!src) skip();
    char dir[4096];
    g_files = 0;
    snprintf(dir, sizeof dir, "%s/tests", src);
    assert_int_equal(nftw(dir, visit, 16, FTW_PHYS), 0);
    snprintf(dir, sizeof dir, "%s/examples", src);
    assert_int_equal(nftw(dir, visit, 16, FTW_PHYS), 0);
    assert_true(g_files > 200); /* the suites are there */
}

/* A module whose second instruction is `line`, so that a head and what
 * follows it are checked at the start, middle and end of a computation. */
static void check_line(const char *line)
{
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "HloModule m\n\n%%add (x: f32[], y: f32[]) -> f32[] {\n  %%x = f32[] parameter(0)\n"
                     "  %%y = f32[] parameter(1)\n  ROOT %%s = f32[] add(%%x, %%y)\n}\n\n"
                     "ENTRY %%main (a: f32[8,16], b: f32[8,16]) -> f32[8,16] {\n"
                     "  %%a = f32[8,16]{1,0} parameter(0)\n%s\n  %%b = f32[8,16]{1,0} parameter(1)\n"
                     "  ROOT %%r = f32[8,16]{1,0} add(%%a, %%b)\n}\n",
                     line);
    assert_true(n > 0 && (size_t)n < sizeof text);
    check_same(line, text, (size_t)n);
}

static void test_heads_and_what_follows(void **state)
{
    (void)state;
    static const char *const heads[] = {
        "  %h = f32[8,16]{1,0} add(%a, %b)",
        "  %h = f32[8,16]{1,0} negate(%a), metadata={op_name=\"x\"}",
        "  %h = f32[8,16] add(%a, %b), sharding={replicated}",
        "  %h = f32[16]{0} reduce(%a, %z), dimensions={0}, to_apply=%add",
        "  %h = f32[8,16]{1,0} custom-call(%a), custom_call_target=\"f\", backend_config={1}",
    };
    static const char *const after[] = {
        "",       "x2",       "1",        ".5",          "e5",          "_1",       ":",        "[",
        "(",      "{",        "}",        "=",           "==",          "/* c */",  "// c",     "\t",
        " ",      ",",        ", x=1",    ", x=1x2",     ", x={1} {2}", ", x=nan",  ", x=T",    ", x=f32",
        ", x=f32[2]", ", x=ROOT", ", x=-",  ", x=-1.5",    ", x=%y.z",    ", x={}",   ", x={1,}", ", x=\"s\"",
        ", x=true", ", x=inf",  ", x=-inf", ", x={1,2}{3}", ", x=1_2",    ", x=12345678901234567890",
        ", x=a:",   ", x=a,",   ", frontend_attributes={a=\"b\"}", ", backend_config={}", ", x=1 y=2",
        ", x==1",   ", x= 1",   ", x =1",   ", x=1, y={1,0}, z=%add, w=LT, v=-3",
        ", a=1, b=2, c=3, d=4, e=5, f=6, g=7, h=8, i=9",
    };
    char line[512];
    for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
        for (size_t k = 0; k < sizeof after / sizeof after[0]; k++) {
            snprintf(line, sizeof line, "%s%s", heads[h], after[k]);
            check_line(line);
        }
}

/* An attribute's integer list with an empty item is no INTS: the LAC
 * parser reports it, so the head may not take it (`x={0,}` was taken as
 * {0, 0}, and the module kept without a word). */
static void test_int_list_items(void **state)
{
    (void)state;
    static const char *const after[] = {
        ", x={0,}", ", x={1,2,}", ", x={,}", ", x={,1}", ", x={1,,2}", ", y=1, x={0,}", ", x={0,}, y=1",
        ", x={0}", ", x={1,2}", ", dimensions={0,}",
    };
    char line[512];
    for (size_t k = 0; k < sizeof after / sizeof after[0]; k++) {
        snprintf(line, sizeof line, "  %%h = f32[8,16]{1,0} negate(%%a)%s", after[k]);
        check_line(line);
    }
}

static void test_heads_inside(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "  %h = f32[8,16]{1,0} T(%a, %b)",
        "  %h = f32[8,16]{1,0} nan(%a)",
        "  %h = f32[8,16]{1,0} true(%a)",
        "  %h = f32[8,16]{1,0} f32(%a)",
        "  %h = f32[8,16]{1,0} ROOT(%a)",
        "  %h = f32[8,16]{1,0} add(%a,%b)",
        "  %h = f32[8,16]{1,0} add( %a , %b )",
        "  %h = f32[8,16]{1,0} add(%a %b)",
        "  %h = f32[8,16]{1,0} add(%a, %b,)",
        "  %h = f32[8,16]{1,0}\tadd(%a,\t%b)",
        "  %h=f32[8,16]{1,0} add(%a, %b)",
        "  %h = f32[8,16]{1,0}add(%a, %b)",
        "  %h = f32[8,16] {1,0} add(%a, %b)",
        "  %h = f32[8,16]{0,1} add(%a, %b)",
        "  %h = f32[8,16]{1,1} add(%a, %b)",
        "  %h = f32[8,16]{1} add(%a, %b)",
        "  %h = nan[8,16] add(%a, %b)",
        "  %h = foo[8,16] add(%a, %b)",
        "  %h = f32[] constant(1)",
        "  %h = f32[] constant(-1)",
        "  %h = f32[] constant(12345678901234567890)",
        "  %h = f32[] constant(123456789012345678)",
        "  %h = f32[] constant(0123)",
        "  %h = u64[] constant(18446744073709551615)",
        "  %h = s64[] constant(9223372036854775807)",
        "  %h = s64[] constant(999999999999999999)",
        "  %h = s32[8,16]{1,0} iota(), iota_dimension=18446744073709551617",
        "  %h = (f32[], f32[]) tuple(%a, %b)",
        "  %h = f32[8,16]{1,0} tuple(%a, %a, %a, %a, %a, %a, %a, %a, %a)",
        "  %h = f32[8,16]{1,0} tuple(%a, %a, %a, %a, %a, %a, %a, %a)",
        "  %h = f32[8,16]{1,0} add(%nope, %b)",
        "  %a = f32[8,16]{1,0} add(%a, %b)",
        "  %h = f32[8,16]{1,0} add(%a)",
        "  %h = f32[8,16]{1,0} frobnicate(%a, %b)",
        "  %h = f32[8,16]{1,0} add(%a, %b), frontend_attributes={}",
        "  %h = f32[8,16]{1,0} add(%a, %b), backend_config={}",
        "  %h.x-y_z = f32[8,16]{1,0} add(%a, %b)",
        "  %h = f32[8,16,1,1,1,1,1,1,1]{8,7,6,5,4,3,2,1,0} reshape(%a)",
        "  %h = f32[4,32]{1,0} reshape(%a), dimensions={}",
        "  %h = s32[8,16]{1,0} iota(), iota_dimension=1",
    };
    for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) check_line(lines[k]);
}

/* The same sharding text on several instructions (the parse without LAC
 * reads the first and copies it for the others, SHARDING): every form of
 * sharding, at other columns and lines, and forms it must read again. */
static void test_repeated_shardings(void **state)
{
    (void)state;
    static const char *const forms[] = {
        "{replicated}",
        "{maximal device=1}",
        "{manual}",
        "{devices=[2,1]0,1}",
        "{devices=[2,1]<=[2]}",
        "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
        "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dims={manual}}",
        "{mesh[x=2,y=2], [{x}, {y, ?}]}",
        "{mesh[x=2,y=2], [{x:(1)2}, {}], replicated={y}}",
        "{mesh[x=2,y=2], [{}, {}], unreduced={x}}",
        "{mesh[x=2,y=2], [{x}, {}p1]}",
        "{mesh['x'=2,'y'=2], [{'x'}, {}]}",
        "{devices=[2,1,1]<=[2]}",
        "{mesh[x=2], [{x}, {x}]}",
        "{devices=[2,1]0,1 /* c */}",
        "{ replicated }",
        "{replicated} {replicated}",
        "{{replicated}}",
    };
    char text[4096];
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        const char *f = forms[k];
        int n = snprintf(text, sizeof text,
                         "HloModule m\n\nENTRY %%main (a: f32[8,16], b: f32[8,16]) -> (f32[8,16], f32[8,16]) {\n"
                         "  %%a = f32[8,16]{1,0} parameter(0), sharding=%s\n"
                         "  %%b = f32[8,16]{1,0} parameter(1), sharding=%s\n"
                         "      %%c = f32[8,16]{1,0} add(%%a, %%b), sharding=%s, metadata={op_name=\"c\"}\n"
                         "  %%d = f32[8,16]{1,0} add(%%c, %%b),   sharding=%s\n"
                         "  ROOT %%t = (f32[8,16], f32[8,16]) tuple(%%c, %%d), sharding={%s, %s}\n}\n",
                         f, f, f, f, f, f);
        assert_true(n > 0 && (size_t)n < sizeof text);
        check_same(f, text, (size_t)n);
    }
    /* `sharding=` texts that are no instruction's sharding (a header
     * attribute's group, another attribute's value) are not taken for one:
     * the later instructions' same text still keeps the first parse */
    static const char *const nested[] = {
        "HloModule m, foo={sharding={replicated}}\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  ROOT %p = f32[8] parameter(0), sharding={replicated}\n}\n",
        "HloModule m, foo={a=1, sharding={replicated}}\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  ROOT %p = f32[8] parameter(0), sharding={replicated}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8] parameter(0), foo=sharding={replicated}\n"
        "  ROOT %n = f32[8] negate(%p), sharding={replicated}\n}\n",
    };
    for (size_t k = 0; k < sizeof nested / sizeof nested[0]; k++) check_same(nested[k], nested[k], strlen(nested[k]));
    /* a text that binds on its first instruction and fails on a later one,
     * or fails on each: bind's messages point at each instruction's own text */
    static const char *const failing[] = {
        "HloModule m\n\nENTRY %main (p: f32[8,16]) -> f32[8] {\n"
        "  %p = f32[8,16] parameter(0), sharding={devices=[2,1]0,1}\n"
        "  %q = f32[8] slice(%p), slice={[0:8], [0:1]}, sharding={devices=[2,1]0,1}\n"
        "  ROOT %r = f32[8] negate(%q),    sharding={devices=[2,1]0,1}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8,16]) -> f32[8] {\n"
        "  %p = f32[8,16] parameter(0), sharding={mesh[x=2], [{x}, {}]}\n"
        "  %q = f32[8] slice(%p), slice={[0:8], [0:1]}, sharding={mesh[x=2], [{x}, {}]}\n"
        "  ROOT %r = f32[8] negate(%q),  sharding={mesh[x=2], [{x}, {}]}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  %p = f32[8] parameter(0), sharding={mesh[x=2], [{x}]}\n"
        "  %q = f32[8] negate(%p), sharding={mesh[y=2], [{y}]}\n"
        "  ROOT %r = f32[8] negate(%q),  sharding={mesh[y=2], [{y}]}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  %p = f32[8] parameter(0), sharding={mesh[x=2], [{z}]}\n"
        "  %q = f32[8] negate(%p), sharding={mesh[x=2], [{z}]}\n"
        "  ROOT %r = f32[8] negate(%q),   sharding={mesh[x=2], [{z}]}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  %p = f32[8] parameter(0), sharding={maximal device=3}\n"
        "  ROOT %q = f32[8] negate(%p),  sharding={maximal device=3}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  %p = f32[8] parameter(0), sharding={mesh[x=2], [{x}]}\n"
        "  %q = f32[8] negate(%p), sharding={devices=[4]<=[4]}\n"
        "  ROOT %r = f32[8] negate(%q),   sharding={devices=[4]<=[4]}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8]) -> (f32[8], f32[8]) {\n"
        "  %p = f32[8] parameter(0), sharding={devices=[2]<=[2]}\n"
        "  %q = f32[8] negate(%p), sharding={devices=[2]<=[2]}\n"
        "  ROOT %t = (f32[8], f32[8]) tuple(%p, %q), sharding={{devices=[2]<=[2]}, {mesh[a=2], [{b}]}}\n"
        "  %u = f32[8] negate(%q),   sharding={{devices=[2]<=[2]}, {mesh[a=2], [{b}]}}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
        "  %p = f32[8] parameter(0), sharding={unknown}\n"
        "  ROOT %q = f32[8] negate(%p),  sharding={unknown}\n}\n",
    };
    for (size_t k = 0; k < sizeof failing / sizeof failing[0]; k++)
        check_same(failing[k], failing[k], strlen(failing[k]));
    /* tuple shardings whose leaves are earlier instructions' texts
     * (SHARDING_LEAF), beside leaves read token by token: the same syntax
     * with each leaf's spans where it is, across blanks and a line end, and
     * bind's message at the one leaf that does not fit its element */
    static const char *const tuples[] = {
        "HloModule m\n\nENTRY %main (p: f32[8,16], v: f32[8]) -> (f32[8,16], f32[8], f32[8,16]) {\n"
        "  %p = f32[8,16] parameter(0), sharding={mesh[x=2,y=2], [{x}, {y}]}\n"
        "  %v = f32[8] parameter(1), sharding={mesh[x=2,y=2], [{y}]}\n"
        "  ROOT %t = (f32[8,16], f32[8], f32[8,16]) tuple(%p, %v, %p), sharding={{mesh[x=2,y=2], [{x}, {y}]},  "
        "{mesh[x=2,y=2], [{x}]}, \t{mesh[x=2,y=2], [{x}, {y}]}}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8,16], v: f32[8]) -> (f32[8,16], f32[8]) {\n"
        "  %p = f32[8,16] parameter(0), sharding={devices=[2,1]<=[2]}\n"
        "  %v = f32[8] parameter(1), sharding={devices=[2]<=[2]}\n"
        "  ROOT %t = (f32[8,16], f32[8]) tuple(%p, %v), sharding={{devices=[2]<=[2]},\n"
        "      {devices=[2]<=[2]}}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8,16], v: f32[8]) -> (f32[8,16], f32[8]) {\n"
        "  %p = f32[8,16] parameter(0), sharding={devices=[2,1]<=[2]}\n"
        "  %v = f32[8] parameter(1), sharding={devices=[2]<=[2]}\n"
        "  ROOT %t = (f32[8,16], f32[8]) tuple(%p, %v), sharding={{devices=[2,1]<=[2]}, {devices=[2,1]<=[2]}}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8,16], v: f32[8]) -> (f32[8,16], f32[8]) {\n"
        "  %p = f32[8,16] parameter(0), sharding={mesh[x=2], [{z}, {}]}\n"
        "  %v = f32[8] parameter(1), sharding={replicated}\n"
        "  ROOT %t = (f32[8,16], f32[8]) tuple(%p, %v), sharding={{replicated}, {mesh[x=2], [{z}, {}]}}\n}\n",
        "HloModule m\n\nENTRY %main (p: f32[8]) -> (f32[8], f32[8]) {\n"
        "  %p = f32[8] parameter(0), sharding={replicated}\n"
        "  %q = f32[8] negate(%p), sharding={{replicated}}\n"
        "  ROOT %t = (f32[8], f32[8]) tuple(%p, %q), sharding={{replicated} {replicated}, {replicated}}\n}\n",
    };
    for (size_t k = 0; k < sizeof tuples / sizeof tuples[0]; k++) check_same(tuples[k], tuples[k], strlen(tuples[k]));
}

/* The parse without LAC reads one sharding text once: later instructions
 * of that text share its syntax (one record each, HloSyntaxMove), and
 * hlo_sharding_syntax gives each its own spans. */
static void test_shared_syntax(void **state)
{
    (void)state;
    static const char text[] = "HloModule m\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
                               "  %p = f32[8] parameter(0), sharding={mesh[x=2], [{x}]}\n"
                               "  %q = f32[8] negate(%p), sharding={mesh[x=2], [{x}]}\n"
                               "    ROOT %r = f32[8] negate(%q), sharding={mesh[x=2], [{x}]}\n}\n";
    Parse a = parse_with(text, sizeof text - 1, true);
    assert_non_null(a.m);
    const HloComputation *c = &a.m->comps[a.m->entry];
    assert_int_equal(c->n_insts, 3);
    assert_ptr_equal(c->insts[1].sharding_src, c->insts[0].sharding_src);
    assert_ptr_equal(c->insts[2].sharding_src, c->insts[0].sharding_src);
    assert_int_equal(a.m->n_syntax_moves, 2);
    const ShardingSyntax *p = hlo_sharding_syntax(a.m, a.m->entry, 0), *q = hlo_sharding_syntax(a.m, a.m->entry, 1),
                         *r = hlo_sharding_syntax(a.m, a.m->entry, 2);
    assert_ptr_equal(p, c->insts[0].sharding_src); /* the first keeps its own */
    assert_ptr_not_equal(q, p);
    /* `sharding=` at col 29 (p), 27 (q), 34 (r): each group's `{` 9 columns later */
    assert_int_equal(p->span.begin.line, 4);
    assert_int_equal(p->span.begin.col, 38);
    assert_int_equal(q->span.begin.line, 5);
    assert_int_equal(q->span.begin.col, 36);
    assert_int_equal(q->span.end.col, p->span.end.col - 2);
    assert_int_equal(r->span.begin.line, 6);
    assert_int_equal(r->span.begin.col, 43);
    assert_int_equal(r->dim_axes[0][0].span.begin.line, 6);
    assert_int_equal(r->dim_axes[0][0].span.begin.col, p->dim_axes[0][0].span.begin.col + 5);
    assert_ptr_equal(hlo_sharding_syntax(a.m, a.m->entry, 2), r); /* resolved once */
    parse_free(&a);
}

/* Flex reads its input in blocks of 8 KiB (16 KiB on some hosts), and the
 * parse without LAC takes an instruction head whole only when its scan
 * ends inside the block read so far (ast_scan_inst_head): heads of every
 * kind cut by a block's end at every byte, from their `%` to the byte
 * after them, give the same module as the LAC parser's token by token,
 * and it is the one kept. */
/* A parameter list longer than flex's 64 KiB buffer (one
 * SIGNATURE token, read from the input: flex skips past it), starting at
 * several places of a block, with a parameter the list declares otherwise
 * (the warning points at its label): the same module, spans and messages. */
static void test_long_signature(void **state)
{
    (void)state;
    enum { PARAMS = 9000 };
    for (size_t pad = 0; pad < 80; pad += 13) {
        int odd = pad % 2 ? 7 : -1; /* the parameter declared otherwise, or none */
        StrBuf b = {0};
        sb_puts(&b, "HloModule m\n//");
        for (size_t k = 0; k < pad; k++) sb_putc(&b, '-');
        sb_puts(&b, "\n\nENTRY %main (");
        for (int k = 0; k < PARAMS; k++) sb_printf(&b, "%sp.%d: f32[%d]{0}", k ? ", " : "", k, k == odd ? 5 : 4);
        sb_puts(&b, ") -> f32[4] {\n");
        for (int k = 0; k < PARAMS; k++) sb_printf(&b, "  %%p.%d = f32[4]{0} parameter(%d)\n", k, k);
        sb_printf(&b, "  ROOT %%r = f32[4]{0} negate(%%p.%d)\n}\n", PARAMS - 1);
        assert_true(b.len > 4 * 65536); /* the list alone is over twice flex's 64 KiB buffer */
        uint64_t kept = parse_fast_kept();
        Parse p = parse_with(b.data, b.len, true);
        assert_non_null(p.m);
        if (odd < 0) { /* the parse without LAC took it */
            assert_true(parse_fast_kept() == kept + 1);
            assert_string_equal(diag_text(p.d), "");
        } else { /* a warning: the LAC parser words it */
            assert_non_null(strstr(diag_text(p.d), "t.hlo:4:"));
            assert_non_null(strstr(diag_text(p.d), "the signature declares parameter 7 as f32[5]"));
        }
        parse_free(&p);
        check_same("a long parameter list", b.data, b.len);
        sb_free(&b);
    }
}

static void test_heads_cut_by_read_blocks(void **state)
{
    (void)state;
    static const char *const lines[][2] = { /* the name's letter, the rest after its number */
        {"a", " = f32[8,16]{1,0} add(%a, %b), sharding={devices=[2,1]<=[2]}\n"},
        {"r", " = f32[16]{0} reduce(%a, %z), dimensions={0}, to_apply=%add, metadata={op_name=\"r\"}\n"},
        {"t", " = f32[16,8]{0,1} transpose(%a), dimensions={1,0}, sharding={replicated}\n"},
        {"k", " = s32[] constant(-3)\n"},
        {"d", " = f32[8,8]{1,0} dot(%a, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"},
        {"i", " = s32[8,16]{1,0} iota(), iota_dimension=1, backend_config=1, origin=-2, frontend_attributes={}, statistics=x, control-predecessors={%a}, parameter_replication={true,false}, metadata={}\n"},
        {"n", " = f32[8,16] negate(%b)  ,  sharding={devices=[2,1]<=[2]}, metadata={op_name=\"n\"}\n"},
    };
    size_t n_lines = sizeof lines / sizeof lines[0], period = 0;
    for (size_t k = 0; k < n_lines; k++) period += 8 + strlen(lines[k][1]); /* `  %x.` and 3 digits (near the cuts) */
    for (size_t pad = 0; pad <= period; pad++) {
        StrBuf b = {0};
        sb_puts(&b, "HloModule m\n\n%add (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
                    "  %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n\n"
                    "ENTRY %main (a: f32[8,16], b: f32[8,16], w: f32[16,8]) -> f32[8,16] {\n//");
        for (size_t k = 0; k < pad; k++) sb_putc(&b, '-');
        sb_puts(&b, "\n  %a = f32[8,16]{1,0} parameter(0)\n  %b = f32[8,16]{1,0} parameter(1)\n"
                    "  %w = f32[16,8]{1,0} parameter(2)\n  %z = f32[] constant(0)\n");
        for (size_t n = 0; b.len < 16384 + 2 * period; n++)
            sb_printf(&b, "  %%%s.%zu%s", lines[n % n_lines][0], n, lines[n % n_lines][1]);
        sb_puts(&b, "  ROOT %r = f32[8,16]{1,0} add(%a, %b)\n}\n");
        char what[64];
        snprintf(what, sizeof what, "heads after %zu bytes of padding", pad);
        if (pad == 0) { /* a module the parsers take without a word */
            Parse p = parse_with(b.data, b.len, true);
            assert_non_null(p.m);
            assert_string_equal(diag_text(p.d), "");
            parse_free(&p);
        }
        check_same(what, b.data, b.len);
        sb_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heads_and_what_follows),
        cmocka_unit_test(test_int_list_items),
        cmocka_unit_test(test_heads_inside),
        cmocka_unit_test(test_repeated_shardings),
        cmocka_unit_test(test_shared_syntax),
        cmocka_unit_test(test_heads_cut_by_read_blocks),
        cmocka_unit_test(test_long_signature),
        cmocka_unit_test(test_every_hlo_file),
    };
    int failed = cmocka_run_group_tests_name("coarse tokens", tests, NULL, NULL);
    parse_set_thread_min(1);
    failed += cmocka_run_group_tests_name("coarse tokens, scanner on its own thread", tests, NULL, NULL);
    return failed;
}
