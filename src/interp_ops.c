/* interp_ops.c - interpreter ops with their own index math: dot,
 * convolution, reduce, reduce-window, select-and-scatter, gather, scatter,
 * sort, map, and the elementwise combine used by all-reduce.
 *
 * Reductions apply their to_apply computation element by element in a
 * fixed order (row-major over the reduced / window / update indices), each
 * step rounded to the element type.  A computation that is just
 * `op(param0, param1)` (InterpCompInfo.binop) is applied directly; anything
 * else is interpreted on scalar values.  Dot and convolution accumulate in
 * float for f32/bf16/f16 results, in double for f64 and in wrapping 64-bit
 * integers for integer results, and round once when storing.  Dot permutes
 * its operands to [batch, M, K] x [batch, K, N] and runs a blocked i-k-j
 * loop over flat arrays (the accumulation order over k stays sequential).
 */
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "sim_internal.h"

static int64_t count_of(const Shape *s)
{
    int64_t n = 1;
    for (int32_t d = 0; d < s->rank; d++) n *= s->dims[d];
    return n;
}

static bool same_dims(const Shape *a, const Shape *b)
{
    if (a->rank != b->rank) return false;
    for (int32_t d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return false;
    return true;
}

static bool comp_index_ok(const Interp *ip, const HloInst *inst, int32_t c)
{
    if (c < 0 || c >= ip->sh->m->n_comps) return interp_error(ip, inst, "missing to_apply computation");
    return true;
}

/* Advances idx over dims (row-major); false after the last index. */
static bool next_index(int64_t *idx, const int64_t *dims, int32_t rank)
{
    for (int32_t d = rank - 1; d >= 0; d--) {
        if (++idx[d] < dims[d]) return true;
        idx[d] = 0;
    }
    return false;
}

/* ---------------------------------------------------------------- reducers */

typedef struct Reducer {
    Interp *ip;
    const HloInst *inst;
    int32_t comp;
    int32_t n;        /* values combined per step (variadic width) */
    HloOpcode binop;  /* fast path, or HLO_OPCODE_COUNT */
    ElemType t;
} Reducer;

static bool reducer_init(Reducer *r, Interp *ip, const HloInst *inst, int32_t comp, int32_t n, ElemType acc_t,
                         ElemType x_t)
{
    memset(r, 0, sizeof *r);
    r->ip = ip;
    r->inst = inst;
    r->comp = comp;
    r->n = n;
    r->t = acc_t;
    r->binop = HLO_OPCODE_COUNT;
    if (!comp_index_ok(ip, inst, comp)) return false;
    const InterpCompInfo *ci = interp_comp_info(ip->sh, comp);
    const HloComputation *c = hlo_comp(ip->sh->m, comp);
    if (n == 1 && ci->binop != HLO_OPCODE_COUNT && ci->binop != HLO_COMPARE && acc_t == x_t &&
        c->insts[c->root].shape->type == acc_t && num_binary_ok(ci->binop, acc_t))
        r->binop = ci->binop;
    return true;
}

/* accs[j][o] = f(accs[j][o], xs[j][k]) for every j < n (accs writable). */
static bool reducer_step(Reducer *r, SimValue *accs, int64_t o, const SimValue *xs, int64_t k)
{
    if (r->binop != HLO_OPCODE_COUNT) {
        void *a = sim_value_data(&accs[0]);
        const void *x = sim_value_data(&xs[0]);
        if (num_is_float(r->t))
            num_set_f(r->t, a, o, num_apply_f(r->binop, r->t, num_get_f(r->t, a, o), num_get_f(r->t, x, k)));
        else
            num_set_i(r->t, a, o, num_apply_i(r->binop, r->t, num_get_i(r->t, a, o), num_get_i(r->t, x, k)));
        return true;
    }
    int32_t n = r->n;
    SimValue stack[4] = {0}, *args = 2 * n <= 4 ? stack : xmalloc(sizeof(SimValue) * (size_t)(2 * n));
    for (int32_t j = 0; j < n; j++) {
        args[j] = interp_scalar_from(&accs[j], o);
        args[n + j] = interp_scalar_from(&xs[j], k);
    }
    SimValue res;
    bool ok = interp_call(r->ip, r->comp, args, 2 * n, &res);
    for (int32_t j = 0; j < 2 * n; j++) sim_value_release(&args[j]);
    if (args != stack) free(args);
    if (!ok) return false;
    for (int32_t j = 0; j < n && ok; j++) {
        const SimValue *v = n == 1 ? &res : (res.shape.type == ET_TUPLE && res.shape.n_elems == n ? &res.elems[j] : NULL);
        if (!v || v->shape.type != accs[j].shape.type || v->shape.rank != 0) {
            ok = interp_error(r->ip, r->inst, "to_apply computation does not return %d scalar(s) of the operand type", n);
            break;
        }
        int es = num_elem_bytes(v->shape.type);
        memcpy((char *)sim_value_data(&accs[j]) + o * es, sim_value_data(v), (size_t)es);
    }
    sim_value_release(&res);
    return ok;
}

/* Result of a variadic op: one array, or a tuple of n arrays. */
static SimValue pack_results(SimValue *vals, int32_t n)
{
    if (n == 1) return vals[0];
    SimValue t = sim_value_tuple(n);
    for (int32_t j = 0; j < n; j++) t.elems[j] = vals[j];
    return t;
}

static const Shape *result_leaf(const HloInst *inst, int32_t j, int32_t n)
{
    if (n == 1 && inst->shape->type != ET_TUPLE) return inst->shape;
    if (inst->shape->type == ET_TUPLE && j < inst->shape->n_elems) return &inst->shape->elems[j];
    return NULL;
}

/* outs[j] = new arrays shaped like the result leaves, filled with inits[j]. */
static bool init_outputs(const Interp *ip, const HloInst *inst, const SimValue *inits, int32_t n, SimValue *outs)
{
    for (int32_t j = 0; j < n; j++) {
        const Shape *s = result_leaf(inst, j, n);
        if (!s || s->type == ET_TUPLE || inits[j].shape.rank != 0 || inits[j].shape.type != s->type) {
            for (int32_t k = 0; k < j; k++) sim_value_release(&outs[k]);
            return interp_error(ip, inst, "result %d does not match its init value", j);
        }
        outs[j] = sim_value_new(s);
        num_fill(sim_value_data(&outs[j]), count_of(s), sim_value_data(&inits[j]), num_elem_bytes(s->type));
    }
    return true;
}

static void release_all(SimValue *v, int32_t n)
{
    for (int32_t j = 0; j < n; j++) sim_value_release(&v[j]);
}

bool interp_combine(Interp *ip, const HloInst *inst, int32_t comp, const SimValue *const *vals, int32_t n,
                    SimValue *out)
{
    Reducer r;
    ElemType t = vals[0]->shape.type;
    if (!reducer_init(&r, ip, inst, comp, 1, t, t)) return false;
    *out = sim_value_clone(vals[0]);
    int64_t cnt = count_of(&vals[0]->shape);
    for (int32_t k = 1; k < n; k++) {
        if (r.binop != HLO_OPCODE_COUNT) {
            num_binary(r.binop, t, sim_value_data(out), sim_value_data(vals[k]), sim_value_data(out), cnt);
            continue;
        }
        for (int64_t e = 0; e < cnt; e++)
            if (!reducer_step(&r, out, e, vals[k], e)) {
                sim_value_release(out);
                return false;
            }
    }
    return true;
}

/* ---------------------------------------------------------------- dot */

typedef enum AccKind { ACC_F32, ACC_F64, ACC_I64 } AccKind;

static AccKind acc_kind(ElemType rt, ElemType a, ElemType b)
{
    if (!num_is_float(rt) && !num_is_float(a) && !num_is_float(b)) return ACC_I64;
    if (rt == ET_F64 || a == ET_F64 || b == ET_F64 || !num_is_float(rt)) return ACC_F64;
    return ACC_F32;
}

/* v's elements with dims permuted to order[0..rank) (row-major), converted
 * to the accumulator type.  Caller frees. */
static void *load_permuted(const SimValue *v, const int64_t *order, AccKind kind)
{
    int32_t r = v->shape.rank;
    ElemType t = v->shape.type;
    int64_t n = count_of(&v->shape), st[SPMDC_MAX_RANK], src[SPMDC_MAX_RANK], pd[SPMDC_MAX_RANK], dst[SPMDC_MAX_RANK];
    int es = num_elem_bytes(t);
    num_strides(v->shape.dims, r, st);
    for (int32_t k = 0; k < r; k++) {
        pd[k] = v->shape.dims[order[k]];
        src[k] = st[order[k]];
    }
    num_strides(pd, r, dst);
    char *tmp = xmalloc((size_t)(n * es) + 8);
    num_copy_box(tmp, 0, dst, sim_value_data(v), 0, src, pd, r, es);
    if ((kind == ACC_F32 && t == ET_F32) || (kind == ACC_F64 && t == ET_F64)) return tmp;
    void *acc = xmalloc((size_t)n * 8 + 8);
    for (int64_t k = 0; k < n; k++) {
        if (kind == ACC_F32)
            ((float *)acc)[k] = (float)num_get_f(t, tmp, k);
        else if (kind == ACC_F64)
            ((double *)acc)[k] = num_get_f(t, tmp, k);
        else
            ((int64_t *)acc)[k] = num_get_i(t, tmp, k);
    }
    free(tmp);
    return acc;
}

#define BLK_J 512
#define BLK_K 128
#define MIN64(a, b) ((a) < (b) ? (a) : (b))

/* GCC's -O2 does not vectorize the j loop; vectorizing it does not change
 * any result (every (i, j) is its own sequential sum). */
#if defined(__GNUC__) && !defined(__clang__)
#define VECTORIZE __attribute__((optimize("tree-vectorize")))
#else
#define VECTORIZE
#endif

/* C[M,N] = A[M,K] x B[K,N], k accumulated in order for every (i, j).  Blocked
 * over j and k for the cache, four rows of C at a time (one load of B's row
 * feeds four rows). */
#define DEFINE_MATMUL(NAME, T, MAC)                                                                 \
    VECTORIZE static void NAME(const T *restrict A, const T *restrict B, T *restrict C, int64_t M,  \
                               int64_t K, int64_t N)                                                \
    {                                                                                               \
        memset(C, 0, sizeof(T) * (size_t)(M * N));                                                  \
        for (int64_t j0 = 0; j0 < N; j0 += BLK_J) {                                                 \
            int64_t j1 = MIN64(N, j0 + BLK_J);                                                      \
            for (int64_t k0 = 0; k0 < K; k0 += BLK_K) {                                             \
                int64_t k1 = MIN64(K, k0 + BLK_K), i = 0;                                           \
                for (; i + 4 <= M; i += 4) {                                                        \
                    T *c0 = C + i * N, *c1 = c0 + N, *c2 = c1 + N, *c3 = c2 + N;                    \
                    for (int64_t k = k0; k < k1; k++) {                                             \
                        T a0 = A[i * K + k], a1 = A[(i + 1) * K + k], a2 = A[(i + 2) * K + k],      \
                          a3 = A[(i + 3) * K + k];                                                  \
                        const T *b = B + k * N;                                                     \
                        for (int64_t j = j0; j < j1; j++) {                                         \
                            T bv = b[j];                                                            \
                            MAC(c0[j], a0, bv);                                                     \
                            MAC(c1[j], a1, bv);                                                     \
                            MAC(c2[j], a2, bv);                                                     \
                            MAC(c3[j], a3, bv);                                                     \
                        }                                                                           \
                    }                                                                               \
                }                                                                                   \
                for (; i < M; i++) {                                                                \
                    T *c = C + i * N;                                                               \
                    for (int64_t k = k0; k < k1; k++) {                                             \
                        T av = A[i * K + k];                                                        \
                        const T *b = B + k * N;                                                     \
                        for (int64_t j = j0; j < j1; j++) MAC(c[j], av, b[j]);                      \
                    }                                                                               \
                }                                                                                   \
            }                                                                                       \
        }                                                                                           \
    }

#define MAC_FLOAT(c, a, b) ((c) += (a) * (b))
#define MAC_WRAP(c, a, b) ((c) = (int64_t)((uint64_t)(c) + (uint64_t)(a) * (uint64_t)(b)))

DEFINE_MATMUL(matmul_f32, float, MAC_FLOAT)
DEFINE_MATMUL(matmul_f64, double, MAC_FLOAT)
DEFINE_MATMUL(matmul_i64, int64_t, MAC_WRAP)

/* Stores an accumulator array into out (rounding / wrapping once). */
static void store_acc(SimValue *out, const void *acc, AccKind kind, int64_t n)
{
    ElemType t = out->shape.type;
    void *d = sim_value_data(out);
    if (kind == ACC_F32 && t == ET_F32) {
        memcpy(d, acc, (size_t)n * 4);
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        if (kind == ACC_F32)
            num_set_f(t, d, k, ((const float *)acc)[k]);
        else if (kind == ACC_F64)
            num_set_f(t, d, k, ((const double *)acc)[k]);
        else
            num_set_i(t, d, k, ((const int64_t *)acc)[k]);
    }
}

/* Splits dims of a dot operand into batch, free and contracting lists;
 * false if an index repeats or is out of range. */
static bool dot_dims(const Shape *s, const IntList *batch, const IntList *contr, int64_t *order, int32_t *n_free)
{
    bool used[SPMDC_MAX_RANK] = {false};
    int32_t k = 0;
    const IntList *lists[2] = {batch, contr};
    for (int l = 0; l < 2; l++)
        for (int32_t i = 0; i < lists[l]->n; i++) {
            int64_t d = lists[l]->v[i];
            if (d < 0 || d >= s->rank || used[d]) return false;
            used[d] = true;
        }
    for (int32_t i = 0; i < batch->n; i++) order[k++] = batch->v[i];
    *n_free = 0;
    for (int32_t d = 0; d < s->rank; d++)
        if (!used[d]) order[k++] = d, (*n_free)++;
    for (int32_t i = 0; i < contr->n; i++) order[k++] = contr->v[i];
    return true;
}

/* C[M,N] = A[M,K] x B[K,N] in the accumulator kind. */
static void matmul_acc(AccKind kind, const void *A, const void *B, void *C, int64_t M, int64_t K, int64_t N)
{
    if (kind == ACC_F32)
        matmul_f32(A, B, C, M, K, N);
    else if (kind == ACC_F64)
        matmul_f64(A, B, C, M, K, N);
    else
        matmul_i64(A, B, C, M, K, N);
}

bool interp_dot(Interp *ip, const HloInst *inst, const SimValue *lhs, const SimValue *rhs, SimValue *out)
{
    const HloAttrs *a = hlo_attrs(inst);
    const Shape *ls = &lhs->shape, *rs = &rhs->shape, *os = inst->shape;
    int64_t lo[SPMDC_MAX_RANK], ro[SPMDC_MAX_RANK], rperm[SPMDC_MAX_RANK];
    int32_t lf, rf, nb = a->lhs_batch.n, nc = a->lhs_contracting.n;
    if (a->rhs_batch.n != nb || a->rhs_contracting.n != nc || !dot_dims(ls, &a->lhs_batch, &a->lhs_contracting, lo, &lf) ||
        !dot_dims(rs, &a->rhs_batch, &a->rhs_contracting, ro, &rf) || os->rank != nb + lf + rf)
        return interp_error(ip, inst, "dot dimension numbers do not fit the operands");
    int64_t B = 1, M = 1, K = 1, N = 1;
    for (int32_t i = 0; i < nb; i++) {
        if (ls->dims[lo[i]] != rs->dims[ro[i]] || os->dims[i] != ls->dims[lo[i]])
            return interp_error(ip, inst, "batch dimension %d sizes differ", i);
        B *= ls->dims[lo[i]];
    }
    for (int32_t i = 0; i < nc; i++) {
        if (ls->dims[lo[nb + lf + i]] != rs->dims[ro[nb + rf + i]])
            return interp_error(ip, inst, "contracting dimension %d sizes differ", i);
        K *= ls->dims[lo[nb + lf + i]];
    }
    for (int32_t i = 0; i < lf; i++) {
        if (os->dims[nb + i] != ls->dims[lo[nb + i]]) return interp_error(ip, inst, "result shape does not fit the operands");
        M *= ls->dims[lo[nb + i]];
    }
    for (int32_t i = 0; i < rf; i++) {
        if (os->dims[nb + lf + i] != rs->dims[ro[nb + i]]) return interp_error(ip, inst, "result shape does not fit the operands");
        N *= rs->dims[ro[nb + i]];
    }
    /* rhs as [batch, contracting, free] */
    for (int32_t i = 0; i < nb; i++) rperm[i] = ro[i];
    for (int32_t i = 0; i < nc; i++) rperm[nb + i] = ro[nb + rf + i];
    for (int32_t i = 0; i < rf; i++) rperm[nb + nc + i] = ro[nb + i];
    AccKind kind = acc_kind(os->type, ls->type, rs->type);
    void *A = load_permuted(lhs, lo, kind), *Bm = load_permuted(rhs, rperm, kind);
    size_t es = kind == ACC_F32 ? 4 : 8;
    char *C = xmalloc((size_t)(B * M * N) * es + 8);
    for (int64_t b = 0; b < B; b++) {
        const char *pa = (const char *)A + (size_t)(b * M * K) * es, *pb = (const char *)Bm + (size_t)(b * K * N) * es;
        char *pc = C + (size_t)(b * M * N) * es;
        matmul_acc(kind, pa, pb, pc, M, K, N);
    }
    *out = sim_value_new(os);
    store_acc(out, C, kind, B * M * N);
    free(A);
    free(Bm);
    free(C);
    return true;
}

/* For every row of group_sizes (its leading dims flattened; one row for a
 * [g] operand) and every position p < len of the ragged dim, the group p
 * falls in (groups are consecutive runs of their sizes; a negative size
 * counts as 0), or -1 past their sum.  Caller frees. */
static int32_t *ragged_groups(const SimValue *gs, int64_t len, int64_t *n_rows)
{
    const Shape *s = &gs->shape;
    int64_t g = s->dims[s->rank - 1], rows = g ? count_of(s) / g : 1;
    int32_t *grp = xmalloc(sizeof(int32_t) * (size_t)(rows * len) + 8);
    for (int64_t row = 0; row < rows; row++) {
        int64_t p = 0;
        for (int64_t j = 0; j < g && p < len; j++) {
            int64_t n = num_get_i(s->type, sim_value_data(gs), row * g + j);
            for (; n > 0 && p < len; n--) grp[row * len + p++] = (int32_t)j;
        }
        for (; p < len; p++) grp[row * len + p] = -1;
    }
    *n_rows = rows;
    return grp;
}

/* Product of dims[order[from..to)] of s. */
static int64_t dims_product(const Shape *s, const int64_t *order, int32_t from, int32_t to)
{
    int64_t n = 1;
    for (int32_t k = from; k < to; k++) n *= s->dims[order[k]];
    return n;
}

/* ragged-dot (hlo.h's HloRaggedMode).  lhs is read as [B, M, K] (batch,
 * free, contracting dims in dot order), rhs as [G, B, K, N] or [B, K, N].  A
 * free ragged dim: row m of group j is m's row of A times rhs's group j, a
 * row past the groups is zero.  A contracting one: result [g, B, M, N],
 * group j's slice is the dot over its run of contracting positions only.  A
 * batch one is a plain dot (the group sizes are not read).  Every element is
 * accumulated in contracting order, as by interp_dot. */
bool interp_ragged_dot(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const HloAttrs *a = hlo_attrs(inst);
    HloRaggedMode mode = hlo_ragged_mode(a);
    if (mode == RAGGED_BATCH) return interp_dot(ip, inst, &ops[0], &ops[1], out);
    const Shape *ls = &ops[0].shape, *rs = &ops[1].shape, *os = inst->shape;
    int64_t lo[SPMDC_MAX_RANK], rperm[SPMDC_MAX_RANK];
    int32_t lf, nb = a->lhs_batch.n, nc = a->lhs_contracting.n, ng = a->rhs_group.n, k = 0;
    if (a->lhs_ragged.n != 1 || ng != (mode == RAGGED_FREE) || ops[2].shape.rank < 1 ||
        !dot_dims(ls, &a->lhs_batch, &a->lhs_contracting, lo, &lf))
        return interp_error(ip, inst, "ragged-dot dimension numbers do not fit the operands");
    bool used[SPMDC_MAX_RANK] = {false};
    if (ng) rperm[k++] = a->rhs_group.v[0], used[a->rhs_group.v[0]] = true;
    for (int32_t i = 0; i < nb; i++) rperm[k++] = a->rhs_batch.v[i], used[a->rhs_batch.v[i]] = true;
    for (int32_t i = 0; i < nc; i++) rperm[k++] = a->rhs_contracting.v[i], used[a->rhs_contracting.v[i]] = true;
    for (int32_t d = 0; d < rs->rank; d++)
        if (!used[d]) rperm[k++] = d;
    int64_t B = dims_product(ls, lo, 0, nb), M = dims_product(ls, lo, nb, nb + lf);
    int64_t K = dims_product(ls, lo, nb + lf, ls->rank), N = dims_product(rs, rperm, ng + nb + nc, rs->rank);
    int32_t at = 0; /* the ragged dim's place in lo */
    while (at < ls->rank && lo[at] != a->lhs_ragged.v[0]) at++;
    int32_t end = mode == RAGGED_FREE ? nb + lf : ls->rank;
    if (at == ls->rank || count_of(os) != (mode == RAGGED_FREE ? 1 : ops[2].shape.dims[ops[2].shape.rank - 1]) * B * M * N)
        return interp_error(ip, inst, "ragged-dot result shape does not fit the operands");
    int64_t len = ls->dims[lo[at]], inner = dims_product(ls, lo, at + 1, end), rows;
    int32_t *grp = ragged_groups(&ops[2], len, &rows);
    AccKind kind = acc_kind(os->type, ls->type, rs->type);
    size_t es = kind == ACC_F32 ? 4 : 8;
    char *A = load_permuted(&ops[0], lo, kind), *R = load_permuted(&ops[1], rperm, kind);
    char *C = xcalloc((size_t)count_of(os) + 1, es);
    if (mode == RAGGED_FREE) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t m = 0; m < M; m++) {
                int32_t j = grp[(rows > 1 ? b : 0) * len + (m / inner) % len];
                if (j >= 0)
                    matmul_acc(kind, A + (size_t)((b * M + m) * K) * es, R + (size_t)((j * B + b) * K * N) * es,
                               C + (size_t)((b * M + m) * N) * es, 1, K, N);
            }
    } else {
        int64_t G = ops[2].shape.dims[ops[2].shape.rank - 1];
        char *Ap = xmalloc((size_t)(M * K) * es + 8), *Rp = xmalloc((size_t)(K * N) * es + 8);
        for (int64_t j = 0; j < G; j++)
            for (int64_t b = 0; b < B; b++) {
                int64_t kg = 0;
                for (int64_t kk = 0; kk < K; kk++) {
                    if (grp[(rows > 1 ? b : 0) * len + (kk / inner) % len] != j) continue;
                    for (int64_t m = 0; m < M; m++)
                        memcpy(Ap + (size_t)(m * K + kg) * es, A + (size_t)((b * M + m) * K + kk) * es, es);
                    memcpy(Rp + (size_t)(kg * N) * es, R + (size_t)((b * K + kk) * N) * es, (size_t)N * es);
                    kg++;
                }
                /* A' is [M, kg] with row stride K: pack it tight first */
                for (int64_t m = 1; m < M; m++) memmove(Ap + (size_t)(m * kg) * es, Ap + (size_t)(m * K) * es, (size_t)kg * es);
                if (kg) matmul_acc(kind, Ap, Rp, C + (size_t)((j * B + b) * M * N) * es, M, kg, N);
            }
        free(Ap);
        free(Rp);
    }
    *out = sim_value_new(os);
    store_acc(out, C, kind, count_of(os));
    free(grp);
    free(A);
    free(R);
    free(C);
    return true;
}

