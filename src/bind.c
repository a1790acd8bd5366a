/* bind.c - choose the module's mesh and bind every written sharding to it.
 *
 * The mesh is, in order of preference:
 *   1. --mesh (cx->opt->mesh).  Named shardings in the file are rebound to it
 *      by axis NAME (the file's sizes are replaced by the mesh's, so a file
 *      written for mesh[model=8] compiles at --mesh model=2).  A numeric
 *      --mesh ("8", "2x4") has no names of its own: when the file's named
 *      shardings use as many axes as it has, the file's axis names are copied
 *      onto it in order (--mesh 2x4 on a file written for mesh[x=2,y=4] is
 *      x=2,y=4), so named shardings bind and print back with their names.
 *      Any other axis count is an error, and so is an axis of the file's
 *      mesh that --mesh lacks (reported once); axes of --mesh that the file
 *      does not name replicate.
 *   2. the mesh written in the file's named shardings; every named sharding
 *      must use the same axes, in the same order, with the same sizes.
 *   3. the module's one Shardy mesh (Shardy exports): every mesh with axes
 *      that the header's xla.sdy.meshes declares or an xla.sdy string writes
 *      inline (HloModule.sdy_inline_mesh) is the same mesh; its device count
 *      must then agree with num_partitions and the positional shardings (an
 *      error otherwise, at the inline mesh if there is one); else
 *      num_partitions from the module header (one axis d0);
 *   4. the device count of the first positional sharding (one axis d0);
 *   5. one device.  A {maximal device=N} with N > 0 names a device of a
 *      mesh none of the above gives: an error asking for --mesh (XLA needs
 *      num_partitions; a mistyped device id must not choose the mesh).
 * Positional shardings are then factored over that mesh's atoms
 * (sharding_bind); a device count that differs from the mesh's is an error
 * at the sharding.  `{unknown}` shardings (and tuples with an unknown leaf)
 * are left unbound for propagation to fill in.  A value whose only
 * annotation is an xla.sdy.sharding string that cannot be bound to the
 * chosen mesh (its axes are not the mesh's) is an error: a sharding is never
 * dropped silently.
 */
#include "spmdc/intern.h"
#include "spmdc/parse.h"
#include "spmdc/sdy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the file's shardings say about the mesh. */
typedef struct MeshEvidence {
    const ShardingSyntax *named;      /* first named sharding */
    const ShardingSyntax *positional; /* first positional (devices=...) sharding */
    int64_t positional_devices;
    const ShardingSyntax *maximal;    /* the maximal sharding with the largest device */
    bool ok;
} MeshEvidence;

/* "x=2,y=4" of a named sharding's mesh. */
static void print_syntax_axes(StrBuf *b, const ShardingSyntax *s)
{
    for (int32_t i = 0; i < s->n_mesh_axes; i++)
        sb_printf(b, "%s%s=%lld", i ? "," : "", s->mesh_axis_names[i], (long long)s->mesh_axis_sizes[i]);
}

static void print_syntax_mesh(StrBuf *b, const ShardingSyntax *s)
{
    sb_puts(b, "mesh[");
    print_syntax_axes(b, s);
    sb_putc(b, ']');
}

static bool same_mesh(const ShardingSyntax *a, const ShardingSyntax *b)
{
    if (a->n_mesh_axes != b->n_mesh_axes)
        return false;
    for (int32_t i = 0; i < a->n_mesh_axes; i++)
        if (strcmp(a->mesh_axis_names[i], b->mesh_axis_names[i]) != 0 ||
            a->mesh_axis_sizes[i] != b->mesh_axis_sizes[i])
            return false;
    return true;
}

/* Records one sharding (recursing into tuples); reports named meshes that
 * disagree with the first one.  dry: records and reports nothing, and
 * says whether it would keep s (or a leaf) or report: only then are its
 * spans read (hlo_sharding_syntax). */
static bool gather(MeshEvidence *ev, const ShardingSyntax *s, bool dry, DiagEngine *diag)
{
    if (s->kind == SSYN_TUPLE) {
        bool any = false;
        for (int32_t i = 0; i < s->n_elems && !(dry && any); i++)
            any |= gather(ev, &s->elems[i], dry, diag);
        return any;
    }
    bool kept = false;
    if (s->kind == SSYN_TILED && !ev->positional) {
        if (dry) return true;
        int64_t p = 1;
        for (int32_t t = 0; t < s->n_tile_dims && p <= SPMDC_MAX_DEVICES; t++)
            p *= s->tile_dims[t] > 0 ? s->tile_dims[t] : 1;
        ev->positional = s;
        ev->positional_devices = p;
        kept = true;
    }
    if (s->kind == SSYN_MAXIMAL && s->device >= 0 && s->device < SPMDC_MAX_DEVICES &&
        (!ev->maximal || s->device > ev->maximal->device)) {
        if (dry) return true;
        ev->maximal = s;
        kept = true;
    }
    if (s->kind != SSYN_NAMED || s->n_mesh_axes == 0)
        return kept;
    if (!ev->named) {
        if (dry) return true;
        ev->named = s;
        return true;
    }
    if (!same_mesh(ev->named, s)) {
        if (dry) return true;
        StrBuf a = {0}, b = {0};
        print_syntax_mesh(&a, s);
        print_syntax_mesh(&b, ev->named);
        diag_error(diag, s->span, "sharding uses %s but the sharding at line %u uses %s; all named shardings "
                   "must use the same mesh", sb_cstr(&a), (unsigned)ev->named->span.begin.line, sb_cstr(&b));
        sb_free(&a);
        sb_free(&b);
        ev->ok = false;
        return true;
    }
    return kept;
}

