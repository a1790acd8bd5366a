/* ast.c - the HLO parse tree: scanner helpers, constructors, syntax errors.
 *
 * Three groups of functions, all used only by the front end:
 *  - scanner helpers called from grammar/hlo.l (position tracking, word
 *    classification, integer and string literals, the layout-brace peek);
 *  - constructors called from the one-line actions of grammar/hlo.y (every
 *    node comes from the parse arena; lists are appended in O(1));
 *  - the wording of syntax errors (`unexpected X, expected A or B`) and small
 *    read-only accessors parse.c uses while lowering.
 * Nothing here interprets attributes or resolves names (parse.c does).
 */
#include "ast.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo.tab.h"
#include "spmdc/strbuf.h"

/* ---------------------------------------------------------------- scanner helpers */

size_t ast_scan_read(ScanState *st, char *buf, size_t max)
{
    size_t left = st->cx->len - st->fed, n = left < max ? left : max;
    memcpy(buf, st->cx->text + st->fed, n);
    st->fed += (uint32_t)n;
    st->reads++;
    return n;
}

#define KW(w, t) {w, sizeof w - 1, t}
static const struct {
    const char *word;
    size_t len;
    int tok;
} KEYWORDS[] = {
    KW("HloModule", TOK_KW_HLOMODULE),
    KW("ENTRY", TOK_KW_ENTRY),
    KW("ROOT", TOK_KW_ROOT),
    KW("true", TOK_KW_TRUE),
    KW("false", TOK_KW_FALSE),
    KW("inf", TOK_KW_INF),
    KW("maximal", TOK_KW_MAXIMAL),
    KW("replicated", TOK_KW_REPLICATED),
    KW("manual", TOK_KW_MANUAL),
    KW("unknown", TOK_KW_UNKNOWN),
    KW("unreduced", TOK_KW_UNREDUCED),
    KW("last_tile_dim_replicate", TOK_KW_LAST_TILE_DIM_REPLICATE),
    KW("shard_as", TOK_KW_SHARD_AS),
    KW("shard_like", TOK_KW_SHARD_LIKE),
};
#undef KW

/* shape.h's element type table with the lengths precomputed (hot in the scanner). */
#define ET(e, str, bits, cls) {str, sizeof str - 1, ET_##e},
static const struct {
    const char *name;
    size_t len;
    ElemType type;
} ELEM_TYPES[] = {SPMDC_ELEM_TYPES(ET){"opaque_type", 11, ET_OPAQUE}};
#undef ET

/* Keywords and element type names by a small open-addressing table (built
 * on first use; 64 words in 256 slots), so an identifier costs one probe
 * or two rather than a walk over both lists. */
#define WORD_SLOTS 256
typedef struct WordEnt {
    const char *s; /* NULL: free */
    uint32_t n;
    int tok;       /* TOK_PRIMTYPE for element types */
    int type;      /* ElemType of an element type */
} WordEnt;

static uint32_t word_hash(const char *s, size_t n)
{
    return ((uint32_t)n * 31u + (unsigned char)s[0] * 7u + (unsigned char)s[n - 1] * 13u +
            (unsigned char)s[n / 2]) & (WORD_SLOTS - 1);
}

static void word_put(WordEnt *tab, const char *s, size_t n, int tok, int type)
{
    uint32_t i = word_hash(s, n);
    while (tab[i].s) i = (i + 1) & (WORD_SLOTS - 1);
    tab[i] = (WordEnt){s, (uint32_t)n, tok, type};
}

static const WordEnt *word_table(void)
{
    static WordEnt tab[WORD_SLOTS];
    static bool ready;
    if (!ready) {
        for (size_t k = 0; k < sizeof KEYWORDS / sizeof KEYWORDS[0]; k++)
            word_put(tab, KEYWORDS[k].word, KEYWORDS[k].len, KEYWORDS[k].tok, 0);
        for (size_t k = 0; k < sizeof ELEM_TYPES / sizeof ELEM_TYPES[0]; k++)
            word_put(tab, ELEM_TYPES[k].name, ELEM_TYPES[k].len, TOK_PRIMTYPE, (int)ELEM_TYPES[k].type);
        ready = true;
    }
    return tab;
}

int ast_scan_word(const char *s, size_t n, int depth, AstTok *tok)
{
    static const char *const sections[] = {"FileNames", "FunctionNames", "FileLocations", "StackFrames"};
    if (depth == 0 && s[0] >= 'F' && s[0] <= 'S')
        for (size_t k = 0; k < 4; k++)
            if (strlen(sections[k]) == n && memcmp(sections[k], s, n) == 0) return TOK_SECTION;
    const WordEnt *tab = word_table();
    for (uint32_t i = word_hash(s, n); tab[i].s; i = (i + 1) & (WORD_SLOTS - 1))
        if (tab[i].n == n && memcmp(tab[i].s, s, n) == 0) {
            if (tab[i].tok == TOK_PRIMTYPE) tok->i = tab[i].type;
            return tab[i].tok;
        }
    return TOK_IDENT;
}

/* Where the scanner's own values go: cx->strings on a thread of its own, else cx->keep. */
static Arena *ast_scan_arena(const ScanState *st) { return st->quiet ? st->cx->strings : st->cx->keep; }

int ast_scan_word_token(ScanState *st, const AstLoc *loc, AstTok *tok)
{
    *tok = ast_tok_at(st, loc, 0, 0);
    int w = ast_scan_word(tok->s, tok->n, st->depth, tok);
    /* `s1 = ...`: an element type where a name goes (one error, no cascade) */
    if (w == TOK_PRIMTYPE) w = ast_scan_type_word(st, tok->s, tok->n);
    if (w != TOK_PRIMTYPE && w != TOK_TYPE_AS_NAME) ast_scan_name(st, tok);
    return w;
}

/* The first byte at or after i of t[0..n) that is no blank and not in a
 * comment; n at the end (or in an unterminated comment). */
static uint32_t skip_blanks(const char *t, uint32_t i, uint32_t n)
{
    while (i < n) {
        char c = t[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
            i++;
        } else if (c == '/' && i + 1 < n && t[i + 1] == '*') {
            uint32_t k = i + 2;
            while (k + 1 < n && !(t[k] == '*' && t[k + 1] == '/')) k++;
            if (k + 1 >= n) return n;
            i = k + 2;
        } else if (c == '/' && i + 1 < n && t[i + 1] == '/') {
            while (i < n && t[i] != '\n' && t[i] != '\r') i++;
        } else {
            return i;
        }
    }
    return n;
}

/* One distinct SHAPE or INTGROUP text and its value, kept in ScanState.texts
 * under the text's name hash h (a shape's text starts with a letter, a
 * group's with '{'); or an instruction's sharding text (ScanState.shardings). */
struct ScanText {
    const char *s; /* in the input */
    uint32_t n, h;
    const void *val; /* Shape or AstIntGroup; a sharding's: its text */
};
/* Distinct SHAPE and INTGROUP texts a scan keeps; more are read token by token. */
#define SCAN_MAX_SHAPES 65536

/* Whether the n bytes at a and at b are equal (8 at a time, no call: the
 * texts are short). */
static inline bool scan_bytes_equal(const char *a, const char *b, uint32_t n)
{
    uint64_t x, y;
    if (n < 8) {
        for (uint32_t k = 0; k < n; k++)
            if (a[k] != b[k]) return false;
        return true;
    }
    for (uint32_t k = 0; k + 8 < n; k += 8) {
        memcpy(&x, a + k, 8);
        memcpy(&y, b + k, 8);
        if (x != y) return false;
    }
    memcpy(&x, a + n - 8, 8);
    memcpy(&y, b + n - 8, 8);
    return x == y;
}

static bool scan_text_same(const void *stored, const void *item)
{
    const ScanText *a = stored, *b = item;
    return a->n == b->n && scan_bytes_equal(a->s, b->s, a->n);
}

/* The text s[0..n) (hash h) kept in set, or NULL; *at: where
 * scan_text_keep puts one (intern.h).  recent (AST_SCAN_RECENT entries,
 * by hash) remembers the last text found or kept per entry: a module
 * repeats a few texts on every line, so most lookups end there. */
static const ScanText *scan_text_lookup(InternSet *set, const ScanText **recent, const char *s, uint32_t n,
                                        uint32_t h, uint32_t *at)
{
    const ScanText **r = &recent[h & (AST_SCAN_RECENT - 1)];
    if (*r && (*r)->h == h && (*r)->n == n && scan_bytes_equal((*r)->s, s, n)) return *r;
    ScanText probe = {s, n, h, NULL};
    const ScanText *e = intern_find(set, h, &probe, scan_text_same, at);
    if (e) *r = e;
    return e;
}