/* ---------------------------------------------------------------- convolution */

typedef struct ConvGeo {
    int32_t nsp;
    int64_t size[SPMDC_MAX_RANK], stride[SPMDC_MAX_RANK], lo[SPMDC_MAX_RANK], ldil[SPMDC_MAX_RANK],
        rdil[SPMDC_MAX_RANK];
    bool rev[SPMDC_MAX_RANK];
} ConvGeo;

/* Window along n spatial dims (a missing window means size = sizes[i], unit stride, no padding). */
static bool window_geo(const Window *w, int32_t n, const int64_t *sizes, ConvGeo *g)
{
    if (w && w->rank != n) return false;
    g->nsp = n;
    for (int32_t i = 0; i < n; i++) {
        const WindowDim *wd = w ? &w->dims[i] : NULL;
        g->size[i] = wd ? wd->size : sizes[i];
        g->stride[i] = wd && wd->stride ? wd->stride : 1;
        g->lo[i] = wd ? wd->pad_lo : 0;
        g->ldil[i] = wd && wd->lhs_dilate ? wd->lhs_dilate : 1;
        g->rdil[i] = wd && wd->rhs_dilate ? wd->rhs_dilate : 1;
        g->rev[i] = wd && wd->reversal;
        if (g->size[i] < 0 || g->stride[i] < 1 || g->ldil[i] < 1 || g->rdil[i] < 1) return false;
    }
    return true;
}

