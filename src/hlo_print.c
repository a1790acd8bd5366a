/* hlo_print.c - the IR as HLO text that XLA's parser (and parse.c) accept.
 *
 *   HloModule name, replica_count=R, num_partitions=N
 *
 *   %callee {
 *     %a = f32[] parameter(0)
 *     ROOT %r = f32[] add(%a, %a)
 *   }
 *
 *   ENTRY %main {
 *     ...
 *   }
 *
 * Computations are printed callee-first without a signature (XLA accepts
 * `name {`).  Each instruction is `%name = shape opcode(%operands), attrs`
 * with the typed attributes spelled as XLA prints them (attribute order as
 * XLA's printer), then `sharding=` (print_shardings), then the verbatim
 * attributes.  Verbatim attributes that only annotate (metadata,
 * frontend_attributes, backend_config, ...) are printed only with
 * print_raw_attrs; any other verbatim attribute (e.g. rng-bit-generator's
 * algorithm=) always is, since the program means something else without it.
 * Replica groups are printed in XLA's iota form `[G,S]<=[..]T(..)` when they
 * are a transposed iota over the module's mesh (or over the prime factors of
 * their device count), else as explicit lists.  Output is deterministic.
 */
#include "spmdc/hlo.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ================================================================ small pieces */

static void put_list(StrBuf *b, const char *name, IntList l)
{
    sb_puts(b, ", ");
    sb_puts(b, name);
    sb_putc(b, '=');
    sb_int_list(b, l.v, l.n, "{", ",", "}");
}

static void put_list_if(StrBuf *b, const char *name, IntList l)
{
    if (l.n > 0)
        put_list(b, name, l);
}

static const char *comp_name(const HloModule *m, int64_t c)
{
    return c >= 0 && c < m->n_comps ? m->comps[c].name : "?";
}

static void put_comp(StrBuf *b, const HloModule *m, const char *name, int32_t c)
{
    if (c >= 0 && c < m->n_comps) {
        sb_puts(b, ", ");
        sb_puts(b, name);
        sb_puts(b, "=%");
        sb_puts(b, m->comps[c].name);
    }
}

/* ", name={%a, %b}" */
static void put_comp_list(StrBuf *b, const HloModule *m, const char *name, const IntList *l)
{
    sb_printf(b, ", %s={", name);
    for (int32_t k = 0; k < l->n; k++)
        sb_printf(b, "%s%%%s", k ? ", " : "", comp_name(m, l->v[k]));
    sb_putc(b, '}');
}

/* A double spelled with the fewest digits that read back to the same value
 * ("0.1", "1e+10", "3"), or nan / inf / -inf. */
