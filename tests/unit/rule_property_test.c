/* rule_property_test.c - properties over the op-rule registry, and random
 * programs with pending sums, checked end to end.
 *
 * 1. For every op family, random small instances and random factor
 *    shardings the op's rule allows (pass-through and reduction factors
 *    split over random atoms): the operands are annotated with the rule's
 *    projection, propagation must give the op exactly the projection of
 *    the same factor sharding (less the reduction's pending atoms); with the
 *    op's result pinned to the rule's sharding (its pending reduction as
 *    `unreduced`), the partitioner must emit no collective at all; and
 *    `spmdc verify` must find both programs right.
 * 2. Random programs built from sums over split dims, converts, widening
 *    dots, integer and float divides, maxima and `unreduced` annotations,
 *    each checked by `spmdc verify` on several meshes: a pending sum may only
 *    pass through an op that is linear in it in the same element type.
 *
 * Deterministic (fixed seeds).  SPMDC_PROPERTY_N / SPMDC_PROGRAMS_N change
 * the counts; SPMDC_PROPERTY_DUMP=dir keeps every generated file.  Needs
 * SPMDC_BIN (set by ctest) for `spmdc verify`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "spmdc/driver.h"
#include "spmdc/hlo.h"
#include "spmdc/oprule.h"
#include "spmdc/partition.h"
#include "spmdc/propagate.h"
#include "spmdc/report.h"

/* ================================================================ random */

typedef struct Rng {
    uint64_t s;
} Rng;

static uint32_t rnd(Rng *r, uint32_t n)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((r->s >> 33) % n);
}

static int64_t pick_dim(Rng *r)
{
    static const int64_t sizes[] = {2, 4, 8, 4, 8, 16};
    return sizes[rnd(r, 6)];
}

/* ================================================================ text helpers */

typedef struct Text {
    char *s;
    size_t n, cap;
} Text;

static void tx(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tx(Text *t, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (t->s && (size_t)k < t->cap - t->n) {
            t->n += (size_t)k;
            return;
        }
        t->cap = (t->cap + (size_t)k + 1) * 2;
        t->s = realloc(t->s, t->cap);
        if (t->n == 0)
            t->s[0] = 0;
    }
}

static void tx_shape(Text *t, const char *type, int32_t rank, const int64_t *d)
{
    tx(t, "%s[", type);
    for (int32_t k = 0; k < rank; k++)
        tx(t, "%s%lld", k ? "," : "", (long long)d[k]);
    tx(t, "]");
}

static void tx_list(Text *t, const int64_t *v, int32_t n)
{
    tx(t, "{");
    for (int32_t k = 0; k < n; k++)
        tx(t, "%s%lld", k ? "," : "", (long long)v[k]);
    tx(t, "}");
}

static const char REDUCERS[] = "%add (a: f32[], b: f32[]) -> f32[] {\n"
                               "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                               "  ROOT %s = f32[] add(%a, %b)\n}\n"
                               "%max (a: f32[], b: f32[]) -> f32[] {\n"
                               "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                               "  ROOT %s = f32[] maximum(%a, %b)\n}\n"
                               "%lt (a: f32[], b: f32[]) -> pred[] {\n"
                               "  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
                               "  ROOT %c = pred[] compare(%a, %b), direction=LT\n}\n";

/* ================================================================ op instances */

/* Writes one random instance of family f: parameters %p0.. and ROOT %op.
 * Returns false for an unknown family. */
