/* lexer_test.c - the flex scanner (grammar/hlo.l): token kinds, token text,
 * values, locations, the context-sensitive rules (layout braces, JSON blobs,
 * T(), LABEL vs ATTRNAME) and lexical errors.
 *
 * Each test lexes a string and compares a one-line rendering of the token
 * stream, e.g. "IDENT(all-reduce.3) ',' INT(3)", so the expectations read
 * like the input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ast.h"
#include "hlo.tab.h"
#define YYSTYPE HLO_YYSTYPE
#define YYLTYPE AstLoc
#include "hlo.lex.h"

#include "spmdc/diag.h"
#include "spmdc/strbuf.h"

static const struct {
    int tok;
    const char *name;
} NAMES[] = {
    {TOK_NAME_PCT, "NAME_PCT"},     {TOK_LABEL, "LABEL"},       {TOK_ATTRNAME, "ATTRNAME"},
    {TOK_PRIMTYPE, "PRIMTYPE"},     {TOK_IDENT, "IDENT"},       {TOK_INT, "INT"},
    {TOK_DECIMAL, "DECIMAL"},       {TOK_NAN, "NAN"},           {TOK_NEGINF, "NEGINF"},
    {TOK_STRING, "STRING"},         {TOK_BLOB, "BLOB"},         {TOK_DXD, "DXD"},
    {TOK_PAD, "PAD"},               {TOK_DIMLABELS, "DIMLABELS"}, {TOK_KW_HLOMODULE, "HloModule"},
    {TOK_KW_ENTRY, "ENTRY"},        {TOK_KW_ROOT, "ROOT"},      {TOK_KW_TRUE, "true"},
    {TOK_KW_FALSE, "false"},        {TOK_KW_INF, "inf"},        {TOK_KW_MAXIMAL, "maximal"},
    {TOK_KW_REPLICATED, "replicated"}, {TOK_KW_MANUAL, "manual"}, {TOK_KW_UNKNOWN, "unknown"},
    {TOK_KW_UNREDUCED, "unreduced"}, {TOK_KW_LAST_TILE_DIM_REPLICATE, "last_tile_dim_replicate"},
    {TOK_KW_SHARD_AS, "shard_as"},  {TOK_KW_SHARD_LIKE, "shard_like"}, {TOK_LE, "<="},
    {TOK_ARROW, "->"},              {TOK_ELLIPSIS, "..."},      {TOK_TPAREN, "T("},
    {TOK_LAYOUT_LBRACE, "LAYOUT{"}, {TOK_HLO_YYerror, "ERROR"}, {TOK_SECTION, "SECTION"},
    {TOK_SHAPE, "SHAPE"},           {TOK_INTGROUP, "INTGROUP"}, {TOK_SHARDING, "SHARDING"},
    {TOK_SHARDING_LEAF, "SHARDING_LEAF"}, {TOK_SIGNATURE, "SIGNATURE"},
};

/* Tokens with text print it in parentheses. */
static bool has_text(int tok)
{
    return tok == TOK_NAME_PCT || tok == TOK_LABEL || tok == TOK_ATTRNAME || tok == TOK_PRIMTYPE ||
           tok == TOK_IDENT || tok == TOK_INT || tok == TOK_DECIMAL || tok == TOK_NAN || tok == TOK_STRING ||
           tok == TOK_BLOB || tok == TOK_DXD || tok == TOK_PAD || tok == TOK_DIMLABELS || tok == TOK_SHAPE ||
           tok == TOK_INTGROUP || tok == TOK_INST || tok == TOK_SHARDING || tok == TOK_SHARDING_LEAF ||
           tok == TOK_SIGNATURE;
}

/* Whether lex() reads whole shapes (ScanState.coarse, as for the parser without LAC). */
static bool g_coarse;

typedef struct Lexed {
    StrBuf out;       /* rendered tokens */
    DiagEngine *diag; /* in-memory messages */
    Arena *arena, *keep;
    AstTok last;      /* value of the last token */
    AstLoc locs[64];  /* locations of the first 64 tokens */
    SrcSpan spans[64]; /* and their line:col spans (ast_span) */
    int n;
} Lexed;

static void lex(Lexed *lx, const char *text)
{
    memset(lx, 0, sizeof *lx);
    lx->diag = diag_create(NULL);
    diag_set_show_source(lx->diag, false);
    size_t len = strlen(text);
    uint32_t fid = diag_add_file(lx->diag, "t.hlo", text, len);
    lx->arena = arena_create();
    lx->keep = arena_create();
    ParseCtx cx = {.arena = lx->arena, .keep = lx->keep, .diag = lx->diag, .file_id = fid, .text = text,
                   .len = (uint32_t)len};
    AstLines lines;
    ast_lines_scan(cx.text, cx.len, &lines);
    ast_lines_init(&cx, &lines);
    ScanState st;
    memset(&st, 0, sizeof st);
    st.cx = &cx;
    st.coarse = g_coarse;
    yyscan_t sc;
    assert_int_equal(hlo_yylex_init_extra(&st, &sc), 0);
    hlo_yy_scan_bytes(text, (int)len, sc);
    for (;;) {
        HLO_YYSTYPE v;
        AstLoc loc;
        memset(&v, 0, sizeof v);
        memset(&loc, 0, sizeof loc);
        int tok = hlo_yylex(&v, &loc, sc);
        if (tok == TOK_YYEOF) break;
        if (lx->n < 64) {
            lx->locs[lx->n] = loc;
            lx->spans[lx->n] = ast_span(&cx, &loc);
        }
        lx->n++;
        if (lx->out.len) sb_putc(&lx->out, ' ');
        const char *name = NULL;
        for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++)
            if (NAMES[k].tok == tok) name = NAMES[k].name;
        if (name)
            sb_puts(&lx->out, name);
        else
            sb_printf(&lx->out, "'%c'", tok);
        if (has_text(tok)) {
            sb_printf(&lx->out, "(%.*s)", (int)v.tok.n, v.tok.s);
            lx->last = v.tok;
        }
    }
    hlo_yylex_destroy(sc);
    intern_free(&st.texts);
    intern_free(&st.shardings);
    ast_lines_release(&lines);
}