/* Keeps text s[0..n) (hash h; not kept yet, at from scan_text_lookup) and val. */
static void scan_text_keep(ScanState *st, InternSet *set, const ScanText **recent, const char *s, uint32_t n,
                           uint32_t h, uint32_t at, const void *val)
{
    ScanText *e = ARENA_NEW(ast_scan_arena(st), ScanText);
    *e = (ScanText){s, n, h, val};
    intern_add(set, at, h, e);
    recent[h & (AST_SCAN_RECENT - 1)] = e;
}

/* The value kept for SHAPE or INTGROUP text s[0..n) (hash h), or NULL;
 * *at: where scan_text_add puts one. */
static const void *scan_text_find(ScanState *st, const char *s, uint32_t n, uint32_t h, uint32_t *at)
{
    const ScanText *e = scan_text_lookup(&st->texts, st->recent_texts, s, n, h, at);
    return e ? e->val : NULL;
}

/* Keeps val for SHAPE or INTGROUP text s[0..n) (hash h; not kept yet, at from scan_text_find). */
static void scan_text_add(ScanState *st, const char *s, uint32_t n, uint32_t h, uint32_t at, const void *val)
{
    scan_text_keep(st, &st->texts, st->recent_texts, s, n, h, at, val);
}

/* Reads `,`-separated decimal integers of at most 18 digits from s[*p..),
 * up to the closing byte close, into v[0..max); their count, or -1 when
 * one is longer or there are more than max. */
static int scan_int_list(const char *s, uint32_t *p, char close, int64_t *v, int max)
{
    int k = 0;
    uint32_t i = *p;
    if (s[i] == close) {
        *p = i + 1;
        return 0;
    }
    for (;;) {
        if (k == max) return -1;
        int64_t x = 0;
        uint32_t start = i;
        for (; s[i] >= '0' && s[i] <= '9'; i++) {
            if (i - start == 18) return -1;
            x = x * 10 + (s[i] - '0');
        }
        v[k++] = x;
        if (s[i++] == close) break; /* else ',' (the scanner's pattern) */
    }
    *p = i;
    return k;
}

/* The shape of a SHAPE text s[0..n) whose element type word is s[0..w),
 * or false when it is no well-formed array shape (ast_scan_shape). */
static bool scan_lower_shape(const char *s, uint32_t n, uint32_t w, Shape *out)
{
    memset(out, 0, sizeof *out); /* as lower_array_shape: equal shapes are equal bytes */
    AstTok t;
    if (ast_scan_word(s, w, 1, &t) != TOK_PRIMTYPE) return false;
    out->type = (ElemType)t.i;
    uint32_t p = w + 1;
    int rank = scan_int_list(s, &p, ']', out->dims, SPMDC_MAX_RANK);
    if (rank < 0) return false;
    out->rank = rank;
    if (p == n) return true;
    int64_t perm[SPMDC_MAX_RANK];
    p++; /* '{' */
    if (scan_int_list(s, &p, '}', perm, SPMDC_MAX_RANK) != rank) return false;
    uint32_t seen = 0;
    for (int k = 0; k < rank; k++) {
        if (perm[k] >= rank || (seen >> perm[k] & 1)) return false;
        seen |= 1u << perm[k];
        out->minor_to_major[k] = (int8_t)perm[k];
    }
    out->has_layout = true;
    return true;
}

/* The lowered shape of the SHAPE text s[0..n) (its element type word
 * s[0..w), h its ast_name_hash), shared by every equal text; NULL when it is no well-formed
 * array shape or the scan keeps SCAN_MAX_SHAPES texts already. */
static const Shape *scan_shape_text(ScanState *st, const char *s, uint32_t n, uint32_t w, uint32_t h)
{
    uint32_t slot = 0;
    const Shape *found = scan_text_find(st, s, n, h, &slot);
    if (found) return found;
    Shape sh;
    if (st->texts.n == SCAN_MAX_SHAPES || !scan_lower_shape(s, n, w, &sh)) return NULL;
    Shape *keep = ARENA_NEW(ast_scan_arena(st), Shape);
    memcpy(keep, &sh, sizeof sh);
    scan_text_add(st, s, n, h, slot, keep);
    return keep;
}

uint32_t ast_scan_shape(ScanState *st, const AstLoc *loc, AstTok *tok)
{
    const char *text = st->cx->text, *s = text + loc->off;
    uint32_t n = loc->end - loc->off, w = 0;
    while (s[w] != '[') w++;
    if (!st->coarse || st->depth >= AST_MAX_NESTING) return w;
    /* `f32[2] {1,0}`: the layout is the parser's to join (and `{` after
     * `]` the scanner's to tell apart, ast_scan_layout_follows) */
    if (s[n - 1] == ']') {
        uint32_t i = skip_blanks(text, st->off, st->cx->len);
        if (i < st->cx->len && text[i] == '{') return w;
    }
    const Shape *found = scan_shape_text(st, s, n, w, ast_name_hash(s, n));
    if (!found) return w;
    memset(tok, 0, sizeof *tok);
    tok->s = s;
    tok->n = n;
    tok->shape = found;
    return 0;
}

/* The integers of the INTGROUP text s[0..n) (`{}` or `{ints}`; h its
 * ast_name_hash), shared by
 * every equal text; NULL when one has more than 18 digits or the scan
 * keeps SCAN_MAX_SHAPES texts already. */
static const AstIntGroup *scan_int_group_text(ScanState *st, const char *s, uint32_t n, uint32_t h)
{
    uint32_t slot = 0;
    const AstIntGroup *found = scan_text_find(st, s, n, h, &slot);
    if (found) return found;
    if (st->texts.n == SCAN_MAX_SHAPES) return NULL;
    uint32_t count = n > 2 ? 1 : 0, run = 0;
    for (uint32_t i = 1; i + 1 < n; i++) {
        run = s[i] == ',' ? 0 : run + 1;
        if (run > 18) return NULL;
        count += s[i] == ',';
    }
    Arena *a = ast_scan_arena(st);
    struct AstGroupInt *ints = ARENA_ARRAY(a, struct AstGroupInt, count ? count : 1);
    for (uint32_t k = 0, i = 1; k < count; k++, i++) { /* i: the first digit, then the ',' or '}' after */
        ints[k].off = i;
        for (; s[i] != ',' && s[i] != '}'; i++) ints[k].v = ints[k].v * 10 + (s[i] - '0');
        ints[k].len = i - ints[k].off;
    }
    AstIntGroup *g = ARENA_NEW(a, AstIntGroup);
    g->n = count;
    g->ints = ints;
    scan_text_add(st, s, n, h, slot, g);
    return g;
}

bool ast_scan_int_group(ScanState *st, const AstLoc *loc, AstTok *tok)
{
    if (!st->coarse || st->last_tok != TOK_ATTRNAME || st->last_attr_blob || st->last_attr_fa ||
        (st->fa_depth > 0 && st->fa_depth == st->depth) || st->depth >= AST_MAX_NESTING)
        return false;
    const char *s = st->cx->text + loc->off;
    uint32_t n = loc->end - loc->off;
    const AstIntGroup *found = scan_int_group_text(st, s, n, ast_name_hash(s, n));
    if (!found) return false;
    memset(tok, 0, sizeof *tok);
    tok->s = s;
    tok->n = n;
    tok->ints = found;
    return true;
}

/* ---------------------------------------------------------------- whole instruction heads */

/* Byte classes of an instruction head (grammar/hlo.l): HEAD_ID a name's
 * bytes (IDCHAR), HEAD_DIGIT, HEAD_BLANK (the blanks a head may hold:
 * space and tab), HEAD_START a name's first byte (IDSTART).  NUL, the
 * end mark of flex's buffer, is in none. */
enum { HEAD_ID = 1, HEAD_DIGIT = 2, HEAD_BLANK = 4, HEAD_START = 8 };
static const uint8_t HEAD_CLASS[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0,
    0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0, 0, 9,
    0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0, 0, 0,
};
#define HEAD_IS(c, cls) (HEAD_CLASS[(unsigned char)(c)] & (cls))
/* One byte into an FNV-1a hash (ast_name_hash). */
#define HEAD_FNV(h, c) ((h) = ((h) ^ (unsigned char)(c)) * 16777619u)

/* The walkers over a head's bytes b (flex's buffer: they stop at its NUL
 * end mark at the latest).  head_blanks: past {B}; head_name: past a
 * name's bytes from i, its ast_name_hash into *hash; head_ints: *at past
 * INTS (`({D}+(","{D}+)*)?`) and the byte close after them, each byte into
 * *hash, or false and *at at the first byte that does not fit. */