/* A mesh of one axis d0 = n. */
static bool mesh_1d(Mesh *mesh, int64_t n, SrcSpan span, DiagEngine *diag)
{
    const char *name = "d0";
    char err[200];
    if (!mesh_init(mesh, 1, &name, &n, err, sizeof err)) {
        diag_error(diag, span, "cannot build a mesh of %lld devices: %s", (long long)n, err);
        return false;
    }
    return true;
}

/* The mesh written in a named sharding. */
static bool mesh_from_named(Mesh *mesh, const ShardingSyntax *s, DiagEngine *diag)
{
    char err[200];
    if (!mesh_init(mesh, s->n_mesh_axes, s->mesh_axis_names, s->mesh_axis_sizes, err, sizeof err)) {
        diag_error(diag, s->span, "bad mesh in sharding: %s", err);
        return false;
    }
    mesh->named = true;
    return true;
}

/* The mesh the user gave, as messages name it: "--mesh x=4", or "the mesh
 * x=4 from x.budget:3" when a budget file's `mesh =` line gave it. */
static void put_user_mesh(StrBuf *b, const SpmdcOptions *opt, const Mesh *mesh)
{
    sb_puts(b, opt && opt->mesh_from ? "the mesh " : "--mesh ");
    mesh_print(b, mesh);
    if (opt && opt->mesh_from) sb_printf(b, " from %s", opt->mesh_from);
}

/* --mesh given: copy the file's axis names onto a numeric mesh (see top),
 * then check that every axis of the file's mesh exists (reported once, at
 * the first named sharding, rather than at every sharding). */
static bool adopt_names(Mesh *mesh, const ShardingSyntax *named, const SpmdcOptions *opt, DiagEngine *diag)
{
    if (!named)
        return true;
    StrBuf a = {0}, b = {0}, c = {0};
    print_syntax_mesh(&a, named);
    put_user_mesh(&b, opt, mesh);
    print_syntax_axes(&c, named);
    bool ok = true;
    if (!mesh->named && named->n_mesh_axes != mesh->n_axes) {
        diag_error(diag, named->span, "the shardings use %s (%d %s) but %s has %d; name the axes, e.g. "
                   "%s%s", sb_cstr(&a), (int)named->n_mesh_axes, named->n_mesh_axes == 1 ? "axis" : "axes",
                   sb_cstr(&b), (int)mesh->n_axes, opt && opt->mesh_from ? "mesh = " : "--mesh ", sb_cstr(&c));
        ok = false;
    } else if (!mesh->named) {
        for (int32_t i = 0; i < mesh->n_axes; i++)
            snprintf(mesh->axes[i].name, sizeof mesh->axes[i].name, "%s", named->mesh_axis_names[i]);
        mesh->named = true;
    }
    for (int32_t i = 0; ok && i < named->n_mesh_axes; i++) {
        if (mesh_axis_index(mesh, named->mesh_axis_names[i]) < 0) {
            diag_error(diag, named->span, "axis '%s' of the shardings' %s is not in %s",
                       named->mesh_axis_names[i], sb_cstr(&a), sb_cstr(&b));
            ok = false;
        }
    }
    sb_free(&a);
    sb_free(&b);
    sb_free(&c);
    return ok;
}

/* The verbatim frontend_attributes among raw attributes, or NULL. */
static const char *frontend_attrs_of(const RawAttr *raw, int32_t n)
{
    for (int32_t k = 0; k < n; k++)
        if (strcmp(raw[k].name, "frontend_attributes") == 0) return raw[k].text;
    return NULL;
}

/* The module's single Shardy mesh, declared in the header's xla.sdy.meshes
 * or written inline in the shardings (sdy_module_mesh); *which (may be
 * NULL): -1 for the header's, else the index of the inline mesh
 * (HloModule.sdy_inline_mesh). */
static bool mesh_from_sdy(const HloModule *m, Mesh *mesh, int32_t *which)
{
    int32_t w;
    if (!sdy_module_mesh(frontend_attrs_of(m->raw, m->n_raw), m->sdy_inline_mesh, 2, mesh, &w)) return false;
    if (which) *which = w;
    return true;
}