static void lexed_free(Lexed *lx)
{
    sb_free(&lx->out);
    diag_destroy(lx->diag);
    arena_destroy(lx->arena);
    arena_destroy(lx->keep);
}

/* Lexes text and expects exactly the rendering want and no diagnostics. */
static void expect_tokens(const char *text, const char *want)
{
    Lexed lx;
    lex(&lx, text);
    assert_string_equal(sb_cstr(&lx.out), want);
    assert_string_equal(diag_text(lx.diag), "");
    lexed_free(&lx);
}

/* Lexes text and expects the tokens and exactly the diagnostics given. */
static void expect_error(const char *text, const char *want_tokens, const char *want_diag)
{
    Lexed lx;
    lex(&lx, text);
    assert_string_equal(sb_cstr(&lx.out), want_tokens);
    assert_string_equal(diag_text(lx.diag), want_diag);
    lexed_free(&lx);
}

static void test_identifiers_keep_dots_and_dashes(void **state)
{
    (void)state;
    expect_tokens("all-reduce.3 get-tuple-element.8 p.0.lhs.1247 %add-call x_1",
                  "IDENT(all-reduce.3) IDENT(get-tuple-element.8) IDENT(p.0.lhs.1247) NAME_PCT(add-call) "
                  "IDENT(x_1)");
}

static void test_label_attrname_name(void **state)
{
    (void)state;
    /* LABEL and ATTRNAME need the ':' / '=' touching the word; %names never absorb them. */
    expect_tokens("p0: dimensions= x : y = %p.1= %q:",
                  "LABEL(p0) ATTRNAME(dimensions) IDENT(x) ':' IDENT(y) '=' NAME_PCT(p.1) '=' NAME_PCT(q) ':'");
    expect_tokens("control-predecessors={%a} xla.sdy.meshes=",
                  "ATTRNAME(control-predecessors) '{' NAME_PCT(a) '}' ATTRNAME(xla.sdy.meshes)");
}

static void test_types_and_keywords(void **state)
{
    (void)state;
    expect_tokens("f32 bf16 pred token opaque_type f8e4m3fn f32.1 token0 tuple",
                  "PRIMTYPE(f32) PRIMTYPE(bf16) PRIMTYPE(pred) PRIMTYPE(token) PRIMTYPE(opaque_type) "
                  "PRIMTYPE(f8e4m3fn) IDENT(f32.1) IDENT(token0) IDENT(tuple)");
    expect_tokens("HloModule ENTRY ROOT true false inf maximal replicated manual unknown unreduced",
                  "HloModule ENTRY ROOT true false inf maximal replicated manual unknown unreduced");
    expect_tokens("last_tile_dim_replicate shard_as shard_like Root entry",
                  "last_tile_dim_replicate shard_as shard_like IDENT(Root) IDENT(entry)");
}

static void test_numbers(void **state)
{
    (void)state;
    expect_tokens("0 -3 1.5 .5 2. 1e5 -1.5e-3 3x3 1x0x2 0_0x1_2 2_4_1x1_1_2 -1_-1",
                  "INT(0) INT(-3) DECIMAL(1.5) DECIMAL(.5) DECIMAL(2.) DECIMAL(1e5) DECIMAL(-1.5e-3) DXD(3x3) "
                  "DXD(1x0x2) PAD(0_0x1_2) PAD(2_4_1x1_1_2) PAD(-1_-1)");
    expect_tokens("-inf inf nan -nan nan(0x1) nan.2",
                  "NEGINF inf NAN(nan) NAN(-nan) NAN(nan(0x1)) IDENT(nan.2)");
}

static void test_integer_values(void **state)
{
    (void)state;
    Lexed lx;
    lex(&lx, "18446744073709551615");
    assert_string_equal(sb_cstr(&lx.out), "INT(18446744073709551615)");
    assert_true(lx.last.is_u64);
    assert_int_equal(lx.last.i, -1); /* u64 max keeps its bit pattern */
    lexed_free(&lx);
    lex(&lx, "-9223372036854775808");
    assert_false(lx.last.is_u64);
    assert_true(lx.last.i == INT64_MIN);
    lexed_free(&lx);
    lex(&lx, "9223372036854775807");
    assert_false(lx.last.is_u64);
    assert_true(lx.last.i == INT64_MAX);
    lexed_free(&lx);
}

static void test_dim_labels(void **state)
{
    (void)state;
    expect_tokens("b01f_01io->b01f 0bf_0oi->0bf bf_io->bf ??_io->??",
                  "DIMLABELS(b01f_01io->b01f) DIMLABELS(0bf_0oi->0bf) DIMLABELS(bf_io->bf) DIMLABELS(\?\?_io->\?\?)");
}

