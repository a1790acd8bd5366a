/* verify.c - semantic checks of a module: arity, attributes, shapes.
 *
 * verify_module walks every computation and every instruction in program
 * order.  Per computation: it has a ROOT; its parameter numbers are 0..k-1,
 * each used once.  Per instruction: the declared shape is well formed;
 * operands exist and are defined before use; called computations exist and
 * are defined before the caller (callees first); then the result shape is
 * inferred from the operands and attributes (verify_shape.c, XLA's rules)
 * and compared with the declared shape, layouts ignored.  Every problem is
 * one error at the instruction's span that names it; an instruction whose
 * operand failed is skipped quietly rather than cascade.
 *
 * This file holds the driver, the structure checks and the helpers both
 * halves use (well-formed shapes, parameter tables; verify_internal.h).
 *
 * Cost: linear in the module.  verify_module builds each computation's
 * parameter table once, and infers each distinct situation once: an
 * instruction whose computation, opcode, attribute set (shared between
 * equal sets) and array shapes of result and operands are those of one that
 * passed passes every check but the order of its operands, which is made
 * for each (a stack of layers repeats a few situations).
 *
 * A large computation (VERIFY_SPLIT_MIN instructions and up) is checked
 * first in two halves on two threads, quietly (verify_split): the checks of
 * one instruction read only the module and its own pass keys.  Only when
 * one fails are its instructions checked again in order, reporting, so the
 * messages are those of the checks in order.
 */
#include "spmdc/verify.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "spmdc/intern.h"

#include "verify_internal.h"

/* ------------------------------------------------------------ well-formed shapes */

static bool rank_ok(const Shape *s) { return s->rank >= 0 && s->rank <= SPMDC_MAX_RANK; }

/* The top level is well formed: a typed array of rank <= 8 with dims >= 0,
 * or a tuple with its element array. */
bool verify_shape_top_ok(const Shape *s)
{
    if (s->type == ET_TUPLE) return s->n_elems >= 0 && (s->n_elems == 0 || s->elems);
    if (!type_ok(s->type) || !rank_ok(s)) return false;
    for (int32_t d = 0; d < s->rank; d++)
        if (s->dims[d] < 0) return false;
    return true;
}

bool verify_shape_ok(const Shape *s, int depth)
{
    if (depth > 64 || !verify_shape_top_ok(s)) return false;
    if (s->type == ET_TUPLE)
        for (int32_t i = 0; i < s->n_elems; i++)
            if (!verify_shape_ok(&s->elems[i], depth + 1)) return false;
    return true;
}

