/* ast.h - the HLO parse tree (private to the front end: hlo.l, hlo.y, ast.c, parse.c).
 *
 * The bison grammar builds this tree and nothing else; parse.c lowers it to
 * the IR.  Attribute values are kept generic: a value is a list of "prims"
 * (tokens, bracket groups, array shapes, `name=value` pairs); a bracket group
 * holds comma-separated elements, each element a list of juxtaposed prims.
 * So `devices=[2,2]0,1,2,3 last_tile_dim_replicate` inside `sharding={...}`
 * is the group {elem[ATTR(devices)=[2,2], 0], elem[1], elem[2],
 * elem[3, last_tile_dim_replicate]} and parse.c interprets it.
 *
 * Every node carries an AstLoc: the byte offsets [off, end) into the source
 * text, so verbatim attribute text and layout tails can be sliced out of the
 * input exactly as written.  Line and column are worked out from the offsets
 * only where a span is needed (ast_span: a diagnostic, an instruction's
 * span in the IR), so the parser stack carries 8 bytes per symbol.
 *
 * Nodes live in the parse arena (ParseCtx.arena), which is reset after each
 * hand-over to the sink (header, computation head, instruction, computation
 * end): the tree of one instruction exists at a time.  Token text points into
 * the caller's source buffer; unescaped STRING values into ParseCtx.keep.
 */
#ifndef SPMDC_AST_H
#define SPMDC_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmdc/arena.h"
#include "spmdc/diag.h"
#include "spmdc/intern.h"
#include "spmdc/shape.h"

/* Location of a token or node: the bytes [off, end) of the source text.
 * An empty location (off == end, an empty grammar rule) stands for the
 * last byte before it (ast_span). */
typedef struct AstLoc {
    uint32_t off, end;
} AstLoc;

/* An attribute's `{ints}` value the scanner read whole (an INTGROUP
 * token): n integers of at most 18 digits, each at [off, off + len) of
 * the token's text and of value v. */
typedef struct AstIntGroup {
    uint32_t n;
    const struct AstGroupInt {
        uint32_t off, len;
        int64_t v;
    } *ints;
} AstIntGroup;

/* One piece of an INST token's text (ast_scan_inst_head): bytes
 * [off, off + n) from the head's start, and v: for a `%name` (off at the
 * '%'), a word, an opcode or an attribute name (n without its '='), the
 * name hash (ast_name_hash, of the text after any '%'); for an integer,
 * its value; for an integer list `{...}`, its AstIntGroup. */
typedef struct AstHeadPart {
    uint32_t off, n;
    union {
        int64_t v;
        const AstIntGroup *ints;
    };
} AstHeadPart;

/* An instruction head the scanner read whole (an INST token): its lowered
 * shape and parts: the name, the shape, the opcode, the n_ops operands
 * (a `%name` or an integer), then per attribute its name and its value
 * (an integer list, `%name`, integer or word: told by the first byte). */
#define AST_HEAD_MAX_OPS 8
#define AST_HEAD_MAX_ATTRS 8
#define AST_HEAD_MAX_PARTS (3 + AST_HEAD_MAX_OPS + 2 * AST_HEAD_MAX_ATTRS)
typedef struct AstHead {
    const Shape *shape;
    uint16_t n_ops, n_attrs;
    AstHeadPart part[AST_HEAD_MAX_PARTS];
} AstHead;
/* Bytes of h that are in use (what a copy must take). */
static inline size_t ast_head_size(const AstHead *h)
{
    return offsetof(AstHead, part) + sizeof(AstHeadPart) * (3u + h->n_ops + 2u * h->n_attrs);
}

/* Token text (not NUL-terminated) and, for INT, its value (u64 literals
 * above INT64_MAX keep their bit pattern; is_u64 says so); for PRIMTYPE the
 * ElemType; for the names and words (IDENT, NAME_PCT, ATTRNAME, the
 * keywords) ast_name_hash of the text, worked out by the scanner so the
 * lowering's table lookups (names, opcodes, attribute names) and the
 * parser's prefetch need not hash again. */
typedef struct AstTok {
    const char *s;
    uint32_t n;
    bool is_u64;
    union {
        int64_t i;
        const Shape *shape; /* SHAPE: the shape lowered by the scanner (ast_scan_shape) */
        const AstIntGroup *ints; /* INTGROUP: its integers (ast_scan_int_group) */
        const AstHead *head;     /* INST: its pieces (ast_scan_inst_head) */
        const struct AstSig *sig; /* SIGNATURE: its parameters (ast_scan_signature) */
    };
} AstTok;

