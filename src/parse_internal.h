/* parse_internal.h - what the three parts of the HLO text lowering share:
 * parse.c (driver, names, computations, instructions), parse_attrs.c
 * (literals, typed and verbatim attributes) and parse_sharding.c (the
 * `sharding=` syntax).  Not part of the contract: only src/parse*.c include it.
 */
#ifndef SPMDC_PARSE_INTERNAL_H
#define SPMDC_PARSE_INTERNAL_H

#include "spmdc/parse.h"

#include <string.h>

#include "ast.h"

/* uthash tables live in the parse arena: nothing is freed one by one. */
#define uthash_malloc(sz) arena_alloc(hash_arena, (sz), 16)
#define uthash_free(ptr, sz) ((void)(ptr), (void)(sz))
#include <uthash.h>

/* printf arguments for a token, shortened for messages. */
#define TOKF(t) (int)((t).n > 64 ? 64 : (t).n), (t).s

typedef struct NameEnt {
    const char *key;        /* into the source text (or static) */
    uint32_t len;
    int32_t idx;
    AstLoc loc;             /* of the definition */
    UT_hash_handle hh;
} NameEnt;

/* The instruction names of the computation being lowered: name -> index,
 * open addressing over a flat array of (32-bit hash, entry) slots at most
 * half full, entries in a flat array in definition order (both in
 * comp_arena), so a lookup touches one or two slots and one entry rather
 * than a chain of scattered hash nodes.  An entry is 32 bytes, one cache
 * line's half: a name of up to INST_NAME_INLINE bytes is compared with
 * its copy in the entry, a longer one with the source text (by offset,
 * which is also its location), where a lookup of an operand defined far
 * back would otherwise wait for a line of the input that left the cache. */
#define INST_NAME_INLINE 12
typedef struct InstName {
    uint32_t off;           /* the name token in the source text (with any '%') */
    uint32_t width;         /* its bytes; the name itself is the last len of them */
    uint32_t len;
    uint32_t hash;          /* ast_name_hash of the name */
    int32_t idx;            /* instruction index */
    char inl[INST_NAME_INLINE]; /* the name's bytes when len <= INST_NAME_INLINE */
} InstName;
_Static_assert(sizeof(InstName) == 32, "two entries a cache line");

typedef struct InstNames {
    uint64_t *slot;         /* [cap]: hash << 32 | (entry + 1); 0 = free */
    uint32_t cap;           /* a power of two, or 0 */
    uint32_t n;
    InstName *ents;         /* [cap_ents] */
    uint32_t cap_ents;
} InstNames;

/* A fixed set of spellings (opcodes, attribute names) -> index: open
 * addressing over a flat array at most a quarter full, hashed with
 * ast_name_hash, so a lookup per instruction or attribute is one or two
 * probes in a table that stays in the cache. */
typedef struct KwEnt {
    const char *key;        /* static */
    uint32_t len;
    int32_t idx;
} KwEnt;

/* The most attribute names XLA's parser knows that parse_attrs.c can hold. */
#define PARSE_MAX_XLA_ATTRS 128

typedef struct KwTable {
    KwEnt *ents;            /* [mask + 1], key NULL = free */
    uint32_t mask;
} KwTable;

static inline void kw_init(Arena *a, KwTable *t, uint32_t n)
{
    uint32_t cap = 16;
    while (cap < 4 * n) cap *= 2;
    t->ents = ARENA_ARRAY(a, KwEnt, cap);
    t->mask = cap - 1;
}

/* Adds s -> idx (a spelling given twice keeps the later index). */
static inline void kw_add(KwTable *t, const char *s, uint32_t n, int32_t idx)
{
    uint32_t i = ast_name_hash(s, n) & t->mask;
    while (t->ents[i].key && (t->ents[i].len != n || memcmp(t->ents[i].key, s, n) != 0)) i = (i + 1) & t->mask;
    t->ents[i] = (KwEnt){s, n, idx};
}

/* The index of s[0..n) (h: its ast_name_hash), or -1. */
static inline int32_t kw_find_hashed(const KwTable *t, const char *s, uint32_t n, uint32_t h)
{
    for (uint32_t i = h & t->mask; t->ents[i].key; i = (i + 1) & t->mask)
        if (t->ents[i].len == n && memcmp(t->ents[i].key, s, n) == 0) return t->ents[i].idx;
    return -1;
}

/* The index of s[0..n), or -1. */
static inline int32_t kw_find(const KwTable *t, const char *s, uint32_t n)
{
    return kw_find_hashed(t, s, n, ast_name_hash(s, n));
}

/* The index of a word or name token's text (its hash is in t.i), or -1. */
static inline int32_t kw_find_tok(const KwTable *t, AstTok tok)
{
    return kw_find_hashed(t, tok.s, tok.n, (uint32_t)tok.i);
}