static bool instance(int f, Rng *r, Text *t)
{
    int64_t a[SPMDC_MAX_RANK], b[SPMDC_MAX_RANK], c[SPMDC_MAX_RANK];
    int32_t rank = 1 + (int32_t)rnd(r, 3);
    for (int32_t k = 0; k < rank; k++)
        a[k] = pick_dim(r);
    tx(t, "HloModule prop\n%sENTRY %%main {\n", REDUCERS);
    switch (f) {
    case 0: { /* binary elementwise */
        static const char *ops[] = {"add", "multiply", "subtract", "maximum"};
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  %%p1 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(1)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " %s(%%p0, %%p1)\n", ops[rnd(r, 4)]);
        break;
    }
    case 1: { /* unary and convert */
        static const char *ops[] = {"negate", "abs", "exponential", "floor"};
        bool cv = rnd(r, 3) == 0;
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  ROOT %%op = ");
        tx_shape(t, cv ? "s32" : "f32", rank, a);
        tx(t, " %s(%%p0)\n", cv ? "convert" : ops[rnd(r, 4)]);
        break;
    }
    case 2: /* select with a predicate */
        tx(t, "  %%p0 = ");
        tx_shape(t, "pred", rank, a);
        tx(t, " parameter(0)\n  %%p1 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(1)\n  %%p2 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(2)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " select(%%p0, %%p1, %%p2)\n");
        break;
    case 3: { /* broadcast: insert one new dim */
        int32_t at = (int32_t)rnd(r, (uint32_t)rank + 1);
        int64_t dims[SPMDC_MAX_RANK];
        for (int32_t k = 0, j = 0; k <= rank; k++) {
            if (k == at) {
                b[k] = pick_dim(r);
                continue;
            }
            b[k] = a[j];
            dims[j++] = k;
        }
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank + 1, b);
        tx(t, " broadcast(%%p0), dimensions=");
        tx_list(t, dims, rank);
        tx(t, "\n");
        break;
    }
    case 4: { /* transpose */
        int64_t perm[SPMDC_MAX_RANK];
        for (int32_t k = 0; k < rank; k++)
            perm[k] = k;
        for (int32_t k = rank - 1; k > 0; k--) {
            int32_t j = (int32_t)rnd(r, (uint32_t)k + 1);
            int64_t x = perm[k];
            perm[k] = perm[j];
            perm[j] = x;
        }
        for (int32_t k = 0; k < rank; k++)
            b[k] = a[perm[k]];
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, b);
        tx(t, " transpose(%%p0), dimensions=");
        tx_list(t, perm, rank);
        tx(t, "\n");
        break;
    }
    case 5: { /* reshape: split one dim in two, or merge two neighbours */
        int32_t nr = 0;
        int32_t d = (int32_t)rnd(r, (uint32_t)rank);
        bool merge = rank > 1 && rnd(r, 2) && d + 1 < rank;
        for (int32_t k = 0; k < rank; k++) {
            if (merge && k == d) {
                b[nr++] = a[k] * a[k + 1];
                k++;
            } else if (!merge && k == d && a[k] >= 4) {
                b[nr++] = 2;
                b[nr++] = a[k] / 2;
            } else {
                b[nr++] = a[k];
            }
        }
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  ROOT %%op = ");
        tx_shape(t, "f32", nr, b);
        tx(t, " reshape(%%p0)\n");
        break;
    }
    case 6: { /* reduce over a random non-empty subset of dims */
        uint32_t red = 1 + rnd(r, (1u << rank) - 1);
        int64_t dims[SPMDC_MAX_RANK];
        int32_t nd = 0, nk = 0;
        for (int32_t k = 0; k < rank; k++) {
            if ((red >> k) & 1u)
                dims[nd++] = k;
            else
                b[nk++] = a[k];
        }
        bool mx = rnd(r, 3) == 0;
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  %%z = f32[] constant(%s)\n  ROOT %%op = ", mx ? "-inf" : "0");
        tx_shape(t, "f32", nk, b);
        tx(t, " reduce(%%p0, %%z), dimensions=");
        tx_list(t, dims, nd);
        tx(t, ", to_apply=%%%s\n", mx ? "max" : "add");
        break;
    }
    case 7: { /* dot: [batch,] m, k x [batch,] k, n */
        bool batch = rnd(r, 2);
        int64_t B = pick_dim(r), M = pick_dim(r), K = pick_dim(r), N = pick_dim(r);
        int64_t l[3], rr[3], o[3];
        int32_t n = 0;
        if (batch)
            l[n] = rr[n] = o[n] = B, n++;
        l[n] = M;
        l[n + 1] = K;
        rr[n] = K;
        rr[n + 1] = N;
        o[n] = M;
        o[n + 1] = N;
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", n + 2, l);
        tx(t, " parameter(0)\n  %%p1 = ");
        tx_shape(t, "f32", n + 2, rr);
        tx(t, " parameter(1)\n  ROOT %%op = ");
        tx_shape(t, "f32", n + 2, o);
        if (batch)
            tx(t, " dot(%%p0, %%p1), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                  "rhs_contracting_dims={1}\n");
        else
            tx(t, " dot(%%p0, %%p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n");
        break;
    }
    case 8: { /* 1x1 convolution, optionally grouped */
        int64_t N = pick_dim(r), H = pick_dim(r), G = rnd(r, 2) ? 2 : 1, CI = pick_dim(r), CO = pick_dim(r);
        tx(t, "  %%p0 = f32[%lld,%lld,%lld] parameter(0)\n", (long long)N, (long long)H, (long long)(G * CI));
        tx(t, "  %%p1 = f32[1,%lld,%lld] parameter(1)\n", (long long)CI, (long long)(G * CO));
        tx(t, "  ROOT %%op = f32[%lld,%lld,%lld] convolution(%%p0, %%p1), window={size=1}, dim_labels=b0f_0io->b0f",
           (long long)N, (long long)H, (long long)(G * CO));
        if (G > 1)
            tx(t, ", feature_group_count=%lld", (long long)G);
        tx(t, "\n");
        break;
    }
    case 9: { /* concatenate along one dim: the others may split */
        int32_t d = (int32_t)rnd(r, (uint32_t)rank);
        memcpy(b, a, sizeof b);
        b[d] = a[d] * 2;
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  %%p1 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(1)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, b);
        tx(t, " concatenate(%%p0, %%p1), dimensions={%d}\n", (int)d);
        break;
    }
    case 10: { /* slice of one dim */
        int32_t d = (int32_t)rnd(r, (uint32_t)rank);
        memcpy(b, a, sizeof b);
        b[d] = a[d] / 2;
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, b);
        tx(t, " slice(%%p0), slice={");
        for (int32_t k = 0; k < rank; k++)
            tx(t, "%s[%lld:%lld]", k ? ", " : "", (long long)(k == d ? 1 : 0), (long long)(k == d ? 1 + b[d] : a[k]));
        tx(t, "}\n");
        break;
    }
    case 11: { /* sort along one dim */
        int32_t d = (int32_t)rnd(r, (uint32_t)rank);
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " sort(%%p0), dimensions={%d}, to_apply=%%lt\n", (int)d);
        break;
    }
    case 12: { /* gather rows of a table (embedding lookup) */
        int64_t V = pick_dim(r), E = pick_dim(r), N = pick_dim(r);
        tx(t, "  %%p0 = f32[%lld,%lld] parameter(0)\n  %%p1 = s32[%lld] parameter(1)\n", (long long)V, (long long)E,
           (long long)N);
        tx(t, "  ROOT %%op = f32[%lld,%lld] gather(%%p0, %%p1), offset_dims={1}, collapsed_slice_dims={0}, "
              "start_index_map={0}, index_vector_dim=1, slice_sizes={1,%lld}\n",
           (long long)N, (long long)E, (long long)E);
        break;
    }
    case 13: { /* scatter-add rows */
        int64_t V = pick_dim(r), E = pick_dim(r), N = pick_dim(r);
        tx(t, "  %%p0 = f32[%lld,%lld] parameter(0)\n  %%p1 = s32[%lld] parameter(1)\n", (long long)V, (long long)E,
           (long long)N);
        tx(t, "  %%p2 = f32[%lld,%lld] parameter(2)\n", (long long)N, (long long)E);
        tx(t, "  ROOT %%op = f32[%lld,%lld] scatter(%%p0, %%p1, %%p2), update_window_dims={1}, "
              "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%%add\n",
           (long long)V, (long long)E);
        break;
    }
    case 14: { /* dynamic-slice of one dim */
        int32_t d = (int32_t)rnd(r, (uint32_t)rank);
        memcpy(b, a, sizeof b);
        b[d] = a[d] / 2;
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  %%i = s32[] parameter(1)\n  %%z = s32[] constant(0)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, b);
        tx(t, " dynamic-slice(%%p0");
        for (int32_t k = 0; k < rank; k++)
            tx(t, ", %s", k == d ? "%i" : "%z");
        tx(t, "), dynamic_slice_sizes=");
        tx_list(t, b, rank);
        tx(t, "\n");
        break;
    }
    case 15: { /* reduce-window with a window on one dim */
        int32_t d = (int32_t)rnd(r, (uint32_t)rank);
        memcpy(b, a, sizeof b);
        b[d] = a[d] / 2;
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  %%z = f32[] constant(0)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, b);
        tx(t, " reduce-window(%%p0, %%z), window={size=");
        for (int32_t k = 0; k < rank; k++)
            tx(t, "%s%d", k ? "x" : "", k == d ? 2 : 1);
        tx(t, " stride=");
        for (int32_t k = 0; k < rank; k++)
            tx(t, "%s%d", k ? "x" : "", k == d ? 2 : 1);
        tx(t, "}, to_apply=%%add\n");
        break;
    }
    case 16: { /* dynamic-update-slice of one dim */
        int32_t d = (int32_t)rnd(r, (uint32_t)rank);
        memcpy(c, a, sizeof c);
        c[d] = a[d] / 2;
        tx(t, "  %%p0 = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " parameter(0)\n  %%p1 = ");
        tx_shape(t, "f32", rank, c);
        tx(t, " parameter(1)\n  %%i = s32[] parameter(2)\n  %%z = s32[] constant(0)\n  ROOT %%op = ");
        tx_shape(t, "f32", rank, a);
        tx(t, " dynamic-update-slice(%%p0, %%p1");
        for (int32_t k = 0; k < rank; k++)
            tx(t, ", %s", k == d ? "%i" : "%z");
        tx(t, ")\n");
        break;
    }
    default: return false;
    }
    tx(t, "}\n");
    return true;
}