typedef enum AstValKind {
    AV_INT,       /* 12, -3 (dim <=N: flags AVF_BOUNDED) */
    AV_DECIMAL,   /* 1.5e3 */
    AV_NAN,       /* nan, -nan, nan(0x1) */
    AV_NEGINF,    /* -inf */
    AV_STRING,    /* "..." or '...' (t.s is the unescaped text) */
    AV_BLOB,      /* {...} JSON after backend_config= / in frontend_attributes */
    AV_DXD,       /* 3x3 */
    AV_PAD,       /* 0_0x1_2 */
    AV_DIMLABELS, /* b01f_01io->b01f */
    AV_NAME,      /* %name (t = text after '%') */
    AV_WORD,      /* identifiers and keywords: add, LT, true, inf, replicated */
    AV_LABEL,     /* x: (t = text before ':') */
    AV_PUNCT,     /* <= -> : ? ... * # + ~   (punct says which) */
    AV_ATTR,      /* name=value: t = name, child = the value prim */
    AV_BRACE,     /* { elems }: child = first AV_ELEM */
    AV_BRACKET,   /* [ elems ] */
    AV_PAREN,     /* ( elems ) */
    AV_TPAREN,    /* T( elems ) (iota transpose) */
    AV_SHAPE,     /* f32[2,3]{1,0}: shape */
    AV_ELEM,      /* one comma-separated element: child = first prim */
    AV_SHARED,    /* an instruction's sharding `{...}` whose text an earlier instruction's
                     sharding had (from a SHARDING token: t = the text, t.i its name hash) */
} AstValKind;

typedef enum AstPunct {
    AP_NONE, AP_LE, AP_ARROW, AP_COLON, AP_QUESTION, AP_ELLIPSIS, AP_STAR, AP_HASH, AP_PLUS, AP_TILDE, AP_EQ
} AstPunct;

typedef struct AstShape AstShape;
typedef struct AstLayout AstLayout;

typedef struct AstVal {
    uint8_t kind;  /* AstValKind */
    uint8_t punct; /* AstPunct for AV_PUNCT */
    uint8_t flags; /* AVF_* */
    AstLoc loc;
    AstTok t;
    struct AstVal *next;  /* next prim of an element / next element of a group */
    struct AstVal *child; /* see AstValKind */
    union {
        AstShape *shape;  /* AV_SHAPE */
        struct AstVal *last; /* AV_ATTR, AV_ELEM: the last prim of child's list (O(1) append) */
    };
} AstVal;

#define AVF_BOUNDED 1 /* shape dim written `<=N` */
#define AVF_UNBOUNDED 2 /* shape dim written `?` */

/* A list under construction (left-recursive grammar rules append in O(1)). */
typedef struct AstList {
    AstVal *head, *tail;
} AstList;

/* A shape: array (type set) or tuple (is_tuple, elems). */
struct AstShape {
    AstLoc loc;
    bool is_tuple;
    const Shape *pre;      /* read whole by the scanner (a SHAPE token): already lowered, the rest unset */
    AstTok type;           /* element type spelling */
    AstVal *dims;          /* AV_INT list (flags for <=N and ?) */
    AstLayout *layout;     /* NULL: none written */
    AstShape *elems;       /* tuple elements */
    AstShape *next;        /* next tuple element */
};

/* `{1,0:T(8,128)}`: ints minor to major, optional tail text location. */
struct AstLayout {
    AstLoc loc;
    AstVal *ints;          /* AV_INT list */
    bool has_tail;
    AstLoc tail;           /* after ':' up to the closing brace */
};

typedef struct AstShapeList {
    AstShape *head, *tail;
} AstShapeList;

typedef struct AstInst {
    AstLoc loc;            /* the whole instruction */
    bool is_root;
    AstLoc root_loc;
    AstTok name;
    AstLoc name_loc;
    AstShape *shape;       /* NULL: omitted */
    AstTok opcode;
    AstLoc opcode_loc;
    AstVal *operands;      /* AV_PAREN */
    AstVal *attrs;         /* AV_ATTR list */
    struct AstInst *next;
} AstInst;

typedef struct AstParam {
    AstTok name;
    AstLoc loc;
    AstShape *shape;
    struct AstParam *next;
} AstParam;

typedef struct AstParamList {
    AstParam *head, *tail;
} AstParamList;

/* `ENTRY %name (p: f32[]) -> f32[]`, everything before the body's '{'. */
typedef struct AstCompHead {
    bool is_entry;
    AstLoc entry_loc;
    AstTok name;
    AstLoc name_loc;
    bool has_sig;
    AstParam *params;     /* the parameter list read token by token, or */
    const struct AstSig *sig; /* read whole (a SIGNATURE token at offset sig_off) */
    uint32_t sig_off;
    AstShape *result;
} AstCompHead;