static bool choose_mesh(HloModule *m, PassCtx *cx, const MeshEvidence *ev, Mesh *mesh)
{
    if (cx->opt && cx->opt->has_mesh) {
        *mesh = cx->opt->mesh;
        Mesh sdy;
        if (!mesh->named && !ev->named && mesh_from_sdy(m, &sdy, NULL) && sdy.n_axes == mesh->n_axes) {
            /* A numeric --mesh on a Shardy export takes the export's axis names. */
            for (int32_t i = 0; i < mesh->n_axes; i++)
                snprintf(mesh->axes[i].name, sizeof mesh->axes[i].name, "%s", sdy.axes[i].name);
            mesh->named = true;
        }
        return adopt_names(mesh, ev->named, cx->opt, cx->diag);
    }
    if (ev->named) {
        if (!mesh_from_named(mesh, ev->named, cx->diag))
            return false;
        if (m->num_partitions > 0 && m->num_partitions != mesh->n_devices) {
            StrBuf a = {0};
            print_syntax_mesh(&a, ev->named);
            diag_error(cx->diag, ev->named->span, "the module says num_partitions=%lld but the sharding's %s has "
                       "%lld devices", (long long)m->num_partitions, sb_cstr(&a), (long long)mesh->n_devices);
            sb_free(&a);
            return false;
        }
        return true;
    }
    int64_t implied = m->num_partitions > 0 ? m->num_partitions : ev->positional ? ev->positional_devices : 0;
    Mesh sdy;
    int32_t which;
    if (mesh_from_sdy(m, &sdy, &which)) {
        if (!implied || implied == sdy.n_devices) {
            *mesh = sdy;
            return true;
        }
        StrBuf a = {0};
        mesh_print(&a, &sdy);
        SrcSpan at = which >= 0 ? m->sdy_inline_span[which]
                     : ev->positional && m->num_partitions <= 0 ? ev->positional->span : m->span;
        diag_error(cx->diag, at, "%s %s (%lld devices) but %s %lld devices; give --mesh",
                   which >= 0 ? "the shardings' inline Shardy mesh is" : "the header's xla.sdy.meshes declares mesh",
                   sb_cstr(&a), (long long)sdy.n_devices,
                   m->num_partitions > 0 ? "num_partitions says" : "the positional shardings use", (long long)implied);
        sb_free(&a);
        return false;
    }
    if (m->num_partitions > 0)
        return mesh_1d(mesh, m->num_partitions, SRC_SPAN_NONE, cx->diag);
    if (ev->positional)
        return mesh_1d(mesh, ev->positional_devices, ev->positional->span, cx->diag);
    if (ev->maximal && ev->maximal->device > 0) {
        diag_error(cx->diag, ev->maximal->span, "sharding {maximal device=%lld} names a device, but nothing says how "
                   "many devices there are (no --mesh, mesh in a sharding, num_partitions or positional sharding): "
                   "give --mesh, e.g. --mesh %lld", (long long)ev->maximal->device,
                   (long long)ev->maximal->device + 1);
        return false;
    }
    return mesh_1d(mesh, 1, SRC_SPAN_NONE, cx->diag);
}

static bool has_unknown(const ShardingSyntax *s)
{
    if (s->kind == SSYN_UNKNOWN)
        return true;
    if (s->kind == SSYN_TUPLE)
        for (int32_t i = 0; i < s->n_elems; i++)
            if (has_unknown(&s->elems[i]))
                return true;
    return false;
}

/* An outfeed's sharding describes the data it sends (XLA's outfeed_shape,
 * its first operand), not its token result; a tuple sharding may end in one
 * more element, the token's (as XLA's sharding propagation writes it), which
 * is dropped.  Bound against the data, then
 * kept on the token as replicated, {manual} or {maximal device=N} when
 * every leaf is ({manual}: each device sends its own data, as written, in
 * a manual region); data split across devices is not partitioned yet (an
 * error). */
static bool bind_outfeed(HloModule *m, const HloComputation *c, HloInst *inst, Sharding *s, DiagEngine *diag)
{
    const Shape *data = c->insts[inst->operands[0]].shape;
    ShardingSyntax syn = *inst->sharding_src;
    if (syn.kind == SSYN_TUPLE && shape_is_tuple(data) && syn.n_elems == shape_leaf_count(data) + 1)
        syn.n_elems--; /* the token's element */
    Sharding d;
    if (!sharding_bind(&syn, &m->mesh, data, &d, m->arena, diag)) return false;
    int32_t n = d.kind == SHARDING_TUPLE ? d.n_elems : 1;
    int64_t dev = -1;
    bool repl = true, same = true, manual = n > 0;
    for (int32_t k = 0; k < n; k++) {
        const Sharding *l = d.kind == SHARDING_TUPLE ? &d.elems[k] : &d;
        manual &= l->kind == SHARDING_MANUAL;
        if (l->kind == SHARDING_MAXIMAL) {
            repl = false;
            same &= dev < 0 || dev == l->device;
            dev = l->device;
        } else if (l->kind == SHARDING_MANUAL || l->manual_atoms || !sharding_is_replicated(l)) {
            repl = same = false;
        }
    }
    if (!repl && !manual && !(same && dev >= 0 && n > 0)) {
        diag_error(diag, inst->span, "%s: an outfeed of data split across devices is not partitioned yet (its "
                   "sharding describes the data; replicated, {manual} or {maximal device=N} are)", inst->name);
        return false;
    }
    *s = sharding_replicated();
    if (manual) {
        *s = d.kind == SHARDING_TUPLE ? d.elems[0] : d; /* each device sends its own data, as written */
    } else if (!repl) {
        s->kind = SHARDING_MAXIMAL;
        s->device = dev;
    }
    inst->sharding = s;
    inst->sharding_from_user = true;
    return true;
}

/* A sharding annotation bind leaves out: the warning "NAME: message" at
 * span, and the same message in the report's warnings (kind
 * "ignored-annotation"), so a check of the report sees it too. */