#define N_FAMILIES 17


/* ================================================================ loading */

typedef struct Loaded {
    DiagEngine *diag;
    HloModule *m;
    Arena *arena;
} Loaded;

static bool load(Loaded *l, const char *text, const char *mesh, bool propagate)
{
    memset(l, 0, sizeof *l);
    l->diag = diag_create(NULL);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    char err[200];
    assert_true(mesh_parse_spec(mesh, &opt.mesh, err, sizeof err));
    opt.has_mesh = true;
    l->arena = arena_create();
    PassCtx cx = {l->arena, l->diag, &opt};
    uint32_t fid = diag_add_file(l->diag, "p.hlo", text, strlen(text));
    l->m = driver_load_module(text, strlen(text), fid, &cx, propagate);
    return l->m != NULL;
}

static void unload(Loaded *l)
{
    hlo_module_free(l->m);
    arena_destroy(l->arena);
    diag_destroy(l->diag);
}

/* ================================================================ spmdc verify */

static int verify_file(const char *text, const char *mesh, char **out)
{
    const char *bin = getenv("SPMDC_BIN");
    assert_non_null(bin);
    char path[] = "/tmp/spmdc-prop-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s verify %s --mesh %s 2>&1", bin, path, mesh);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 14, n = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 >= cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = 0;
    int st = pclose(p);
    unlink(path);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void dump(const char *name, int k, const char *text)
{
    const char *dir = getenv("SPMDC_PROPERTY_DUMP");
    if (!dir)
        return;
    char path[512];
    snprintf(path, sizeof path, "%s/%s%04d.hlo", dir, name, k);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* ================================================================ 1. rule property */

/* A random factor sharding over the splittable factors (pass-through, and
 * reduction with a known reduction) that some operand indexes, such that
 * every tensor's projection is an even tiling. */
static bool random_fs(const OpRule *r, const Mesh *m, Rng *g, FactorSharding *fs)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        fsh_init(fs, r->n_factors);
        uint32_t free = m->n_atoms >= 32 ? ~0u : (1u << m->n_atoms) - 1;
        for (int32_t f = 0; f < r->n_factors; f++) {
            const Factor *fa = &r->factors[f];
            bool ok = fa->kind == FACTOR_PASS || (fa->kind == FACTOR_REDUCTION && fa->reduce != REDUCE_NONE);
            /* only factors an operand indexes: propagation infers the result from the operands */
            uint32_t in_mask = r->n_in >= 32 ? ~0u : (1u << r->n_in) - 1;
            if (!ok || !(oprule_factor_tensors(r, f) & in_mask) || rnd(g, 3) == 0)
                continue;
            int8_t run[SPMDC_MAX_ATOMS];
            int32_t n = 0;
            int64_t left = fa->size;
            for (int32_t tries = 0; tries < 4; tries++) {
                int32_t a = (int32_t)rnd(g, (uint32_t)m->n_atoms);
                if (!((free >> a) & 1u) || left % m->atom_size[a] != 0)
                    continue;
                run[n++] = (int8_t)a;
                free &= ~(1u << a);
                left /= m->atom_size[a];
                if (rnd(g, 2))
                    break;
            }
            if (n)
                fsh_set(fs, f, run, n);
        }
        bool ok = true;
        for (int32_t k = 0; k < r->n_in + r->n_out && ok; k++) {
            Tiling t;
            Shape s = shape_array(ET_F32, r->t[k].rank, r->t[k].shape);
            ok = oprule_factors_to_tiling(r, k, fs, m, &t, NULL) && tiling_is_even(&t, m, &s, NULL);
        }
        if (ok)
            return true;
    }
    return false;
}