/* Where finished pieces go.  The parser hands over the module header, each
 * computation head, each instruction and each computation end as soon as it
 * is reduced; after the call the parse arena is reset, so the AST of a
 * 1M-instruction computation never exists at once (parse.c lowers as it goes). */
typedef struct AstSink {
    void *data;
    void (*header)(void *data, AstTok name, const AstLoc *name_loc, const AstVal *attrs);
    void (*comp_begin)(void *data, const AstCompHead *head);
    void (*inst)(void *data, const AstInst *inst);
    void (*comp_end)(void *data, const AstLoc *close, const AstVal *attrs);
} AstSink;

/* The grammar's semantic value (bison's api.value.type): one member per
 * kind of grammar symbol. */
typedef union AstSemVal {
    AstTok tok;
    AstVal *val;
    AstList list;
    AstShape *shape;
    AstShapeList shapes;
    AstLayout *layout;
    AstInst *inst;
    AstParamList params;
    bool flag;
} AstSemVal;

/* Shared by the scanner, the parser and the lowering. */
struct ScanState;
typedef struct ParseCtx {
    Arena *arena;          /* AST nodes: reset after every sink call */
    Arena *keep;           /* unescaped strings: live for the whole parse */
    Arena *strings;        /* the same from a scanner on its own thread (ScanState.quiet), or NULL */
    DiagEngine *diag;
    uint32_t file_id;
    const char *text;      /* the whole input */
    uint32_t len;
    const AstSink *sink;
    struct ScanState *scan; /* for "opened here" notes at end of file and skip_to after a syntax error */
    struct {                      /* element types used as instruction names (ast_bad_inst_name) */
        const char *s;
        uint32_t n;
    } bad_name[8];
    int n_bad_names;
    /* The lowering's instruction-name table (parse_internal.h InstNames):
     * its slots and mask, or NULL.  The scanner prefetches the slot of every
     * name it reads, so the lookup when the instruction is lowered finds it
     * in the cache. */
    const uint64_t *name_slot;
    uint32_t name_mask;
    /* Line starts of text, borrowed from the parse's AstLines
     * (ast_lines_init): line_start[k] is the offset of line k + 1's first
     * byte; cur_line is where the last ast_pos query ended, so queries in
     * text order cost O(1). */
    const uint32_t *line_start;
    uint32_t n_lines;
    uint32_t cur_line;
    /* AST nodes are bump-allocated from a list of blocks that every
     * hand-over rewinds (ast.c); the blocks come from pool (a separate
     * arena, or NULL for the first use to create it), ast_pool_free
     * releases them. */
    Arena *pool;
    struct AstBlock *pool_first, *pool_blk;
    char *pool_cur, *pool_end;
} ParseCtx;

#define AST_MAX_NESTING 200
#define AST_HEAD_RING 4
#define AST_SCAN_RECENT 64

/* A text the scanner keeps, with its value (ast.c). */
typedef struct ScanText ScanText;

/* Scanner state (flex extra): position, context for the `{` rules. */
typedef struct ScanState {
    ParseCtx *cx;
    uint32_t off;          /* byte offset of the next character */
    uint32_t fed;          /* bytes of cx->text handed to flex so far (ast_scan_read) */
    uint32_t reads;        /* flex's refills so far (ast_scan_read calls): O(log) per long token */
    int last_tok;          /* kind of the last token returned */
    AstLoc last_loc, prev_loc; /* where the last token returned and the one before it are */
    bool last_attr_blob;   /* last ATTRNAME was backend_config */
    bool last_attr_fa;     /* last ATTRNAME was frontend_attributes */
    int depth;             /* open ( [ { T( */
    AstLoc open_loc[AST_MAX_NESTING + 1]; /* where each open bracket is */
    int fa_depth;          /* depth inside frontend_attributes={ ... }, 0 outside */
    bool in_body;          /* the open depth-1 '{' is a computation's body (not an attribute's value):
                              at depth 1 after a ',' an ATTRNAME is an instruction's attribute */
    AstLoc body_loc;       /* where that '{' is (open_loc[0] again after a dropped line, ast_lac_lex) */
    int blob_depth;
    AstLoc blob_start;
    bool dead;             /* a fatal lexical error was reported: only EOF follows */
    uint32_t skip_to;      /* after a syntax error in mid-line: the offset of that line's end; the
                              LAC parser's tokens before it are dropped (ast_lac_lex), 0: none */
    /* Scanning on a thread of its own (ScanFeed): errors are not reported
     * but only set failed (the parse is then run again without the
     * thread, which reports them), strings are unescaped into strings
     * into cx->strings instead of cx->keep, and nothing of the ParseCtx that the parser
     * writes is read. */
    bool quiet;
    bool failed;
    /* Whole shapes (ast_scan_shape): on for the parser without LAC only,
     * which reports nothing (parse.c), so the tokens of the parser that
     * words the diagnostics stay the single ones its expected lists name. */
    bool coarse;
    InternSet texts; /* the distinct SHAPE and INTGROUP texts (ast.c); the scan's owner frees it */
    InternSet shardings; /* the distinct texts of instructions' shardings seen (ast_scan_sharding); freed so too */
    int leaf_depth;      /* > 0: in a tuple sharding, whose leaves' '{' come at this depth (ast_scan_sharding_leaf) */
    /* The text of each set found or kept last, per hash & (AST_SCAN_RECENT - 1) (ast.c). */
    const struct ScanText *recent_texts[AST_SCAN_RECENT];
    const struct ScanText *recent_shardings[AST_SCAN_RECENT];
    /* The last AST_HEAD_RING INST descriptors, in turn (a token's value
     * points at its slot; the parser holds at most two INST values at
     * once: the one being reduced and the lookahead). */
    AstHead heads[AST_HEAD_RING];
    uint32_t n_heads;
    AstHead *head_at;      /* where the next INST descriptor goes instead (a ScanFeed's chunk), or NULL */
} ScanState;