/* Input coordinate of window position w at output position o along spatial
 * dim i, or -1 when it falls into padding or a dilation hole. */
static int64_t window_input(const ConvGeo *g, int32_t i, int64_t o, int64_t w, int64_t in_size)
{
    int64_t p = o * g->stride[i] + w * g->rdil[i] - g->lo[i];
    if (p < 0 || p % g->ldil[i]) return -1;
    p /= g->ldil[i];
    return p < in_size ? p : -1;
}

typedef struct ConvCtx {
    const ConvDims *cd;
    ConvGeo g;
    int64_t lst[SPMDC_MAX_RANK], rst[SPMDC_MAX_RANK];
    const int64_t *ldims, *rdims;
    int64_t k_in, ofg, obg, out_batch, fgc, bgc;
} ConvCtx;

/* One output element: b = batch, f = feature, sp = spatial position. */
static void conv_point(const ConvCtx *x, AccKind kind, const void *L, const void *R, const int64_t *sp, int64_t b,
                       int64_t f, void *acc_out)
{
    const ConvDims *cd = x->cd;
    int64_t g = f / x->ofg, lb = x->bgc > 1 ? (f / x->obg) * x->out_batch + b : b;
    int64_t kp[SPMDC_MAX_RANK] = {0}, ksz[SPMDC_MAX_RANK];
    for (int32_t i = 0; i < x->g.nsp; i++) ksz[i] = x->rdims[cd->k_spatial[i]];
    double accd = 0;
    float accf = 0;
    uint64_t acci = 0;
    int64_t lbase = lb * x->lst[cd->in_batch] + g * x->k_in * x->lst[cd->in_feature];
    int64_t rbase = f * x->rst[cd->k_out];
    for (bool more = true; more; more = next_index(kp, ksz, x->g.nsp)) {
        int64_t loff = lbase, roff = rbase;
        bool valid = true;
        for (int32_t i = 0; i < x->g.nsp && valid; i++) {
            int64_t q = window_input(&x->g, i, sp[i], kp[i], x->ldims[cd->in_spatial[i]]);
            if (q < 0) valid = false;
            loff += q * x->lst[cd->in_spatial[i]];
            roff += (x->g.rev[i] ? ksz[i] - 1 - kp[i] : kp[i]) * x->rst[cd->k_spatial[i]];
        }
        if (!valid) continue;
        int64_t ls = x->lst[cd->in_feature], rs = x->rst[cd->k_in];
        for (int64_t c = 0; c < x->k_in; c++) {
            int64_t li = loff + c * ls, ri = roff + c * rs;
            if (kind == ACC_F32)
                accf += ((const float *)L)[li] * ((const float *)R)[ri];
            else if (kind == ACC_F64)
                accd += ((const double *)L)[li] * ((const double *)R)[ri];
            else
                acci += (uint64_t)((const int64_t *)L)[li] * (uint64_t)((const int64_t *)R)[ri];
        }
    }
    if (kind == ACC_F32)
        *(float *)acc_out = accf;
    else if (kind == ACC_F64)
        *(double *)acc_out = accd;
    else
        *(int64_t *)acc_out = (int64_t)acci;
}