static void ignored_annotation(HloModule *m, const HloInst *inst, SrcSpan span, DiagEngine *diag, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void ignored_annotation(HloModule *m, const HloInst *inst, SrcSpan span, DiagEngine *diag, const char *fmt, ...)
{
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *msg = xmalloc(n > 0 ? (size_t)n + 1 : 1);
    vsnprintf(msg, n > 0 ? (size_t)n + 1 : 1, fmt, aq);
    va_end(aq);
    diag_warning(diag, span, "%s: %s", inst->name, msg);
    hlo_add_input_warning(m, "ignored-annotation", inst->name, span.begin.line, msg);
    free(msg);
}

/* In a Shardy export (one Shardy mesh, declared or inline, its axes all in
 * the chosen mesh) each value's xla.sdy.sharding string is bound BY NAME in
 * preference to its positional sharding=: that is what makes `--mesh`
 * rebind such a file (another order or size of the axes), and it gives
 * out_shardings to values that carry no sharding= at all.  A string that
 * names an axis or mesh the module does not declare is an error, as it is
 * to Shardy; one spmdc cannot bind otherwise is an error without --mesh
 * (the export contradicts itself) and a warning with it (--mesh chose other
 * sizes), and one that does not fit its value (another rank) or that spmdc
 * does not read (several values) is a warning: the positional sharding (if
 * any) is bound, else propagation decides.  Returns 1 when bound, 0 when
 * not, -1 after an error. */
static int bind_sdy(HloModule *m, HloInst *inst, bool user_mesh, DiagEngine *diag)
{
    ShardingSyntax syn;
    char why[200];
    Arena *sa = m->syntax_arena ? m->syntax_arena : m->arena;
    SdyResult r = sdy_sharding_syntax(frontend_attrs_of(hlo_attrs(inst)->raw, hlo_attrs(inst)->n_raw),
                                      frontend_attrs_of(m->raw, m->n_raw), &m->mesh, sa, &syn, why, sizeof why);
    if (r == SDY_NONE) return 0;
    bool error = r == SDY_UNKNOWN_NAME;
    if (r == SDY_OK) {
        syn.span = inst->span;
        DiagEngine *quiet = diag_create(NULL);
        diag_set_show_source(quiet, false);
        Sharding *s = ARENA_NEW(m->arena, Sharding);
        bool ok = sharding_bind(&syn, &m->mesh, inst->shape, s, m->arena, quiet);
        if (ok) {
            ShardingSyntax *keep = ARENA_NEW(sa, ShardingSyntax);
            *keep = syn;
            inst->sharding_src = keep;
            inst->sharding = s;
            inst->sharding_from_user = true;
        } else {
            const char *t = diag_text(quiet);
            const char *msg = strstr(t, "error: ");
            snprintf(why, sizeof why, "%.*s", (int)strcspn(msg ? msg + 7 : t, "\n"), msg ? msg + 7 : t);
            error = !user_mesh && shape_is_array(inst->shape) &&
                    (syn.kind == SSYN_MAXIMAL || syn.n_dims == inst->shape->rank);
        }
        diag_destroy(quiet);
        if (ok) return 1;
    }
    if (error) {
        diag_error(diag, inst->span, "%s: its xla.sdy.sharding cannot be bound: %s", inst->name, why);
        return -1;
    }
    ignored_annotation(m, inst, inst->span, diag, "ignoring its xla.sdy.sharding (%s)%s", why,
                       inst->sharding_src ? "; using its sharding= instead" : "");
    return 0;
}

/* The instruction's written sharding with its spans where its own text is
 * (hlo_sharding_syntax); comp is m's, inst one of comp's. */
static const ShardingSyntax *syntax_here(HloModule *m, const HloComputation *comp, const HloInst *inst)
{
    return hlo_sharding_syntax(m, (int32_t)(comp - m->comps), (int32_t)(inst - comp->insts));
}

/* Whether the instruction carries a Shardy sharding string. */
static bool has_sdy_string(const HloInst *inst)
{
    const char *fa = frontend_attrs_of(hlo_attrs(inst)->raw, hlo_attrs(inst)->n_raw);
    return fa && strstr(fa, "xla.sdy.sharding");
}

/* Whether a written sharding holds a positional tiling (a tuple: in a leaf). */
static bool has_positional_tiling(const ShardingSyntax *s)
{
    if (s->kind == SSYN_TILED) return true;
    for (int32_t k = 0; s->kind == SSYN_TUPLE && k < s->n_elems; k++)
        if (has_positional_tiling(&s->elems[k])) return true;
    return false;
}

static bool same_mesh_layout(const Mesh *a, const Mesh *b)
{
    if (a->n_axes != b->n_axes) return false;
    for (int32_t i = 0; i < a->n_axes; i++)
        if (strcmp(a->axes[i].name, b->axes[i].name) || a->axes[i].size != b->axes[i].size) return false;
    return true;
}

/* XLA's `backend_config="unspecified_dims=[1,3]"` on a Sharding custom-call
 * (jax's with_sharding_constraint with P.UNCONSTRAINED dims) or on a
 * shard_map border, SPMDFullToShardShape / SPMDShardToFullShape (jax writes
 * every dim there when the region leaves mesh axes automatic): those dims of
 * the bound array sharding s are open to propagation.  A config that is not
 * such a list is left alone. */
static void open_unspecified_dims(const HloInst *inst, Sharding *s)
{
    if (inst->op != HLO_CUSTOM_CALL)
        return; /* before the attributes are read: most annotated values are parameters */
    const HloAttrs *a = hlo_attrs(inst);
    const char *t = a->custom_call_target;
    if (!t ||
        (strcmp(t, "Sharding") != 0 && strcmp(t, "SPMDFullToShardShape") != 0 &&
         strcmp(t, "SPMDShardToFullShape") != 0) ||
        s->kind == SHARDING_TUPLE || !shape_is_array(inst->shape))
        return;
    for (int32_t k = 0; k < a->n_raw; k++) {
        const char *p = strcmp(a->raw[k].name, "backend_config") == 0 ? strstr(a->raw[k].text, "unspecified_dims=[")
                                                                        : NULL;
        if (!p)
            continue;
        p += strlen("unspecified_dims=[");
        uint32_t open = 0;
        while (*p >= '0' && *p <= '9') {
            char *end;
            long d = strtol(p, &end, 10);
            if (d >= 0 && d < inst->shape->rank)
                open |= 1u << d;
            p = end;
            while (*p == ',' || *p == ' ')
                p++;
        }
        if (*p == ']')
            s->open_dims |= open;
    }
}

/* Bound shardings, stored once per distinct value (a stack of layers
 * carries a few shardings many times): an open-addressing set of the
 * array shardings bound so far. */
typedef InternSet ShardingSet;

/* Every field of a non-tuple sharding, field by field (its padding is not
 * part of its value). */
static uint64_t sharding_hash(const Sharding *s)
{
    uint64_t v[10];
    memset(v, 0, sizeof v);
    memcpy(v, &s->tile, sizeof s->tile); /* 48 bytes, no padding */
    v[6] = (uint64_t)s->kind | (uint64_t)s->named_form << 8 | (uint64_t)s->manual_atoms << 32;
    v[7] = (uint64_t)s->device;
    v[8] = (uint64_t)s->open_dims | (uint64_t)s->replicated_atoms << 32;
    memcpy(&v[9], s->priority, sizeof s->priority);
    uint64_t h = 0x2545f4914f6cdd1dull;
    for (int k = 0; k < 10; k++) h = (h ^ v[k]) * 0x100000001b3ull + (h >> 29);
    return h;
}

static bool sharding_same(const Sharding *a, const Sharding *b)
{
    return a->kind == b->kind && memcmp(&a->tile, &b->tile, sizeof a->tile) == 0 && a->device == b->device &&
           a->manual_atoms == b->manual_atoms && a->named_form == b->named_form && a->open_dims == b->open_dims &&
           a->replicated_atoms == b->replicated_atoms && memcmp(a->priority, b->priority, sizeof a->priority) == 0;
}

static bool sharding_same_v(const void *stored, const void *item) { return sharding_same(stored, item); }

/* The module's copy of bound sharding s: shared with every equal array
 * sharding bound before (tuples get their own). */
static Sharding *keep_sharding(HloModule *m, ShardingSet *set, const Sharding *s)
{
    if (s->kind == SHARDING_TUPLE)
        return arena_memdup(m->arena, s, sizeof *s);
    uint64_t h = sharding_hash(s);
    uint32_t at;
    Sharding *kept = intern_find(set, h, s, sharding_same_v, &at);
    if (!kept) {
        kept = arena_memdup(m->arena, s, sizeof *s);
        intern_add(set, at, h, kept);
    }
    return kept;
}

/* ---------------------------------------------------------------- bound syntax
 * What was written decides the bound sharding (with the mesh and the
 * value's rank): an annotation written like an earlier one on a value of
 * the same rank binds to what that one bound (a stack of layers writes a
 * few annotations many times).  Only binds that reported nothing are
 * remembered, so every diagnostic is made as before.  Tuples (of syntax or
 * shape) are bound each time. */

typedef struct BoundSyntax {
    const ShardingSyntax *syn; /* the first annotation written so (in the syntax arena) */
    int32_t rank;
    Sharding s;                /* what sharding_bind made of it */
    Sharding *kept;            /* keep_sharding(s): for instructions open_unspecified_dims leaves alone */
} BoundSyntax;

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull + (h >> 29); }