static void test_punctuation(void **state)
{
    (void)state;
    expect_tokens("= , : * ? # + ~ [ ] ( ) { } ... -> <=",
                  "'=' ',' ':' '*' '?' '#' '+' '~' '[' ']' '(' ')' '{' '}' ... -> <=");
}

static void test_layout_brace(void **state)
{
    (void)state;
    /* `{` right after `]` is a layout when a digit, '-' or ':' follows (blanks and comments skipped). */
    expect_tokens("f32[2,3]{1,0}", "PRIMTYPE(f32) '[' INT(2) ',' INT(3) ']' LAYOUT{ INT(1) ',' INT(0) '}'");
    expect_tokens("f32[]{:T(256)}", "PRIMTYPE(f32) '[' ']' LAYOUT{ ':' T( INT(256) ')' '}'");
    expect_tokens("f32[2] /*c*/ { 0 }", "PRIMTYPE(f32) '[' INT(2) ']' LAYOUT{ INT(0) '}'");
    expect_tokens("f32[]{}", "PRIMTYPE(f32) '[' ']' LAYOUT{ '}'");
    /* ... otherwise it opens a body or a group. */
    expect_tokens("-> f32[2] {\n  %x", "-> PRIMTYPE(f32) '[' INT(2) ']' '{' NAME_PCT(x)");
    expect_tokens("{ 0 }", "'{' INT(0) '}'");
}

/* For the parser without LAC a well-formed array shape is one SHAPE token,
 * lowered by the scanner and shared by equal texts; every other shape is
 * read token by token, as for the LAC parser. */
static void test_coarse_shapes(void **state)
{
    (void)state;
    g_coarse = true;
    expect_tokens("f32[2,3]{1,0} bf16[] pred[]{} s32[07], %x",
                  "SHAPE(f32[2,3]{1,0}) SHAPE(bf16[]) SHAPE(pred[]{}) SHAPE(s32[07]) ',' NAME_PCT(x)");
    Lexed lx;
    lex(&lx, "u8[5,1,4]{0,2,1}");
    const Shape *s = lx.last.shape;
    assert_int_equal(s->type, ET_U8);
    assert_int_equal(s->rank, 3);
    assert_true(s->dims[0] == 5 && s->dims[1] == 1 && s->dims[2] == 4);
    assert_true(s->has_layout);
    assert_true(s->minor_to_major[0] == 0 && s->minor_to_major[1] == 2 && s->minor_to_major[2] == 1);
    lexed_free(&lx);
    lex(&lx, "s32[7] s32[]");
    assert_false(lx.last.shape->has_layout);
    assert_int_equal(lx.last.shape->rank, 0);
    lexed_free(&lx);
    /* read token by token: a layout after a blank, a layout tail, a layout
     * that is no permutation or of another rank, more than 8 dims, a dim of
     * 19 digits, a word that is no element type */
    expect_tokens("f32[2] {0}", "PRIMTYPE(f32) '[' INT(2) ']' LAYOUT{ INT(0) '}'");
    expect_tokens("f32[2] /* c */{0}", "PRIMTYPE(f32) '[' INT(2) ']' LAYOUT{ INT(0) '}'");
    expect_tokens("f32[2]{0:T(2)}", "PRIMTYPE(f32) '[' INT(2) ']' LAYOUT{ INT(0) ':' T( INT(2) ')' '}'");
    expect_tokens("f32[2,2]{0,0}", "PRIMTYPE(f32) '[' INT(2) ',' INT(2) ']' LAYOUT{ INT(0) ',' INT(0) '}'");
    expect_tokens("f32[2]{1}", "PRIMTYPE(f32) '[' INT(2) ']' LAYOUT{ INT(1) '}'");
    expect_tokens("f32[2]{}", "PRIMTYPE(f32) '[' INT(2) ']' LAYOUT{ '}'");
    expect_tokens("f32[1,1,1,1,1,1,1,1,1]", "PRIMTYPE(f32) '[' INT(1) ',' INT(1) ',' INT(1) ',' INT(1) ',' INT(1) "
                                            "',' INT(1) ',' INT(1) ',' INT(1) ',' INT(1) ']'");
    expect_tokens("f32[1234567890123456789]", "PRIMTYPE(f32) '[' INT(1234567890123456789) ']'");
    expect_tokens("f32[123456789012345678]", "SHAPE(f32[123456789012345678])");
    expect_tokens("mesh[1] f32x[2]", "IDENT(mesh) '[' INT(1) ']' IDENT(f32x) '[' INT(2) ']'");
    g_coarse = false;
    /* the LAC parser's scanner never reads one */
    expect_tokens("bf16[8]{0}", "PRIMTYPE(bf16) '[' INT(8) ']' LAYOUT{ INT(0) '}'");
}