/* Every dimension number names a distinct dimension of its operand. */
static bool conv_dims_ok(const ConvDims *cd)
{
    int32_t r = cd->n_spatial + 2;
    uint32_t used[3] = {0, 0, 0}; /* lhs, kernel, output */
    int64_t dims[3][SPMDC_MAX_RANK + 2];
    dims[0][0] = cd->in_batch, dims[0][1] = cd->in_feature;
    dims[1][0] = cd->k_in, dims[1][1] = cd->k_out;
    dims[2][0] = cd->out_batch, dims[2][1] = cd->out_feature;
    for (int32_t i = 0; i < cd->n_spatial; i++) {
        dims[0][i + 2] = cd->in_spatial[i];
        dims[1][i + 2] = cd->k_spatial[i];
        dims[2][i + 2] = cd->out_spatial[i];
    }
    for (int32_t o = 0; o < 3; o++)
        for (int32_t i = 0; i < r; i++) {
            int64_t d = dims[o][i];
            if (d < 0 || d >= r || (used[o] >> d) & 1) return false;
            used[o] |= 1u << d;
        }
    return true;
}

static bool conv_setup(const Interp *ip, const HloInst *inst, const Shape *ls, const Shape *rs, ConvCtx *x)
{
    const HloAttrs *a = hlo_attrs(inst);
    const ConvDims *cd = a->conv;
    const Shape *os = inst->shape;
    if (!cd || ls->rank != cd->n_spatial + 2 || rs->rank != ls->rank || os->rank != ls->rank || !conv_dims_ok(cd))
        return interp_error(ip, inst, "convolution dimension labels do not fit the operands");
    memset(x, 0, sizeof *x);
    x->cd = cd;
    int64_t ksz[SPMDC_MAX_RANK] = {0};
    for (int32_t i = 0; i < cd->n_spatial; i++) ksz[i] = rs->dims[cd->k_spatial[i]];
    if (!window_geo(a->window, cd->n_spatial, ksz, &x->g)) return interp_error(ip, inst, "window does not fit the kernel");
    for (int32_t i = 0; i < cd->n_spatial; i++)
        if (x->g.size[i] != ksz[i]) return interp_error(ip, inst, "window size differs from the kernel size");
    num_strides(ls->dims, ls->rank, x->lst);
    num_strides(rs->dims, rs->rank, x->rst);
    x->ldims = ls->dims;
    x->rdims = rs->dims;
    x->fgc = a->feature_group_count > 0 ? a->feature_group_count : 1;
    x->bgc = a->batch_group_count > 0 ? a->batch_group_count : 1;
    x->k_in = rs->dims[cd->k_in];
    int64_t k_out = rs->dims[cd->k_out];
    x->out_batch = os->dims[cd->out_batch];
    if (ls->dims[cd->in_feature] != x->fgc * x->k_in || k_out % x->fgc || k_out % x->bgc ||
        os->dims[cd->out_feature] != k_out || ls->dims[cd->in_batch] != x->bgc * x->out_batch)
        return interp_error(ip, inst, "convolution feature/batch sizes do not fit the group counts");
    x->ofg = k_out / x->fgc;
    x->obg = k_out / x->bgc;
    return true;
}

/* The order that keeps s's dims but moves dim f last (load_permuted's
 * order), and in st the stride of each original dim in that copy. */
static void feature_last(const Shape *s, int32_t f, int64_t *order, int64_t *st)
{
    int32_t r = s->rank, k = 0;
    for (int32_t d = 0; d < r; d++)
        if (d != f) order[k++] = d;
    if (f >= 0 && f < r) order[k++] = f;
    int64_t pd[SPMDC_MAX_RANK] = {0}, dst[SPMDC_MAX_RANK] = {0};
    for (int32_t j = 0; j < k; j++) pd[j] = s->dims[order[j]];
    num_strides(pd, k, dst);
    for (int32_t j = 0; j < k; j++) st[order[j]] = dst[j];
}