static uint64_t mix_ints(uint64_t h, const int64_t *v, int32_t n)
{
    for (int32_t k = 0; k < n; k++) h = mix(h, (uint64_t)v[k]);
    return h;
}

static uint64_t mix_str(uint64_t h, const char *t)
{
    uint64_t v = 0x84222325u;
    for (; t && *t; t++) v = (v ^ (uint8_t)*t) * 0x100000001b3ull;
    return mix(h, v);
}

static uint64_t mix_refs(uint64_t h, const AxisRefSyntax *r, int32_t n)
{
    h = mix(h, (uint64_t)n);
    for (int32_t k = 0; k < n; k++) h = mix(mix(mix_str(h, r[k].name), (uint64_t)r[k].pre_size), (uint64_t)r[k].size);
    return h;
}

/* The fields of a non-tuple annotation its kind gives meaning to (spans
 * aside: they only place messages). */
static uint64_t syntax_hash(const ShardingSyntax *a, int32_t rank)
{
    uint64_t h = mix(mix(0x51ed2701u, (uint64_t)a->kind), (uint64_t)(uint32_t)rank);
    switch (a->kind) {
    case SSYN_MAXIMAL: return mix(h, (uint64_t)a->device);
    case SSYN_TILED:
        h = mix_ints(mix(h, (uint64_t)a->n_tile_dims), a->tile_dims, a->n_tile_dims);
        h = mix_ints(mix(h, (uint64_t)a->n_iota_dims), a->iota_dims, a->n_iota_dims);
        h = mix(mix(h, (uint64_t)a->has_perm), (uint64_t)a->n_devices);
        for (int32_t k = 0; a->has_perm && k < a->n_iota_dims; k++) h = mix(h, (uint64_t)a->iota_perm[k]);
        if (a->devices) h = mix_ints(h, a->devices, (int32_t)a->n_devices);
        h = mix(mix(h, (uint64_t)a->last_tile_dim_replicate), (uint64_t)a->n_subgroups);
        for (int32_t k = 0; k < a->n_subgroups; k++) h = mix(h, (uint64_t)a->subgroups[k]);
        return h;
    case SSYN_NAMED:
        h = mix(h, (uint64_t)a->n_mesh_axes);
        for (int32_t k = 0; k < a->n_mesh_axes; k++)
            h = mix(mix_str(h, a->mesh_axis_names[k]), (uint64_t)a->mesh_axis_sizes[k]);
        h = mix(h, (uint64_t)a->n_dims);
        for (int32_t d = 0; d < a->n_dims; d++) h = mix_refs(h, a->dim_axes[d], a->dim_n_axes[d]);
        h = mix(h, (uint64_t)a->open_dims);
        for (int32_t d = 0; d < SPMDC_MAX_RANK; d++) h = mix(h, a->dim_priority[d]);
        h = mix_refs(h, a->replicated_axes, a->n_replicated_axes);
        h = mix_refs(h, a->unreduced_axes, a->n_unreduced_axes);
        h = mix_refs(h, a->manual_axes, a->n_manual_axes);
        return mix(h, (uint64_t)a->named_replicated | (uint64_t)a->named_manual << 1 |
                          (uint64_t)a->named_unreduced << 2);
    default: return h;
    }
}