/* Likewise an attribute's plain integer list `={...}` is one INTGROUP. */
static void test_coarse_int_groups(void **state)
{
    (void)state;
    g_coarse = true;
    expect_tokens("a={1,0}, b={}, c={07}", "ATTRNAME(a) INTGROUP({1,0}) ',' ATTRNAME(b) INTGROUP({}) ',' "
                                           "ATTRNAME(c) INTGROUP({07})");
    Lexed lx;
    lex(&lx, "x={12,3,456}");
    const AstIntGroup *g = lx.last.ints;
    assert_int_equal(g->n, 3);
    assert_true(g->ints[0].v == 12 && g->ints[1].v == 3 && g->ints[2].v == 456);
    assert_true(g->ints[2].off == 6 && g->ints[2].len == 3);
    lexed_free(&lx);
    /* token by token: blanks, a sign, 19 digits, not after an attribute
     * name, backend_config's text, a frontend attribute's */
    expect_tokens("a={1, 0}", "ATTRNAME(a) '{' INT(1) ',' INT(0) '}'");
    expect_tokens("a={-1}", "ATTRNAME(a) '{' INT(-1) '}'");
    expect_tokens("a={1234567890123456789}", "ATTRNAME(a) '{' INT(1234567890123456789) '}'");
    expect_tokens("a={123456789012345678}", "ATTRNAME(a) INTGROUP({123456789012345678})");
    expect_tokens("[{1}]", "'[' '{' INT(1) '}' ']'");
    expect_tokens("backend_config={1}", "ATTRNAME(backend_config) BLOB({1})");
    expect_tokens("frontend_attributes={k={1}}", "ATTRNAME(frontend_attributes) '{' ATTRNAME(k) BLOB({1}) '}'");
    g_coarse = false;
    expect_tokens("a={1,0}", "ATTRNAME(a) '{' INT(1) ',' INT(0) '}'");
}

/* An instruction's sharding of a text an earlier instruction's had is one
 * SHARDING token; so is each leaf of a tuple sharding whose text one had
 * (SHARDING_LEAF), the other leaves token by token.  A leaf that is itself
 * a tuple or empty, a leaf across a line end, a tuple no instruction's
 * sharding holds: token by token. */
static void test_coarse_shardings(void **state)
{
    (void)state;
    g_coarse = true;
    Lexed lx;
    lex(&lx, "{\n %a = f32[2] parameter(0), sharding={replicated}\n"
             " %b = f32[2] parameter(1), sharding={replicated}\n"
             " %t = (f32[2], f32[2], f32[2]) tuple(%a, %b, %a), sharding={{replicated},\t{ maximal device=1}, "
             "{replicated}}\n"
             " %u = (f32[2], f32[2]) tuple(%a, %b), sharding={{{replicated}}, {}}\n"
             " %v = (f32[2], f32[2]) tuple(%a, %b), sharding={{replicated},\n{replicated}}\n"
             " %w = f32[2] negate(%a), foo={{replicated}, {replicated}}\n}");
    const char *out = sb_cstr(&lx.out);
    /* %b's whole sharding, %t's first and third leaves, %v's first and second */
    const char *b = strstr(out, "ATTRNAME(sharding) ");
    assert_non_null(b);
    assert_non_null(strstr(b, "SHARDING({replicated})"));
    const char *t = strstr(out, "'{' SHARDING_LEAF({replicated}) ',' '{' KW_MAXIMAL");
    if (!t) t = strstr(out, "'{' SHARDING_LEAF({replicated}) ',' '{' maximal");
    assert_non_null(t);
    assert_non_null(strstr(t, "INT(1) '}' ',' SHARDING_LEAF({replicated}) '}'"));
    assert_non_null(strstr(out, "'{' '{' '{' replicated '}' '}' ',' '{' '}' '}'"));
    assert_non_null(strstr(out, "'{' SHARDING_LEAF({replicated}) ',' SHARDING_LEAF({replicated}) '}'"));
    assert_non_null(strstr(out, "ATTRNAME(foo) '{' '{' replicated '}' ',' '{' replicated '}' '}'"));
    int leaves = 0;
    for (const char *p = out; (p = strstr(p, "SHARDING_LEAF")); p++) leaves++;
    assert_int_equal(leaves, 4);
    assert_string_equal(diag_text(lx.diag), "");
    lexed_free(&lx);
    g_coarse = false;
}

/* A computation's regular parameter list is one SIGNATURE token, its
 * shapes lowered; anything else in it goes token by token. */
static void test_coarse_signature(void **state)
{
    (void)state;
    g_coarse = true;
    Lexed lx;
    lex(&lx, "ENTRY %main (x: bf16[8,1024]{1,0}, a.1:f32[],\tb-2: s32[3]) -> f32[] {");
    assert_string_equal(sb_cstr(&lx.out), "ENTRY NAME_PCT(main) SIGNATURE((x: bf16[8,1024]{1,0}, a.1:f32[],\tb-2: "
                                          "s32[3])) -> PRIMTYPE(f32) '[' ']' '{'");
    lexed_free(&lx);
    lex(&lx, "%c (p: f32[4]) -> f32[4]");
    assert_int_equal(lx.n, 4); /* NAME_PCT SIGNATURE -> SHAPE */
    lexed_free(&lx);
    lex(&lx, "%c ( p.0: f32[4]{0} ,q:s8[2,3] )");
    const AstSig *sig = lx.last.sig;
    assert_int_equal(sig->n, 2);
    assert_true(sig->p[0].label_off == 2 && sig->p[0].label_len == 3 && sig->p[0].shape_off == 7 &&
                sig->p[0].shape_len == 9);
    assert_true(sig->p[1].label_off == 18 && sig->p[1].label_len == 1 && sig->p[1].shape_off == 20 &&
                sig->p[1].shape_len == 7);
    assert_int_equal(sig->p[0].shape->type, ET_F32);
    assert_true(sig->p[0].shape->rank == 1 && sig->p[0].shape->dims[0] == 4 && sig->p[0].shape->has_layout);
    assert_true(sig->p[1].shape->type == ET_S8 && sig->p[1].shape->rank == 2 && sig->p[1].shape->dims[1] == 3);
    lexed_free(&lx);
    /* token by token: an empty list, a tuple, a layout after a blank or
     * with a tail, a line end, a comment, a shape word cut short, not after a name */
    expect_tokens("c () -> f32[]", "IDENT(c) '(' ')' -> SHAPE(f32[])");
    expect_tokens("c (p: (f32[])) -> f32[]", "IDENT(c) '(' LABEL(p) '(' SHAPE(f32[]) ')' ')' -> SHAPE(f32[])");
    expect_tokens("c (p: f32[2] {0})", "IDENT(c) '(' LABEL(p) PRIMTYPE(f32) '[' INT(2) ']' LAYOUT{ INT(0) '}' ')'");
    expect_tokens("c (p: f32[2]{0:T(2)})",
                  "IDENT(c) '(' LABEL(p) PRIMTYPE(f32) '[' INT(2) ']' LAYOUT{ INT(0) ':' T( INT(2) ')' '}' ')'");
    expect_tokens("c (p: f32[2],\n q: f32[2])", "IDENT(c) '(' LABEL(p) SHAPE(f32[2]) ',' LABEL(q) SHAPE(f32[2]) ')'");
    expect_tokens("c (p: f32[2] /* c */)", "IDENT(c) '(' LABEL(p) SHAPE(f32[2]) ')'");
    expect_tokens("c (p : f32[2])", "IDENT(c) '(' IDENT(p) ':' SHAPE(f32[2]) ')'");
    expect_tokens("{(p: f32[2])}", "'{' '(' LABEL(p) SHAPE(f32[2]) ')' '}'");
    g_coarse = false;
    expect_tokens("c (p: f32[2])", "IDENT(c) '(' LABEL(p) PRIMTYPE(f32) '[' INT(2) ']' ')'");
}