bool interp_convolution(Interp *ip, const HloInst *inst, const SimValue *lhs, const SimValue *rhs, SimValue *out)
{
    ConvCtx x;
    if (!conv_setup(ip, inst, &lhs->shape, &rhs->shape, &x)) return false;
    const Shape *os = inst->shape;
    const ConvDims *cd = x.cd;
    AccKind kind = acc_kind(os->type, lhs->shape.type, rhs->shape.type);
    /* the input features innermost in both copies: conv_point's inner loop
     * then reads contiguous elements whatever the dim_labels */
    int64_t lo[SPMDC_MAX_RANK], ro[SPMDC_MAX_RANK];
    feature_last(&lhs->shape, cd->in_feature, lo, x.lst);
    feature_last(&rhs->shape, cd->k_in, ro, x.rst);
    void *L = load_permuted(lhs, lo, kind), *R = load_permuted(rhs, ro, kind);
    int64_t n = count_of(os);
    char *acc = xmalloc((size_t)n * 8 + 8);
    size_t es = kind == ACC_F32 ? 4 : 8;
    int64_t idx[SPMDC_MAX_RANK] = {0}, sp[SPMDC_MAX_RANK];
    for (int64_t k = 0; k < n; k++) {
        for (int32_t i = 0; i < cd->n_spatial; i++) sp[i] = idx[cd->out_spatial[i]];
        conv_point(&x, kind, L, R, sp, idx[cd->out_batch], idx[cd->out_feature], acc + (size_t)k * es);
        next_index(idx, os->dims, os->rank);
    }
    *out = sim_value_new(os);
    store_acc(out, acc, kind, n);
    free(L);
    free(R);
    free(acc);
    return true;
}

/* ---------------------------------------------------------------- reduce */

/* Checks that every input has the same dims and returns the count n of inputs. */
static bool variadic_inputs(const Interp *ip, const HloInst *inst, const SimValue *ops, int32_t *n)
{
    if (inst->n_operands < 2 || inst->n_operands % 2) return interp_error(ip, inst, "expected inputs and as many init values");
    *n = inst->n_operands / 2;
    for (int32_t j = 1; j < *n; j++)
        if (!same_dims(&ops[0].shape, &ops[j].shape))
            return interp_error(ip, inst, "inputs 0 and %d have different dimensions", j);
    return true;
}

bool interp_reduce(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    int32_t n;
    if (!variadic_inputs(ip, inst, ops, &n)) return false;
    const Shape *in = &ops[0].shape;
    const IntList *dl = &hlo_attrs(inst)->dimensions;
    uint32_t red = 0;
    for (int32_t i = 0; i < dl->n; i++) {
        if (dl->v[i] < 0 || dl->v[i] >= in->rank) return interp_error(ip, inst, "reduce dimension out of range");
        red |= 1u << dl->v[i];
    }
    SimValue outs[SPMDC_MAX_RANK * 4];
    if (n > (int32_t)(sizeof outs / sizeof outs[0]))
        return interp_error(ip, inst, "the simulator reduces at most %d inputs together (this reduce has %d)",
                            (int)(sizeof outs / sizeof outs[0]), (int)n);
    if (!init_outputs(ip, inst, &ops[n], n, outs)) return false;
    int64_t ost[SPMDC_MAX_RANK], kept[SPMDC_MAX_RANK], ostr[SPMDC_MAX_RANK] = {0};
    int32_t nk = 0;
    for (int32_t d = 0; d < in->rank; d++)
        if (!(red & (1u << d))) kept[nk++] = in->dims[d];
    for (int32_t j = 0; j < n; j++) {
        bool fits = nk == outs[j].shape.rank;
        for (int32_t d = 0; d < nk && fits; d++) fits = kept[d] == outs[j].shape.dims[d];
        if (!fits) {
            release_all(outs, n);
            return interp_error(ip, inst, "result shape does not fit the reduced dimensions");
        }
    }
    num_strides(kept, nk, ost);
    for (int32_t d = 0, k = 0; d < in->rank; d++)
        if (!(red & (1u << d))) ostr[d] = ost[k++];
    Reducer r;
    bool ok = reducer_init(&r, ip, inst, hlo_attrs(inst)->to_apply, n, outs[0].shape.type, in->type);
    /* Input elements in row-major order; each lands on its output slot. */
    int64_t idx[SPMDC_MAX_RANK] = {0}, o = 0, total = count_of(in);
    for (int64_t k = 0; k < total && ok; k++) {
        ok = reducer_step(&r, outs, o, ops, k);
        for (int32_t d = in->rank - 1; d >= 0; d--) {
            o += ostr[d];
            if (++idx[d] < in->dims[d]) break;
            o -= ostr[d] * in->dims[d];
            idx[d] = 0;
        }
    }
    if (!ok) {
        release_all(outs, n);
        return false;
    }
    *out = pack_results(outs, n);
    return true;
}