/* ------------------------------------------------------------ scanner helpers */

/* FNV-1a, 32 bits: the hash of instruction names (parse.c's table). */
static inline uint32_t ast_name_hash(const char *s, uint32_t n)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* A name token (its hash in t.i) was scanned (or, from a scanner on its
 * own thread, is read by the parser): prefetches its slot in cx->name_slot. */
static inline void ast_prefetch_name(const ParseCtx *cx, AstTok t)
{
    if (cx->name_slot) __builtin_prefetch(&cx->name_slot[(uint32_t)t.i & cx->name_mask]);
}
/* Prefetches the slots of an instruction head's name and `%name`
 * operands (text: the INST token's) in cx->name_slot. */
static inline void ast_prefetch_head(const ParseCtx *cx, const char *text, const AstHead *h)
{
    if (!cx->name_slot) return;
    for (uint32_t k = 0; k < 3u + h->n_ops; k++)
        if (text[h->part[k].off] == '%') __builtin_prefetch(&cx->name_slot[(uint32_t)h->part[k].v & cx->name_mask]);
}
/* A name or word token was scanned: sets its hash (t->i) and, on the
 * parser's thread, prefetches its slot. */
static inline void ast_scan_name(const ScanState *st, AstTok *t)
{
    t->i = ast_name_hash(t->s, t->n);
    if (!st->quiet) ast_prefetch_name(st->cx, *t);
}

/* The parser's token source (grammar/hlo.y's yylex is ast_feed_lex in the
 * parser without LAC): the flex scanner called token by token, or, when
 * threaded, the same scanner running ahead on a thread of its own and
 * handing over its tokens in chunks through a ring (scan_feed.c), so
 * scanning and parsing + lowering share the two cores of a large input.
 * The tokens, values and locations are the same either way; the scanner's
 * state (st) must not be read by the parser's thread until
 * ast_feed_finish, and cx->scan stays NULL meanwhile.  Errors from the
 * thread only set st->failed (ScanState.quiet). */
typedef struct ScanFeed ScanFeed;

/* One scanned token as the feed hands it over: its kind, value
 * (AstSemVal.tok, the only member the scanner sets) and location. */
typedef struct FeedTok {
    AstTok tok;
    AstLoc loc;
    int32_t kind;
    uint8_t mark;           /* FEED_NAME: NAME_PCT or IDENT (the parser prefetches its slot);
                               FEED_HEAD: INST (tok.head points into the chunk's descriptors) */
} FeedTok;
enum { FEED_NAME = 1, FEED_HEAD = 2 };

/* The parser's side of a ScanFeed, its first member (its thread only):
 * the chunk being read, so ast_feed_lex, inlined into the parser, hands
 * over a token in a few instructions. */
typedef struct ScanFeedReader {
    const FeedTok *cur;     /* the chunk being read, NULL: none */
    uint32_t pos, n;        /* next token, tokens in cur (n = pos once the end was read) */
    const ParseCtx *cx;     /* for the name-table prefetch */
    /* INST descriptors taken out of the chunks in turn (a chunk is
     * handed back while its last INST may still wait for its reduction),
     * as ScanState.heads */
    AstHead heads[AST_HEAD_RING];
    uint32_t n_heads;
} ScanFeedReader;
/* flex: the yyscan_t whose extra is st.  threaded: start the thread (when
 * one cannot be made, the feed scans on the caller's thread instead).
 * cx: for the name-table prefetch.  Never NULL (out of memory ends the
 * process, spmdc_oom). */