static void test_iota_transpose(void **state)
{
    (void)state;
    expect_tokens("[2,4]<=[4,2]T(1,0)",
                  "'[' INT(2) ',' INT(4) ']' <= '[' INT(4) ',' INT(2) ']' T( INT(1) ',' INT(0) ')'");
    expect_tokens("T (1) xT(1)", "IDENT(T) '(' INT(1) ')' IDENT(xT) '(' INT(1) ')'");
}

static void test_strings_unescaped(void **state)
{
    (void)state;
    Lexed lx;
    lex(&lx, "\"a\\\"b\\n\\t\\\\\\101\\x42\"");
    assert_int_equal(lx.last.n, 8);
    assert_memory_equal(lx.last.s, "a\"b\n\t\\AB", 8);
    assert_string_equal(diag_text(lx.diag), "");
    lexed_free(&lx);
    lex(&lx, "\"two\nlines\"");
    assert_int_equal(lx.last.n, 9);
    lexed_free(&lx);
}

static void test_single_quotes_and_sections(void **state)
{
    (void)state;
    /* XLA 0.10 quotes mesh axis names with single quotes. */
    expect_tokens("mesh['model'=8] 'a\\'b'", "IDENT(mesh) '[' STRING(model) '=' INT(8) ']' STRING(a'b)");
    /* Stack frame section names are keywords only outside brackets. */
    expect_tokens("FileNames 1 \"a.py\" StackFrames { StackFrames }",
                  "SECTION INT(1) STRING(a.py) SECTION '{' IDENT(StackFrames) '}'");
    expect_error("'open", "ERROR", "t.hlo:1:1: error: unterminated string: \"'\" has no closing \"'\"\n");
}

static void test_comments_skipped(void **state)
{
    (void)state;
    expect_tokens("a /*index=5*/ b // rest of line\n c /* multi\n line */ d",
                  "IDENT(a) IDENT(b) IDENT(c) IDENT(d)");
}

static void test_backend_config_blob(void **state)
{
    (void)state;
    /* Brace-balanced, strings (with escaped quotes and braces) skipped. */
    expect_tokens("backend_config={\"a\":{\"b\":\"}\\\"{\"}}, x=1",
                  "ATTRNAME(backend_config) BLOB({\"a\":{\"b\":\"}\\\"{\"}}) ',' ATTRNAME(x) INT(1)");
    expect_tokens("backend_config=\"s\"", "ATTRNAME(backend_config) STRING(s)");
    expect_tokens("backend_config={}", "ATTRNAME(backend_config) BLOB({})");
}

static void test_frontend_attribute_blobs(void **state)
{
    (void)state;
    /* Values directly inside frontend_attributes={...} may be raw dicts. */
    expect_tokens("frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<[\"x\"=4]>}, k=\"v\"} y={1}",
                  "ATTRNAME(frontend_attributes) '{' ATTRNAME(xla.sdy.meshes) "
                  "BLOB({mesh = #sdy.mesh<[\"x\"=4]>}) ',' ATTRNAME(k) STRING(v) '}' ATTRNAME(y) '{' INT(1) '}'");
}

static void test_locations(void **state)
{
    (void)state;
    Lexed lx;
    lex(&lx, "HloModule m\n  %x = f32[]\t{\n\"a\nb\" z");
    assert_string_equal(sb_cstr(&lx.out),
                        "HloModule IDENT(m) NAME_PCT(x) '=' PRIMTYPE(f32) '[' ']' '{' STRING(a\nb) IDENT(z)");
    assert_int_equal(lx.spans[2].begin.line, 2); /* %x */
    assert_int_equal(lx.spans[2].begin.col, 3);
    assert_int_equal(lx.spans[2].end.col, 4);
    assert_int_equal(lx.locs[2].off, 14);
    assert_int_equal(lx.locs[2].end, 16);
    assert_int_equal(lx.spans[7].begin.col, 14); /* '{' after a tab: byte columns */
    assert_int_equal(lx.spans[8].begin.line, 3); /* the string spans two lines */
    assert_int_equal(lx.spans[8].end.line, 4);
    assert_int_equal(lx.spans[8].end.col, 2);
    assert_int_equal(lx.spans[9].begin.line, 4);
    assert_int_equal(lx.spans[9].begin.col, 4);
    lexed_free(&lx);
}