bool interp_reduce_window(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    int32_t n;
    if (!variadic_inputs(ip, inst, ops, &n)) return false;
    const Shape *in = &ops[0].shape;
    ConvGeo g;
    int64_t ones[SPMDC_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
    if (!window_geo(hlo_attrs(inst)->window, in->rank, ones, &g)) return interp_error(ip, inst, "window does not fit the operand");
    SimValue outs[16];
    if (n > 16) return interp_error(ip, inst, "too many reduce-window inputs");
    if (!init_outputs(ip, inst, &ops[n], n, outs)) return false;
    const Shape *os = &outs[0].shape;
    bool fits = os->rank == in->rank;
    for (int32_t j = 1; j < n && fits; j++) fits = same_dims(&outs[j].shape, os);
    if (!fits) {
        release_all(outs, n);
        return interp_error(ip, inst, "result rank differs from the operand rank");
    }
    Reducer r;
    bool ok = reducer_init(&r, ip, inst, hlo_attrs(inst)->to_apply, n, os->type, in->type);
    int64_t ist[SPMDC_MAX_RANK], oi[SPMDC_MAX_RANK] = {0}, total = count_of(os);
    num_strides(in->dims, in->rank, ist);
    for (int64_t o = 0; o < total && ok; o++, next_index(oi, os->dims, os->rank)) {
        int64_t w[SPMDC_MAX_RANK] = {0};
        for (bool more = true; more && ok; more = next_index(w, g.size, g.nsp)) {
            int64_t k = 0;
            bool valid = true;
            for (int32_t d = 0; d < in->rank && valid; d++) {
                int64_t q = window_input(&g, d, oi[d], w[d], in->dims[d]);
                valid = q >= 0;
                k += q * ist[d];
            }
            if (valid) ok = reducer_step(&r, outs, o, ops, k);
        }
    }
    if (!ok) {
        release_all(outs, n);
        return false;
    }
    *out = pack_results(outs, n);
    return true;
}

/* ---------------------------------------------------------------- comparators */

typedef struct Comparator {
    Interp *ip;
    const HloInst *inst;
    int32_t comp;
    const HloInst *root; /* compare(param0, param1), or NULL (interpret) */
    bool failed;
} Comparator;

static void comparator_init(Comparator *c, Interp *ip, const HloInst *inst, int32_t comp)
{
    memset(c, 0, sizeof *c);
    c->ip = ip;
    c->inst = inst;
    c->comp = comp;
    const HloComputation *hc = hlo_comp(ip->sh->m, comp);
    if (interp_comp_info(ip->sh, comp)->binop == HLO_COMPARE) c->root = &hc->insts[hc->root];
}

/* comp(v0[i], v0[j], v1[i], v1[j], ...) for the n arrays vals. */
static bool comparator_less(Comparator *c, const SimValue *vals, int32_t n, int64_t i, int64_t j)
{
    if (c->failed) return false;
    if (c->root) {
        const HloAttrs *a = hlo_attrs(c->root);
        ElemType t = vals[0].shape.type;
        int es = num_elem_bytes(t);
        const char *d = sim_value_data(&vals[0]);
        uint8_t r = 0;
        num_compare(a->direction, a->compare_type && strcmp(a->compare_type, "TOTALORDER") == 0, t, d + i * es,
                    d + j * es, &r, 1);
        return r;
    }
    SimValue stack[8] = {0}, *args = 2 * n <= 8 ? stack : xmalloc(sizeof(SimValue) * (size_t)(2 * n));
    for (int32_t k = 0; k < n; k++) {
        args[2 * k] = interp_scalar_from(&vals[k], i);
        args[2 * k + 1] = interp_scalar_from(&vals[k], j);
    }
    SimValue res;
    bool ok = interp_call(c->ip, c->comp, args, 2 * n, &res), less = false;
    for (int32_t k = 0; k < 2 * n; k++) sim_value_release(&args[k]);
    if (args != stack) free(args);
    if (ok && (res.shape.type != ET_PRED || res.shape.rank != 0))
        ok = interp_error(c->ip, c->inst, "comparator does not return pred[]");
    if (ok) less = num_get_i(ET_PRED, sim_value_data(&res), 0) != 0;
    sim_value_release(&res);
    if (!ok) c->failed = true;
    return less;
}

/* ---------------------------------------------------------------- select-and-scatter */

bool interp_select_and_scatter(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const HloAttrs *a = hlo_attrs(inst);
    const Shape *in = &ops[0].shape, *src = &ops[1].shape;
    ConvGeo g;
    int64_t ones[SPMDC_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
    if (!window_geo(a->window, in->rank, ones, &g) || src->rank != in->rank || src->type != in->type)
        return interp_error(ip, inst, "window does not fit the operand");
    if (!comp_index_ok(ip, inst, a->select) || !comp_index_ok(ip, inst, a->to_apply)) return false;
    SimValue res;
    if (!init_outputs(ip, inst, &ops[2], 1, &res)) return false;
    Comparator sel;
    comparator_init(&sel, ip, inst, a->select);
    Reducer r;
    bool ok = reducer_init(&r, ip, inst, a->to_apply, 1, in->type, src->type);
    int64_t ist[SPMDC_MAX_RANK], si[SPMDC_MAX_RANK] = {0}, total = count_of(src);
    num_strides(in->dims, in->rank, ist);
    for (int64_t s = 0; s < total && ok; s++, next_index(si, src->dims, src->rank)) {
        int64_t w[SPMDC_MAX_RANK] = {0}, best = -1;
        for (bool more = true; more; more = next_index(w, g.size, g.nsp)) {
            int64_t k = 0;
            bool valid = true;
            for (int32_t d = 0; d < in->rank && valid; d++) {
                int64_t q = window_input(&g, d, si[d], w[d], in->dims[d]);
                valid = q >= 0;
                k += q * ist[d];
            }
            if (!valid) continue;
            /* select(selected, candidate) false -> the candidate wins */
            if (best < 0 || !comparator_less(&sel, &ops[0], 1, best, k)) best = k;
        }
        if (sel.failed) ok = false;
        if (ok && best >= 0) ok = reducer_step(&r, &res, best, &ops[1], s);
    }
    if (!ok) {
        sim_value_release(&res);
        return false;
    }
    *out = res;
    return true;
}

/* ---------------------------------------------------------------- gather, scatter */

static bool list_has(const IntList *l, int64_t v)
{
    for (int32_t i = 0; i < l->n; i++)
        if (l->v[i] == v) return true;
    return false;
}

/* Reads the start vector for batch position G (coordinates of the index
 * array's non-vector dims, in order) and fills the operand start S. */
typedef struct IndexMap {
    const SimValue *idx;
    int64_t ivd;               /* index_vector_dim */
    const IntList *to_operand; /* start_index_map / scatter_dims_to_operand_dims */
    const IntList *op_batch, *idx_batch;
} IndexMap;

static bool index_start(const IndexMap *im, const int64_t *G, int32_t op_rank, int64_t *S)
{
    const Shape *is = &im->idx->shape;
    int64_t coord[SPMDC_MAX_RANK + 1], st[SPMDC_MAX_RANK];
    int32_t g = 0;
    for (int32_t d = 0; d < is->rank; d++) coord[d] = d == im->ivd ? 0 : G[g++];
    num_strides(is->dims, is->rank, st);
    for (int32_t d = 0; d < op_rank; d++) S[d] = 0;
    for (int32_t k = 0; k < im->to_operand->n; k++) {
        int64_t od = im->to_operand->v[k];
        if (od < 0 || od >= op_rank) return false;
        if (im->ivd < is->rank) coord[im->ivd] = k;
        int64_t off = 0;
        for (int32_t d = 0; d < is->rank; d++) off += coord[d] * st[d];
        int64_t v = num_get_i(is->type, sim_value_data(im->idx), off);
        S[od] = is->type == ET_U64 && v < 0 ? INT64_MAX : v;
    }
    for (int32_t k = 0; k < im->op_batch->n && k < im->idx_batch->n; k++) {
        int64_t od = im->op_batch->v[k], id = im->idx_batch->v[k];
        if (od < 0 || od >= op_rank || id < 0 || id >= is->rank) return false;
        S[od] = coord[id];
    }
    return true;
}

bool interp_gather(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const HloAttrs *a = hlo_attrs(inst);
    const Shape *os = inst->shape, *in = &ops[0].shape;
    IndexMap im = {&ops[1], a->index_vector_dim, &a->start_index_map, &a->operand_batching_dims, &a->start_indices_batching_dims};
    if (!elem_type_is_integral(ops[1].shape.type) || a->slice_sizes.n != in->rank || os->type != in->type)
        return interp_error(ip, inst, "gather attributes do not fit the operands");
    int64_t off_op[SPMDC_MAX_RANK], batch_dims[SPMDC_MAX_RANK + 1];
    int32_t n_off = 0, nb = 0;
    for (int32_t d = 0; d < in->rank; d++)
        if (!list_has(&a->collapsed_slice_dims, d) && !list_has(&a->operand_batching_dims, d)) off_op[n_off++] = d;
    for (int32_t d = 0; d < os->rank; d++)
        if (!list_has(&a->offset_dims, d)) batch_dims[nb++] = d;
    if (n_off != a->offset_dims.n) return interp_error(ip, inst, "offset_dims do not match the slice dimensions");
    for (int32_t d = 0; d < in->rank; d++)
        if (a->slice_sizes.v[d] < 0 || a->slice_sizes.v[d] > in->dims[d])
            return interp_error(ip, inst, "slice size of dimension %d exceeds the operand", d);
    for (int32_t j = 0; j < n_off; j++)
        if (a->offset_dims.v[j] < 0 || a->offset_dims.v[j] >= os->rank || os->dims[a->offset_dims.v[j]] > a->slice_sizes.v[off_op[j]])
            return interp_error(ip, inst, "offset dimension %d does not fit the slice", j);
    int64_t ist[SPMDC_MAX_RANK], oi[SPMDC_MAX_RANK] = {0}, G[SPMDC_MAX_RANK + 1], S[SPMDC_MAX_RANK];
    num_strides(in->dims, in->rank, ist);
    int es = num_elem_bytes(os->type);
    *out = sim_value_new(os);
    int64_t total = count_of(os);
    for (int64_t k = 0; k < total; k++, next_index(oi, os->dims, os->rank)) {
        for (int32_t j = 0; j < nb; j++) G[j] = oi[batch_dims[j]];
        if (!index_start(&im, G, in->rank, S)) {
            sim_value_release(out);
            return interp_error(ip, inst, "index maps do not fit the operand");
        }
        int64_t src = 0;
        for (int32_t d = 0; d < in->rank; d++) {
            int64_t hi = in->dims[d] - a->slice_sizes.v[d];
            S[d] = S[d] < 0 ? 0 : S[d] > hi ? hi : S[d];
            src += S[d] * ist[d];
        }
        for (int32_t j = 0; j < n_off; j++) src += oi[a->offset_dims.v[j]] * ist[off_op[j]];
        memcpy((char *)sim_value_data(out) + k * es, (const char *)sim_value_data(&ops[0]) + src * es, (size_t)es);
    }
    return true;
}

bool interp_scatter(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const HloAttrs *a = hlo_attrs(inst);
    int32_t n = (inst->n_operands - 1) / 2;
    if (inst->n_operands < 3 || inst->n_operands % 2 == 0 || n > 16) return interp_error(ip, inst, "scatter needs 2n+1 operands");
    const Shape *in = &ops[0].shape, *us = &ops[n + 1].shape;
    IndexMap im = {&ops[n], a->index_vector_dim, &a->scatter_dims_to_operand_dims, &a->input_batching_dims,
                   &a->scatter_indices_batching_dims};
    int64_t win_op[SPMDC_MAX_RANK], sc_dims[SPMDC_MAX_RANK + 1], wsize[SPMDC_MAX_RANK];
    int32_t nw = 0, ns = 0;
    for (int32_t d = 0; d < in->rank; d++) {
        wsize[d] = 1;
        if (!list_has(&a->inserted_window_dims, d) && !list_has(&a->input_batching_dims, d)) win_op[nw++] = d;
    }
    for (int32_t d = 0; d < us->rank; d++)
        if (!list_has(&a->update_window_dims, d)) sc_dims[ns++] = d;
    if (nw != a->update_window_dims.n || !elem_type_is_integral(ops[n].shape.type))
        return interp_error(ip, inst, "update_window_dims do not match the operand");
    for (int32_t j = 0; j < nw; j++)
        if (a->update_window_dims.v[j] < 0 || a->update_window_dims.v[j] >= us->rank)
            return interp_error(ip, inst, "update_window_dims out of range");
    for (int32_t j = 1; j < n; j++)
        if (!same_dims(&ops[j].shape, in) || !same_dims(&ops[n + 1 + j].shape, us))
            return interp_error(ip, inst, "operand %d or its updates differ in dimensions from operand 0", j);
    for (int32_t j = 0; j < nw; j++) wsize[win_op[j]] = us->dims[a->update_window_dims.v[j]];
    SimValue outs[16];
    for (int32_t j = 0; j < n; j++) outs[j] = sim_value_clone(&ops[j]);
    Reducer r;
    bool ok = reducer_init(&r, ip, inst, a->to_apply, n, in->type, ops[n + 1].shape.type);
    int64_t ist[SPMDC_MAX_RANK], ui[SPMDC_MAX_RANK] = {0}, G[SPMDC_MAX_RANK + 1], S[SPMDC_MAX_RANK];
    num_strides(in->dims, in->rank, ist);
    int64_t total = count_of(us);
    for (int64_t k = 0; k < total && ok; k++, next_index(ui, us->dims, us->rank)) {
        for (int32_t j = 0; j < ns; j++) G[j] = ui[sc_dims[j]];
        if (!index_start(&im, G, in->rank, S)) {
            ok = interp_error(ip, inst, "index maps do not fit the operand");
            break;
        }
        bool inside = true;
        int64_t dst = 0;
        for (int32_t d = 0; d < in->rank && inside; d++) {
            if (S[d] < 0 || S[d] > in->dims[d] - wsize[d]) inside = false; /* the whole window is skipped */
            else dst += S[d] * ist[d]; /* only in-range starts: any index value is safe */
        }
        if (!inside) continue;
        for (int32_t j = 0; j < nw; j++) dst += ui[a->update_window_dims.v[j]] * ist[win_op[j]];
        ok = reducer_step(&r, outs, dst, &ops[n + 1], k);
    }
    if (!ok) {
        release_all(outs, n);
        return false;
    }
    *out = pack_results(outs, n);
    return true;
}

/* ---------------------------------------------------------------- sort */

typedef struct SortLine {
    Comparator *cmp;
    const SimValue *vals;
    int32_t n;
    int64_t base, stride;
} SortLine;

static bool line_less(const SortLine *l, int64_t a, int64_t b)
{
    return comparator_less(l->cmp, l->vals, l->n, l->base + a * l->stride, l->base + b * l->stride);
}

/* Stable bottom-up merge sort of perm[0..len). */
static void merge_sort(const SortLine *l, int64_t *perm, int64_t *tmp, int64_t len)
{
    for (int64_t w = 1; w < len; w *= 2) {
        for (int64_t lo = 0; lo < len; lo += 2 * w) {
            int64_t mid = MIN64(lo + w, len), hi = MIN64(lo + 2 * w, len), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = line_less(l, perm[j], perm[i]) ? perm[j++] : perm[i++];
            while (i < mid) tmp[k++] = perm[i++];
            while (j < hi) tmp[k++] = perm[j++];
        }
        memcpy(perm, tmp, sizeof(int64_t) * (size_t)len);
    }
}

bool interp_sort(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    int32_t n = inst->n_operands;
    const Shape *s = &ops[0].shape;
    const IntList *dl = &hlo_attrs(inst)->dimensions;
    if (n > 16)
        return interp_error(ip, inst, "the simulator sorts at most 16 operands together (this sort has %d)", (int)n);
    if (n < 1 || dl->n != 1 || dl->v[0] < 0 || dl->v[0] >= s->rank)
        return interp_error(ip, inst, "sort needs one dimension in range");
    for (int32_t j = 1; j < n; j++)
        if (count_of(&ops[j].shape) != count_of(s) || ops[j].shape.rank != s->rank)
            return interp_error(ip, inst, "operands have different dimensions");
    if (!comp_index_ok(ip, inst, hlo_attrs(inst)->to_apply)) return false;
    int32_t dim = (int32_t)dl->v[0];
    int64_t st[SPMDC_MAX_RANK], len = s->dims[dim], outer[SPMDC_MAX_RANK], oi[SPMDC_MAX_RANK] = {0};
    num_strides(s->dims, s->rank, st);
    memcpy(outer, s->dims, sizeof outer);
    outer[dim] = 1;
    Comparator cmp;
    comparator_init(&cmp, ip, inst, hlo_attrs(inst)->to_apply);
    SimValue outs[16];
    for (int32_t j = 0; j < n; j++) outs[j] = sim_value_new(&ops[j].shape);
    int64_t *perm = xmalloc(sizeof(int64_t) * (size_t)(len + 1)), *tmp = xmalloc(sizeof(int64_t) * (size_t)(len + 1));
    int64_t lines = count_of(s) ? count_of(s) / (len ? len : 1) : 0;
    for (int64_t line = 0; line < lines && !cmp.failed; line++, next_index(oi, outer, s->rank)) {
        SortLine l = {&cmp, ops, n, 0, st[dim]};
        for (int32_t d = 0; d < s->rank; d++) l.base += oi[d] * st[d];
        for (int64_t k = 0; k < len; k++) perm[k] = k;
        merge_sort(&l, perm, tmp, len);
        for (int32_t j = 0; j < n; j++) {
            int es = num_elem_bytes(ops[j].shape.type);
            for (int64_t k = 0; k < len; k++)
                memcpy((char *)sim_value_data(&outs[j]) + (l.base + k * l.stride) * es,
                       (const char *)sim_value_data(&ops[j]) + (l.base + perm[k] * l.stride) * es, (size_t)es);
        }
    }
    free(perm);
    free(tmp);
    if (cmp.failed) {
        release_all(outs, n);
        return false;
    }
    *out = pack_results(outs, n);
    return true;
}

/* ---------------------------------------------------------------- topk */

/* Whether element a of a row goes before element b in a topk: the `topk`
 * opcode orders by value in total order (NaN above +inf), largest or
 * smallest first, the lower index first among equals; the TopK custom-call
 * by its comparator (to_apply), stably. */
typedef struct TopkOrder {
    Comparator *cmp; /* custom-call: the comparator, else NULL */
    bool largest;
    const SimValue *x;
    int64_t base, stride;
} TopkOrder;

static bool topk_before(const TopkOrder *o, int64_t a, int64_t b)
{
    int64_t ia = o->base + a * o->stride, ib = o->base + b * o->stride;
    if (o->cmp) return comparator_less(o->cmp, o->x, 1, ia, ib);
    ElemType t = o->x->shape.type;
    int es = num_elem_bytes(t);
    const char *d = sim_value_data(o->x);
    uint8_t r = 0;
    num_compare(o->largest ? CMP_GT : CMP_LT, true, t, d + ia * es, d + ib * es, &r, 1);
    return r != 0;
}

/* Stable merge sort of perm[0..len) by topk_before. */
static void topk_sort(const TopkOrder *o, int64_t *perm, int64_t *tmp, int64_t len)
{
    for (int64_t w = 1; w < len; w *= 2) {
        for (int64_t lo = 0; lo < len; lo += 2 * w) {
            int64_t mid = MIN64(lo + w, len), hi = MIN64(lo + 2 * w, len), i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = topk_before(o, perm[j], perm[i]) ? perm[j++] : perm[i++];
            while (i < mid) tmp[k++] = perm[i++];
            while (j < hi) tmp[k++] = perm[j++];
        }
        memcpy(perm, tmp, sizeof(int64_t) * (size_t)len);
    }
}

bool interp_topk(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const Shape *s = &ops[0].shape, *rs = inst->shape;
    if (inst->n_operands != 1 || s->type == ET_TUPLE || s->rank < 1 || rs->type != ET_TUPLE || rs->n_elems != 2 ||
        rs->elems[0].rank != s->rank || rs->elems[1].type != ET_S32)
        return interp_error(ip, inst, "topk needs one array operand and a (values, s32 indices) result");
    int32_t r = s->rank, last = r - 1;
    int64_t n = s->dims[last], k = rs->elems[0].dims[last];
    if (k < 0 || k > n) return interp_error(ip, inst, "topk keeps %lld of %lld elements", (long long)k, (long long)n);
    Comparator cmp;
    /* a TopK custom-call without a comparator takes the largest, as XLA's does */
    bool custom = inst->op == HLO_CUSTOM_CALL && hlo_attrs(inst)->to_apply >= 0;
    if (custom) {
        if (!comp_index_ok(ip, inst, hlo_attrs(inst)->to_apply)) return false;
        comparator_init(&cmp, ip, inst, hlo_attrs(inst)->to_apply);
    }
    Shape vs = rs->elems[0], is = rs->elems[1];
    vs.type = s->type;
    SimValue outs[2] = {sim_value_new(&vs), sim_value_new(&is)};
    int64_t *perm = xmalloc(sizeof(int64_t) * (size_t)(n + 1)), *tmp = xmalloc(sizeof(int64_t) * (size_t)(n + 1));
    int64_t rows = n ? count_of(s) / n : 0;
    int es = num_elem_bytes(s->type);
    for (int64_t row = 0; row < rows && !(custom && cmp.failed); row++) {
        TopkOrder o = {custom ? &cmp : NULL, hlo_attrs(inst)->largest, &ops[0], row * n, 1};
        for (int64_t j = 0; j < n; j++) perm[j] = j;
        topk_sort(&o, perm, tmp, n);
        for (int64_t j = 0; j < k; j++) {
            memcpy((char *)sim_value_data(&outs[0]) + (row * k + j) * es,
                   (const char *)sim_value_data(&ops[0]) + (row * n + perm[j]) * es, (size_t)es);
            sim_value_set_i64(&outs[1], row * k + j, perm[j]);
        }
    }
    free(perm);
    free(tmp);
    if (custom && cmp.failed) {
        release_all(outs, 2);
        return false;
    }
    *out = pack_results(outs, 2);
    return true;
}

/* ---------------------------------------------------------------- random numbers */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

bool interp_rng(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const char *dist = hlo_attrs(inst)->rng_distribution;
    const Shape *s = inst->shape;
    if (inst->n_operands != 2 || s->type == ET_TUPLE || !dist)
        return interp_error(ip, inst, "rng needs two scalar parameters and a distribution");
    bool normal = strcmp(dist, "rng_normal") == 0;
    /* one stream per instruction and device: a device's rng is its own */
    uint64_t key = mix64(name_hash(inst->name) ^ mix64((uint64_t)ip->partition_id * 0x9e3779b97f4a7c15ull +
                                                       (uint64_t)ip->replica_id));
    *out = sim_value_new(s);
    int64_t n = count_of(s);
    ElemType t = s->type;
    if (num_is_float(t)) {
        double a = sim_value_get_f64(&ops[0], 0), b = sim_value_get_f64(&ops[1], 0);
        for (int64_t i = 0; i < n; i++) {
            uint64_t r = mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ull);
            double u = (double)(r >> 11) * 0x1p-53;
            if (normal) {
                double u2 = (double)(mix64(r) >> 11) * 0x1p-53;
                double z = sqrt(-2.0 * log(u > 0 ? u : 0x1p-53)) * cos(6.283185307179586 * u2);
                sim_value_set_f64(out, i, a + b * z);
            } else {
                double v = a + (b - a) * u;
                sim_value_set_f64(out, i, v < b || !(b > a) ? v : a);
            }
        }
    } else {
        int64_t a = sim_value_get_i64(&ops[0], 0), b = sim_value_get_i64(&ops[1], 0);
        uint64_t span = b > a ? (uint64_t)b - (uint64_t)a : 1;
        for (int64_t i = 0; i < n; i++) {
            uint64_t r = mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ull);
            sim_value_set_i64(out, i, (int64_t)((uint64_t)a + r % span));
        }
    }
    return true;
}