/* The text with every array parameter annotated with its tiling (and, if
 * root_sh, the root with that sharding text). */
static char *annotate(const char *text, const HloModule *m, const OpRule *r, const FactorSharding *fs,
                      const char *root_sh)
{
    Text out = {0};
    const HloComputation *e = hlo_comp(m, m->entry);
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        tx(&out, "%.*s", (int)len, p);
        if (root_sh && strncmp(p, "  ROOT %op", 10) == 0)
            tx(&out, ", sharding=%s", root_sh);
        const char *at = strstr(p, " parameter(");
        if (at && at < p + len && strncmp(p, "  %p", 4) == 0) {
            int pn = atoi(at + 11);
            for (int32_t i = 0; i < e->n_insts; i++) {
                const HloInst *in = &e->insts[i];
                if (in->op != HLO_PARAMETER || in->param_number != pn)
                    continue;
                int32_t slot = -1;
                for (int32_t s = 0; s < e->insts[e->root].n_operands; s++)
                    if (e->insts[e->root].operands[s] == i)
                        slot = s;
                int32_t k = slot >= 0 ? oprule_operand_tensor(r, slot) : -1;
                Tiling t;
                if (k < 0 || !oprule_factors_to_tiling(r, k, fs, &m->mesh, &t, NULL))
                    tiling_replicated(&t, in->shape->rank);
                Sharding sh = sharding_from_tiling(&t);
                sh.tile.rank = (int8_t)in->shape->rank;
                StrBuf b = {0};
                sharding_print(&b, &sh, &m->mesh);
                tx(&out, ", sharding=%s", sb_cstr(&b));
                sb_free(&b);
            }
        }
        tx(&out, "\n");
        p += len + (nl ? 1 : 0);
    }
    return out.s;
}