static bool same_str(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static bool same_ints(const int64_t *a, const int64_t *b, int32_t n)
{
    return n <= 0 || memcmp(a, b, sizeof(int64_t) * (size_t)n) == 0;
}

static bool same_refs(const AxisRefSyntax *a, int32_t na, const AxisRefSyntax *b, int32_t nb)
{
    if (na != nb) return false;
    for (int32_t k = 0; k < na; k++)
        if (!same_str(a[k].name, b[k].name) || a[k].pre_size != b[k].pre_size || a[k].size != b[k].size)
            return false;
    return true;
}

/* Whether a and b say the same (the fields syntax_hash reads). */
static bool same_syntax(const ShardingSyntax *a, const ShardingSyntax *b)
{
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case SSYN_MAXIMAL: return a->device == b->device;
    case SSYN_TILED:
        if (a->n_tile_dims != b->n_tile_dims || !same_ints(a->tile_dims, b->tile_dims, a->n_tile_dims) ||
            a->n_iota_dims != b->n_iota_dims || !same_ints(a->iota_dims, b->iota_dims, a->n_iota_dims) ||
            a->has_perm != b->has_perm || a->n_devices != b->n_devices || !a->devices != !b->devices ||
            a->last_tile_dim_replicate != b->last_tile_dim_replicate || a->n_subgroups != b->n_subgroups)
            return false;
        for (int32_t k = 0; a->has_perm && k < a->n_iota_dims; k++)
            if (a->iota_perm[k] != b->iota_perm[k]) return false;
        for (int32_t k = 0; k < a->n_subgroups; k++)
            if (a->subgroups[k] != b->subgroups[k]) return false;
        return !a->devices || same_ints(a->devices, b->devices, (int32_t)a->n_devices);
    case SSYN_NAMED:
        if (a->n_mesh_axes != b->n_mesh_axes || a->n_dims != b->n_dims || a->open_dims != b->open_dims ||
            memcmp(a->dim_priority, b->dim_priority, sizeof a->dim_priority) != 0 ||
            a->named_replicated != b->named_replicated || a->named_manual != b->named_manual ||
            a->named_unreduced != b->named_unreduced)
            return false;
        for (int32_t k = 0; k < a->n_mesh_axes; k++)
            if (!same_str(a->mesh_axis_names[k], b->mesh_axis_names[k]) ||
                a->mesh_axis_sizes[k] != b->mesh_axis_sizes[k])
                return false;
        for (int32_t d = 0; d < a->n_dims; d++)
            if (!same_refs(a->dim_axes[d], a->dim_n_axes[d], b->dim_axes[d], b->dim_n_axes[d])) return false;
        return same_refs(a->replicated_axes, a->n_replicated_axes, b->replicated_axes, b->n_replicated_axes) &&
               same_refs(a->unreduced_axes, a->n_unreduced_axes, b->unreduced_axes, b->n_unreduced_axes) &&
               same_refs(a->manual_axes, a->n_manual_axes, b->manual_axes, b->n_manual_axes);
    default: return true;
    }
}

static bool bound_same(const void *stored, const void *item)
{
    const BoundSyntax *a = stored, *b = item;
    return a->rank == b->rank && same_syntax(a->syn, b->syn);
}

/* The annotations bound so far, and where their records live.  by_syn: the
 * record last found for a syntax by its address and rank (direct-mapped):
 * the instructions of one sharding text share one syntax (HloSyntaxMove),
 * so most find their record there without hashing the syntax. */
#define BIND_BY_SYN 64
typedef struct BindMemo {
    InternSet set;
    Arena *a;
    struct {
        const ShardingSyntax *syn;
        int32_t rank;
        BoundSyntax *b;
    } by_syn[BIND_BY_SYN];
} BindMemo;