bool interp_rng_bit_generator(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    const Shape *s = inst->shape;
    if (inst->n_operands != 1 || s->type != ET_TUPLE || s->n_elems != 2 || ops[0].shape.type == ET_TUPLE)
        return interp_error(ip, inst, "rng-bit-generator needs a state and a (state, bits) result");
    /* a function of the state and the result's shape only: every device with
     * the same state draws the same bits */
    int64_t ns = count_of(&ops[0].shape), n = count_of(&s->elems[1]);
    uint64_t key = 0x2545f4914f6cdd1dull;
    for (int64_t k = 0; k < ns; k++)
        key = mix64(key ^ (uint64_t)sim_value_get_i64(&ops[0], k));
    SimValue res[2] = {sim_value_new(&s->elems[0]), sim_value_new(&s->elems[1])};
    for (int64_t k = 0; k < ns; k++)
        sim_value_set_i64(&res[0], k, (int64_t)mix64((uint64_t)sim_value_get_i64(&ops[0], k) + (uint64_t)n));
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ull);
        if (num_is_float(s->elems[1].type))
            sim_value_set_f64(&res[1], i, (double)(r >> 11) * 0x1p-53);
        else
            sim_value_set_i64(&res[1], i, (int64_t)r);
    }
    *out = pack_results(res, 2);
    return true;
}