static void put_double(StrBuf *b, double v)
{
    if (isnan(v)) {
        sb_puts(b, "nan");
        return;
    }
    if (isinf(v)) {
        sb_puts(b, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == 0 && signbit(v)) {
        sb_puts(b, "-0.0");
        return;
    }
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    sb_puts(b, buf);
}

/* ================================================================ literals */

static void put_scalar(StrBuf *b, ElemType t, const Literal *l, int64_t k)
{
    if (t == ET_PRED) {
        sb_puts(b, l->i && l->i[k] ? "true" : "false");
    } else if (elem_type_is_complex(t)) {
        sb_putc(b, '(');
        put_double(b, l->f ? l->f[2 * k] : 0.0);
        sb_puts(b, ", ");
        put_double(b, l->f ? l->f[2 * k + 1] : 0.0);
        sb_putc(b, ')');
    } else if (elem_type_is_float(t)) {
        put_double(b, l->f ? l->f[k] : 0.0);
    } else if (t == ET_U64) {
        sb_printf(b, "%" PRIu64, l->i ? (uint64_t)l->i[k] : 0);
    } else {
        sb_printf(b, "%" PRId64, l->i ? l->i[k] : 0);
    }
}

/* Dims d.. of an array literal, elements from *k on. */
static void put_nested(StrBuf *b, const Shape *s, const Literal *l, int32_t d, int64_t *k)
{
    if (d == s->rank) {
        put_scalar(b, s->type, l, (*k)++);
        return;
    }
    sb_putc(b, '{');
    for (int64_t i = 0; i < s->dims[d]; i++) {
        if (i)
            sb_puts(b, ", ");
        put_nested(b, s, l, d + 1, k);
    }
    sb_putc(b, '}');
}

static void put_literal(StrBuf *b, const Shape *s, const Literal *l)
{
    if (shape_is_tuple(s)) {
        sb_putc(b, '(');
        for (int32_t i = 0; i < s->n_elems; i++) {
            if (i)
                sb_puts(b, ", ");
            if (l && i < l->n_elems)
                put_literal(b, &s->elems[i], &l->elems[i]);
            else
                put_literal(b, &s->elems[i], NULL);
        }
        sb_putc(b, ')');
        return;
    }
    Literal zero;
    memset(&zero, 0, sizeof zero);
    if (!l || (l->n < shape_elem_count(s) && !l->elided))
        l = &zero;
    if (s->rank > 0 && l->elided) {
        sb_puts(b, "{...}");
        return;
    }
    int64_t k = 0;
    put_nested(b, s, l, 0, &k);
}

/* ================================================================ attribute kinds */

static void put_slice(StrBuf *b, const HloAttrs *a)
{
    sb_puts(b, ", slice={");
    for (int32_t d = 0; d < a->slice_start.n; d++) {
        int64_t lim = d < a->slice_limit.n ? a->slice_limit.v[d] : 0;
        int64_t st = d < a->slice_stride.n ? a->slice_stride.v[d] : 1;
        sb_printf(b, "%s[%" PRId64 ":%" PRId64, d ? ", " : "", a->slice_start.v[d], lim);
        if (st != 1)
            sb_printf(b, ":%" PRId64, st);
        sb_putc(b, ']');
    }
    sb_putc(b, '}');
}

static void put_padding(StrBuf *b, const HloAttrs *a)
{
    bool interior = false;
    for (int32_t d = 0; d < a->pad_interior.n; d++)
        interior |= a->pad_interior.v[d] != 0;
    sb_puts(b, ", padding=");
    for (int32_t d = 0; d < a->pad_lo.n; d++) {
        sb_printf(b, "%s%" PRId64 "_%" PRId64, d ? "x" : "", a->pad_lo.v[d],
                  d < a->pad_hi.n ? a->pad_hi.v[d] : 0);
        if (interior)
            sb_printf(b, "_%" PRId64, d < a->pad_interior.n ? a->pad_interior.v[d] : 0);
    }
}

enum { WF_SIZE, WF_STRIDE, WF_LHS_DILATE, WF_RHS_DILATE };

static int64_t window_field(const WindowDim *d, int which)
{
    switch (which) {
    case WF_SIZE: return d->size;
    case WF_STRIDE: return d->stride;
    case WF_LHS_DILATE: return d->lhs_dilate;
    default: return d->rhs_dilate;
    }
}

/* One window field ("stride=2x1") if any dim differs from dflt (size:
 * always, dflt < 0). */
static void put_window_field(StrBuf *b, const Window *w, const char *name, int which, int64_t dflt, bool *first)
{
    bool any = dflt < 0;
    for (int32_t d = 0; d < w->rank && !any; d++)
        any = window_field(&w->dims[d], which) != dflt;
    if (!any)
        return;
    sb_printf(b, "%s%s=", *first ? "" : " ", name);
    *first = false;
    for (int32_t d = 0; d < w->rank; d++)
        sb_printf(b, "%s%" PRId64, d ? "x" : "", window_field(&w->dims[d], which));
}

static void put_window(StrBuf *b, const Window *w)
{
    bool first = true, pad = false, rev = false;
    sb_puts(b, ", window={");
    if (w && w->rank > 0) {
        put_window_field(b, w, "size", WF_SIZE, -1, &first);
        put_window_field(b, w, "stride", WF_STRIDE, 1, &first);
        for (int32_t d = 0; d < w->rank; d++) {
            pad |= w->dims[d].pad_lo != 0 || w->dims[d].pad_hi != 0;
            rev |= w->dims[d].reversal;
        }
        if (pad) {
            sb_puts(b, " pad=");
            for (int32_t d = 0; d < w->rank; d++)
                sb_printf(b, "%s%" PRId64 "_%" PRId64, d ? "x" : "", w->dims[d].pad_lo, w->dims[d].pad_hi);
        }
        put_window_field(b, w, "lhs_dilate", WF_LHS_DILATE, 1, &first);
        put_window_field(b, w, "rhs_dilate", WF_RHS_DILATE, 1, &first);
        if (rev) {
            sb_puts(b, " rhs_reversal=");
            for (int32_t d = 0; d < w->rank; d++)
                sb_printf(b, "%s%d", d ? "x" : "", w->dims[d].reversal ? 1 : 0);
        }
    }
    sb_putc(b, '}');
}

/* dim_labels from ConvDims when the text form is not kept: b01f_01io->b01f. */
static void put_conv_labels(StrBuf *b, const ConvDims *c)
{
    char lhs[SPMDC_MAX_RANK + 3], rhs[SPMDC_MAX_RANK + 3], out[SPMDC_MAX_RANK + 3];
    int32_t n = c->n_spatial + 2;
    if (n > SPMDC_MAX_RANK + 2)
        return;
    memset(lhs, '?', sizeof lhs);
    memset(rhs, '?', sizeof rhs);
    memset(out, '?', sizeof out);
    lhs[c->in_batch % n] = 'b';
    lhs[c->in_feature % n] = 'f';
    rhs[c->k_in % n] = 'i';
    rhs[c->k_out % n] = 'o';
    out[c->out_batch % n] = 'b';
    out[c->out_feature % n] = 'f';
    for (int32_t i = 0; i < c->n_spatial; i++) {
        lhs[c->in_spatial[i] % n] = (char)('0' + i);
        rhs[c->k_spatial[i] % n] = (char)('0' + i);
        out[c->out_spatial[i] % n] = (char)('0' + i);
    }
    sb_printf(b, ", dim_labels=%.*s_%.*s->%.*s", (int)n, lhs, (int)n, rhs, (int)n, out);
}

/* What printing one module remembers between instructions, so the repeated
 * layers of a large module do not spell the same attribute text again for
 * every instruction:
 *  - put_attrs' text of the shared attribute sets printed last.  Equal sets
 *    of a module are one copy (hlo_set_attrs), and put_attrs reads only the
 *    opcode, the set and the module, so a set's address and the opcode key
 *    its text.  Direct mapped: a slot keeps the last key that hashed to it.
 *  - the replica groups printed last and their text: collectives carry
 *    their own sets (each has its channel_id) but mostly the same groups;
 *  - the text of the array shapes printed lately (a layer's shapes are the
 *    next layer's), by what shape_print reads (ShapeKey). */
#define ATTRS_MEMO_SLOTS 64

/* What shape_print reads of an array shape without a layout tail (a
 * TextMemo key of offsetof(ShapeKey, dims) + 8 * rank bytes, unused layout
 * entries zero). */
typedef struct ShapeKey {
    int32_t type, rank;
    int8_t minor_to_major[SPMDC_MAX_RANK];
    uint8_t layout, pad[7]; /* layout: printed with it */
    int64_t dims[SPMDC_MAX_RANK];
} ShapeKey;
typedef struct PrintMemo {
    struct {
        const HloAttrs *a; /* NULL: empty slot */
        HloOpcode op;
        StrBuf text;
    } slot[ATTRS_MEMO_SLOTS];
    TextMemo shapes;
    int64_t *group_ids; /* heap copy of the last groups' ids (NULL: none yet) */
    int64_t n_groups, group_size;
    StrBuf groups_text;  /* their text after "replica_groups=" */
} PrintMemo;

/* The mesh to factor replica groups over: the module's if it has P
 * devices, else one axis of P (its prime factors). */
static bool groups_mesh(const HloModule *m, int64_t P, Mesh *mesh)
{
    if (m->has_mesh && m->mesh.n_devices == P) {
        *mesh = m->mesh;
        return true;
    }
    const char *name = "d0";
    char err[128];
    return mesh_init(mesh, 1, &name, &P, err, sizeof err);
}

/* The groups after "replica_groups=" (g has at least one nonempty group). */
static void put_groups(StrBuf *b, const HloModule *m, const ReplicaGroups *g)
{
    int64_t P = g->n_groups * g->group_size;
    Mesh mesh;
    int8_t order[SPMDC_MAX_ATOMS];
    bool in_range = P > 1 && P <= SPMDC_MAX_DEVICES;
    for (int64_t k = 0; k < P && in_range; k++)
        in_range = g->ids[k] >= 0 && g->ids[k] < P;
    if (in_range && groups_mesh(m, P, &mesh) && mesh_factor_order(&mesh, g->ids, order)) {
        sb_putc(b, '[');
        sb_int(b, g->n_groups);
        sb_putc(b, ',');
        sb_int(b, g->group_size);
        sb_putc(b, ']');
        mesh_iota_src(b, &mesh, order);
        return;
    }
    sb_putc(b, '{');
    for (int64_t r = 0; r < g->n_groups; r++) {
        if (r)
            sb_putc(b, ',');
        sb_int_list(b, g->ids + r * g->group_size, (int32_t)g->group_size, "{", ",", "}");
    }
    sb_putc(b, '}');
}

static void put_replica_groups(StrBuf *b, const HloModule *m, const ReplicaGroups *g, PrintMemo *memo)
{
    sb_puts(b, ", replica_groups=");
    if (g->n_groups <= 0 || g->group_size <= 0 || !g->ids) {
        sb_puts(b, "{}");
        return;
    }
    if (!memo) {
        put_groups(b, m, g);
        return;
    }
    size_t bytes = sizeof(int64_t) * (size_t)g->n_groups * (size_t)g->group_size;
    if (!memo->group_ids || memo->n_groups != g->n_groups || memo->group_size != g->group_size ||
        memcmp(memo->group_ids, g->ids, bytes) != 0) {
        memo->group_ids = xrealloc(memo->group_ids, bytes);
        memcpy(memo->group_ids, g->ids, bytes);
        memo->n_groups = g->n_groups;
        memo->group_size = g->group_size;
        sb_clear(&memo->groups_text);
        put_groups(&memo->groups_text, m, g);
    }
    sb_putn(b, memo->groups_text.data, memo->groups_text.len);
}

static void put_collective_head(StrBuf *b, const HloModule *m, const HloAttrs *a, PrintMemo *memo)
{
    if (a->channel_id) {
        sb_puts(b, ", channel_id=");
        sb_int(b, a->channel_id);
    }
    put_replica_groups(b, m, &a->replica_groups, memo);
}

static const char *compare_dir_name(CompareDir d)
{
    static const char *const names[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    return (unsigned)d < 6 ? names[d] : "EQ";
}

/* ================================================================ per opcode */

static void put_dot_conv(StrBuf *b, const HloInst *inst, const HloAttrs *a)
{
    if (inst->op == HLO_DOT || inst->op == HLO_RAGGED_DOT) {
        put_list_if(b, "lhs_batch_dims", a->lhs_batch);
        put_list_if(b, "lhs_contracting_dims", a->lhs_contracting);
        put_list_if(b, "rhs_batch_dims", a->rhs_batch);
        put_list_if(b, "rhs_contracting_dims", a->rhs_contracting);
        put_list_if(b, "lhs_ragged_dims", a->lhs_ragged);
        put_list_if(b, "rhs_group_dims", a->rhs_group);
        return;
    }
    put_window(b, a->window);
    if (a->dim_labels)
        sb_printf(b, ", dim_labels=%s", a->dim_labels);
    else if (a->conv)
        put_conv_labels(b, a->conv);
    if (a->feature_group_count > 1)
        sb_printf(b, ", feature_group_count=%" PRId64, a->feature_group_count);
    if (a->batch_group_count > 1)
        sb_printf(b, ", batch_group_count=%" PRId64, a->batch_group_count);
}

static void put_gather_scatter(StrBuf *b, const HloModule *m, const HloInst *inst, const HloAttrs *a)
{
    if (inst->op == HLO_GATHER) {
        put_list(b, "offset_dims", a->offset_dims);
        put_list(b, "collapsed_slice_dims", a->collapsed_slice_dims);
        put_list(b, "start_index_map", a->start_index_map);
        put_list_if(b, "operand_batching_dims", a->operand_batching_dims);
        put_list_if(b, "start_indices_batching_dims", a->start_indices_batching_dims);
        sb_printf(b, ", index_vector_dim=%" PRId64, a->index_vector_dim);
        put_list(b, "slice_sizes", a->slice_sizes);
        if (a->indices_are_sorted)
            sb_puts(b, ", indices_are_sorted=true");
        return;
    }
    put_list(b, "update_window_dims", a->update_window_dims);
    put_list(b, "inserted_window_dims", a->inserted_window_dims);
    put_list(b, "scatter_dims_to_operand_dims", a->scatter_dims_to_operand_dims);
    put_list_if(b, "input_batching_dims", a->input_batching_dims);
    put_list_if(b, "scatter_indices_batching_dims", a->scatter_indices_batching_dims);
    sb_printf(b, ", index_vector_dim=%" PRId64, a->index_vector_dim);
    if (a->indices_are_sorted)
        sb_puts(b, ", indices_are_sorted=true");
    if (a->unique_indices)
        sb_puts(b, ", unique_indices=true");
    put_comp(b, m, "to_apply", a->to_apply);
}

static void put_collective(StrBuf *b, const HloModule *m, const HloInst *inst, const HloAttrs *a, PrintMemo *memo)
{
    switch (inst->op) {
    case HLO_ALL_REDUCE:
        put_collective_head(b, m, a, memo);
        if (a->use_global_device_ids)
            sb_puts(b, ", use_global_device_ids=true");
        put_comp(b, m, "to_apply", a->to_apply);
        break;
    case HLO_ALL_GATHER:
        put_collective_head(b, m, a, memo);
        put_list(b, "dimensions", a->dimensions);
        if (a->use_global_device_ids)
            sb_puts(b, ", use_global_device_ids=true");
        break;
    case HLO_REDUCE_SCATTER:
        put_collective_head(b, m, a, memo);
        if (a->use_global_device_ids)
            sb_puts(b, ", use_global_device_ids=true");
        put_list(b, "dimensions", a->dimensions);
        put_comp(b, m, "to_apply", a->to_apply);
        break;
    case HLO_ALL_TO_ALL:
        put_collective_head(b, m, a, memo);
        put_list_if(b, "dimensions", a->dimensions);
        break;
    case HLO_COLLECTIVE_PERMUTE:
        if (a->channel_id) {
            sb_puts(b, ", channel_id=");
            sb_int(b, a->channel_id);
        }
        sb_puts(b, ", source_target_pairs={");
        for (int32_t k = 0; k < a->n_pairs; k++)
            sb_printf(b, "%s{%" PRId64 ",%" PRId64 "}", k ? "," : "", a->pairs[2 * k], a->pairs[2 * k + 1]);
        sb_putc(b, '}');
        break;
    default:
        break;
    }
}

static void put_calls(StrBuf *b, const HloModule *m, const HloInst *inst, const HloAttrs *a)
{
    switch (inst->op) {
    case HLO_WHILE:
        put_comp(b, m, "condition", a->condition);
        put_comp(b, m, "body", a->body);
        break;
    case HLO_CONDITIONAL:
        if (a->branches_by_pred && a->branches.n == 2) {
            put_comp(b, m, "true_computation", (int32_t)a->branches.v[0]);
            put_comp(b, m, "false_computation", (int32_t)a->branches.v[1]);
        } else {
            put_comp_list(b, m, "branch_computations", &a->branches);
        }
        break;
    case HLO_CALL:
        put_comp(b, m, "to_apply", a->to_apply);
        break;
    case HLO_CUSTOM_CALL:
        if (a->custom_call_target) {
            sb_puts(b, ", custom_call_target=\"");
            for (const char *p = a->custom_call_target; *p; p++) {
                if (*p == '"' || *p == '\\')
                    sb_putc(b, '\\');
                sb_putc(b, *p);
            }
            sb_putc(b, '"');
        }
        if (a->called.n > 0) put_comp_list(b, m, "called_computations", &a->called);
        break;
    default:
        break;
    }
}

/* The typed attributes of one instruction, XLA's spelling and order (memo:
 * see PrintMemo; NULL: none). */
static void put_attrs(StrBuf *b, const HloModule *m, const HloInst *inst, const HloAttrs *a, PrintMemo *memo)
{
    switch (inst->op) {
    case HLO_IOTA:
        sb_printf(b, ", iota_dimension=%" PRId64, a->iota_dimension);
        break;
    case HLO_REDUCE_PRECISION:
        sb_printf(b, ", exponent_bits=%" PRId64 ", mantissa_bits=%" PRId64, a->exponent_bits, a->mantissa_bits);
        break;
    case HLO_GET_TUPLE_ELEMENT:
        sb_puts(b, ", index=");
        sb_int(b, a->index);
        break;
    case HLO_BROADCAST:
    case HLO_TRANSPOSE:
    case HLO_REVERSE:
    case HLO_CONCATENATE:
        put_list(b, "dimensions", a->dimensions);
        break;
    case HLO_REDUCE:
    case HLO_MAP:
        put_list(b, "dimensions", a->dimensions);
        put_comp(b, m, "to_apply", a->to_apply);
        break;
    case HLO_SORT:
        put_list(b, "dimensions", a->dimensions);
        if (a->is_stable)
            sb_puts(b, ", is_stable=true");
        put_comp(b, m, "to_apply", a->to_apply);
        break;
    case HLO_TOPK:
        sb_printf(b, ", k=%" PRId64 ", largest=%s", a->k, a->largest ? "true" : "false");
        break;
    case HLO_SLICE:
        put_slice(b, a);
        break;
    case HLO_DYNAMIC_SLICE:
        put_list(b, "dynamic_slice_sizes", a->dynamic_slice_sizes);
        break;
    case HLO_PAD:
        put_padding(b, a);
        break;
    case HLO_DOT:
    case HLO_RAGGED_DOT:
    case HLO_CONVOLUTION:
        put_dot_conv(b, inst, a);
        break;
    case HLO_REDUCE_WINDOW:
        put_window(b, a->window);
        put_comp(b, m, "to_apply", a->to_apply);
        break;
    case HLO_SELECT_AND_SCATTER:
        put_window(b, a->window);
        put_comp(b, m, "select", a->select);
        put_comp(b, m, "scatter", a->to_apply);
        break;
    case HLO_COMPARE:
        sb_printf(b, ", direction=%s", compare_dir_name(a->direction));
        if (a->compare_type)
            sb_printf(b, ", type=%s", a->compare_type);
        break;
    case HLO_GATHER:
    case HLO_SCATTER:
        put_gather_scatter(b, m, inst, a);
        break;
    case HLO_RNG:
        if (a->rng_distribution)
            sb_printf(b, ", distribution=%s", a->rng_distribution);
        break;
    case HLO_ALL_REDUCE:
    case HLO_ALL_GATHER:
    case HLO_REDUCE_SCATTER:
    case HLO_ALL_TO_ALL:
    case HLO_COLLECTIVE_PERMUTE:
        put_collective(b, m, inst, a, memo);
        break;
    case HLO_SEND:
    case HLO_SEND_DONE:
    case HLO_RECV:
    case HLO_RECV_DONE:
        if (a->channel_id) {
            sb_puts(b, ", channel_id=");
            sb_int(b, a->channel_id);
        }
        break;
    case HLO_WHILE:
    case HLO_CONDITIONAL:
    case HLO_CALL:
    case HLO_CUSTOM_CALL:
        put_calls(b, m, inst, a);
        break;
    default:
        break;
    }
}

/* Verbatim attributes that only annotate the program (dropped unless
 * print_raw_attrs); the backend_config of a custom-call to a callee is the
 * callee's configuration (a LAPACK call's uplo), never dropped (that of
 * the partitioner's own Sharding and SPMD* targets is a hint). */
static bool is_annotation(const HloInst *inst, const HloAttrs *a, const char *name)
{
    const char *t = a->custom_call_target;
    if (inst->op == HLO_CUSTOM_CALL && strcmp(name, "backend_config") == 0 && t && strcmp(t, "Sharding") != 0 &&
        strncmp(t, "SPMD", 4) != 0)
        return false;
    static const char *const names[] = {"metadata",    "frontend_attributes", "backend_config",
                                        "statistics",  "origin",              "control-predecessors",
                                        "parameter_replication"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

/* ================================================================ instructions */

static void put_operands(StrBuf *b, const HloModule *m, int32_t c, const HloInst *inst, const HloAttrs *a)
{
    const HloComputation *comp = &m->comps[c];
    sb_putc(b, '(');
    if (inst->op == HLO_PARAMETER) {
        sb_int(b, inst->param_number);
    } else if (inst->op == HLO_CONSTANT) {
        put_literal(b, inst->shape, a->literal);
    } else {
        for (int32_t k = 0; k < inst->n_operands; k++) {
            int32_t o = inst->operands[k];
            const char *name = o >= 0 && o < comp->n_insts ? comp->insts[o].name : "?";
            sb_puts(b, k ? ", %" : "%");
            sb_puts(b, name);
        }
    }
    sb_putc(b, ')');
}

/* shape_print through memo (NULL: none); arrays without a layout tail only. */
static void put_shape_memo(StrBuf *b, const Shape *s, bool with_layout, PrintMemo *memo)
{
    if (!memo || s->type == ET_TUPLE || s->layout_tail || s->rank < 0 || s->rank > SPMDC_MAX_RANK) {
        shape_print(b, s, with_layout);
        return;
    }
    ShapeKey k;
    memset(&k, 0, offsetof(ShapeKey, dims));
    k.type = (int32_t)s->type;
    k.rank = s->rank;
    k.layout = with_layout && s->has_layout && s->rank > 0;
    memcpy(k.dims, s->dims, sizeof(int64_t) * (size_t)s->rank);
    if (k.layout) memcpy(k.minor_to_major, s->minor_to_major, (size_t)s->rank);
    size_t n = offsetof(ShapeKey, dims) + sizeof(int64_t) * (size_t)s->rank;
    const StrBuf *t = text_memo_find(&memo->shapes, &k, n);
    if (!t) {
        StrBuf *w = text_memo_put(&memo->shapes, &k, n);
        shape_print(w, s, with_layout);
        t = w;
    }
    sb_putn(b, t->data, t->len);
}

static void print_memo_free(PrintMemo *memo)
{
    text_memo_free(&memo->shapes);
    for (int k = 0; k < ATTRS_MEMO_SLOTS; k++) sb_free(&memo->slot[k].text);
    free(memo->group_ids);
    sb_free(&memo->groups_text);
}

/* put_attrs through memo (NULL: none); only shared sets are kept. */
static void put_attrs_memo(StrBuf *b, const HloModule *m, const HloInst *inst, const HloAttrs *a, PrintMemo *memo)
{
    if (!memo || !inst->attrs_shared) {
        put_attrs(b, m, inst, a, memo);
        return;
    }
    uintptr_t h = ((uintptr_t)a >> 4) * 31u + (uintptr_t)inst->op;
    size_t k = (size_t)((h ^ (h >> 7)) % ATTRS_MEMO_SLOTS);
    if (memo->slot[k].a != a || memo->slot[k].op != inst->op) {
        sb_clear(&memo->slot[k].text);
        put_attrs(&memo->slot[k].text, m, inst, a, memo);
        memo->slot[k].a = a;
        memo->slot[k].op = inst->op;
    }
    sb_putn(b, memo->slot[k].text.data, memo->slot[k].text.len);
}

static void print_inst(StrBuf *b, const HloModule *m, int32_t c, int32_t i, const HloPrintOptions *opt, bool quote,
                       PrintMemo *memo)
{
    const HloInst *inst = &m->comps[c].insts[i];
    const HloAttrs *a = hlo_attrs(inst);
    sb_putc(b, '%');
    sb_puts(b, inst->name);
    sb_puts(b, " = ");
    /* a custom-call's result layout is the layout its callee writes (a LAPACK
     * call's column-major {1,2,0}): always printed */
    put_shape_memo(b, inst->shape, opt->print_layouts || inst->op == HLO_CUSTOM_CALL, memo);
    sb_putc(b, ' ');
    sb_puts(b, hlo_opcode_name(inst->op));
    put_operands(b, m, c, inst, a);
    put_attrs_memo(b, m, inst, a, memo);
    if (opt->print_shardings) {
        if (inst->sharding && m->has_mesh) {
            sb_puts(b, ", sharding=");
            if (quote)
                sharding_print_quoted(b, inst->sharding, &m->mesh);
            else
                sharding_print(b, inst->sharding, &m->mesh);
        } else if (inst->sharding_src) {
            sb_puts(b, ", sharding=");
            sharding_syntax_print(b, inst->sharding_src);
        }
    }
    for (int32_t k = 0; k < a->n_raw; k++)
        if (opt->print_raw_attrs || !is_annotation(inst, a, a->raw[k].name))
            sb_printf(b, ", %s=%s", a->raw[k].name, a->raw[k].text);
}

/* ================================================================ module */

void hlo_print_inst(StrBuf *b, const HloModule *m, int32_t c, int32_t i, const HloPrintOptions *opt)
{
    print_inst(b, m, c, i, opt, false, NULL);
}

static void print_module(StrBuf *b, const HloModule *m, const HloPrintOptions *opt, bool quote)
{
    sb_printf(b, "HloModule %s", m->name);
    if (opt->print_raw_attrs)
        for (int32_t k = 0; k < m->n_raw; k++)
            sb_printf(b, ", %s=%s", m->raw[k].name, m->raw[k].text);
    if (m->replica_count > 0)
        sb_printf(b, ", replica_count=%" PRId64, m->replica_count);
    if (m->num_partitions > 0)
        sb_printf(b, ", num_partitions=%" PRId64, m->num_partitions);
    sb_putc(b, '\n');
    PrintMemo memo;
    memset(&memo, 0, sizeof memo);
    for (int32_t c = 0; c < m->n_comps; c++) {
        const HloComputation *comp = &m->comps[c];
        sb_printf(b, "\n%s%%%s", comp->is_entry ? "ENTRY " : "", comp->name);
        if (comp->execution_thread)
            sb_printf(b, ", execution_thread=\"%s\"", comp->execution_thread);
        sb_puts(b, " {\n");
        for (int32_t i = 0; i < comp->n_insts; i++) {
            /* The operands' records and names are far behind in a large
             * computation (a backward pass's reads of its forward values),
             * and the names and attribute sets lie elsewhere in the arena:
             * ask for the records 16 instructions ahead, the strings and
             * attributes 8 ahead (in the loop itself: GCC drops calls to a
             * function that only prefetches) */
            if (i + 16 < comp->n_insts) {
                const HloInst *x = &comp->insts[i + 16];
                for (int32_t k = 0; k < x->n_operands && k < 4; k++)
                    if (x->operands[k] >= 0 && x->operands[k] < comp->n_insts)
                        __builtin_prefetch(&comp->insts[x->operands[k]].name);
            }
            if (i + 8 < comp->n_insts) {
                const HloInst *x = &comp->insts[i + 8];
                __builtin_prefetch(x->name);
                if (x->attrs) __builtin_prefetch(x->attrs);
                for (int32_t k = 0; k < x->n_operands && k < 4; k++)
                    if (x->operands[k] >= 0 && x->operands[k] < comp->n_insts)
                        __builtin_prefetch(comp->insts[x->operands[k]].name);
            }
            sb_puts(b, i == comp->root ? "  ROOT " : "  ");
            print_inst(b, m, c, i, opt, quote, &memo);
            sb_putc(b, '\n');
            sb_flush_point(b);
        }
        sb_puts(b, "}\n");
    }
    print_memo_free(&memo);
}

void hlo_print_module(StrBuf *b, const HloModule *m, const HloPrintOptions *opt) { print_module(b, m, opt, false); }

void hlo_print_module_quoted(StrBuf *b, const HloModule *m, const HloPrintOptions *opt)
{
    print_module(b, m, opt, true);
}