static void test_rule_property(void **state)
{
    (void)state;
    static const char *meshes[] = {"a=2,b=2", "8", "a=2,b=4", "a=2,b=2,c=2"};
    const char *env = getenv("SPMDC_PROPERTY_N");
    int n = env ? atoi(env) : 30;
    Rng g = {20261201};
    int checked = 0, with_partial = 0;
    for (int f = 0; f < N_FAMILIES; f++) {
        for (int k = 0; k < n; k++) {
            const char *mesh = meshes[rnd(&g, 4)];
            Text t = {0};
            assert_true(instance(f, &g, &t));
            Loaded l;
            if (!load(&l, t.s, mesh, false))
                fail_msg("family %d instance %d does not load: %s\n%s", f, k, diag_text(l.diag), t.s);
            const HloComputation *e = hlo_comp(l.m, l.m->entry);
            OpRule r;
            Arena *a = arena_create();
            assert_true(oprule_build(l.m, l.m->entry, e->root, a, &r));
            FactorSharding fs;
            if (!random_fs(&r, &l.m->mesh, &g, &fs)) {
                arena_destroy(a);
                unload(&l);
                free(t.s);
                continue;
            }
            char *text = annotate(t.s, l.m, &r, &fs, NULL);
            Tiling want;
            assert_true(oprule_factors_to_tiling(&r, r.n_in, &fs, &l.m->mesh, &want, NULL));
            ReduceKind rk;
            Tiling full = want;
            full.partial = oprule_result_partial(&r, &fs, &rk, NULL);
            full.kind = (uint8_t)(full.partial ? rk : REDUCE_NONE);
            bool partial = full.partial != 0;
            Sharding fsh = sharding_from_tiling(&full);
            fsh.tile.rank = full.rank;
            StrBuf rb = {0};
            sharding_print(&rb, &fsh, &l.m->mesh);
            char *pinned = annotate(t.s, l.m, &r, &fs, sb_cstr(&rb));
            sb_free(&rb);
            arena_destroy(a);
            unload(&l);
            dump("rule", f * 1000 + k, text);
            /* propagation gives the op the projection */
            Loaded pl;
            if (!load(&pl, text, mesh, true))
                fail_msg("annotated instance does not load: %s\n%s", diag_text(pl.diag), text);
            const HloInst *op = &hlo_comp(pl.m, pl.m->entry)->insts[hlo_comp(pl.m, pl.m->entry)->root];
            Tiling got;
            assert_true(sharding_to_tiling(op->sharding, op->shape->rank, &got));
            if (!tiling_equal(&got, &want)) {
                StrBuf b1 = {0}, b2 = {0};
                tiling_describe(&b1, &got, &pl.m->mesh);
                tiling_describe(&b2, &want, &pl.m->mesh);
                fail_msg("propagation gives %s, the rule %s, for\n%s", sb_cstr(&b1), sb_cstr(&b2), text);
            }
            unload(&pl);
            /* the partitioner runs the op locally in the rule's sharding: with the
             * result pinned to it (pending reduction included), no collective at all */
            if (!load(&pl, pinned, mesh, true))
                fail_msg("pinned instance does not load: %s\n%s", diag_text(pl.diag), pinned);
            CommReport rep;
            report_init(&rep, pl.m->name, &pl.m->mesh);
            HloModule *out = NULL;
            Arena *sc = arena_create();
            SpmdcOptions opt;
            memset(&opt, 0, sizeof opt);
            PassCtx cx = {sc, pl.diag, &opt};
            if (!partition_module(pl.m, &out, &rep, &cx))
                fail_msg("partition failed: %s\n%s", diag_text(pl.diag), pinned);
            /* `unreduced` is a pending sum: a pending max cannot be pinned */
            bool pinnable = !partial || rk == REDUCE_SUM;
            if (pinnable && rep.n_records > 0)
                fail_msg("%d collectives (first %s) for a sharding the rule allows:\n%s", (int)rep.n_records,
                         collective_kind_name(rep.records[0].kind), pinned);
            with_partial += partial;
            hlo_module_free(out);
            report_free(&rep);
            arena_destroy(sc);
            unload(&pl);
            /* and the numbers */
            char *vout;
            int rc = verify_file(text, mesh, &vout);
            if (rc != 0 || !strstr(vout, "OK"))
                fail_msg("spmdc verify --mesh %s failed (%d):\n%s\n%s", mesh, rc, vout, text);
            free(vout);
            rc = verify_file(pinned, mesh, &vout);
            if (rc != 0 || !strstr(vout, "OK"))
                fail_msg("spmdc verify --mesh %s failed (%d):\n%s\n%s", mesh, rc, vout, pinned);
            free(vout);
            free(pinned);
            free(text);
            free(t.s);
            checked++;
        }
    }
    print_message("rule property: %d instances over %d op families (%d with a split reduction), all local and "
                  "verified\n",
                  checked, N_FAMILIES, with_partial);
    assert_true(checked >= N_FAMILIES * n / 2);
    assert_true(with_partial > 0);
}