static inline uint32_t head_blanks(const char *b, uint32_t i)
{
    while (HEAD_IS(b[i], HEAD_BLANK)) i++;
    return i;
}
static inline uint32_t head_name(const char *b, uint32_t i, uint32_t *hash)
{
    const unsigned char *p = (const unsigned char *)b + i;
    uint32_t h = 2166136261u;
    for (unsigned c; HEAD_CLASS[c = *p] & HEAD_ID; p++) HEAD_FNV(h, c);
    *hash = h;
    return (uint32_t)(p - (const unsigned char *)b);
}
static inline bool head_ints(const char *b, uint32_t *at, char close, uint32_t *hash)
{
    uint32_t i = *at, h = *hash;
    if (b[i] != close)
        for (;;) {
            if (!HEAD_IS(b[i], HEAD_DIGIT)) break;
            do HEAD_FNV(h, b[i]); while (HEAD_IS(b[++i], HEAD_DIGIT));
            if (b[i] != ',') break;
            HEAD_FNV(h, ',');
            i++;
            if (!HEAD_IS(b[i], HEAD_DIGIT)) { /* INTS has no empty item: `{0,}` is no list */
                *at = i;
                return false;
            }
        }
    *at = i;
    if (b[i] != close) return false;
    HEAD_FNV(h, close);
    *hash = h;
    *at = i + 1;
    return true;
}
static inline bool head_word_is(const char *s, uint32_t n, const char *w)
{
    return strlen(w) == n && memcmp(s, w, n) == 0;
}
/* Whether a word that ast_scan_word classed as tok is a prim of the
 * grammar (an IDENT or a keyword the rule `prim` takes). */
static bool head_prim_word(int tok)
{
    switch (tok) {
    case TOK_IDENT: case TOK_KW_TRUE: case TOK_KW_FALSE: case TOK_KW_INF: case TOK_KW_MAXIMAL:
    case TOK_KW_REPLICATED: case TOK_KW_MANUAL: case TOK_KW_UNKNOWN: case TOK_KW_UNREDUCED:
    case TOK_KW_LAST_TILE_DIM_REPLICATE: case TOK_KW_SHARD_AS: case TOK_KW_SHARD_LIKE:
        return true;
    default:
        return false;
    }
}

/* The value at b[*at] of a head (VAL of grammar/hlo.l; ops: only OPND, a
 * `%name` or digits) as part *p (the name hash of a name or word, the
 * text hash of an integer list, nothing yet for an integer:
 * head_value_check), *at past it; or false and
 * *at at the first byte that does not fit. */
static inline bool head_value(const char *b, uint32_t *at, bool ops, AstHeadPart *p)
{
    uint32_t i = *at, e, hash = 0;
    char c = b[i];
    if (c == '%') {
        *at = i + 1;
        if (!HEAD_IS(b[i + 1], HEAD_START)) return false;
        e = head_name(b, i + 1, &hash);
    } else if (HEAD_IS(c, HEAD_DIGIT) || (c == '-' && !ops)) {
        e = i + (c == '-');
        *at = e;
        if (!HEAD_IS(b[e], HEAD_DIGIT)) return false;
        while (HEAD_IS(b[++e], HEAD_DIGIT)) {}
    } else if (c == '{' && !ops) {
        e = i + 1;
        hash = (2166136261u ^ '{') * 16777619u; /* the list's text hash, for scan_int_group_text */
        if (!head_ints(b, &e, '}', &hash)) {
            *at = e;
            return false;
        }
    } else if (HEAD_IS(c, HEAD_START) && !ops) {
        e = head_name(b, i, &hash);
    } else {
        return false;
    }
    p->off = i;
    p->n = e - i;
    p->v = hash;
    *at = e;
    return true;
}

/* Whether the value part p of the head text s is one the LAC parser's
 * scanner reads as one prim (no integer of more than 18 digits, no word
 * that is no prim, an integer list the scan keeps, scan_int_group_text),
 * and its integer or list into p. */
static bool head_value_check(ScanState *st, const char *s, AstHeadPart *p)
{
    const char *t = s + p->off;
    if (t[0] == '%') return true;
    if (t[0] == '{') {
        p->ints = scan_int_group_text(st, t, p->n, (uint32_t)p->v);
        return p->ints != NULL;
    }
    if (t[0] == '-' || HEAD_IS(t[0], HEAD_DIGIT)) {
        uint32_t d = t[0] == '-';
        if (p->n - d > 18) return false;
        int64_t v = 0;
        for (uint32_t k = d; k < p->n; k++) v = v * 10 + (t[k] - '0');
        p->v = d ? -v : v;
        return true;
    }
    AstTok w;
    return head_prim_word(ast_scan_word(t, p->n, st->depth, &w)) && !head_word_is(t, p->n, "nan");
}