static void test_lexical_errors(void **state)
{
    (void)state;
    expect_error("a /* open\n b", "IDENT(a) ERROR",
                 "t.hlo:1:3: error: unterminated comment: '/*' has no closing '*/'\n");
    expect_error("x \"open\n", "IDENT(x) ERROR", "t.hlo:1:3: error: unterminated string: '\"' has no closing '\"'\n");
    expect_error("a @ b < c", "IDENT(a) ERROR IDENT(b) ERROR IDENT(c)",
                 "t.hlo:1:3: error: unexpected character '@'\nt.hlo:1:7: error: unexpected character '<'\n");
    expect_error("a . b", "IDENT(a) ERROR IDENT(b)", "t.hlo:1:3: error: unexpected character '.'\n");
    expect_error("\x01 \xc3", "ERROR ERROR",
                 "t.hlo:1:1: error: unexpected byte 0x01\nt.hlo:1:3: error: unexpected byte 0xc3\n");
    expect_error("99999999999999999999", "ERROR",
                 "t.hlo:1:1: error: integer '99999999999999999999' does not fit in 64 bits\n");
    expect_error("-9223372036854775809", "ERROR",
                 "t.hlo:1:1: error: integer '-9223372036854775809' does not fit in 64 bits\n");
    expect_error("backend_config={\"a\":1", "ATTRNAME(backend_config) ERROR",
                 "t.hlo:1:16: error: unterminated '{': no matching '}' before the end of the file\n");
}

static void test_nesting_limit(void **state)
{
    (void)state;
    char text[2 * AST_MAX_NESTING + 8];
    memset(text, '[', AST_MAX_NESTING + 1);
    text[AST_MAX_NESTING + 1] = 0;
    Lexed lx;
    lex(&lx, text);
    char want[128];
    snprintf(want, sizeof want, "t.hlo:1:%d: error: brackets nested deeper than %d levels\n", AST_MAX_NESTING + 1,
             AST_MAX_NESTING);
    assert_string_equal(diag_text(lx.diag), want);
    assert_int_equal(lx.n, AST_MAX_NESTING + 1); /* 200 '[' then the error, then nothing */
    lexed_free(&lx);
}

/* Every token of text, scanned as the parser does (flex reading cx->text
 * through YY_INPUT), directly or through a ScanFeed on a thread of its own. */
typedef struct FedTok {
    int kind;
    AstLoc loc;
    AstTok tok;
} FedTok;

static FedTok *scan_all(const char *text, size_t len, bool threaded, bool coarse, int *n_out, bool *failed,
                        Arena *strings)
{
    DiagEngine *d = diag_create(NULL);
    uint32_t fid = diag_add_file(d, "t.hlo", text, len);
    Arena *a = arena_create(), *keep = arena_create();
    ParseCtx cx = {.arena = a, .keep = keep, .strings = strings, .diag = d, .file_id = fid, .text = text,
                   .len = (uint32_t)len};
    AstLines lines;
    ast_lines_scan(cx.text, cx.len, &lines);
    ast_lines_init(&cx, &lines);
    ScanState st;
    memset(&st, 0, sizeof st);
    st.cx = &cx;
    st.coarse = coarse;
    yyscan_t sc;
    assert_int_equal(hlo_yylex_init_extra(&st, &sc), 0);
    ScanFeed *f = ast_feed_start(sc, &st, &cx, threaded);
    assert_int_equal(st.quiet, threaded);
    int n = 0, cap = 1024;
    FedTok *out = malloc(sizeof *out * (size_t)cap);
    for (;;) {
        AstSemVal v;
        memset(&v, 0, sizeof v);
        if (n == cap) out = realloc(out, sizeof *out * (size_t)(cap *= 2));
        FedTok *t = &out[n++];
        t->kind = ast_feed_lex(&v, &t->loc, f);
        t->tok = v.tok;
        if (t->kind == TOK_STRING) { /* the unescaped text is in keep or strings: compare bytes */
            char *copy = malloc(t->tok.n + 1);
            memcpy(copy, t->tok.s, t->tok.n);
            t->tok.s = copy;
        } else if (t->kind == TOK_INTGROUP) { /* and the list: compare its text */
            memset(&t->tok.i, 0, sizeof t->tok.i);
        } else if (t->kind == TOK_SHAPE) { /* so is the shape */
            Shape *copy = malloc(sizeof *copy);
            memcpy(copy, t->tok.shape, sizeof *copy);
            t->tok.shape = copy;
        } else if (t->kind == TOK_INST) { /* and the descriptor (in a ring slot): its parts, shape by value */
            AstHead *copy = malloc(sizeof *copy);
            memcpy(copy, t->tok.head, ast_head_size(t->tok.head));
            Shape *shape = malloc(sizeof *shape);
            memcpy(shape, t->tok.head->shape, sizeof *shape);
            copy->shape = shape;
            t->tok.head = copy;
        } else if (t->kind != TOK_YYEOF && !has_text(t->kind)) {
            memset(&t->tok, 0, sizeof t->tok); /* punctuation leaves the value unset */
        }
        if (t->kind == TOK_YYEOF) break;
    }
    /* after the end the feed gives the end again */
    AstSemVal v;
    AstLoc l;
    assert_int_equal(ast_feed_lex(&v, &l, f), TOK_YYEOF);
    ast_feed_finish(f);
    *failed = st.failed || diag_error_count(d) > 0;
    hlo_yylex_destroy(sc);
    intern_free(&st.texts);
    intern_free(&st.shardings);
    ast_lines_release(&lines);
    arena_destroy(keep);
    arena_destroy(a);
    diag_destroy(d);
    *n_out = n;
    return out;
}