ScanFeed *ast_feed_start(void *flex, ScanState *st, const ParseCtx *cx, bool threaded);
/* ast_feed_lex past the end of the reader's chunk (or without a thread):
 * the next chunk, the flex scanner, or the end again. */
int ast_feed_lex_next(AstSemVal *lval, AstLoc *lloc, void *feed);
/* The descriptor of an INST token t (in the reader's chunk) copied into
 * the reader's next slot, its names' slots prefetched; the copy. */
const AstHead *ast_feed_keep_head(ScanFeedReader *r, const AstTok *t);
/* The next token into *lval (its tok member) and *lloc; its kind.  feed:
 * a ScanFeed.  After the end of input it returns the end again. */
static inline int ast_feed_lex(AstSemVal *lval, AstLoc *lloc, void *feed)
{
    ScanFeedReader *r = feed;
    if (r->pos == r->n) return ast_feed_lex_next(lval, lloc, feed);
    const FeedTok *t = &r->cur[r->pos++];
    lval->tok = t->tok;
    *lloc = t->loc;
    int kind = t->kind;
    if (t->mark == FEED_NAME) ast_prefetch_name(r->cx, t->tok);
    else if (t->mark == FEED_HEAD) lval->tok.head = ast_feed_keep_head(r, &t->tok);
    else if (kind == 0) r->n = r->pos; /* the end (YYEOF): ast_feed_lex_next gives it again */
    return kind;
}
/* Stops and joins the scanner's thread (wherever it is) and frees the feed;
 * st may be read again after.  NULL is a no-op. */
void ast_feed_finish(ScanFeed *f);

/* Flex's YY_INPUT: copies the next at most max bytes of cx->text into buf;
 * returns the count, 0 at the end. */
size_t ast_scan_read(ScanState *st, char *buf, size_t max);
/* Fills *loc for the matched text (len bytes) and advances off past it. */
static inline void ast_scan_advance(ScanState *st, AstLoc *loc, size_t len)
{
    loc->off = st->off;
    st->off += (uint32_t)len;
    loc->end = st->off;
}
/* Token kind of a bare word (keyword, element type or IDENT); at bracket
 * depth 0 the stack frame section names are SECTION.  For PRIMTYPE, tok->i
 * is set to the ElemType. */
int ast_scan_word(const char *s, size_t n, int depth, AstTok *tok);
/* A bare word (an element type, keyword or name; loc: its bytes) as a
 * token: fills *tok and returns its kind (ast_scan_word,
 * ast_scan_type_word, ast_scan_name). */
int ast_scan_word_token(ScanState *st, const AstLoc *loc, AstTok *tok);
/* The text at loc matched `word[ints]` or `word[ints]{ints}` (no blanks).
 * When st->coarse is set and it is a well-formed array shape (an element
 * type, at most SPMDC_MAX_RANK dims of at most 18 digits, a layout that is
 * a permutation of the dims, no layout '{' following a shape without one,
 * within the nesting limit), it is one SHAPE token: tok->shape is its
 * lowered Shape, shared by every SHAPE of the same text (the scanner's
 * arena: cx->strings when quiet, else cx->keep), and 0 is returned.
 * Otherwise the length of the word, which the scanner then reads as a
 * word, and the rest token by token, so every malformed shape meets the
 * parser's and the lowering's own checks and messages. */
uint32_t ast_scan_shape(ScanState *st, const AstLoc *loc, AstTok *tok);
/* A computation's parameter list `(p: f32[8]{0}, q: s32[])` as the scanner
 * read it whole (a SIGNATURE token): per parameter its label (without the
 * ':') and its array shape, at byte offsets from the '(', the shape lowered
 * (ast_scan_shape's record).  In the scan's arena. */
typedef struct AstSigParam {
    uint32_t label_off, label_len;
    uint32_t shape_off, shape_len;
    const Shape *shape;
} AstSigParam;
typedef struct AstSig {
    uint32_t n;
    AstSigParam p[];
} AstSig;
/* A '(' after a computation's name at depth 0 (loc: the '('), coarse scans
 * only: when the parameter list to its ')' is on this line and regular
 * (labels `name:` as the LABEL token reads them, one SHAPE-token array
 * shape each, ',' between, blanks around), it is one SIGNATURE token
 * (tok->sig) and its length is returned; 0 otherwise (token by token).
 * The list is read from the input itself, not flex's buffer: a
 * 400,000-parameter list is megabytes on one line (the rule skips flex
 * past what its buffer does not hold). */