uint32_t ast_scan_inst_head(ScanState *st, const AstLoc *loc, const char *b, size_t avail, AstTok *tok)
{
    const char *s = st->cx->text + loc->off;
    AstHead *h = st->head_at ? st->head_at : &st->heads[st->n_heads % AST_HEAD_RING];
    uint32_t hash, name_n = head_name(b, 1, &hash);
    if (!st->coarse || st->depth != 1) return name_n;
    h->part[0] = (AstHeadPart){0, name_n, {hash}};
    /* the pattern of grammar/hlo.l's comment, each byte read once: the
     * shape (its text hash as it goes: the element type's, then the rest) */
    uint32_t i = head_blanks(b, loc->end - loc->off), w, e;
    if (!HEAD_IS(b[i], HEAD_START)) return name_n;
    w = head_name(b, i, &hash);
    if (b[w] != '[') return name_n;
    HEAD_FNV(hash, '[');
    e = w + 1;
    if (!head_ints(b, &e, ']', &hash)) return name_n;
    if (b[e] == '{') {
        HEAD_FNV(hash, '{');
        e++;
        if (!head_ints(b, &e, '}', &hash)) return name_n;
    }
    if (!HEAD_IS(b[e], HEAD_BLANK)) return name_n;
    uint32_t shape_hash = hash;
    h->part[1] = (AstHeadPart){i, e - i, {0}};
    /* the opcode and at most 8 operands */
    i = head_blanks(b, e);
    if (!HEAD_IS(b[i], HEAD_START)) return name_n;
    e = head_name(b, i, &hash);
    if (b[e] != '(') return name_n;
    h->part[2] = (AstHeadPart){i, e - i, {hash}};
    uint32_t k = 3;
    i = e + 1;
    if (b[i] != ')')
        for (;;) {
            if (!head_value(b, &i, true, &h->part[k++])) return name_n;
            if (b[i] == ')') break;
            if (k == 3 + AST_HEAD_MAX_OPS) return name_n;
            i = head_blanks(b, i);
            if (b[i] != ',') return name_n;
            i = head_blanks(b, i + 1);
        }
    uint32_t n_ops = k - 3, end = i + 1;
    /* at most 8 attributes `, name=value`: up to the first that is none
     * (i: where it stops fitting), which must lie inside flex's buffer */
    for (uint32_t a = 0; a < AST_HEAD_MAX_ATTRS; a++) {
        i = head_blanks(b, end);
        if (b[i] != ',') break;
        i = head_blanks(b, i + 1);
        if (!HEAD_IS(b[i], HEAD_START)) break;
        e = head_name(b, i, &hash);
        h->part[k] = (AstHeadPart){i, e - i, {hash}};
        i = e;
        if (b[i] != '=') break;
        i++;
        if (!head_value(b, &i, false, &h->part[k + 1])) break;
        k += 2;
        end = i;
    }
    /* the text [0, end) and the byte after it are in flex's buffer (the
     * NUL at avail ends its scan); its last token ends there for the LAC
     * parser's scanner too */
    char c = b[end];
    if (i >= avail || (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\f' && c != '\v' && c != ','))
        return name_n;
    /* the pieces as the LAC parser's scanner reads them, checked in the
     * order that keeps the same shape and integer-list texts */
    h->shape = scan_shape_text(st, s + h->part[1].off, h->part[1].n, w - h->part[1].off, shape_hash);
    if (!h->shape) return name_n;
    const char *op = s + h->part[2].off;
    uint32_t op_n = h->part[2].n;
    AstTok t;
    if (ast_scan_word(op, op_n, st->depth, &t) != TOK_IDENT || head_word_is(op, op_n, "T") ||
        head_word_is(op, op_n, "nan"))
        return name_n; /* `T(` and `nan(` are tokens of their own */
    for (uint32_t p = 3; p < 3 + n_ops; p++)
        if (!head_value_check(st, s, &h->part[p])) return name_n;
    for (uint32_t p = 3 + n_ops; p < k; p += 2) {
        const char *an = s + h->part[p].off;
        uint32_t an_n = h->part[p].n;
        if (head_word_is(an, an_n, "backend_config") || head_word_is(an, an_n, "frontend_attributes"))
            return name_n; /* their '{' opens a blob, or a group of blobs */
        if (!head_value_check(st, s, &h->part[p + 1])) return name_n;
    }
    h->n_ops = (uint16_t)n_ops;
    h->n_attrs = (uint16_t)((k - 3 - n_ops) / 2);
    st->n_heads++;
    if (!st->quiet) ast_prefetch_head(st->cx, s, h); /* else the parser's thread does (ast_feed_keep_head) */
    memset(tok, 0, sizeof *tok);
    tok->s = s;
    tok->n = end;
    tok->head = h;
    return 0;
}

/* A parameter list's text: t[0..n) of the input (not flex's buffer, which
 * a long list overruns), read through sig_at: NUL past the end. */
typedef struct SigText {
    const char *t;
    uint32_t n;
} SigText;

static char sig_at(const SigText *x, uint32_t i) { return i < x->n ? x->t[i] : '\0'; }

static uint32_t sig_blanks(const SigText *x, uint32_t i)
{
    while (HEAD_IS(sig_at(x, i), HEAD_BLANK)) i++;
    return i;
}

/* Past `{D}+(","{D}+)*` and the closing byte close at i (an empty list
 * too), or 0 when there is no such list. */
static uint32_t sig_int_list(const SigText *x, uint32_t i, char close)
{
    if (sig_at(x, i) == close) return i + 1;
    for (;;) {
        if (!HEAD_IS(sig_at(x, i), HEAD_DIGIT)) return 0;
        while (HEAD_IS(sig_at(x, i), HEAD_DIGIT)) i++;
        if (sig_at(x, i) == close) return i + 1;
        if (sig_at(x, i++) != ',') return 0;
    }
}

/* One parameter `label: shape` at i, the label as the LABEL token reads it
 * and the shape as the SHAPE token does, then blanks: where it ends, or 0.
 * *p gets the offsets; the shape is looked up when fill is set. */
static uint32_t sig_param(ScanState *st, const SigText *x, uint32_t i, AstSigParam *p, bool fill)
{
    if (!HEAD_IS(sig_at(x, i), HEAD_START)) return 0;
    uint32_t j = i;
    while (HEAD_IS(sig_at(x, j), HEAD_ID)) j++;
    if (sig_at(x, j) != ':') return 0;
    p->label_off = i;
    p->label_len = j - i;
    i = sig_blanks(x, j + 1);
    uint32_t s = i;
    if (!HEAD_IS(sig_at(x, i), HEAD_START)) return 0;
    while (HEAD_IS(sig_at(x, i), HEAD_ID)) i++;
    if (sig_at(x, i) != '[') return 0;
    uint32_t w = i - s;
    if (!(i = sig_int_list(x, i + 1, ']'))) return 0;
    if (sig_at(x, i) == '{' && !(i = sig_int_list(x, i + 1, '}'))) return 0;
    p->shape_off = s;
    p->shape_len = i - s;
    if (fill) {
        p->shape = scan_shape_text(st, x->t + s, p->shape_len, w, ast_name_hash(x->t + s, p->shape_len));
        if (!p->shape) return 0;
    }
    return sig_blanks(x, i);
}

uint32_t ast_scan_signature(ScanState *st, const AstLoc *loc, AstTok *tok)
{
    SigText x = {st->cx->text + loc->off, st->cx->len - loc->off};
    if (!st->coarse || sig_at(&x, 0) != '(') return 0;
    uint32_t n = 0, end = 0;
    AstSigParam p;
    for (uint32_t i = sig_blanks(&x, 1);; n++) { /* the form and the count */
        if (!(i = sig_param(st, &x, i, &p, false))) return 0;
        if (sig_at(&x, i) == ')') {
            end = i + 1;
            break;
        }
        if (sig_at(&x, i) != ',') return 0;
        i = sig_blanks(&x, i + 1);
    }
    n++;
    AstSig *sig = arena_alloc(ast_scan_arena(st), sizeof(AstSig) + sizeof(AstSigParam) * n, _Alignof(AstSig));
    sig->n = n;
    for (uint32_t k = 0, i = sig_blanks(&x, 1); k < n; k++) {
        if (!(i = sig_param(st, &x, i, &sig->p[k], true))) return 0;
        i = sig_blanks(&x, i + 1);
    }
    memset(tok, 0, sizeof *tok);
    tok->s = x.t;
    tok->n = end;
    tok->sig = sig;
    return end;
}

/* The bytes a sharding's scan stops at (ast_scan_sharding): braces,
 * quotes, and what ends its one-line text (a line end, a comment, an
 * escape, NUL: the end mark of flex's buffer). */
static const bool SHARDING_STOP[256] = {
    ['\0'] = true, ['{'] = true, ['}'] = true, ['"'] = true, ['\''] = true,
    ['\n'] = true, ['\r'] = true, ['/'] = true, ['\\'] = true,
};

/* The brace group at b (b[0] == '{') to its matching '}' on this line:
 * its length and text hash (ast_name_hash) in *len and *hash; false when a
 * stop byte other than a brace or a plain string's quote comes first. */
static bool scan_brace_group(const char *b, uint32_t *len, uint32_t *hash)
{
    uint32_t n = 0, h = 2166136261u;
    for (int depth = 0;;) {
        unsigned char c = (unsigned char)b[n];
        if (!SHARDING_STOP[c]) {
            HEAD_FNV(h, c);
            n++;
            continue;
        }
        if (c == '{') {
            depth++;
        } else if (c == '}') {
            if (--depth == 0) {
                HEAD_FNV(h, c);
                *len = n + 1;
                *hash = h;
                return true;
            }
        } else if (c == '"' || c == '\'') { /* a string without escapes */
            HEAD_FNV(h, c);
            for (n++; b[n] != (char)c && b[n] != '\\' && b[n] != '\n' && b[n] != '\0'; n++) HEAD_FNV(h, b[n]);
            if (b[n] != (char)c) return false;
        } else {
            return false;
        }
        HEAD_FNV(h, c);
        n++;
    }
}

uint32_t ast_scan_sharding(ScanState *st, const char *b, size_t avail, AstTok *tok)
{
    const char *s = st->cx->text + st->off;
    uint32_t n, h;
    if (!st->coarse || avail == 0 || b[0] != '{') return 0;
    if (b[head_blanks(b, 1)] == '{') st->leaf_depth = st->depth + 1; /* a tuple: its leaves open at that depth */
    if (!scan_brace_group(b, &n, &h)) return 0;
    uint32_t slot = 0;
    if (scan_text_lookup(&st->shardings, st->recent_shardings, b, n, h, &slot)) {
        memset(tok, 0, sizeof *tok);
        tok->s = s;
        tok->n = n;
        tok->i = h;
        st->leaf_depth = 0;
        return n;
    }
    if (st->shardings.n < SCAN_MAX_SHAPES) scan_text_keep(st, &st->shardings, st->recent_shardings, s, n, h, slot, s);
    return 0;
}

uint32_t ast_scan_sharding_leaf(ScanState *st, const AstLoc *loc, const char *b, AstTok *tok)
{
    uint32_t n, h, slot;
    char first = b[head_blanks(b, 1)];
    if (first == '{' || first == '}' || !scan_brace_group(b, &n, &h) ||
        !scan_text_lookup(&st->shardings, st->recent_shardings, b, n, h, &slot))
        return 0;
    memset(tok, 0, sizeof *tok);
    tok->s = st->cx->text + loc->off;
    tok->n = n;
    tok->i = h;
    return n;
}

AstTok ast_tok_at(const ScanState *st, const AstLoc *loc, uint32_t skip_front, uint32_t skip_back)
{
    AstTok t = {0};
    t.s = st->cx->text + loc->off + skip_front;
    t.n = loc->end - loc->off - skip_front - skip_back;
    return t;
}

void ast_scan_error(ScanState *st, const AstLoc *loc, const char *fmt, ...)
{
    if (st->quiet) {
        st->failed = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    diag_report(st->cx->diag, DIAG_ERROR, ast_span(st->cx, loc), fmt, ap);
    va_end(ap);
}

bool ast_scan_int(ScanState *st, const AstLoc *loc, AstTok *tok)
{
    *tok = ast_tok_at(st, loc, 0, 0);
    const char *p = tok->s, *e = tok->s + tok->n;
    bool neg = *p == '-';
    if (neg) p++;
    uint64_t v = 0;
    bool overflow = false, check = e - p > 19; /* 19 digits always fit in 64 bits */
    for (; p < e; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (check && v > (UINT64_MAX - d) / 10) overflow = true;
        v = v * 10 + d;
    }
    if (neg && v > (uint64_t)INT64_MAX + 1) overflow = true;
    if (overflow) {
        ast_scan_error(st, loc, "integer '%.*s%s' does not fit in 64 bits", (int)(tok->n > 40 ? 40 : tok->n),
                       tok->s, tok->n > 40 ? "..." : "");
        return false;
    }
    if (neg)
        tok->i = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    else
        tok->i = (int64_t)v; /* above INT64_MAX: the u64 bit pattern */
    tok->is_u64 = !neg && v > (uint64_t)INT64_MAX;
    return true;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* C escapes: \n \t \r \a \b \f \v \\ \" \' \? \ooo \xHH; others keep the char. */
static size_t unescape_one(const char *p, const char *e, char *out)
{
    static const char from[] = "ntrabfv\\\"'?", to[] = "\n\t\r\a\b\f\v\\\"'?";
    const char *hit = strchr(from, *p);
    if (hit && *p) {
        *out = to[hit - from];
        return 1;
    }
    if (*p >= '0' && *p <= '7') {
        unsigned v = 0;
        size_t k = 0;
        while (k < 3 && p + k < e && p[k] >= '0' && p[k] <= '7') v = v * 8 + (unsigned)(p[k++] - '0');
        *out = (char)(v & 0xff);
        return k;
    }
    if (*p == 'x' && p + 1 < e && hex_digit(p[1]) >= 0) {
        unsigned v = 0;
        size_t k = 1;
        while (p + k < e && hex_digit(p[k]) >= 0) v = v * 16 + (unsigned)hex_digit(p[k++]);
        *out = (char)(v & 0xff);
        return k;
    }
    *out = *p;
    return 1;
}

void ast_scan_string(ScanState *st, const AstLoc *loc, AstTok *tok)
{
    AstTok raw = ast_tok_at(st, loc, 1, 1);
    char *buf = arena_alloc(ast_scan_arena(st), (size_t)raw.n + 1, 1);
    const char *p = raw.s, *e = raw.s + raw.n;
    size_t n = 0;
    while (p < e) {
        if (*p == '\\' && p + 1 < e) {
            p += 1 + unescape_one(p + 1, e, &buf[n++]);
        } else {
            buf[n++] = *p++;
        }
    }
    buf[n] = 0;
    memset(tok, 0, sizeof *tok);
    tok->s = buf;
    tok->n = (uint32_t)n;
}

int ast_scan_type_word(ScanState *st, const char *text, size_t n)
{
    const char *t = st->cx->text;
    uint32_t i = st->off, len = st->cx->len;
    while (i < len && (t[i] == ' ' || t[i] == '\t')) i++;
    if (i < len && t[i] == '=' && (i + 1 >= len || t[i + 1] != '=')) return TOK_TYPE_AS_NAME;
    if (i < len && t[i] == '[') return TOK_PRIMTYPE;
    /* (bad names are recorded by the parser after an error; a quiet
     * scanner's parse is run again anyway once its parser reports one) */
    for (int k = 0; !st->quiet && k < st->cx->n_bad_names; k++)
        if (st->cx->bad_name[k].n == n && memcmp(st->cx->bad_name[k].s, text, n) == 0) return TOK_IDENT;
    return TOK_PRIMTYPE;
}

bool ast_scan_layout_follows(const ScanState *st)
{
    const char *t = st->cx->text;
    uint32_t i = st->off, n = st->cx->len;
    if (i < n && t[i] == '}') return true; /* `f32[]{}` */
    i = skip_blanks(t, i, n);
    if (i == n) return false;
    char c = t[i];
    return (c >= '0' && c <= '9') || c == '-' || c == ':';
}

/* ---------------------------------------------------------------- locations */

/* Bytes per block of ast_lines_scan: small enough that a block read once
 * from memory stays in the L2 cache for the block's other searches. */
#define LINES_BLOCK (64u * 1024u)

static void lines_put(AstLines *l, uint32_t *cap, uint32_t start)
{
    if (l->n == *cap) {
        *cap *= 2;
        l->start = xrealloc(l->start, *cap * sizeof *l->start);
    }
    l->start[l->n++] = start;
}

void ast_lines_scan(const char *t, uint32_t len, AstLines *l)
{
    uint32_t cap = 1024;
    l->start = xmalloc(cap * sizeof *l->start);
    l->start[0] = 0;
    l->n = 1;
    l->nul = len;
    for (uint32_t b = 0; b < len; b += LINES_BLOCK) {
        uint32_t e = len - b > LINES_BLOCK ? b + LINES_BLOCK : len;
        const char *z = memchr(t + b, 0, e - b);
        if (z) { /* the parser stops at the NUL: its line table is not needed */
            l->nul = (uint32_t)(z - t);
            return;
        }
        if (memchr(t + b, '\r', e - b)) { /* no '\r' before b: the rest byte by byte, as diag_is_line_end says */
            const char *z2 = memchr(t + e, 0, len - e);
            if (z2) {
                l->nul = (uint32_t)(z2 - t);
                return;
            }
            for (uint32_t i = b; i < len; i++)
                if (diag_is_line_end(t, len, i)) lines_put(l, &cap, i + 1);
            return;
        }
        for (const char *nl = memchr(t + b, '\n', e - b); nl; nl = memchr(nl + 1, '\n', (size_t)(t + e - nl - 1)))
            lines_put(l, &cap, (uint32_t)(nl - t) + 1);
    }
}

void ast_lines_release(AstLines *l)
{
    free(l->start);
    l->start = NULL;
    l->n = 0;
}

void ast_lines_init(ParseCtx *cx, const AstLines *l)
{
    cx->line_start = l->start;
    cx->n_lines = l->n;
    cx->cur_line = 0;
}

SrcLoc ast_pos(ParseCtx *cx, uint32_t off)
{
    const uint32_t *ls = cx->line_start;
    uint32_t n = cx->n_lines, k = cx->cur_line;
    if (ls[k] <= off && (k + 1 == n || ls[k + 1] > off)) {
        /* the line of the last query */
    } else if (ls[k] <= off && (k + 2 == n || ls[k + 2] > off)) {
        k++; /* the next line: text order */
    } else {
        uint32_t lo = 0, hi = n; /* the last line start <= off: ls[lo] <= off < ls[hi] */
        while (hi - lo > 1) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (ls[mid] <= off)
                lo = mid;
            else
                hi = mid;
        }
        k = lo;
    }
    cx->cur_line = k;
    return (SrcLoc){cx->file_id, k + 1, off - ls[k] + 1};
}

SrcSpan ast_span(ParseCtx *cx, const AstLoc *loc)
{
    SrcSpan s;
    if (loc->end > loc->off) {
        s.begin = ast_pos(cx, loc->off);
        s.end = ast_pos(cx, loc->end - 1);
    } else if (loc->off > 0) {
        s.begin = s.end = ast_pos(cx, loc->off - 1);
    } else {
        memset(&s, 0, sizeof s);
    }
    return s;
}

/* ---------------------------------------------------------------- constructors */

/* A zeroed node of size bytes, valid until the next hand-over.  Nodes are
 * bump-allocated from a list of blocks that each hand-over rewinds, so the
 * one instruction's tree lives in memory that stays in the cache, at a few
 * instructions per node.  The arena's debug build allocates every node on
 * its own from the parse arena, so the sanitizers see each node's bounds. */
typedef struct AstBlock {
    struct AstBlock *next;
    _Alignas(16) char data[];
} AstBlock;
/* Blocks of 1 MiB are mappings of their own in the arena (MAP_MIN):
 * freeing them returns the memory, which malloc'd blocks would not. */
#define AST_BLOCK (1024 * 1024)

#ifndef SPMDC_ARENA_DEBUG
static void ast_pool_next(ParseCtx *cx)
{
    AstBlock *b = cx->pool_blk ? cx->pool_blk->next : cx->pool_first;
    if (!b) {
        if (!cx->pool) cx->pool = arena_create();
        b = arena_alloc(cx->pool, sizeof(AstBlock) + AST_BLOCK, 16);
        b->next = NULL;
        if (cx->pool_blk)
            cx->pool_blk->next = b;
        else
            cx->pool_first = b;
    }
    cx->pool_blk = b;
    cx->pool_cur = b->data;
    cx->pool_end = b->data + AST_BLOCK;
}

#endif

static inline void *ast_new(ParseCtx *cx, size_t size)
{
#ifdef SPMDC_ARENA_DEBUG
    return arena_alloc(cx->arena, size, 16);
#else
    size = (size + 7) & ~(size_t)7; /* every node is smaller than a block */
    if ((size_t)(cx->pool_end - cx->pool_cur) < size) ast_pool_next(cx);
    void *p = cx->pool_cur;
    cx->pool_cur += size;
    memset(p, 0, size);
    return p;
#endif
}
#define AST_NEW(cx, T) ((T *)ast_new((cx), sizeof(T)))

/* Frees the AST of the piece just handed over. */
static void ast_reset(ParseCtx *cx)
{
    arena_reset(cx->arena);
    /* A piece that needed more than one block (a signature of many
     * parameters) gives them all back rather than holding them to the end. */
    if (cx->pool_first && cx->pool_first->next) ast_pool_free(cx);
    cx->pool_blk = NULL;
    cx->pool_cur = cx->pool_end = NULL;
}

void ast_pool_free(ParseCtx *cx)
{
    if (cx->pool) arena_destroy(cx->pool);
    cx->pool = NULL;
    cx->pool_first = cx->pool_blk = NULL;
    cx->pool_cur = cx->pool_end = NULL;
}

static AstVal *new_val(ParseCtx *cx, AstValKind kind, const AstLoc *loc)
{
    AstVal *v = AST_NEW(cx, AstVal);
    v->kind = (uint8_t)kind;
    v->loc = *loc;
    return v;
}

AstVal *ast_tok_val(ParseCtx *cx, AstValKind kind, AstTok t, const AstLoc *loc)
{
    AstVal *v = new_val(cx, kind, loc);
    v->t = t;
    return v;
}

AstVal *ast_punct(ParseCtx *cx, AstPunct p, const AstLoc *loc)
{
    AstVal *v = new_val(cx, AV_PUNCT, loc);
    v->punct = (uint8_t)p;
    v->t.s = cx->text + loc->off;
    v->t.n = loc->end - loc->off;
    return v;
}

AstVal *ast_attr(ParseCtx *cx, AstTok name, AstVal *value, const AstLoc *loc)
{
    AstVal *v = new_val(cx, AV_ATTR, loc);
    v->t = name;
    v->child = value;
    v->last = value;
    return v;
}

AstVal *ast_attr_add(AstVal *attr, AstVal *prim)
{
    attr->last->next = prim;
    attr->last = prim;
    attr->loc = ast_loc_join(&attr->loc, &prim->loc);
    return attr;
}

AstVal *ast_group(ParseCtx *cx, AstValKind kind, AstList elems, const AstLoc *loc)
{
    AstVal *v = new_val(cx, kind, loc);
    v->child = elems.head;
    return v;
}

AstVal *ast_elem1(ParseCtx *cx, AstVal *prim)
{
    AstVal *v = new_val(cx, AV_ELEM, &prim->loc);
    v->child = prim;
    v->last = prim;
    return v;
}

void ast_elem_add(AstVal *elem, AstVal *prim)
{
    elem->last->next = prim;
    elem->last = prim;
    elem->loc = ast_loc_join(&elem->loc, &prim->loc);
}

AstVal *ast_shape_val(ParseCtx *cx, AstShape *s)
{
    AstVal *v = new_val(cx, AV_SHAPE, &s->loc);
    v->shape = s;
    return v;
}

AstList ast_list1(AstVal *v)
{
    AstList l = {v, v};
    return l;
}

AstList ast_list_add(AstList l, AstVal *v)
{
    if (!v) return l;
    if (l.tail)
        l.tail->next = v;
    else
        l.head = v;
    l.tail = v;
    return l;
}

AstVal *ast_dim(ParseCtx *cx, AstTok t, int flags, const AstLoc *loc)
{
    AstVal *v = ast_tok_val(cx, AV_INT, t, loc);
    v->flags = (uint8_t)flags;
    return v;
}

AstShape *ast_array_shape(ParseCtx *cx, AstTok type, AstList dims, AstLayout *layout, const AstLoc *loc)
{
    AstShape *s = AST_NEW(cx, AstShape);
    s->loc = *loc;
    s->type = type;
    s->dims = dims.head;
    s->layout = layout;
    return s;
}

AstShape *ast_pre_shape(ParseCtx *cx, AstTok shape, const AstLoc *loc)
{
    AstShape *s = AST_NEW(cx, AstShape);
    s->loc = *loc;
    s->pre = shape.shape;
    return s;
}

AstVal *ast_int_group(ParseCtx *cx, AstTok group, const AstLoc *loc)
{
    AstVal *g = new_val(cx, AV_BRACE, loc), *prev = NULL;
    for (uint32_t k = 0; k < group.ints->n; k++) {
        const struct AstGroupInt *e = &group.ints->ints[k];
        AstLoc l = {loc->off + e->off, loc->off + e->off + e->len};
        AstVal *v = new_val(cx, AV_INT, &l), *el = new_val(cx, AV_ELEM, &l);
        v->t.s = cx->text + l.off;
        v->t.n = e->len;
        v->t.i = e->v;
        el->child = el->last = v;
        if (prev)
            prev->next = el;
        else
            g->child = el;
        prev = el;
    }
    return g;
}

/* The token of part p of an INST text s: for a `%name` the text after the
 * '%'; v is its hash or value. */
static inline AstTok head_tok(const char *s, const AstHeadPart *p)
{
    AstTok t = {0};
    uint32_t pct = s[p->off] == '%';
    t.s = s + p->off + pct;
    t.n = p->n - pct;
    t.i = p->v;
    return t;
}

/* The prim the grammar builds for part p (an operand or an attribute
 * value) of the INST text s at offset base. */
static AstVal *head_prim(ParseCtx *cx, const char *s, uint32_t base, const AstHeadPart *p)
{
    AstLoc l = {base + p->off, base + p->off + p->n};
    char c = s[p->off];
    if (c == '{') {
        AstTok g = {0};
        g.s = s + p->off;
        g.n = p->n;
        g.ints = p->ints;
        return ast_int_group(cx, g, &l);
    }
    AstValKind kind = c == '%' ? AV_NAME : c == '-' || (c >= '0' && c <= '9') ? AV_INT : AV_WORD;
    return ast_tok_val(cx, kind, head_tok(s, p), &l);
}

AstVal *ast_sharding_attr(ParseCtx *cx, AstTok group, const AstLoc *loc)
{
    static const char name[] = "sharding";
    AstTok t = {0};
    t.s = group.s - (sizeof name - 1) - 1; /* `sharding=` precedes the group */
    t.n = sizeof name - 1;
    t.i = ast_name_hash(t.s, t.n);
    AstVal *v = ast_tok_val(cx, AV_SHARED, group, &(AstLoc){loc->end - group.n, loc->end});
    return ast_attr(cx, t, v, loc);
}

AstLayout *ast_layout(ParseCtx *cx, AstList ints, const AstLoc *tail, const AstLoc *loc)
{
    AstLayout *l = AST_NEW(cx, AstLayout);
    l->loc = *loc;
    l->ints = ints.head;
    if (tail) {
        l->has_tail = true;
        l->tail = *tail;
    }
    return l;
}

AstShape *ast_tuple_shape(ParseCtx *cx, AstShapeList elems, const AstLoc *loc)
{
    AstShape *s = AST_NEW(cx, AstShape);
    s->loc = *loc;
    s->is_tuple = true;
    s->elems = elems.head;
    return s;
}

AstShapeList ast_shape_list_add(AstShapeList l, AstShape *s)
{
    if (l.tail)
        l.tail->next = s;
    else
        l.head = s;
    l.tail = s;
    return l;
}

AstInst *ast_inst_head(ParseCtx *cx, bool is_root, const AstLoc *root_loc, AstTok head, const AstLoc *head_loc,
                       AstList attrs, const AstLoc *whole)
{
    const char *s = head.s;
    const AstHead *h = head.head;
    const AstHeadPart *p = h->part;
    uint32_t base = head_loc->off;
    AstLoc name_loc = {base, base + p[0].n}, opcode_loc = {base + p[2].off, base + p[2].off + p[2].n};
    AstTok shape_tok = {0};
    shape_tok.s = s + p[1].off;
    shape_tok.n = p[1].n;
    shape_tok.shape = h->shape;
    AstShape *shape = ast_pre_shape(cx, shape_tok, &(AstLoc){base + p[1].off, base + p[1].off + p[1].n});
    AstList ops = {0};
    for (uint32_t k = 0; k < h->n_ops; k++) ops = ast_list_add(ops, ast_elem1(cx, head_prim(cx, s, base, &p[3 + k])));
    /* '(' right after the opcode, ')' the last byte before the attributes (or the end) */
    uint32_t close = h->n_attrs ? p[3 + h->n_ops].off : head.n;
    while (s[--close] != ')') {}
    AstVal *operands = ast_group(cx, AV_PAREN, ops, &(AstLoc){opcode_loc.end, base + close + 1});
    AstList all = {0};
    for (uint32_t k = 0; k < h->n_attrs; k++) {
        const AstHeadPart *an = &p[3 + h->n_ops + 2 * k];
        AstVal *value = head_prim(cx, s, base, an + 1);
        all = ast_list_add(all, ast_attr(cx, head_tok(s, an), value, &(AstLoc){base + an->off, value->loc.end}));
    }
    if (attrs.head) { /* the attributes after the head follow its own */
        if (all.tail)
            all.tail->next = attrs.head;
        else
            all.head = attrs.head;
    }
    return ast_inst(cx, is_root, root_loc, head_tok(s, &p[0]), &name_loc, shape, head_tok(s, &p[2]), &opcode_loc,
                    operands, all, is_root ? root_loc : &name_loc, whole);
}

AstParamList ast_param_add(ParseCtx *cx, AstParamList l, AstTok name, AstShape *shape, const AstLoc *loc)
{
    AstParam *p = AST_NEW(cx, AstParam);
    p->name = name;
    p->loc = *loc;
    p->shape = shape;
    if (l.tail)
        l.tail->next = p;
    else
        l.head = p;
    l.tail = p;
    return l;
}

AstInst *ast_inst(ParseCtx *cx, bool is_root, const AstLoc *root_loc, AstTok name, const AstLoc *name_loc,
                  AstShape *shape, AstTok opcode, const AstLoc *opcode_loc, AstVal *operands,
                  AstList attrs, const AstLoc *start, const AstLoc *whole)
{
    AstInst *in = AST_NEW(cx, AstInst);
    in->loc = ast_loc_join(start, whole);
    in->is_root = is_root;
    in->root_loc = *root_loc;
    in->name = name;
    in->name_loc = *name_loc;
    in->shape = shape;
    in->opcode = opcode;
    in->opcode_loc = *opcode_loc;
    in->operands = operands;
    in->attrs = attrs.head;
    return in;
}

/* ---------------------------------------------------------------- hand-overs */

void ast_header(ParseCtx *cx, AstTok name, const AstLoc *name_loc, AstList attrs)
{
    cx->sink->header(cx->sink->data, name, name_loc, attrs.head);
    ast_reset(cx);
}

void ast_comp_begin(ParseCtx *cx, bool is_entry, const AstLoc *entry_loc, AstTok name, const AstLoc *name_loc,
                    bool has_sig, AstParamList params, AstShape *result)
{
    AstCompHead h = {is_entry, *entry_loc, name, *name_loc, has_sig, params.head, NULL, 0, result};
    cx->sink->comp_begin(cx->sink->data, &h);
    ast_reset(cx);
}

void ast_comp_begin_sig(ParseCtx *cx, bool is_entry, const AstLoc *entry_loc, AstTok name, const AstLoc *name_loc,
                        AstTok sig, const AstLoc *loc, AstShape *result)
{
    AstCompHead h = {is_entry, *entry_loc, name, *name_loc, true, NULL, sig.sig, loc->off, result};
    cx->sink->comp_begin(cx->sink->data, &h);
    ast_reset(cx);
}

void ast_inst_done(ParseCtx *cx, AstInst *inst)
{
    cx->sink->inst(cx->sink->data, inst);
    ast_reset(cx);
}

void ast_comp_end(ParseCtx *cx, const AstLoc *close, AstList attrs)
{
    cx->sink->comp_end(cx->sink->data, close, attrs.head);
    ast_reset(cx);
}

/* ---------------------------------------------------------------- syntax errors */

/* Token classes whose text is worth quoting after the class name. */
static bool names_text_token(const char *name)
{
    static const char *const with_text[] = {"identifier", "%name", "label (name:)", "attribute name",
                                            "element type", "integer", "number", "string", "size (AxB)",
                                            "padding (lo_hi)", "dim labels", "'{...}' text"};
    for (size_t i = 0; i < sizeof with_text / sizeof with_text[0]; i++)
        if (strcmp(name, with_text[i]) == 0) return true;
    return false;
}

/* Appends the source text at loc, quoted and shortened. */
static void put_quoted_text(StrBuf *b, const ParseCtx *cx, const AstLoc *loc)
{
    uint32_t n = loc->end > loc->off ? loc->end - loc->off : 0;
    const char *s = cx->text + loc->off;
    bool cut = false;
    for (uint32_t i = 0; i < n; i++)
        if (s[i] == '\n' || s[i] == '\r' || i >= 40) {
            n = i;
            cut = true;
            break;
        }
    sb_putc(b, '\'');
    for (uint32_t i = 0; i < n; i++) sb_putc(b, (s[i] >= 32 && s[i] < 127) ? s[i] : '?');
    if (cut) sb_puts(b, "...");
    sb_putc(b, '\'');
}

static bool has_name(const char *const *names, int n, const char *want)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], want) == 0) return true;
    return false;
}