static void free_scanned(FedTok *t, int n)
{
    for (int k = 0; k < n; k++)
        if (t[k].kind == TOK_STRING) free((char *)t[k].tok.s);
        else if (t[k].kind == TOK_SHAPE) free((Shape *)t[k].tok.shape);
        else if (t[k].kind == TOK_INST) {
            free((Shape *)t[k].tok.head->shape);
            free((AstHead *)t[k].tok.head);
        }
    free(t);
}

/* A scanner on its own thread (ScanFeed) hands the parser exactly the
 * tokens, values and locations of the direct scan, across chunk and ring
 * boundaries (about 150,000 tokens, 80,000 coarse: more than the ring's
 * 8 x 8,192), with strings, blobs, whole shapes, integer lists, instruction
 * heads (their descriptors compared part by part) and shared shardings or
 * not, and a lexical error; its errors only mark it failed. */
static void test_feed_on_thread_matches_direct_scan(void **state)
{
    (void)state;
    StrBuf b = {0};
    sb_puts(&b, "HloModule m\nENTRY %e {\n");
    for (int k = 0; k < 5000; k++)
        sb_printf(&b, "  %%a.%d = f32[8,16]{1,0} add(%%x.%d, %%y), metadata={op_name=\"jit(f)/add\\t%d\"}, "
                      "backend_config={\"k\": [%d, {\"z\": 1}]}, sharding={devices=[2,1]<=[2]}, dimensions={1,0}\n",
                  k, k, k, k);
    sb_puts(&b, "}\n");
    for (int run = 0; run < 4; run++) {
        bool bad = run >= 2, coarse = run % 2;
        if (run == 2) { /* an integer that does not fit, near the end */
            b.len -= 2;
            sb_puts(&b, " 99999999999999999999999 }\n");
        }
        int n1, n2;
        bool f1, f2;
        Arena *strings = arena_create();
        FedTok *direct = scan_all(b.data, b.len, false, coarse, &n1, &f1, NULL);
        FedTok *fed = scan_all(b.data, b.len, true, coarse, &n2, &f2, strings);
        assert_true(n1 > (coarse ? 70000 : 150000)); /* coarse: whole heads and SHARDING attributes */
        assert_int_equal(n1, n2);
        assert_int_equal(f1, bad);
        assert_int_equal(f2, bad);
        for (int k = 0; k < n1; k++) {
            assert_int_equal(direct[k].kind, fed[k].kind);
            assert_int_equal(direct[k].loc.off, fed[k].loc.off);
            assert_int_equal(direct[k].loc.end, fed[k].loc.end);
            assert_int_equal(direct[k].tok.n, fed[k].tok.n);
            if (direct[k].kind == TOK_SHAPE) {
                assert_memory_equal(direct[k].tok.shape, fed[k].tok.shape, sizeof(Shape));
            } else if (direct[k].kind == TOK_INST) {
                const AstHead *x = direct[k].tok.head, *y = fed[k].tok.head;
                assert_memory_equal(x->shape, y->shape, sizeof(Shape));
                assert_int_equal(x->n_ops, y->n_ops);
                assert_int_equal(x->n_attrs, y->n_attrs);
                for (uint32_t p = 0; p < 3u + x->n_ops + 2u * x->n_attrs; p++) {
                    assert_int_equal(x->part[p].off, y->part[p].off);
                    assert_int_equal(x->part[p].n, y->part[p].n);
                    if (direct[k].tok.s[x->part[p].off] == '{') /* an integer list: by content */
                        assert_memory_equal(x->part[p].ints->ints, y->part[p].ints->ints,
                                            sizeof *x->part[p].ints->ints * x->part[p].ints->n);
                    else
                        assert_true(x->part[p].v == y->part[p].v);
                }
            } else
                assert_true(direct[k].tok.i == fed[k].tok.i);
            if (direct[k].tok.n) assert_memory_equal(direct[k].tok.s, fed[k].tok.s, direct[k].tok.n);
        }
        free_scanned(direct, n1);
        free_scanned(fed, n2);
        arena_destroy(strings);
    }
    sb_free(&b);
}

/* A token longer than flex's buffer: every refill makes flex rescan the
 * token from its start, so the refills must fill the (doubling) buffer
 * rather than come in fixed blocks, or a multi-megabyte string is
 * quadratic.  Scans through YY_INPUT (ast_scan_read) as parse.c does and
 * counts the refills: a 4 MiB string in a 64 KiB buffer that doubles takes
 * 7 doublings (one refill each) plus the first and the last refill; fixed
 * 8 KiB refills would take 512. */