static uint32_t by_syn_slot(const ShardingSyntax *syn, int32_t rank)
{
    uint64_t k = ((uint64_t)(uintptr_t)syn >> 4) * 0x9e3779b97f4a7c15ull + (uint64_t)rank;
    return (uint32_t)(k >> 58) % BIND_BY_SYN;
}

/* Whether inst's value is a Shardy export's result sharding custom-call
 * (xla.sdy.FuncResultSharding), directly or through the tuple JAX wraps
 * results in: its string, not inst's positional sharding, decides the
 * result's sharding. */
static bool result_sharding_decides(const HloComputation *comp, const HloInst *inst)
{
    const HloInst *v = inst;
    if (v->op == HLO_GET_TUPLE_ELEMENT && v->n_operands == 1 && v->operands[0] >= 0 && v->operands[0] < comp->n_insts) {
        const HloInst *t = &comp->insts[v->operands[0]];
        int64_t k = hlo_attrs(v)->index;
        if (t->op != HLO_TUPLE || k < 0 || k >= t->n_operands || t->operands[k] < 0 || t->operands[k] >= comp->n_insts)
            return false;
        v = &comp->insts[t->operands[k]];
    }
    const char *target = hlo_attrs(v)->custom_call_target;
    return v->op == HLO_CUSTOM_CALL && target && strcmp(target, "xla.sdy.FuncResultSharding") == 0;
}

/* Binds one instruction's written sharding (see bind_all); false after an
 * error. */
static bool bind_inst(HloModule *m, const HloComputation *comp, HloInst *inst, bool sdy, bool sdy_moved,
                      const SpmdcOptions *user, ShardingSet *set, BindMemo *memo, DiagEngine *diag)
{
    bool user_mesh = user != NULL;
    int bound = sdy ? bind_sdy(m, inst, user_mesh, diag) : 0;
    if (bound != 0)
        return bound > 0;
    if (sdy_moved && inst->sharding_src && has_positional_tiling(inst->sharding_src)) {
        if (!result_sharding_decides(comp, inst)) { /* else nothing is lost: no word */
            StrBuf b = {0};
            put_user_mesh(&b, user, &m->mesh);
            ignored_annotation(m, inst, syntax_here(m, comp, inst)->span, diag,
                               "ignoring its positional sharding, written for the export's own mesh, which %s "
                               "reorders or resizes; propagation decides it", sb_cstr(&b));
            sb_free(&b);
        }
        inst->sharding_src = NULL;
        return true;
    }
    if (!sdy && !inst->sharding_src && has_sdy_string(inst)) {
        /* Never dropped silently: a warning when --mesh chose other
         * axes on purpose, an error otherwise. */
        StrBuf b = {0};
        if (user_mesh) put_user_mesh(&b, user, &m->mesh);
        else mesh_print(&b, &m->mesh);
        bool ok = user_mesh;
        const char *fa = frontend_attrs_of(m->raw, m->n_raw);
        const char *meshes = (fa && strstr(fa, "xla.sdy.meshes")) || !m->sdy_inline_mesh[0]
                                 ? "the header's xla.sdy.meshes" : "the shardings' inline Shardy meshes";
        if (user_mesh) {
            ignored_annotation(m, inst, inst->span, diag, "ignoring its xla.sdy.sharding: %s does not have the "
                               "axes of %s; propagation decides it", sb_cstr(&b), meshes);
        } else {
            diag_error(diag, inst->span, "%s: its xla.sdy.sharding cannot be bound: the module's mesh %s does "
                       "not have the axes of %s (give --mesh with the export's axis names)", inst->name,
                       sb_cstr(&b), meshes);
        }
        sb_free(&b);
        return ok;
    }
    if (!inst->sharding_src || has_unknown(inst->sharding_src))
        return true;
    if (inst->op == HLO_OUTFEED && inst->n_operands > 0) {
        syntax_here(m, comp, inst);
        return bind_outfeed(m, comp, inst, ARENA_NEW(m->arena, Sharding), diag);
    }
    /* the content serves the memo; spans are read only by sharding_bind */
    const ShardingSyntax *syn = inst->sharding_src;
    bool keyed = syn->kind != SSYN_TUPLE && !shape_is_tuple(inst->shape);
    BoundSyntax probe = {syn, keyed ? inst->shape->rank : 0, {0}, NULL}, *seen = NULL;
    uint64_t h = 0;
    uint32_t at = 0;
    uint32_t slot = keyed ? by_syn_slot(syn, probe.rank) : 0;
    if (keyed && memo->by_syn[slot].syn == syn && memo->by_syn[slot].rank == probe.rank) {
        seen = memo->by_syn[slot].b;
    } else if (keyed) {
        h = syntax_hash(syn, probe.rank);
        seen = intern_find(&memo->set, h, &probe, bound_same, &at);
        if (seen) {
            memo->by_syn[slot].syn = syn;
            memo->by_syn[slot].rank = probe.rank;
            memo->by_syn[slot].b = seen;
        }
    }
    if (seen && inst->op != HLO_CUSTOM_CALL) { /* open_unspecified_dims reads custom-calls only */
        inst->sharding = seen->kept;
        inst->sharding_from_user = true;
        return true;
    }
    Sharding s;
    if (seen)
        s = seen->s;
    else if (!sharding_bind(syntax_here(m, comp, inst), &m->mesh, inst->shape, &s, m->arena, diag))
        return false;
    Sharding written = s;
    open_unspecified_dims(inst, &s);
    inst->sharding = keep_sharding(m, set, &s);
    inst->sharding_from_user = true;
    if (keyed && !seen) {
        BoundSyntax *b = ARENA_NEW(memo->a, BoundSyntax);
        *b = probe;
        b->s = written;
        b->kept = keep_sharding(m, set, &written);
        intern_add(&memo->set, at, h, b);
        memo->by_syn[slot].syn = syn;
        memo->by_syn[slot].rank = probe.rank;
        memo->by_syn[slot].b = b;
    }
    return true;
}