/* shape_equal that never reads past a malformed shape. */
bool verify_same_shape(const Shape *a, const Shape *b)
{
    if (a->type != b->type) return false;
    if (a->type == ET_TUPLE) {
        if (a->n_elems != b->n_elems) return false;
        if (a->n_elems > 0 && (!a->elems || !b->elems)) return false;
        for (int32_t i = 0; i < a->n_elems; i++)
            if (!verify_same_shape(&a->elems[i], &b->elems[i])) return false;
        return true;
    }
    if (a->rank != b->rank || !rank_ok(a)) return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

void verify_put_shape(StrBuf *b, const Shape *s, int depth)
{
    if (depth > 8 || !verify_shape_top_ok(s)) {
        sb_puts(b, "<malformed shape>");
    } else if (s->type == ET_TUPLE) {
        sb_putc(b, '(');
        for (int32_t i = 0; i < s->n_elems; i++) {
            if (i) sb_puts(b, ", ");
            verify_put_shape(b, &s->elems[i], depth + 1);
        }
        sb_putc(b, ')');
    } else {
        shape_print(b, s, false);
    }
}

/* The parameter instructions of cc in program order: *idx[k] their indices,
 * *num[k] their parameter numbers (arena a); returns how many. */
static int32_t param_insts(const HloComputation *cc, Arena *a, int32_t **idx, int64_t **num)
{
    int32_t cnt = 0, cap = 64;
    *idx = ARENA_ARRAY(a, int32_t, cap);
    for (int32_t i = 0; i < cc->n_insts; i++) {
        HLO_WALK_PREFETCH(cc, i);
        if (cc->insts[i].op != HLO_PARAMETER) continue;
        if (cnt == cap) {
            *idx = arena_realloc(a, *idx, sizeof(int32_t) * (size_t)cap, sizeof(int32_t) * (size_t)cap * 2,
                                 _Alignof(int32_t));
            cap *= 2;
        }
        (*idx)[cnt++] = i;
    }
    *num = ARENA_ARRAY(a, int64_t, cnt > 0 ? cnt : 1);
    for (int32_t k = 0; k < cnt; k++) {
        (*num)[k] = cc->insts[(*idx)[k]].param_number;
    }
    return cnt;
}

/* tab[p] = the first parameter instruction numbered p, -1 if none. */
static int32_t *param_table_of(const int32_t *idx, const int64_t *num, int32_t cnt, Arena *a)
{
    int32_t *tab = ARENA_ARRAY(a, int32_t, cnt > 0 ? cnt : 1);
    for (int32_t k = 0; k < cnt; k++) tab[k] = -1;
    for (int32_t k = 0; k < cnt; k++)
        if (num[k] >= 0 && num[k] < cnt && tab[num[k]] < 0) tab[num[k]] = idx[k];
    return tab;
}

/* Instruction index of parameter k for every k of computation c (-1 where a
 * number is missing); *n = number of parameter instructions. */
int32_t *verify_param_table(const HloComputation *cc, Arena *a, int32_t *n)
{
    int32_t *idx;
    int64_t *num;
    *n = param_insts(cc, a, &idx, &num);
    return param_table_of(idx, num, *n, a);
}

/* ------------------------------------------------------------ verify_module */

typedef struct Verifier {
    const HloModule *m;
    DiagEngine *diag;
    Arena *tables;   /* parameter tables, whole run */
    Arena *scratch;  /* per-instruction temporaries, reset now and then */
    int32_t **ptab;
    int32_t *pcount;
    int32_t **pidx;  /* per computation: its parameter instructions in order */
    int64_t **pnum;  /* ... and their parameter numbers */
    uint8_t *bad;    /* current computation: instruction failed (or an operand did) */
    InternSet passed; /* pass keys (pass_key, in tables) of the instructions that passed */
    bool quiet;      /* a check that fails sets failed and reports nothing (verify_split) */
    bool failed;
} Verifier;

/* An instruction's error through v->diag, or, quiet, only marked. */
__attribute__((format(printf, 3, 4))) static void verr(Verifier *v, SrcSpan span, const char *fmt, ...)
{
    if (v->quiet) {
        v->failed = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    diag_report(v->diag, DIAG_ERROR, span, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ passed situations */

enum {
    PASS_KEY_OPERANDS = 8, /* instructions with more operands are checked in full */
    PASS_KEY_WORDS = 3 + (1 + SPMDC_MAX_RANK) * (1 + PASS_KEY_OPERANDS),
    PASS_MAX = 1 << 16     /* situations remembered at most */
};

/* Appends the words of array shape s (type, rank, dims; the layout aside,
 * as the checks ignore it); false for a tuple or a malformed rank. */
static bool pass_shape(const Shape *s, uint64_t *w, int32_t *n)
{
    if (s->type == ET_TUPLE || s->rank < 0 || s->rank > SPMDC_MAX_RANK) return false;
    w[(*n)++] = (uint64_t)(uint32_t)s->type | (uint64_t)(uint32_t)s->rank << 32;
    for (int32_t d = 0; d < s->rank; d++) w[(*n)++] = (uint64_t)s->dims[d];
    return true;
}

/* What the checks of instruction i of computation c read besides its
 * operand indices, as w[0] words (w[0] itself first): the computation (the
 * callees must precede it), opcode, operand count, attribute set, and the
 * array shapes of the result and the operands.  False when some shape is
 * no array or an operand index is out of range (checked in full). */
static bool pass_key(const Verifier *v, int32_t c, const HloInst *in, uint64_t *w)
{
    const HloComputation *cc = &v->m->comps[c];
    if (in->n_operands < 0 || in->n_operands > PASS_KEY_OPERANDS || (in->n_operands > 0 && !in->operands))
        return false;
    int32_t n = 1;
    w[n++] = (uint64_t)(uint32_t)c | (uint64_t)in->op << 32 | (uint64_t)(uint32_t)in->n_operands << 40;
    w[n++] = (uint64_t)(uintptr_t)in->attrs;
    if (!pass_shape(in->shape, w, &n)) return false;
    for (int32_t k = 0; k < in->n_operands; k++) {
        int32_t o = in->operands[k];
        if (o < 0 || o >= cc->n_insts || !pass_shape(cc->insts[o].shape, w, &n)) return false;
    }
    w[0] = (uint64_t)n;
    return true;
}

/* Hash of pass key w: two words a round into two lanes, then the lanes
 * mixed so every bit reaches the low ones (intern.c's slots use those). */
static uint64_t pass_hash(const uint64_t *w)
{
    uint64_t h1 = 0x9e3779b97f4a7c15ull ^ w[0], h2 = 0xc2b2ae3d27d4eb4full, k = 1;
    for (; k + 1 < w[0]; k += 2) {
        h1 = (h1 ^ w[k]) * 0xff51afd7ed558ccdull;
        h2 = (h2 ^ w[k + 1]) * 0xc4ceb9fe1a85ec53ull;
    }
    if (k < w[0]) h1 = (h1 ^ w[k]) * 0xff51afd7ed558ccdull;
    uint64_t h = h1 ^ (h2 >> 29) ^ (h2 << 35);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    return h;
}

static bool pass_same(const void *stored, const void *item)
{
    const uint64_t *a = stored, *b = item;
    return a[0] == b[0] && memcmp(a + 1, b + 1, sizeof(uint64_t) * (size_t)(a[0] - 1)) == 0;
}

static const char *iname(const HloInst *in) { return in->name ? in->name : "?"; }

static void check_params(Verifier *v, int32_t c)
{
    const HloComputation *cc = &v->m->comps[c];
    int64_t n = v->pcount[c];
    for (int32_t k = 0; k < n; k++) {
        int32_t i = v->pidx[c][k];
        const HloInst *in = &cc->insts[i];
        int64_t p = v->pnum[c][k];
        if (p < 0 || p >= n)
            diag_error(v->diag, in->span, "%s: parameter number %lld is out of range: computation %s has %lld "
                       "parameter%s, numbered from 0", iname(in), (long long)p, cc->name, (long long)n, n == 1 ? "" : "s");
        else if (v->ptab[c][p] != i)
            diag_error(v->diag, in->span, "%s: parameter number %lld is already used by %s", iname(in), (long long)p,
                       iname(&cc->insts[v->ptab[c][p]]));
    }
}

/* A called computation must exist and be defined before its caller. */
static bool check_callee_ref(Verifier *v, int32_t c, const HloInst *in, const char *role, int64_t callee)
{
    if (callee < 0 || callee >= v->m->n_comps) {
        verr(v, in->span, "%s: %s computation index %lld does not exist", iname(in), role,
                   (long long)callee);
        return false;
    }
    if (callee >= c) {
        verr(v, in->span, "%s: %s computation %s must be defined before %s, which calls it", iname(in),
                   role, v->m->comps[callee].name, v->m->comps[c].name);
        return false;
    }
    return true;
}

static bool check_callee_refs(Verifier *v, int32_t c, const HloInst *in)
{
    const HloAttrs *a = hlo_attrs(in);
    bool ok = true;
    if (a->to_apply >= 0) ok &= check_callee_ref(v, c, in, "to_apply", a->to_apply);
    if (a->select >= 0) ok &= check_callee_ref(v, c, in, "select", a->select);
    if (a->condition >= 0) ok &= check_callee_ref(v, c, in, "condition", a->condition);
    if (a->body >= 0) ok &= check_callee_ref(v, c, in, "body", a->body);
    for (int32_t k = 0; k < a->branches.n; k++) ok &= check_callee_ref(v, c, in, "branch", a->branches.v[k]);
    for (int32_t k = 0; k < a->called.n; k++) ok &= check_callee_ref(v, c, in, "called", a->called.v[k]);
    return ok;
}

/* Operands exist and precede the instruction.  An operand that failed was
 * reported at its definition: skip quietly rather than cascade. */
static bool check_operand_order(Verifier *v, const HloComputation *cc, int32_t i)
{
    const HloInst *in = &cc->insts[i];
    if (in->n_operands < 0 || (in->n_operands > 0 && !in->operands)) {
        verr(v, in->span, "%s: malformed operand list", iname(in));
        return false;
    }
    for (int32_t k = 0; k < in->n_operands; k++) {
        int32_t o = in->operands[k];
        if (o < 0 || o >= cc->n_insts) {
            verr(v, in->span, "%s: operand %d refers to instruction index %d, which does not exist",
                       iname(in), k, o);
            return false;
        }
        if (o >= i) {
            verr(v, in->span, "%s: operand %d, %s, is not defined before its use", iname(in), k,
                       iname(&cc->insts[o]));
            return false;
        }
        if (v->bad[o]) return false;
    }
    return true;
}

/* False if the instruction failed a check (reported) or an operand did
 * (not reported again). */
static bool verify_inst(Verifier *v, int32_t c, int32_t i)
{
    const HloComputation *cc = &v->m->comps[c];
    const HloInst *in = &cc->insts[i];
    uint64_t key[PASS_KEY_WORDS];
    uint64_t h = 0;
    uint32_t at = 0;
    bool keyed = pass_key(v, c, in, key);
    if (keyed) {
        h = pass_hash(key);
        if (intern_find(&v->passed, h, key, pass_same, &at)) return check_operand_order(v, cc, i);
    }
    if (!verify_shape_ok(in->shape, 0)) {
        verr(v, in->span, "%s: malformed result shape (unknown element type, rank above %d or a negative "
                   "dimension)", iname(in), SPMDC_MAX_RANK);
        return false;
    }
    if (!shape_size_fits(in->shape)) {
        StrBuf a = {0};
        verify_put_shape(&a, in->shape, 0);
        verr(v, in->span, "%s: shape %s is too large: spmdc handles values of at most 2^62 bytes",
                   iname(in), sb_cstr(&a));
        sb_free(&a);
        return false;
    }
    if (!check_operand_order(v, cc, i) || !check_callee_refs(v, c, in)) return false;
    if (arena_bytes_used(v->scratch) > (1u << 20)) arena_reset(v->scratch);
    char err[400];
    Infer x;
    verify_infer_setup(&x, v->m, c, i, err, sizeof err);
    x.out = x.tmp = v->scratch;
    x.ptab = v->ptab;
    x.pcount = v->pcount;
    Shape got;
    if (!verify_infer_inst(&x, &got)) {
        verr(v, in->span, "%s: %s", iname(in), err);
        return false;
    }
    if (!verify_same_shape(in->shape, &got)) {
        StrBuf a = {0}, b = {0};
        verify_put_shape(&a, in->shape, 0);
        verify_put_shape(&b, &got, 0);
        verr(v, in->span, "%s: result shape %s does not match the shape inferred from its operands, %s",
                   iname(in), sb_cstr(&a), sb_cstr(&b));
        sb_free(&a);
        sb_free(&b);
        return false;
    }
    if (keyed && v->passed.n < PASS_MAX)
        intern_add(&v->passed, at, h, arena_memdup(v->tables, key, sizeof(uint64_t) * (size_t)key[0]));
    return true;
}

/* Computations with at least this many instructions are checked on two
 * threads first (verify_split). */
#define VERIFY_SPLIT_MIN 65536

typedef struct SplitJob {
    Verifier v;      /* quiet, its own scratch and pass keys */
    int32_t c, from, to;
} SplitJob;

static void *split_job(void *arg)
{
    SplitJob *j = arg;
    const HloComputation *cc = &j->v.m->comps[j->c];
    for (int32_t i = j->from; i < j->to && !j->v.failed; i++) {
        /* operands defined far back (a backward pass's reads of its forward
         * values) miss the cache once the computation outgrows it: ask for
         * their shapes 8 instructions ahead (in the loop itself: GCC drops
         * calls to a function that only prefetches) */
        if (i + 8 < j->to) {
            const HloInst *in = &cc->insts[i + 8];
            for (int32_t k = 0; in->operands && k < in->n_operands && k < 4; k++)
                if (in->operands[k] >= 0 && in->operands[k] < cc->n_insts)
                    __builtin_prefetch(&cc->insts[in->operands[k]].shape);
        }
        (void)verify_inst(&j->v, j->c, i);
    }
    return NULL;
}

/* Checks computation c's instructions, halves on two threads, quietly;
 * true when every one passes (nothing to report: v->bad stays zero, as the
 * checks in order would leave it).  False when one fails or no thread can
 * be made: the caller then checks them in order, reporting as it goes. */
static bool verify_split(Verifier *v, int32_t c)
{
    int32_t n = v->m->comps[c].n_insts, half = n / 2;
    SplitJob jobs[2];
    for (int k = 0; k < 2; k++) {
        jobs[k].v = *v;
        jobs[k].v.quiet = true;
        jobs[k].v.failed = false;
        jobs[k].v.tables = arena_create(); /* pass keys (the parameter tables stay v's, read only) */
        jobs[k].v.scratch = arena_create();
        memset(&jobs[k].v.passed, 0, sizeof jobs[k].v.passed);
        jobs[k].c = c;
        jobs[k].from = k ? half : 0;
        jobs[k].to = k ? n : half;
    }
    pthread_t t;
    bool threaded = pthread_create(&t, NULL, split_job, &jobs[1]) == 0;
    if (threaded) {
        split_job(&jobs[0]);
        pthread_join(t, NULL);
    }
    bool ok = threaded && !jobs[0].v.failed && !jobs[1].v.failed;
    for (int k = 0; k < 2; k++) {
        intern_free(&jobs[k].v.passed);
        arena_destroy(jobs[k].v.tables);
        arena_destroy(jobs[k].v.scratch);
    }
    return ok;
}

bool verify_module(const HloModule *m, DiagEngine *diag)
{
    int before = diag_error_count(diag);
    Verifier v = {m, diag, arena_create(), arena_create(), NULL, NULL, NULL, NULL, NULL, {0}, false, false};
    if (m->n_comps > 0 && (m->entry < 0 || m->entry >= m->n_comps))
        diag_error(diag, SRC_SPAN_NONE, "module %s has no ENTRY computation", m->name ? m->name : "?");
    v.ptab = ARENA_ARRAY(v.tables, int32_t *, m->n_comps > 0 ? m->n_comps : 1);
    v.pcount = ARENA_ARRAY(v.tables, int32_t, m->n_comps > 0 ? m->n_comps : 1);
    v.pidx = ARENA_ARRAY(v.tables, int32_t *, m->n_comps > 0 ? m->n_comps : 1);
    v.pnum = ARENA_ARRAY(v.tables, int64_t *, m->n_comps > 0 ? m->n_comps : 1);
    for (int32_t c = 0; c < m->n_comps; c++) {
        v.pcount[c] = param_insts(&m->comps[c], v.tables, &v.pidx[c], &v.pnum[c]);
        v.ptab[c] = param_table_of(v.pidx[c], v.pnum[c], v.pcount[c], v.tables);
    }
    for (int32_t c = 0; c < m->n_comps; c++) {
        const HloComputation *cc = &m->comps[c];
        if (cc->root < 0 || cc->root >= cc->n_insts)
            diag_error(diag, cc->span, "computation %s has no ROOT instruction", cc->name ? cc->name : "?");
        check_params(&v, c);
        v.bad = ARENA_ARRAY(v.tables, uint8_t, cc->n_insts > 0 ? cc->n_insts : 1);
        if (cc->n_insts >= VERIFY_SPLIT_MIN && verify_split(&v, c))
            continue;
        for (int32_t i = 0; i < cc->n_insts; i++) {
            /* the attributes are scattered through the module arena: ask for
             * them a few instructions ahead */
            if (i + 8 < cc->n_insts) __builtin_prefetch(&cc->insts[i + 8].attrs);
            if (i + 4 < cc->n_insts && cc->insts[i + 4].attrs) {
                const char *a = (const char *)cc->insts[i + 4].attrs;
                __builtin_prefetch(a);
                __builtin_prefetch(a + 192);
                __builtin_prefetch(a + 320);
            }
            v.bad[i] = !verify_inst(&v, c, i);
        }
    }
    intern_free(&v.passed);
    arena_destroy(v.tables);
    arena_destroy(v.scratch);
    return diag_error_count(diag) == before;
}