/* A name that was not (yet) defined where it was used; resolved at the end
 * of the computation (operands) or of the module (computations), so the
 * message can say "used before its definition" when it is defined later. */
typedef struct Pending {
    AstTok name;
    AstLoc loc;
    struct Pending *next;
} Pending;

/* A lowered attribute list, by its source text: instructions of one opcode
 * whose attributes (all but a trailing `sharding=`) read byte for byte the
 * same lower to the same shared attribute set, so the set is looked up by
 * text instead of being lowered and hashed again (parse.c attrs_memo_*).
 * Open addressing over a flat array at most half full (keep arena). */
typedef struct AttrsMemo {
    uint32_t off, len;      /* the attribute text in the source */
    uint32_t hash;          /* of the text and the opcode; 0 = free slot */
    int32_t op;
    const HloAttrs *attrs;  /* the shared set, NULL: the defaults */
} AttrsMemo;

typedef struct Lower {
    ParseCtx *cx;
    DiagEngine *diag;
    int base_errors;        /* diag errors before parse_hlo began */
    int n_errors;           /* errors the lowering reported itself */
    HloModule *m;           /* created by the header or the first computation */
    Arena *tmp;             /* = cx->arena: reset after every hand-over */
    Arena *keep;            /* whole parse: computation names, tables, pending computations */
    Arena *comp_arena;      /* one computation: instruction names, signature, pending operands */
    NameEnt *comp_names;    /* computation name -> index */
    NameEnt *axis_names;    /* mesh axis names of named shardings, each copied to the syntax arena once */
    InstNames inst_names;   /* current computation: name -> index (comp_arena) */
    KwTable opcodes;        /* opcode spelling -> HloOpcode */
    KwTable attr_specs;     /* attribute name -> ATTR_SPECS index (parse_attrs.c) */
    KwTable xla_attrs;      /* attribute names XLA's parser knows -> bit index (-2: every op takes it) */
    int32_t n_xla_attrs;
    uint64_t xla_op_attrs[HLO_OPCODE_COUNT][PARSE_MAX_XLA_ATTRS / 64]; /* per opcode: the names it takes */
    int8_t required_attrs[HLO_OPCODE_COUNT]; /* per opcode: its REQUIRED_ATTRS entry (parse_attrs.c), -1: none */
    AttrsMemo *memo;        /* [cap_memo] */
    uint32_t cap_memo, n_memo;
    /* The parse without LAC: the syntax read for each distinct one-line
     * sharding text of an instruction (SharedSyntax, lw->keep), so a SHARED
     * token (AV_SHARED) gets the same syntax (parse_lower_sharding). */
    bool share_shardings;
    InternSet shared_syntax;
    /* The instruction being lowered got a shared syntax (shared != NULL):
     * where its text is, recorded on the module once it has its index. */
    HloSyntaxMove move;
    bool has_header;
    AstTok module_name;
    AstLoc module_name_loc;
    int32_t entry;          /* computation marked ENTRY, or -1 */
    AstLoc entry_loc;
    int32_t layout_params;  /* parameters the header's entry_computation_layout lists, -1: none read */
    AstLoc layout_loc;      /* its parameter list `(...)` */
    int32_t layout_results; /* results it lists (a tuple's elements, else 1), -1: none read */
    AstLoc layout_result_loc;
    Pending *pending_comps;
    /* the computation being lowered */
    int32_t cur_comp;
    AstTok cur_comp_name;
    AstLoc comp_start;
    int comp_errors;        /* n_errors when it began */
    int32_t n_insts;
    /* comp_size_hint: no line after this one (a line index) starts with '}' */
    uint32_t no_close_from;
    int32_t root;
    AstLoc root_loc;
    Pending *pending_ops;
    bool has_sig;
    int32_t n_params;
    int32_t *param_shape;   /* signature: per parameter an index into sig_shapes, -1 after an error */
    AstLoc *param_locs;     /* signature: where each parameter (`p:`) is written */
    Shape *sig_shapes;      /* the distinct shapes of the signature (arrays without a layout tail
                               are shared: a 1M-instruction module's 400k parameters have 3) */
    int32_t n_sig_shapes, cap_sig_shapes;
    int32_t *sig_params;    /* with a signature: the parameter instructions it declares with
                               another shape (sig_differs), in order (comp_arena) */
    int32_t n_sig_params, cap_sig_params;
    int32_t *sig_slot;      /* [cap_sig_slot]: open addressing over sig_shapes, entry + 1; 0 = free */
    uint32_t cap_sig_slot;
    Shape result;
    bool result_ok;
    AstLoc result_loc;
    /* The module's record of a scanner's shape (AstShape.pre, one per
     * distinct text for the whole parse), direct mapped by address: an
     * instruction written with a shape seen lately takes its record without
     * hashing it again (lower_inst). */
    struct {
        const Shape *pre, *rec;
    } shape_recs[64];
} Lower;