/* ---------------------------------------------------------------- map */

bool interp_map(Interp *ip, const HloInst *inst, const SimValue *ops, SimValue *out)
{
    int32_t n = inst->n_operands, comp = hlo_attrs(inst)->to_apply;
    const Shape *os = inst->shape;
    if (!comp_index_ok(ip, inst, comp)) return false;
    int64_t total = count_of(os);
    for (int32_t j = 0; j < n; j++)
        if (count_of(&ops[j].shape) != total) return interp_error(ip, inst, "operand %d has a different size", j);
    const InterpCompInfo *ci = interp_comp_info(ip->sh, comp);
    *out = sim_value_new(os);
    if (n == 2 && ci->binop != HLO_OPCODE_COUNT && ci->binop != HLO_COMPARE && ops[0].shape.type == os->type &&
        ops[1].shape.type == os->type &&
        num_binary(ci->binop, os->type, sim_value_data(&ops[0]), sim_value_data(&ops[1]), sim_value_data(out), total))
        return true;
    SimValue *args = xmalloc(sizeof(SimValue) * (size_t)(n ? n : 1));
    bool ok = true;
    int es = num_elem_bytes(os->type);
    for (int64_t k = 0; k < total && ok; k++) {
        for (int32_t j = 0; j < n; j++) args[j] = interp_scalar_from(&ops[j], k);
        SimValue res;
        ok = interp_call(ip, comp, args, n, &res);
        release_all(args, n);
        if (ok && (res.shape.type != os->type || res.shape.rank != 0))
            ok = interp_error(ip, inst, "to_apply does not return a %s scalar", elem_type_name(os->type));
        if (ok) memcpy((char *)sim_value_data(out) + k * es, sim_value_data(&res), (size_t)es);
        sim_value_release(&res);
    }
    free(args);
    if (!ok) sim_value_release(out);
    return ok;
}