uint32_t ast_scan_signature(ScanState *st, const AstLoc *loc, AstTok *tok);
/* The text at loc matched `{}` or `{ints}` (no blanks or signs).  When
 * st->coarse is set, it follows an attribute name (where the `{` is a
 * plain one: not backend_config's or a frontend attribute's text), within
 * the nesting limit, and no integer has more than 18 digits, it is one
 * INTGROUP token: tok->ints, shared by equal texts as for SHAPE; true.
 * Otherwise false, and the scanner reads it token by token. */
bool ast_scan_int_group(ScanState *st, const AstLoc *loc, AstTok *tok);
/* The COARSE scanner matched `%name =` at loc (grammar/hlo.l); b: the
 * same bytes in flex's buffer, which holds avail bytes from b on and a
 * NUL after them.  When the text from there on matches the instruction
 * head pattern of grammar/hlo.l's comment (`%name = <array shape>
 * opcode(<operands>)` and then `, attr=<value>` pieces, as many as are
 * written so, at most 8) and the scanner reads every byte of it as the
 * LAC parser's scanner would read them token by token (depth 1 inside a
 * computation; the shape one SHAPE token, ast_scan_shape; the opcode an
 * IDENT other than `T` and `nan`; integers of at most 18 digits; attribute
 * values that are prims of the grammar, no backend_config or
 * frontend_attributes; and a blank or ',' after it, so its last
 * token ends where it does), and the scan ended inside flex's buffer (the
 * byte after the text included), it is one INST token: tok->s/n its text,
 * tok->head its pieces (at st->head_at, else a slot of st->heads), and 0 is returned.
 * Otherwise the length of its `%name`, which the scanner then returns
 * alone (NAME_PCT), and the rest token by token. */
uint32_t ast_scan_inst_head(ScanState *st, const AstLoc *loc, const char *b, size_t avail, AstTok *tok);
/* An instruction's `sharding=` (depth 1 in a computation's body, after a
 * ',') was just scanned; b: the bytes after it in flex's buffer, avail of
 * them and a NUL.  When st->coarse is set and a brace group follows on
 * the same line within avail bytes (strings without escapes, no comment),
 * and an earlier instruction's sharding had the same text, the whole
 * attribute is one SHARDING token (tok: the group's text, tok->i its name
 * hash; the lowering reuses the syntax it read for the earlier one,
 * parse_lower_sharding): the group's length is returned.  Otherwise the
 * text (when whole) is remembered and 0: the scanner reads it token by
 * token. */
uint32_t ast_scan_sharding(ScanState *st, const char *b, size_t avail, AstTok *tok);
/* A '{' at st->leaf_depth, a leaf of the tuple sharding ast_scan_sharding
 * began (loc: the '{'; b: it and the bytes after it in flex's buffer, up
 * to a NUL): when the leaf's group is on this line and an earlier
 * instruction's whole sharding had its text, the leaf is one SHARDING_LEAF
 * token (tok as ast_scan_sharding's; the lowering reuses that syntax,
 * parse_lower_sharding) and its length is returned; 0 otherwise.  A leaf
 * that opens with '{' or '}' (a nested tuple, an empty one) never is. */
uint32_t ast_scan_sharding_leaf(ScanState *st, const AstLoc *loc, const char *b, AstTok *tok);
/* Fills tok for an INT; false (after reporting) if it fits neither int64 nor uint64. */
bool ast_scan_int(ScanState *st, const AstLoc *loc, AstTok *tok);
/* Unescapes a STRING token's text (with the quotes) into the arena. */
void ast_scan_string(ScanState *st, const AstLoc *loc, AstTok *tok);
/* Whether the `{` just scanned opens a layout: the previous token was `]`
 * and the next non-blank character is a digit, '-' or ':' (or `}` at once). */
bool ast_scan_layout_follows(const ScanState *st);
/* The token for an element-type word just scanned (text[0..n)): an element
 * type followed on its line by '=' is written where an instruction's name
 * goes (TYPE_AS_NAME: ast_bad_inst_name reports it, once); one that names
 * such an instruction and is not followed by '[' refers to it (IDENT, so
 * its uses cascade no errors); else PRIMTYPE. */