/* What an instruction's attribute list lowers to. */
typedef struct InstOut {
    HloAttrs attrs;
    bool any_attr;
    const ShardingSyntax *sharding;
    int32_t param_number; /* parameter(N) */
} InstOut;

/* ---------------------------------------------------------------- small helpers */

static inline const char *describe(Lower *lw, const AstVal *v) { return ast_describe(lw->cx, v); }

static inline NameEnt *name_find(NameEnt *tab, const char *s, uint32_t n)
{
    NameEnt *e = NULL;
    HASH_FIND(hh, tab, s, n, e);
    return e;
}

/* Adds s[0..n) -> idx; the entry (and the table) live in hash_arena. */
static inline NameEnt *name_add(Arena *hash_arena, NameEnt **tab, const char *s, uint32_t n, int32_t idx,
                                const AstLoc *loc)
{
    NameEnt *e = ARENA_NEW(hash_arena, NameEnt);
    e->key = s;
    e->len = n;
    e->idx = idx;
    if (loc) e->loc = *loc;
    HASH_ADD_KEYPTR(hh, *tab, e->key, e->len, e);
    return e;
}

/* a * b, or -1 when it exceeds limit (both >= 0). */
static inline int64_t mul_capped(int64_t a, int64_t b, int64_t limit)
{
    if (a < 0 || b < 0) return -1;
    if (a != 0 && b > limit / a) return -1;
    return a * b;
}

/* The only prim of an element, or NULL. */
static inline const AstVal *elem_single(const AstVal *elem)
{
    return (elem && elem->child && !elem->child->next) ? elem->child : NULL;
}

static inline bool is_group(const AstVal *v, AstValKind k) { return v && v->kind == k; }

static inline bool is_word(const AstVal *v, const char *w)
{
    return v && v->kind == AV_WORD && ast_tok_eq(v->t, w);
}

/* ---------------------------------------------------------------- parse.c */

/* Reports an error at loc through lw->diag and counts it; returns false. */
bool parse_err(Lower *lw, const AstLoc *loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A note (after an error) at loc. */
void parse_note(Lower *lw, const AstLoc *loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The shape as text, in lw->tmp. */
const char *parse_shape_str(Lower *lw, const Shape *s);
/* The attribute's value, which must be one prim (NULL after an error). */
const AstVal *parse_attr_value(Lower *lw, const AstVal *attr);
/* "attribute 'x' expects <what>, found ..."; returns false. */
bool parse_want(Lower *lw, const AstVal *attr, const AstVal *v, const char *what);
/* v is a plain int64 integer (ctx names it in the message); 0 on error. */
bool parse_int_of(Lower *lw, const AstVal *v, const char *ctx, int64_t *out);

/* ---------------------------------------------------------------- parse_attrs.c */

/* Fills lw->attr_specs (in lw->keep) from the typed-attribute table. */
void parse_attrs_init(Lower *lw);
/* Typed attributes into out->attrs, sharding= into out->sharding, the rest
 * verbatim.  Duplicates are errors. */
bool parse_lower_attrs(Lower *lw, const AstInst *ai, HloOpcode op, InstOut *out);
/* A constant of shape s written as v; arrays go to the module arena. */
bool parse_lower_literal(Lower *lw, const Shape *s, const AstVal *v, Literal *out);
/* Reports every attribute of list[0..n) whose name an earlier one used. */
bool parse_check_dup_names(Lower *lw, const AstVal **list, int32_t n);
/* name=value kept as written (module arena): text is the value's source text. */
RawAttr *parse_make_raw(Lower *lw, const AstVal **list, int32_t n);
/* frontend_attributes (of the header or an instruction): the Shardy meshes
 * written in its xla.sdy strings, checked (sdy_check_meshes; a fault is an
 * error at its place in the text), and the inline ones noted in
 * HloModule.sdy_inline_mesh.  False after an error. */
bool parse_check_sdy_meshes(Lower *lw, const AstVal *at);
/* Checks `[dims] T(perm)` of an iota device list (need_t: T(...) is required
 * when there are several dims); fills dims[0..*nd), perm (identity without
 * T) and *total, the device count. */
bool parse_iota_source(Lower *lw, const AstVal *dims_v, const AstVal *perm_v, bool need_t, int64_t *dims,
                       int32_t *nd, int32_t *perm, int64_t *total, int32_t max_dims);

/* ---------------------------------------------------------------- parse_sharding.c */

/* sharding=: a single sharding or a flat tuple `{{...}, {...}}`, syntax only
 * (bind.c resolves it against the mesh).  In the module arena; NULL after an
 * error. */
const ShardingSyntax *parse_lower_sharding(Lower *lw, const AstVal *attr, const AstVal *v);

#endif