/* ================================================================ 2. random programs with pending sums */

typedef struct Val {
    char name[16];
    const char *type; /* "f32", "s32", "s8", "bf16" */
} Val;

/* Annotations drawn for intermediate values: the unreduced ones ask for a
 * pending sum to be kept (or made) on the value, which is where a pending
 * sum is tempted through an op that is not linear in it. */
static const char *SHARDINGS[] = {"[{}, {}], unreduced={x}", "[{x}, {}]", "[{}, {}], unreduced={x}", "[{}, {x}]",
                                  "[{}, {}]", "[{}, {}], unreduced={x}", "[{x}, {}], unreduced={y}",
                                  "[{}, {}], unreduced={x, y}"};

/* A random program over [R,C] values: sums over split dims (pending sums),
 * dots (some widening), converts, divides, maxima, negates, exponentials,
 * with random annotations (unreduced ones among them) on the mesh x=X[,y=2]. */
static char *random_sum_program(Rng *g, int64_t X, bool two_d)
{
    const int64_t R = 8, C = 8, K = 16;
    static const char *types[] = {"f32", "s32", "s8", "f32", "bf16"};
    Text t = {0};
    tx(&t, "HloModule sums\n");
    static const char *uniq[] = {"f32", "s32", "s8", "bf16"};
    for (int k = 0; k < 4; k++)
            tx(&t, "%%add.%s (a: %s[], b: %s[]) -> %s[] {\n  %%a = %s[] parameter(0)\n  %%b = %s[] parameter(1)\n"
                   "  ROOT %%s = %s[] add(%%a, %%b)\n}\n",
               uniq[k], uniq[k], uniq[k], uniq[k], uniq[k], uniq[k], uniq[k]);
    char mesh[64];
    snprintf(mesh, sizeof mesh, two_d ? "mesh[x=%lld,y=2]" : "mesh[x=%lld]", (long long)X);
    tx(&t, "ENTRY %%main {\n");
    Val vals[32];
    int nv = 0, np = 0;
    /* sources: two 3-D parameters reduced over a split K (pending sums) */
    for (int s = 0; s < 2; s++) {
        const char *ty = types[rnd(g, 5)];
        const char *split = rnd(g, 2) ? "[{}, {}, {x}]" : two_d ? "[{y}, {}, {x}]" : "[{x}, {}, {}]";
        tx(&t, "  %%q%d = %s[%lld,%lld,%lld] parameter(%d), sharding={%s, %s}\n", s, ty, (long long)R, (long long)C,
           (long long)K, np++, mesh, split);
        tx(&t, "  %%z%d = %s[] constant(0)\n", s, ty);
        /* scaled by 7 so that s8 sums wrap (a pending s8 sum closed in a wider type would not)
         * and integer division by 3 rounds */
        tx(&t, "  %%n%d = %s[] constant(7)\n  %%nb%d = %s[%lld,%lld,%lld] broadcast(%%n%d), dimensions={}\n", s, ty, s,
           ty, (long long)R, (long long)C, (long long)K, s);
        tx(&t, "  %%qs%d = %s[%lld,%lld,%lld] multiply(%%q%d, %%nb%d)\n", s, ty, (long long)R, (long long)C, (long long)K,
           s, s);
        snprintf(vals[nv].name, sizeof vals[nv].name, "v%d", nv);
        vals[nv].type = ty;
        tx(&t, "  %%%s = %s[%lld,%lld] reduce(%%qs%d, %%z%d), dimensions={2}, to_apply=%%add.%s\n", vals[nv].name, ty,
           (long long)R, (long long)C, s, s, ty);
        nv++;
    }
    /* traps: ops straight on a pending sum, each asked to keep a pending sum
     * on its result (unreduced): only the linear ones in the same element
     * type may take the sum through */
    int traps = 2 + (int)rnd(g, 2);
    for (int k = 0; k < traps && nv < 30; k++) {
        Val *a = &vals[rnd(g, 2)];
        Val *o = &vals[nv];
        snprintf(o->name, sizeof o->name, "v%d", nv);
        o->type = a->type;
        char sh[128];
        snprintf(sh, sizeof sh, ", sharding={%s, [{}, {}], unreduced={x}}", mesh);
        bool is_float = a->type[0] == 'f' || a->type[0] == 'b';
        switch (rnd(g, 6)) {
        case 0: { /* convert to a wider type */
            o->type = is_float ? "f32" : "s32";
            if (strcmp(a->type, o->type) == 0)
                o->type = is_float ? "f32" : "f32";
            tx(&t, "  %%%s = %s[%lld,%lld] convert(%%%s)%s\n", o->name, o->type, (long long)R, (long long)C,
               a->name, sh);
            break;
        }
        case 1: { /* widening dot */
            o->type = is_float ? "f32" : "s32";
            tx(&t, "  %%w%d = %s[%lld,%lld] parameter(%d)\n", nv, a->type, (long long)C, (long long)C, np++);
            tx(&t, "  %%%s = %s[%lld,%lld] dot(%%%s, %%w%d), lhs_contracting_dims={1}, rhs_contracting_dims={0}%s\n",
               o->name, o->type, (long long)R, (long long)C, a->name, nv, sh);
            break;
        }
        case 2: /* divide by a constant (rounds for integers) */
            tx(&t, "  %%k%d = %s[] constant(3)\n  %%kb%d = %s[%lld,%lld] broadcast(%%k%d), dimensions={}\n", nv,
               a->type, nv, a->type, (long long)R, (long long)C, nv);
            tx(&t, "  %%%s = %s[%lld,%lld] divide(%%%s, %%kb%d)%s\n", o->name, o->type, (long long)R, (long long)C,
               a->name, nv, sh);
            break;
        case 3: /* maximum with itself: not linear */
            tx(&t, "  %%%s = %s[%lld,%lld] maximum(%%%s, %%%s)%s\n", o->name, o->type, (long long)R, (long long)C,
               a->name, a->name, sh);
            break;
        case 4: /* abs: not linear */
            tx(&t, "  %%%s = %s[%lld,%lld] abs(%%%s)%s\n", o->name, o->type, (long long)R, (long long)C, a->name, sh);
            break;
        default: /* negate: linear, may keep the sum pending */
            tx(&t, "  %%%s = %s[%lld,%lld] negate(%%%s)%s\n", o->name, o->type, (long long)R, (long long)C, a->name,
               sh);
            break;
        }
        nv++;
    }
    int steps = 3 + (int)rnd(g, 5);
    for (int st = 0; st < steps && nv < 30; st++) {
        /* half the time an operand is one of the pending sums */
        Val *a = &vals[rnd(g, 2) ? rnd(g, 2) : rnd(g, (uint32_t)nv)];
        Val *b = NULL;
        for (int tries = 0; tries < 8 && !b; tries++) {
            Val *c = &vals[rnd(g, (uint32_t)nv)];
            if (strcmp(c->type, a->type) == 0)
                b = c;
        }
        Val *o = &vals[nv];
        snprintf(o->name, sizeof o->name, "v%d", nv);
        o->type = a->type;
        bool is_float = a->type[0] == 'f' || a->type[0] == 'b';
        uint32_t op = rnd(g, 10);
        char sh[128] = "";
        if (rnd(g, 2) == 0)
            snprintf(sh, sizeof sh, ", sharding={%s, %s}", mesh, SHARDINGS[rnd(g, two_d ? 8 : 6)]);
        switch (op) {
        case 0:
        case 1:
            if (!b)
                b = a;
            tx(&t, "  %%%s = %s[%lld,%lld] %s(%%%s, %%%s)%s\n", o->name, o->type, (long long)R, (long long)C,
               op ? "subtract" : "add", a->name, b->name, sh);
            break;
        case 2:
            if (!b)
                b = a;
            tx(&t, "  %%%s = %s[%lld,%lld] %s(%%%s, %%%s)%s\n", o->name, o->type, (long long)R, (long long)C,
               rnd(g, 2) ? "multiply" : "maximum", a->name, b->name, sh);
            break;
        case 3: { /* divide by a constant */
            tx(&t, "  %%k%d = %s[] constant(3)\n  %%kb%d = %s[%lld,%lld] broadcast(%%k%d), dimensions={}\n", nv,
               a->type, nv, a->type, (long long)R, (long long)C, nv);
            tx(&t, "  %%%s = %s[%lld,%lld] divide(%%%s, %%kb%d)%s\n", o->name, o->type, (long long)R, (long long)C,
               a->name, nv, sh);
            break;
        }
        case 4:
            tx(&t, "  %%%s = %s[%lld,%lld] negate(%%%s)%s\n", o->name, o->type, (long long)R, (long long)C, a->name,
               sh);
            break;
        case 5: { /* convert (never float -> integer: a float sum in another order may round
                   differently, and the truncation would turn that into an exact mismatch) */
            const char *to = types[rnd(g, 4)];
            if (is_float && (to[0] == 's'))
                to = "f32";
            o->type = to;
            tx(&t, "  %%%s = %s[%lld,%lld] convert(%%%s)%s\n", o->name, to, (long long)R, (long long)C, a->name, sh);
            break;
        }
        case 6: { /* dot with a replicated weight, widening for integers */
            bool widen = !is_float || rnd(g, 2);
            const char *rt = !is_float ? (widen ? "s32" : a->type) : (widen && a->type[0] == 'b' ? "f32" : a->type);
            tx(&t, "  %%w%d = %s[%lld,%lld] parameter(%d)\n", nv, a->type, (long long)C, (long long)C, np++);
            o->type = rt;
            tx(&t, "  %%%s = %s[%lld,%lld] dot(%%%s, %%w%d), lhs_contracting_dims={1}, rhs_contracting_dims={0}%s\n",
               o->name, rt, (long long)R, (long long)C, a->name, nv, sh);
            break;
        }
        case 7: { /* reduce over dim 1 and broadcast back */
            tx(&t, "  %%zz%d = %s[] constant(0)\n", nv, a->type);
            tx(&t, "  %%r%d = %s[%lld] reduce(%%%s, %%zz%d), dimensions={1}, to_apply=%%add.%s\n", nv, a->type,
               (long long)R, a->name, nv, a->type);
            tx(&t, "  %%%s = %s[%lld,%lld] broadcast(%%r%d), dimensions={0}%s\n", o->name, o->type, (long long)R,
               (long long)C, nv, sh);
            break;
        }
        case 8: /* tanh of a float (a sum rounded in another order stays within the oracle's bound) */
            tx(&t, "  %%%s = %s[%lld,%lld] %s(%%%s)%s\n", o->name, o->type, (long long)R, (long long)C,
               is_float ? "tanh" : "abs", a->name, sh);
            break;
        default: { /* compare + select */
            if (!b)
                b = a;
            tx(&t, "  %%c%d = pred[%lld,%lld] compare(%%%s, %%%s), direction=GT\n", nv, (long long)R, (long long)C,
               a->name, b->name);
            tx(&t, "  %%%s = %s[%lld,%lld] select(%%c%d, %%%s, %%%s)%s\n", o->name, o->type, (long long)R,
               (long long)C, nv, a->name, b->name, sh);
            break;
        }
        }
        nv++;
    }
    /* the root: every value (the oracle compares each one) */
    tx(&t, "  ROOT %%out = (");
    for (int k = 0; k < nv; k++)
        tx(&t, "%s%s[%lld,%lld]", k ? ", " : "", vals[k].type, (long long)R, (long long)C);
    tx(&t, ") tuple(");
    for (int k = 0; k < nv; k++)
        tx(&t, "%s%%%s", k ? ", " : "", vals[k].name);
    tx(&t, ")\n");
    tx(&t, "}\n");
    return t.s;
}