int ast_scan_type_word(ScanState *st, const char *text, size_t n);
/* Reports a lexical error at loc and marks the scanner dead. */
void ast_scan_error(ScanState *st, const AstLoc *loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Token text from the source at loc (skip leading bytes). */
AstTok ast_tok_at(const ScanState *st, const AstLoc *loc, uint32_t skip_front, uint32_t skip_back);

/* ------------------------------------------------------------ constructors */

/* From a's start to b's end (bison's location of every rule: inline). */
static inline AstLoc ast_loc_join(const AstLoc *a, const AstLoc *b)
{
    AstLoc l;
    l.off = a->off;
    l.end = b->end > a->off ? b->end : a->end;
    return l;
}

/* An empty location at the end of prev (bison's location of an empty rule). */
static inline AstLoc ast_loc_empty(const AstLoc *prev)
{
    AstLoc l;
    l.off = l.end = prev->end;
    return l;
}

/* The bytes strictly between a and b. */
static inline AstLoc ast_loc_between(const AstLoc *a, const AstLoc *b)
{
    AstLoc l;
    l.off = a->end;
    l.end = b->off >= a->end ? b->off : a->end;
    return l;
}

/* ------------------------------------------------------------ line and column */

/* The line starts of a text and where its first NUL byte is.  start[k]
 * is the offset of line k + 1's first byte (lines end as diag_is_line_end
 * says), n >= 1 of them; nul is the offset of the first NUL byte, or the
 * text's length if it has none (start then covers only the lines before
 * the NUL).  start is malloc'd (ast_lines_release). */
typedef struct AstLines {
    uint32_t *start;
    uint32_t n;
    uint32_t nul;
} AstLines;
/* Fills *l from text[0, len) in one pass: each 64 KiB block is searched for
 * a NUL, a '\r' and its '\n's while it is in the cache, so a text larger
 * than the caches is read from memory once.  A text with a '\r' is read
 * byte by byte from the first block that has one.  Aborts only when
 * memory is exhausted (xmalloc). */
void ast_lines_scan(const char *text, uint32_t len, AstLines *l);
void ast_lines_release(AstLines *l);
/* Lets cx's position queries (ast_pos) use l's line starts, which it
 * borrows: l must outlive the parse of cx. */
void ast_lines_init(ParseCtx *cx, const AstLines *l);
/* Frees the blocks the AST nodes came from (at the end of the parse). */
void ast_pool_free(ParseCtx *cx);
/* Line and byte column (1-based) of byte off (off == len: just past the
 * end).  O(1) when queries come in text order, O(log lines) otherwise. */
SrcLoc ast_pos(ParseCtx *cx, uint32_t off);
/* The span of loc for a diagnostic or the IR: its first to its last byte;
 * an empty location is the byte before it (the end of what precedes an
 * empty grammar rule); the empty location at offset 0 has no position. */
SrcSpan ast_span(ParseCtx *cx, const AstLoc *loc);
AstVal *ast_tok_val(ParseCtx *cx, AstValKind kind, AstTok t, const AstLoc *loc);
AstVal *ast_punct(ParseCtx *cx, AstPunct p, const AstLoc *loc);
AstVal *ast_attr(ParseCtx *cx, AstTok name, AstVal *value, const AstLoc *loc);
/* A group of kind AV_BRACE/BRACKET/PAREN/TPAREN over a list of AV_ELEMs. */
AstVal *ast_group(ParseCtx *cx, AstValKind kind, AstList elems, const AstLoc *loc);
/* An AV_ELEM of one prim (its location is the prim's). */
AstVal *ast_elem1(ParseCtx *cx, AstVal *prim);
/* Appends a prim juxtaposed to an AV_ELEM and extends its location to the prim's end. */
void ast_elem_add(AstVal *elem, AstVal *prim);
/* Appends a prim to an AV_ATTR's value (`replica_groups=[2,2]<=[4]`) and
 * extends its location to the prim's end; returns attr. */
AstVal *ast_attr_add(AstVal *attr, AstVal *prim);
AstVal *ast_shape_val(ParseCtx *cx, AstShape *s);
AstList ast_list1(AstVal *v);
AstList ast_list_add(AstList l, AstVal *v);
/* A shape dim: INT (flags 0), `<=INT` (AVF_BOUNDED) or `?` (AVF_UNBOUNDED). */
AstVal *ast_dim(ParseCtx *cx, AstTok t, int flags, const AstLoc *loc);
AstShape *ast_array_shape(ParseCtx *cx, AstTok type, AstList dims, AstLayout *layout, const AstLoc *loc);
/* An array shape read whole by the scanner (a SHAPE token). */
AstShape *ast_pre_shape(ParseCtx *cx, AstTok shape, const AstLoc *loc);
/* The AV_BRACE group of AV_ELEMs of one AV_INT each that an INTGROUP token
 * stands for: the nodes '{' INT ',' ... '}' would have made. */
AstVal *ast_int_group(ParseCtx *cx, AstTok group, const AstLoc *loc);
/* `SHARDING`: the attribute `sharding=` + AV_SHARED value (tok: the
 * group's text and hash, ast_scan_sharding; loc: the whole attribute) that
 * the rule `attr: ATTRNAME prim` builds from the same text token by
 * token, location for location, except for its value's kind. */
AstVal *ast_sharding_attr(ParseCtx *cx, AstTok group, const AstLoc *loc);
/* `opt_root INST inst_attrs`: the instruction the grammar's rule
 * `opt_root name '=' array_shape IDENT operands inst_attrs` builds from the
 * same text token by token, node for node and location for location (head:
 * the INST token at head_loc, ast_scan_inst_head; its attributes come
 * before attrs).  The names' slots in the lowering's table are prefetched. */
AstInst *ast_inst_head(ParseCtx *cx, bool is_root, const AstLoc *root_loc, AstTok head, const AstLoc *head_loc,
                       AstList attrs, const AstLoc *whole);
/* A layout; tail is NULL when no ':' part was written. */
AstLayout *ast_layout(ParseCtx *cx, AstList ints, const AstLoc *tail, const AstLoc *loc);
AstShape *ast_tuple_shape(ParseCtx *cx, AstShapeList elems, const AstLoc *loc);
AstShapeList ast_shape_list_add(AstShapeList l, AstShape *s);
AstParamList ast_param_add(ParseCtx *cx, AstParamList l, AstTok name, AstShape *shape, const AstLoc *loc);
/* start: ROOT or the name; whole: the rule's location (its end is used). */
AstInst *ast_inst(ParseCtx *cx, bool is_root, const AstLoc *root_loc, AstTok name, const AstLoc *name_loc,
                  AstShape *shape, AstTok opcode, const AstLoc *opcode_loc, AstVal *operands,
                  AstList attrs, const AstLoc *start, const AstLoc *whole);

/* Hand-overs to cx->sink (each resets cx->arena afterwards). */
void ast_header(ParseCtx *cx, AstTok name, const AstLoc *name_loc, AstList attrs);
void ast_comp_begin(ParseCtx *cx, bool is_entry, const AstLoc *entry_loc, AstTok name, const AstLoc *name_loc,
                    bool has_sig, AstParamList params, AstShape *result);
/* ast_comp_begin of a head whose parameter list is a SIGNATURE token sig
 * (loc: the token): the lowering reads the list from it, no node per parameter. */
void ast_comp_begin_sig(ParseCtx *cx, bool is_entry, const AstLoc *entry_loc, AstTok name, const AstLoc *name_loc,
                        AstTok sig, const AstLoc *loc, AstShape *result);
void ast_inst_done(ParseCtx *cx, AstInst *inst);
void ast_comp_end(ParseCtx *cx, const AstLoc *close, AstList attrs);

/* ------------------------------------------------------------ syntax errors */

/* Reports `unexpected X, expected A, B or C` (the grammar's custom error
 * hook).  unexpected_name/expected are bison's symbol names. */
void ast_syntax_error(ParseCtx *cx, const AstLoc *loc, bool at_eof, const char *unexpected_name,
                      const char *const *expected, int n_expected);
/* Reports an instruction named by an element type (`s1 = ...`), which
 * XLA's parser rejects ("expects name"); loc: the element type. */
void ast_bad_inst_name(ParseCtx *cx, const AstLoc *loc);
/* The LAC parser's token source: the scanner's next token, except that
 * after a syntax error in the middle of a line (ScanState.skip_to, set by
 * ast_syntax_error) the rest of that line is dropped, up to a '}' that
 * closes a computation's body.  Bison's own recovery (`insts: insts
 * error`) then resumes at the next line's instruction, not inside the
 * brackets the bad instruction left open or closed (`bf16[4]{S(1)}`
 * would otherwise close the body at its '}'). */
int ast_lac_lex(AstSemVal *lval, AstLoc *lloc, void *scanner);
/* Bison's yyerror (only "memory exhausted" reaches it). */
void hlo_yyerror(AstLoc *loc, void *scanner, ParseCtx *cx, const char *msg);

/* ------------------------------------------------------------ tree access */

/* Number of AV_ELEMs of a group / prims of an element list. */
int32_t ast_count(const AstVal *list);
/* The group's only element's only prim, or NULL. */
const AstVal *ast_single(const AstVal *group);
/* A short description for messages: "integer '3'", "'{...}'", "identifier 'x'". */
const char *ast_describe(ParseCtx *cx, const AstVal *v);
/* The source text of v ([off, end)), arena copy. */
char *ast_text(ParseCtx *cx, const AstLoc *loc);
/* NUL-terminated arena copy of a token. */
char *ast_tok_str(Arena *a, AstTok t);
bool ast_tok_eq(AstTok t, const char *s);

#endif