/* Binds every instruction's written sharding; reports every failure.  The
 * syntax of a bound sharding is dropped, an unbound one ({unknown}, or
 * after an error) copied out of the syntax arena, which is then released.
 * sdy: bind Shardy strings by name first (bind_sdy); sdy_moved: --mesh
 * reorders or resizes the export's mesh, so a positional tiling without a
 * Shardy string no longer means what it meant, and is dropped (warning);
 * user: the options when the mesh is the user's (--mesh), else NULL. */
/* An instruction bind_inst has to look at: one with a written sharding or
 * with verbatim attributes (a Shardy string lives in its
 * frontend_attributes); bind_inst leaves every other one as it is. */
typedef struct BindItem {
    int32_t c, i;
} BindItem;

static bool bind_all(HloModule *m, const BindItem *items, int32_t n_items, bool sdy, bool sdy_moved,
                     const SpmdcOptions *user, DiagEngine *diag)
{
    bool ok = true;
    ShardingSet set = {0};
    BindMemo memo;
    memset(&memo, 0, sizeof memo);
    memo.a = arena_create();
    for (int32_t k = 0; k < n_items; k++) {
        HloComputation *comp = &m->comps[items[k].c];
        HloInst *inst = &comp->insts[items[k].i];
        if (!bind_inst(m, comp, inst, sdy, sdy_moved, user, &set, &memo, diag))
            ok = false;
        if (inst->sharding)
            inst->sharding_src = NULL;
        else if (inst->sharding_src && m->syntax_arena)
            inst->sharding_src = sharding_syntax_copy(syntax_here(m, comp, inst), m->arena);
    }
    intern_free(&set);
    intern_free(&memo.set);
    arena_destroy(memo.a);
    arena_destroy(m->syntax_arena);
    m->syntax_arena = NULL;
    m->syntax_moves = NULL;
    m->n_syntax_moves = m->cap_syntax_moves = 0;
    return ok;
}

bool bind_shardings(HloModule *m, PassCtx *cx)
{
    MeshEvidence ev = {NULL, NULL, 0, NULL, true};
    BindItem *items = NULL;
    int32_t n_items = 0, cap_items = 0;
    for (int32_t c = 0; c < m->n_comps; c++)
        for (int32_t i = 0; i < m->comps[c].n_insts; i++) {
            HLO_WALK_PREFETCH(&m->comps[c], i);
            const HloInst *in = &m->comps[c].insts[i];
            if (in->sharding_src && gather(&ev, in->sharding_src, true, cx->diag))
                gather(&ev, hlo_sharding_syntax(m, c, i), false, cx->diag);
            if (!in->sharding_src && !(in->attrs && in->attrs->n_raw > 0))
                continue;
            if (n_items == cap_items) {
                cap_items = cap_items ? cap_items * 2 : 256;
                items = xrealloc(items, sizeof(BindItem) * (size_t)cap_items);
            }
            items[n_items++] = (BindItem){c, i};
        }
    Mesh mesh;
    if (!ev.ok || !choose_mesh(m, cx, &ev, &mesh)) {
        free(items);
        return false;
    }
    m->mesh = mesh;
    m->mesh.perms = ARENA_NEW(m->arena, MeshPerms);
    m->mesh.perms->arena = m->arena;
    m->has_mesh = true;
    Mesh sdy;
    bool sdy_mode = mesh.named && mesh_from_sdy(m, &sdy, NULL);
    for (int32_t i = 0; sdy_mode && i < sdy.n_axes; i++)
        if (mesh_axis_index(&mesh, sdy.axes[i].name) < 0) sdy_mode = false;
    const SpmdcOptions *user = cx->opt && cx->opt->has_mesh ? cx->opt : NULL;
    bool ok = bind_all(m, items, n_items, sdy_mode, sdy_mode && !same_mesh_layout(&mesh, &sdy), user, cx->diag);
    free(items);
    Mesh header;
    if (!ok && user && mesh_from_sdy(m, &header, NULL) && header.n_devices != mesh.n_devices) {
        /* positional shardings of the export's device count fail one by one: say why once */
        StrBuf a = {0}, b = {0};
        mesh_print(&a, &header);
        put_user_mesh(&b, user, &mesh);
        diag_note(cx->diag, m->span, "the shardings were written for the header's mesh %s (%lld devices), and %s "
                  "has %lld: give --mesh over %lld devices, e.g. --mesh %s",
                  sb_cstr(&a), (long long)header.n_devices, sb_cstr(&b), (long long)mesh.n_devices,
                  (long long)header.n_devices, sb_cstr(&a));
        sb_free(&a);
        sb_free(&b);
    }
    return ok;
}