static void test_long_token_refills_are_logarithmic(void **state)
{
    (void)state;
    const size_t body = (size_t)4 << 20;
    const char *pre = "x=\"", *post = "\" y=1";
    size_t len = strlen(pre) + body + strlen(post);
    char *text = malloc(len + 1);
    assert_non_null(text);
    memcpy(text, pre, strlen(pre));
    memset(text + strlen(pre), 'a', body);
    memcpy(text + strlen(pre) + body, post, strlen(post) + 1);
    DiagEngine *diag = diag_create(NULL);
    uint32_t fid = diag_add_file(diag, "t.hlo", text, len);
    Arena *arena = arena_create(), *keep = arena_create();
    ParseCtx cx = {.arena = arena, .keep = keep, .diag = diag, .file_id = fid, .text = text, .len = (uint32_t)len};
    AstLines lines;
    ast_lines_scan(cx.text, cx.len, &lines);
    ast_lines_init(&cx, &lines);
    ScanState st;
    memset(&st, 0, sizeof st);
    st.cx = &cx;
    yyscan_t sc;
    assert_int_equal(hlo_yylex_init_extra(&st, &sc), 0);
    int kinds[8], n = 0;
    uint32_t string_len = 0;
    for (;;) {
        HLO_YYSTYPE v;
        AstLoc loc;
        memset(&v, 0, sizeof v);
        int tok = hlo_yylex(&v, &loc, sc);
        if (tok == TOK_YYEOF) break;
        if (tok == TOK_STRING) string_len = v.tok.n;
        if (n < 8) kinds[n] = tok;
        n++;
    }
    assert_int_equal(n, 4); /* x= "a...a" y= 1 */
    assert_int_equal(kinds[0], TOK_ATTRNAME);
    assert_int_equal(kinds[1], TOK_STRING);
    assert_int_equal(kinds[3], TOK_INT);
    assert_int_equal(string_len, body);
    assert_int_equal(st.fed, len);
    assert_in_range(st.reads, 2, 12);
    assert_string_equal(diag_text(diag), "");
    hlo_yylex_destroy(sc);
    intern_free(&st.texts);
    intern_free(&st.shardings);
    ast_lines_release(&lines);
    arena_destroy(arena);
    arena_destroy(keep);
    diag_destroy(diag);
    free(text);
}

/* ast_lines_scan against a byte-by-byte model (diag_is_line_end) on texts
 * larger than its 64 KiB blocks: line ends on and beside block borders, a
 * '\r' first met in a later block (CRLF across a border, a lone CR), and a
 * NUL in a later block. */
static void check_lines(const char *t, uint32_t len)
{
    AstLines l;
    ast_lines_scan(t, len, &l);
    const char *z = memchr(t, 0, len);
    uint32_t nul = z ? (uint32_t)(z - t) : len;
    assert_int_equal(l.nul, nul);
    if (nul < len) {
        ast_lines_release(&l);
        return;
    }
    uint32_t n = 1;
    assert_int_equal(l.start[0], 0);
    for (uint32_t i = 0; i < len; i++)
        if (diag_is_line_end(t, len, i)) {
            assert_true(n < l.n);
            assert_int_equal(l.start[n], i + 1);
            n++;
        }
    assert_int_equal(l.n, n);
    ast_lines_release(&l);
}

static void test_lines_scan_blocks(void **state)
{
    (void)state;
    const uint32_t B = 64u * 1024u, len = 3 * B + 100;
    char *t = malloc(len);
    assert_non_null(t);
    for (uint32_t i = 0; i < len; i++) t[i] = i % 37 == 36 ? '\n' : 'x';
    t[B - 1] = '\n';
    t[B] = '\n';
    t[2 * B - 1] = '\n';
    check_lines(t, len);
    t[len - 1] = '\n'; /* a last line end: a start at len */
    check_lines(t, len);
    t[2 * B - 1] = '\r'; /* CRLF across the border into the third block */
    t[2 * B] = '\n';
    check_lines(t, len);
    t[2 * B + 5] = '\r'; /* a lone CR */
    check_lines(t, len);
    t[2 * B] = 0; /* a NUL first in the block after the first '\r' */
    check_lines(t, len);
    t[2 * B] = '\n';
    t[2 * B + 9] = 0; /* a NUL after the first '\r' */
    check_lines(t, len);
    t[B + 3] = 0; /* a NUL in the second block */
    check_lines(t, len);
    t[0] = 0;
    check_lines(t, len);
    check_lines(t, 0);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identifiers_keep_dots_and_dashes),
        cmocka_unit_test(test_label_attrname_name),
        cmocka_unit_test(test_types_and_keywords),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_integer_values),
        cmocka_unit_test(test_dim_labels),
        cmocka_unit_test(test_punctuation),
        cmocka_unit_test(test_layout_brace),
        cmocka_unit_test(test_coarse_shapes),
        cmocka_unit_test(test_coarse_int_groups),
        cmocka_unit_test(test_coarse_shardings),
        cmocka_unit_test(test_coarse_signature),
        cmocka_unit_test(test_iota_transpose),
        cmocka_unit_test(test_strings_unescaped),
        cmocka_unit_test(test_single_quotes_and_sections),
        cmocka_unit_test(test_comments_skipped),
        cmocka_unit_test(test_backend_config_blob),
        cmocka_unit_test(test_frontend_attribute_blobs),
        cmocka_unit_test(test_locations),
        cmocka_unit_test(test_lexical_errors),
        cmocka_unit_test(test_nesting_limit),
        cmocka_unit_test(test_feed_on_thread_matches_direct_scan),
        cmocka_unit_test(test_long_token_refills_are_logarithmic),
        cmocka_unit_test(test_lines_scan_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