/* Tokens that can start an attribute value (summarised as "a value"). */
static bool starts_value(const char *name)
{
    static const char *const v[] = {
        "%name", "label (name:)", "attribute name", "element type", "identifier", "integer", "number", "'nan'",
        "'-inf'", "string", "'{...}' text", "size (AxB)", "padding (lo_hi)", "dim labels", "'true'", "'false'",
        "'inf'", "'maximal'", "'replicated'", "'manual'", "'unknown'", "'unreduced'", "'last_tile_dim_replicate'",
        "'shard_as'", "'shard_like'", "'<='", "'->'", "'...'", "'T('", "'{'", "'('", "'['", "'?'", "':'", "'*'",
        "'#'", "'+'", "'~'", "'='", "element type followed by '='"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (strcmp(name, v[i]) == 0) return true;
    return false;
}

static void put_list(StrBuf *b, const char *const *items, int n, const char *last)
{
    int total = n + (last ? 1 : 0);
    for (int i = 0; i < total; i++) {
        if (i) sb_puts(b, i == total - 1 ? " or " : ", ");
        sb_puts(b, i < n ? items[i] : last);
    }
}

static void put_expected(StrBuf *b, const char *const *expected, int n)
{
    if (n == 0) return;
    bool at_inst = has_name(expected, n, "'ROOT'");
    bool value = has_name(expected, n, "string") && has_name(expected, n, "integer") && has_name(expected, n, "'{'");
    if (at_inst || value) {
        /* Between instructions, or where an attribute value may start (~35
         * token kinds): name the few other tokens and summarise the rest. */
        const char *other[8];
        int k = 0;
        for (int i = 0; i < n && k < 8; i++)
            if (!starts_value(expected[i]) && strcmp(expected[i], "'ROOT'") != 0) other[k++] = expected[i];
        sb_puts(b, ", expected ");
        put_list(b, other, k, at_inst ? "an instruction" : "a value");
        return;
    }
    if (n > 6) return;
    sb_puts(b, ", expected ");
    put_list(b, expected, n, NULL);
}

/* The offset where the line holding off starts, if only blanks come before
 * off on it; else UINT32_MAX. */
static uint32_t line_start_before(const ParseCtx *cx, uint32_t off)
{
    uint32_t b = off;
    while (b > 0 && (cx->text[b - 1] == ' ' || cx->text[b - 1] == '\t' || cx->text[b - 1] == '\r')) b--;
    return b == 0 || cx->text[b - 1] == '\n' ? b : UINT32_MAX;
}

/* Lua-style help for bracket mistakes at the unexpected token loc: at end of
 * file, where the innermost open bracket is; at the first token of a line
 * inside a bracket an earlier line opened, that bracket; at a closing
 * bracket of the wrong kind, which one it met. */
static void note_open_bracket(ParseCtx *cx, bool at_eof, const char *unexpected_name, const AstLoc *loc)
{
    const ScanState *st = cx->scan;
    if (!st) return;
    const AstLoc *open = NULL;
    uint32_t line = at_eof || loc->off >= cx->len ? UINT32_MAX : line_start_before(cx, loc->off);
    if (at_eof && st->depth > 0) {
        open = &st->open_loc[st->depth - 1];
    } else if (line != UINT32_MAX && st->depth > (st->in_body ? 1 : 0) && st->depth <= AST_MAX_NESTING &&
               st->open_loc[st->depth - 1].off < line) {
        /* the first token of a line inside a bracket an earlier line left open */
        open = &st->open_loc[st->depth - 1];
    } else if (!at_eof && unexpected_name && st->depth < AST_MAX_NESTING && unexpected_name[0] == '\'' &&
               strchr("}])", unexpected_name[1]) && unexpected_name[2] == '\'') {
        /* the scanner already counted this closer against open_loc[depth] */
        open = &st->open_loc[st->depth];
        char c = cx->text[open->off], want = c == '{' ? '}' : c == '[' ? ']' : ')';
        if (open->end <= open->off || want == unexpected_name[1]) open = NULL;
    }
    if (open && open->end > open->off)
        diag_note(cx->diag, ast_span(cx, open), "'%.*s' opened here is %s", (int)(open->end - open->off),
                  cx->text + open->off, at_eof ? "never closed" : "still open");
}

/* After a syntax error at loc: unless loc starts its line (then it likely
 * starts the next instruction), the LAC parser drops the tokens up to the
 * line's end (ast_lac_lex). */
static void skip_rest_of_line(ParseCtx *cx, bool at_eof, const AstLoc *loc)
{
    ScanState *st = cx->scan;
    if (!st || at_eof || loc->off >= cx->len || line_start_before(cx, loc->off) != UINT32_MAX) return;
    const char *nl = memchr(cx->text + loc->off, '\n', cx->len - loc->off);
    st->skip_to = nl ? (uint32_t)(nl - cx->text) : cx->len;
}

int hlo_yylex(AstSemVal *lval, AstLoc *lloc, void *scanner);
ScanState *hlo_yyget_extra(void *scanner);

int ast_lac_lex(AstSemVal *lval, AstLoc *lloc, void *scanner)
{
    ScanState *st = hlo_yyget_extra(scanner);
    for (;;) {
        int t = hlo_yylex(lval, lloc, scanner);
        if (!st->skip_to) return t;
        if (t == TOK_YYEOF || (t == '}' && st->depth == 0)) {
            st->skip_to = 0;
            return t;
        }
        if (lloc->off >= st->skip_to) {
            /* the next line starts an instruction of the body: the brackets
             * the dropped part opened or closed are forgotten, so that a
             * later note names no bracket of it */
            st->skip_to = 0;
            if (st->in_body && t != '(' && t != '[' && t != '{' && t != TOK_TPAREN &&
                t != TOK_LAYOUT_LBRACE && t != ')' && t != ']' && t != '}') {
                st->depth = 1;
                st->open_loc[0] = st->body_loc;
                st->fa_depth = 0;
            }
            return t;
        }
    }
}

void ast_syntax_error(ParseCtx *cx, const AstLoc *loc, bool at_eof, const char *unexpected_name,
                      const char *const *expected, int n_expected)
{
    StrBuf b = {0};
    sb_puts(&b, "unexpected ");
    if (unexpected_name && strcmp(unexpected_name, "element type followed by '='") == 0)
        unexpected_name = "element type"; /* the token the scanner tells apart for ast_bad_inst_name */
    if (unexpected_name && strcmp(unexpected_name, "layout") == 0)
        unexpected_name = "'{'"; /* a '{' after ']' where no layout goes: it is just a brace there */
    if (at_eof) {
        sb_puts(&b, "end of file");
    } else if (unexpected_name && names_text_token(unexpected_name)) {
        sb_puts(&b, unexpected_name);
        sb_putc(&b, ' ');
        put_quoted_text(&b, cx, loc);
    } else {
        sb_puts(&b, unexpected_name ? unexpected_name : "token");
    }
    put_expected(&b, expected, n_expected);
    diag_error(cx->diag, ast_span(cx, loc), "%s", sb_cstr(&b));
    note_open_bracket(cx, at_eof, unexpected_name, loc);
    skip_rest_of_line(cx, at_eof, loc);
    if (!at_eof && unexpected_name && strcmp(unexpected_name, "attribute name") == 0 &&
        (has_name(expected, n_expected, "identifier") || has_name(expected, n_expected, "'='")))
        diag_note(cx->diag, ast_span(cx, loc), "'name=' reads as an attribute name; an instruction needs a space "
                                       "before '=' ('name = ...')");
    if (!at_eof && n_expected == 1 && strcmp(expected[0], "'='") == 0 && cx->scan && cx->scan->last_loc.off == loc->off) {
        /* `%q = f32[4] negate(%p) x` then `%r = ...`: the stray word is the name of a next instruction */
        const AstLoc *prev = &cx->scan->prev_loc;
        uint32_t w = prev->off;
        while (w > 0 && (cx->text[w - 1] == ' ' || cx->text[w - 1] == '\t')) w--;
        bool starts = line_start_before(cx, prev->off) != UINT32_MAX ||
                      (w >= 4 && memcmp(cx->text + w - 4, "ROOT", 4) == 0 && line_start_before(cx, w - 4) != UINT32_MAX);
        if (prev->end > prev->off && prev->end <= loc->off && !starts) /* not where a name is meant to be */
            diag_note(cx->diag, ast_span(cx, prev), "'%.*s' reads as the name of a new instruction",
                      (int)(prev->end - prev->off), cx->text + prev->off);
    }
    if (!at_eof && unexpected_name && strcmp(unexpected_name, "'{'") == 0 && has_name(expected, n_expected, "layout"))
        diag_note(cx->diag, ast_span(cx, loc), "a layout after a shape starts with its dimension numbers or ':' "
                                       "('{1,0}', '{1,0:T(8,128)}', '{:S(1)}' for a scalar)");
    sb_free(&b);
}

void ast_bad_inst_name(ParseCtx *cx, const AstLoc *loc)
{
    int n = (int)(loc->end > loc->off ? loc->end - loc->off : 0);
    const char *s = cx->text + loc->off;
    if (cx->n_bad_names < (int)(sizeof cx->bad_name / sizeof cx->bad_name[0])) {
        cx->bad_name[cx->n_bad_names].s = s;
        cx->bad_name[cx->n_bad_names++].n = (uint32_t)n;
    }
    diag_error(cx->diag, ast_span(cx, loc), "'%.*s' is an element type and cannot name an instruction; rename it, e.g. "
               "'%.*s_'", n, s, n, s);
}

void hlo_yyerror(AstLoc *loc, void *scanner, ParseCtx *cx, const char *msg)
{
    (void)scanner;
    if (strcmp(msg, "memory exhausted") == 0)
        diag_error(cx->diag, ast_span(cx, loc), "input nested too deeply (parser stack exhausted)");
    else
        diag_error(cx->diag, ast_span(cx, loc), "%s", msg);
}

/* ---------------------------------------------------------------- tree access */

int32_t ast_count(const AstVal *list)
{
    int32_t n = 0;
    for (; list; list = list->next) n++;
    return n;
}

const AstVal *ast_single(const AstVal *group)
{
    const AstVal *e = group ? group->child : NULL;
    if (!e || e->next || !e->child || e->child->next) return NULL;
    return e->child;
}

bool ast_tok_eq(AstTok t, const char *s)
{
    size_t n = strlen(s);
    return t.n == n && memcmp(t.s, s, n) == 0;
}

char *ast_tok_str(Arena *a, AstTok t) { return arena_strndup(a, t.s ? t.s : "", t.n); }

char *ast_text(ParseCtx *cx, const AstLoc *loc)
{
    uint32_t n = loc->end > loc->off ? loc->end - loc->off : 0;
    return arena_strndup(cx->arena, cx->text + loc->off, n);
}

static const char *const KIND_NAMES[] = {
    [AV_INT] = "integer",       [AV_DECIMAL] = "number",      [AV_NAN] = "nan",
    [AV_NEGINF] = "-inf",       [AV_STRING] = "string",       [AV_BLOB] = "'{...}' text",
    [AV_DXD] = "size",          [AV_PAD] = "padding",         [AV_DIMLABELS] = "dim labels",
    [AV_NAME] = "name",         [AV_WORD] = "identifier",     [AV_LABEL] = "label",
    [AV_PUNCT] = "",            [AV_ATTR] = "attribute",      [AV_BRACE] = "",
    [AV_BRACKET] = "",          [AV_PAREN] = "",              [AV_TPAREN] = "",
    [AV_SHAPE] = "shape",       [AV_ELEM] = "",               [AV_SHARED] = "sharding",
};

const char *ast_describe(ParseCtx *cx, const AstVal *v)
{
    if (!v) return "nothing";
    StrBuf b = {0};
    switch ((AstValKind)v->kind) {
    case AV_BRACE: sb_puts(&b, "'{...}'"); break;
    case AV_BRACKET: sb_puts(&b, "'[...]'"); break;
    case AV_PAREN: sb_puts(&b, "'(...)'"); break;
    case AV_TPAREN: sb_puts(&b, "'T(...)'"); break;
    case AV_PUNCT:
    case AV_NAN:
    case AV_NEGINF: put_quoted_text(&b, cx, &v->loc); break;
    case AV_ELEM:
        if (v->child) {
            sb_puts(&b, ast_describe(cx, v->child));
            break;
        }
        sb_puts(&b, "nothing");
        break;
    default:
        sb_puts(&b, KIND_NAMES[v->kind]);
        sb_putc(&b, ' ');
        put_quoted_text(&b, cx, &v->loc);
        break;
    }
    char *r = arena_strdup(cx->arena, sb_cstr(&b));
    sb_free(&b);
    return r;
}