static void test_random_sum_programs(void **state)
{
    (void)state;
    const char *env = getenv("SPMDC_PROGRAMS_N");
    int n = env ? atoi(env) : 60;
    Rng g = {777};
    static const struct { int64_t x; bool two_d; const char *spec; } meshes[] = {
        {2, false, "x=2"}, {4, false, "x=4"}, {8, false, "x=8"}, {2, true, "x=2,y=2"}, {4, true, "x=4,y=2"}};
    int runs = 0;
    for (int k = 0; k < n; k++) {
        uint64_t seed = g.s;
        for (int m = 0; m < 5; m++) {
            if (m == 4 && k % 4)
                continue; /* the 8-device 2-D mesh on every fourth program */
            Rng pg = {seed};
            char *text = random_sum_program(&pg, meshes[m].x, meshes[m].two_d);
            dump("sums", k * 10 + m, text);
            char *out;
            int rc = verify_file(text, meshes[m].spec, &out);
            if (rc != 0 || !strstr(out, "OK"))
                fail_msg("program %d, spmdc verify --mesh %s: exit %d\n%s\n%s", k, meshes[m].spec, rc, out, text);
            free(out);
            free(text);
            runs++;
        }
        rnd(&g, 2);
    }
    print_message("random programs with pending sums: %d verify runs, all OK\n", runs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_property),
        cmocka_unit_test(test_random_sum_programs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
