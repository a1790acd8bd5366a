/* sweep.c - `spmdc sweep IN.hlo --mesh 'data=1,2 model=1,2,4,8'` (sweep.h,
 * docs/ci.md).
 *
 * The input is parsed and checked once (an error there is the input's, not
 * a mesh's: exit 1); then every mesh of the product is compiled on its own
 * with diagnostics kept in memory, so a mesh that fails becomes a row with
 * status error and its first message.  Rows are compared with their
 * reference row (sweep.h) and printed as a table, CSV or JSON
 * (schema spmdc.sweep/v1); all three are deterministic.
 */
#include "spmdc/sweep.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/driver.h"
#include "spmdc/memory.h"
#include "spmdc/parse.h"
#include "spmdc/plan.h"
#include "spmdc/texttable.h"
#include "spmdc/verify.h"

__extension__ typedef __int128 Int128;

/* ---------------------------------------------------------------- the spec */

bool sweep_parse_spec(SweepSpec *spec, const char *text, char *err, size_t errlen)
{
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        const char *w = p;
        while (*p && *p != ' ' && *p != '\t') p++;
        size_t wl = (size_t)(p - w);
        const char *eq = memchr(w, '=', wl);
        if (!eq || eq == w || eq == w + wl - 1) {
            snprintf(err, errlen, "'%.*s' is not an axis and its sizes (e.g. model=1,2,4,8)", (int)wl, w);
            return false;
        }
        size_t nl = (size_t)(eq - w);
        if (nl >= sizeof spec->names[0]) {
            snprintf(err, errlen, "axis name '%.*s' is too long (at most 31 characters)", (int)nl, w);
            return false;
        }
        for (int32_t a = 0; a < spec->n_axes; a++)
            if (strlen(spec->names[a]) == nl && strncmp(spec->names[a], w, nl) == 0) {
                snprintf(err, errlen, "axis '%.*s' is given twice", (int)nl, w);
                return false;
            }
        if (spec->n_axes == SPMDC_MAX_MESH_AXES) {
            snprintf(err, errlen, "at most %d axes", SPMDC_MAX_MESH_AXES);
            return false;
        }
        int32_t a = spec->n_axes;
        memcpy(spec->names[a], w, nl);
        spec->names[a][nl] = 0;
        spec->n_sizes[a] = 0;
        const char *q = eq + 1;
        while (q < p) {
            const char *e = q;
            int64_t v = 0;
            while (e < p && *e >= '0' && *e <= '9' && v <= SPMDC_MAX_DEVICES) v = v * 10 + (*e++ - '0');
            if (e == q || (e < p && *e != ',') || v < 1 || v > SPMDC_MAX_DEVICES) {
                snprintf(err, errlen, "axis '%s': '%.*s' is not a list of sizes from 1 to %d (e.g. 1,2,4,8)",
                         spec->names[a], (int)(p - eq - 1), eq + 1, SPMDC_MAX_DEVICES);
                return false;
            }
            if (spec->n_sizes[a] == 16) {
                snprintf(err, errlen, "axis '%s': at most 16 sizes", spec->names[a]);
                return false;
            }
            for (int32_t k = 0; k < spec->n_sizes[a]; k++)
                if (spec->sizes[a][k] == v) { /* the same mesh twice, compared with itself */
                    snprintf(err, errlen, "axis '%s': size %lld is given twice", spec->names[a], (long long)v);
                    return false;
                }
            spec->sizes[a][spec->n_sizes[a]++] = v;
            q = e < p ? e + 1 : e;
            if (e < p && q == p) {
                snprintf(err, errlen, "axis '%s': the list ends with ','", spec->names[a]);
                return false;
            }
        }
        spec->n_axes++;
    }
    return true;
}

int64_t sweep_n_rows(const SweepSpec *spec)
{
    int64_t n = spec->n_axes ? 1 : 0;
    for (int32_t a = 0; a < spec->n_axes; a++) n *= spec->n_sizes[a];
    return n;
}

/* ---------------------------------------------------------------- one row */

/* The first error line of what diag collected (warnings and notes before
 * it are skipped; none: the first line), without its trailing newline. */
static void first_error(DiagEngine *d, char *out, size_t n)
{
    const char *t = diag_text(d), *pick = NULL;
    for (const char *l = t; *l && !pick;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        const char *hit = strstr(l, "error: ");
        if (hit && hit < l + len && (hit == l || hit[-1] == ' ')) pick = l;
        l += len + (e != NULL);
    }
    if (!pick) pick = t;
    const char *e = strchr(pick, '\n');
    size_t len = e ? (size_t)(e - pick) : strlen(pick);
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), pick);
}

static void fill_remedy(SweepRow *row, const HloModule *in)
{
    PaddingEstimate pe = memory_padding(in);
    if (pe.first_inst < 0 || pe.first_dim < 0) return;
    const HloInst *x = &in->comps[pe.first_comp].insts[pe.first_inst];
    const Shape *s = x->shape;
    if (shape_is_tuple(s)) {
        int32_t k = 0;
        const Shape *leaf = NULL;
        /* the leaf in flat order (one level deep covers every printed tuple leaf) */
        for (int32_t e = 0; e < s->n_elems && !leaf; e++) {
            if (!shape_is_tuple(&s->elems[e])) {
                if (k++ == pe.first_leaf) leaf = &s->elems[e];
            } else {
                for (int32_t f = 0; f < s->elems[e].n_elems && !leaf; f++)
                    if (k++ == pe.first_leaf) leaf = &s->elems[e].elems[f];
            }
        }
        if (!leaf) return;
        s = leaf;
    }
    Tiling t;
    if (!sharding_to_tiling(sharding_leaf(x->sharding, pe.first_leaf), s->rank, &t)) return;
    SweepRemedy *r = &row->remedy;
    r->any = true;
    snprintf(r->instruction, sizeof r->instruction, "%s", x->name);
    r->line = x->span.begin.line;
    r->dim = pe.first_dim;
    r->size = s->dims[pe.first_dim];
    r->shards = tiling_dim_tiles(&t, &in->mesh, pe.first_dim);
    r->pad_to = tiling_shard_size(r->size, r->shards) * r->shards;
    StrBuf b = {0};
    mesh_atoms_name(&b, &in->mesh, tiling_dim(&t, pe.first_dim), tiling_dim_n(&t, pe.first_dim));
    snprintf(r->axes, sizeof r->axes, "%s", sb_cstr(&b));
    sb_clear(&b);
    uint32_t used = 0;
    for (int32_t k = 0; k < tiling_dim_n(&t, pe.first_dim); k++)
        used |= 1u << in->mesh.atom_axis[tiling_dim(&t, pe.first_dim)[k]];
    for (int32_t a = 0; a < in->mesh.n_axes; a++) {
        int64_t sz = in->mesh.axes[a].size;
        if ((used >> a) & 1u || sz < 2 || r->size % sz != 0) continue;
        sb_printf(&b, "%s%s (%lld)", b.len ? ", " : "", in->mesh.axes[a].name, (long long)sz);
    }
    snprintf(r->alternatives, sizeof r->alternatives, "%s", sb_cstr(&b));
    sb_free(&b);
}

static void run_row(SweepRow *row, const char *text, size_t len, const char *path)
{
    DiagEngine *d = diag_create(NULL);
    diag_set_show_source(d, false);
    uint32_t fid = diag_add_file(d, path, text, len);
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.mesh = row->mesh;
    opt.has_mesh = true;
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, d, &opt};
    Plan plan;
    row->ok = plan_compile(text, len, fid, &cx, &plan);
    if (plan.in) fill_remedy(row, plan.in);
    if (row->ok) {
        const CommReport *r = &plan.rep;
        for (int32_t i = 0; i < r->n_records; i++) {
            int k = (int)r->records[i].kind;
            if (k < 0 || k >= SWEEP_N_KINDS) continue;
            row->count[k]++;
            row->bytes[k] = bytes_add_sat(row->bytes[k], r->records[i].bytes_per_device);
        }
        row->total_count = r->n_records;
        row->total_bytes = report_total_bytes(r);
        row->peak_bytes = r->peak_bytes_per_device;
        row->parameter_bytes = r->parameter_bytes_per_device;
        row->padding_bytes = r->padding_bytes_per_device;
        row->value_bytes = r->value_bytes_per_device;
        row->n_warnings = r->n_warnings;
    } else {
        first_error(d, row->error, sizeof row->error);
    }
    plan_free(&plan);
    arena_destroy(scratch);
    diag_destroy(d);
}

int32_t sweep_reference_row(const SweepSpec *spec, const SweepRow *rows, int32_t r)
{
    for (int32_t a = spec->n_axes - 1; a >= 0; a--) {
        if (rows[r].idx[a] == 0) continue;
        int64_t stride = 1;
        for (int32_t b = a + 1; b < spec->n_axes; b++) stride *= spec->n_sizes[b];
        return (int32_t)(r - stride);
    }
    return -1;
}

void sweep_compare(SweepRow *rows, int32_t r)
{
    SweepRow *row = &rows[r];
    if (row->ref < 0 || !row->ok || !rows[row->ref].ok) return;
    const SweepRow *ref = &rows[row->ref];
    for (int k = 0; k < SWEEP_N_KINDS; k++) {
        if (row->count[k] && !ref->count[k]) row->appeared |= 1u << k;
        if (!row->count[k] && ref->count[k]) row->disappeared |= 1u << k;
    }
    /* bytes/ref_bytes > devices/ref_devices */
    if (ref->total_bytes > 0)
        row->bytes_faster = (Int128)row->total_bytes * ref->mesh.n_devices >
                            (Int128)ref->total_bytes * row->mesh.n_devices;
}

/* ---------------------------------------------------------------- output */

static void put_mesh(StrBuf *b, const Mesh *m) { mesh_print(b, m); }

static void put_collectives(StrBuf *b, const SweepRow *row)
{
    if (!row->total_count) {
        sb_puts(b, "none");
        return;
    }
    bool first = true;
    for (int k = 0; k < SWEEP_N_KINDS; k++)
        if (row->count[k]) {
            sb_printf(b, "%s%lld %s", first ? "" : ", ", (long long)row->count[k],
                      collective_kind_name((CollectiveKind)k));
            first = false;
        }
}

/* "+all-gather, -all-reduce, bytes ×3.00 > devices ×2.00" */
static void put_marks(StrBuf *b, const SweepRow *rows, const SweepRow *row)
{
    for (int k = 0; k < SWEEP_N_KINDS; k++) {
        if ((row->appeared >> k) & 1u) sb_printf(b, "%s+%s", b->len ? ", " : "", collective_kind_name((CollectiveKind)k));
        if ((row->disappeared >> k) & 1u)
            sb_printf(b, "%s-%s", b->len ? ", " : "", collective_kind_name((CollectiveKind)k));
    }
    if (row->bytes_faster) {
        const SweepRow *ref = &rows[row->ref];
        sb_printf(b, "%sbytes \xC3\x97%.2f > devices \xC3\x97%.2f", b->len ? ", " : "",
                  (double)row->total_bytes / (double)ref->total_bytes,
                  (double)row->mesh.n_devices / (double)ref->mesh.n_devices);
    }
}

/* "dim 0 of x (size 1000, line 12) does not divide into 8 shards over model:
 * pad it to 1,008, or split it over data (2)" */
static void put_remedy(StrBuf *b, const SweepRemedy *r)
{
    sb_printf(b, "dim %d of %s (size ", (int)r->dim, r->instruction);
    text_put_grouped(b, r->size);
    if (r->line) sb_printf(b, ", line %u", (unsigned)r->line);
    sb_printf(b, ") does not divide into %lld shards over %s: pad it to ", (long long)r->shards, r->axes);
    text_put_grouped(b, r->pad_to);
    if (r->alternatives[0]) sb_printf(b, ", or split it over %s", r->alternatives);
}

static void print_text(StrBuf *out, const char *path, const SweepSpec *spec, const SweepRow *rows, int32_t n)
{
    sb_printf(out, "sweep of %s over ", path);
    for (int32_t a = 0; a < spec->n_axes; a++) {
        sb_printf(out, "%s%s=", a ? " " : "", spec->names[a]);
        sb_int_list(out, spec->sizes[a], spec->n_sizes[a], "", ",", "");
    }
    sb_printf(out, " (%d mesh%s)\n\n", (int)n, n == 1 ? "" : "es");
    TextTable t = {8, 0, 0, "lrllllll", NULL};
    static const char *const head[] = {"mesh", "devices", "collectives", "bytes per device", "peak memory per device",
                                       "padding", "status", "changes"};
    for (int k = 0; k < 8; k++) text_table_puts(&t, head[k]);
    size_t bw = 0, pw = 0;
    for (int32_t r = 0; r < n; r++) {
        if (rows[r].ok && text_bytes_width(rows[r].total_bytes) > bw) bw = text_bytes_width(rows[r].total_bytes);
        if (rows[r].ok && text_bytes_width(rows[r].peak_bytes) > pw) pw = text_bytes_width(rows[r].peak_bytes);
    }
    StrBuf c = {0};
    for (int32_t r = 0; r < n; r++) {
        const SweepRow *row = &rows[r];
        put_mesh(&c, &row->mesh);
        text_table_put(&t, &c);
        sb_printf(&c, "%lld", (long long)row->mesh.n_devices);
        text_table_put(&t, &c);
        if (row->ok) {
            put_collectives(&c, row);
            text_table_put(&t, &c);
            text_put_bytes(&c, row->total_bytes, bw);
            text_table_put(&t, &c);
            text_put_bytes(&c, row->peak_bytes, pw);
            text_table_put(&t, &c);
            text_put_grouped(&c, row->padding_bytes);
            sb_puts(&c, " B");
            if (row->padding_bytes && row->value_bytes)
                sb_printf(&c, " (%.1f%%)", 100.0 * (double)row->padding_bytes / (double)row->value_bytes);
            text_table_put(&t, &c);
            text_table_puts(&t, row->n_warnings ? "warnings" : "ok");
        } else {
            for (int k = 0; k < 4; k++) text_table_puts(&t, "-");
            text_table_puts(&t, "error");
        }
        put_marks(&c, rows, row);
        if (c.len) {
            sb_puts(&c, " vs ");
            put_mesh(&c, &rows[row->ref].mesh);
        } else {
            sb_putc(&c, '-');
        }
        text_table_put(&t, &c);
    }
    text_table_print(out, &t);
    text_table_free(&t);
    bool notes = false;
    for (int32_t r = 0; r < n; r++) {
        const SweepRow *row = &rows[r];
        if (row->ok && !row->remedy.any && !row->n_warnings) continue;
        if (!notes) sb_puts(out, "\nnotes:\n");
        notes = true;
        sb_puts(out, "  ");
        put_mesh(out, &row->mesh);
        sb_puts(out, ": ");
        if (!row->ok) sb_printf(out, "%s", row->error);
        else if (row->n_warnings) sb_printf(out, "%d warning%s (spmdc compile shows them)", row->n_warnings,
                                           row->n_warnings == 1 ? "" : "s");
        if (row->remedy.any) {
            sb_puts(out, !row->ok || row->n_warnings ? "\n    remedy: " : "remedy: ");
            put_remedy(out, &row->remedy);
        }
        sb_putc(out, '\n');
    }
    sb_free(&c);
}

/* RFC 4180: a field with a comma, quote or newline is quoted, quotes doubled. */
static void csv_field(StrBuf *b, const char *s, bool last)
{
    if (strpbrk(s, ",\"\n\r")) {
        sb_putc(b, '"');
        for (const char *p = s; *p; p++) {
            if (*p == '"') sb_putc(b, '"');
            sb_putc(b, *p);
        }
        sb_putc(b, '"');
    } else {
        sb_puts(b, s);
    }
    sb_putc(b, last ? '\n' : ',');
}

static void csv_int(StrBuf *b, int64_t v) { sb_printf(b, "%lld,", (long long)v); }

static void print_csv(StrBuf *out, const SweepRow *rows, int32_t n)
{
    sb_puts(out, "mesh,devices,status,collectives");
    for (int k = 0; k < SWEEP_N_KINDS; k++)
        sb_printf(out, ",%s.count,%s.bytes_per_device", collective_kind_name((CollectiveKind)k),
                  collective_kind_name((CollectiveKind)k));
    sb_puts(out, ",bytes_per_device,peak_bytes_per_device,parameter_bytes_per_device,padding_bytes_per_device,"
                 "value_bytes_per_device,warnings,compared_to,changes,remedy,error\n");
    StrBuf c = {0};
    for (int32_t r = 0; r < n; r++) {
        const SweepRow *row = &rows[r];
        put_mesh(&c, &row->mesh);
        csv_field(out, sb_cstr(&c), false);
        sb_clear(&c);
        csv_int(out, row->mesh.n_devices);
        sb_puts(out, row->ok ? "ok," : "error,");
        if (row->ok) {
            csv_int(out, row->total_count);
            for (int k = 0; k < SWEEP_N_KINDS; k++) {
                csv_int(out, row->count[k]);
                csv_int(out, row->bytes[k]);
            }
            csv_int(out, row->total_bytes);
            csv_int(out, row->peak_bytes);
            csv_int(out, row->parameter_bytes);
            csv_int(out, row->padding_bytes);
            csv_int(out, row->value_bytes);
            csv_int(out, row->n_warnings);
        } else {
            for (int k = 0; k < 2 * SWEEP_N_KINDS + 7; k++) sb_putc(out, ',');
        }
        if (row->ref >= 0) put_mesh(&c, &rows[row->ref].mesh);
        csv_field(out, sb_cstr(&c), false);
        sb_clear(&c);
        put_marks(&c, rows, row);
        csv_field(out, sb_cstr(&c), false);
        sb_clear(&c);
        if (row->remedy.any) put_remedy(&c, &row->remedy);
        csv_field(out, sb_cstr(&c), false);
        sb_clear(&c);
        csv_field(out, row->error, true);
    }
    sb_free(&c);
}

/* A JSON string; bytes that are not UTF-8 become '?'. */
static json_t *jstr(const char *s)
{
    json_t *j = json_string(s);
    if (j) return j;
    size_t n = strlen(s) + 1;
    char *c = xmalloc(n);
    memcpy(c, s, n);
    for (char *p = c; *p; p++)
        if ((unsigned char)*p >= 0x80) *p = '?';
    j = json_string(c);
    free(c);
    return j ? j : json_null();
}

static json_t *jint(int64_t v) { return json_integer((json_int_t)v); }

static json_t *jmesh_text(const Mesh *m)
{
    StrBuf b = {0};
    put_mesh(&b, m);
    json_t *j = jstr(sb_cstr(&b));
    sb_free(&b);
    return j;
}

static json_t *jrow(const SweepRow *rows, const SweepRow *row)
{
    json_t *o = json_object();
    json_object_set_new(o, "mesh", jmesh_text(&row->mesh));
    json_t *axes = json_object();
    for (int32_t a = 0; a < row->mesh.n_axes; a++) json_object_set_new(axes, row->mesh.axes[a].name, jint(row->mesh.axes[a].size));
    json_object_set_new(o, "axes", axes);
    json_object_set_new(o, "devices", jint(row->mesh.n_devices));
    json_object_set_new(o, "status", json_string(row->ok ? "ok" : "error"));
    json_object_set_new(o, "error", row->ok ? json_null() : jstr(row->error));
    if (row->ok) {
        json_t *by = json_object();
        for (int k = 0; k < SWEEP_N_KINDS; k++) {
            if (!row->count[k]) continue;
            json_t *e = json_object();
            json_object_set_new(e, "count", jint(row->count[k]));
            json_object_set_new(e, "bytes_per_device", jint(row->bytes[k]));
            json_object_set_new(by, collective_kind_name((CollectiveKind)k), e);
        }
        json_object_set_new(o, "collectives", jint(row->total_count));
        json_object_set_new(o, "by_kind", by);
        json_object_set_new(o, "bytes_per_device", jint(row->total_bytes));
        json_object_set_new(o, "peak_bytes_per_device", jint(row->peak_bytes));
        json_object_set_new(o, "parameter_bytes_per_device", jint(row->parameter_bytes));
        json_object_set_new(o, "padding_bytes_per_device", jint(row->padding_bytes));
        json_object_set_new(o, "value_bytes_per_device", jint(row->value_bytes));
        json_object_set_new(o, "warnings", jint(row->n_warnings));
    }
    json_object_set_new(o, "compared_to", row->ref >= 0 ? jmesh_text(&rows[row->ref].mesh) : json_null());
    json_t *app = json_array(), *dis = json_array();
    for (int k = 0; k < SWEEP_N_KINDS; k++) {
        if ((row->appeared >> k) & 1u) json_array_append_new(app, json_string(collective_kind_name((CollectiveKind)k)));
        if ((row->disappeared >> k) & 1u)
            json_array_append_new(dis, json_string(collective_kind_name((CollectiveKind)k)));
    }
    json_object_set_new(o, "appeared", app);
    json_object_set_new(o, "disappeared", dis);
    json_object_set_new(o, "bytes_grow_faster_than_devices", json_boolean(row->bytes_faster));
    if (row->remedy.any) {
        const SweepRemedy *r = &row->remedy;
        json_t *m = json_object();
        StrBuf b = {0};
        put_remedy(&b, r);
        json_object_set_new(m, "instruction", jstr(r->instruction));
        json_object_set_new(m, "line", jint(r->line));
        json_object_set_new(m, "dim", jint(r->dim));
        json_object_set_new(m, "size", jint(r->size));
        json_object_set_new(m, "shards", jint(r->shards));
        json_object_set_new(m, "axes", jstr(r->axes));
        json_object_set_new(m, "pad_to", jint(r->pad_to));
        json_object_set_new(m, "alternatives", jstr(r->alternatives));
        json_object_set_new(m, "text", jstr(sb_cstr(&b)));
        sb_free(&b);
        json_object_set_new(o, "remedy", m);
    } else {
        json_object_set_new(o, "remedy", json_null());
    }
    return o;
}

static void print_json(StrBuf *out, const char *module, const SweepSpec *spec, const SweepRow *rows, int32_t n)
{
    json_t *root = json_object(), *axes = json_array(), *arr = json_array();
    json_object_set_new(root, "schema", json_string("spmdc.sweep/v1"));
    json_object_set_new(root, "module", jstr(module));
    for (int32_t a = 0; a < spec->n_axes; a++) {
        json_t *ax = json_object(), *sz = json_array();
        json_object_set_new(ax, "name", jstr(spec->names[a]));
        for (int32_t k = 0; k < spec->n_sizes[a]; k++) json_array_append_new(sz, jint(spec->sizes[a][k]));
        json_object_set_new(ax, "sizes", sz);
        json_array_append_new(axes, ax);
    }
    json_object_set_new(root, "axes", axes);
    for (int32_t r = 0; r < n; r++) json_array_append_new(arr, jrow(rows, &rows[r]));
    json_object_set_new(root, "rows", arr);
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!s) spmdc_oom();
    sb_puts(out, s);
    sb_putc(out, '\n');
    free(s);
    json_decref(root);
}

/* ---------------------------------------------------------------- command */

static void usage(FILE *f)
{
    fputs("usage: spmdc sweep IN.hlo --mesh 'AXIS=N,N,... [AXIS=N,N,...]' [--format text|csv|json] [-o FILE]\n"
          "Compiles IN at every mesh of the product of the axis sizes, one row per mesh\n"
          "(docs/ci.md).  --mesh may be repeated, one axis each.\n",
          f);
}

enum { OPT_MESH = 256, OPT_FORMAT, OPT_HELP };

int sweep_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"mesh", required_argument, NULL, OPT_MESH},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    SweepSpec spec;
    memset(&spec, 0, sizeof spec);
    const char *format = "text", *out_path = "-";
    int c;
    optind = 1;
    opterr = 0;
    DriverOptionsSeen seen = {{0}, 0};
    static const int repeatable[] = {OPT_MESH, 0}; /* one axis each */
    while ((c = getopt_long(argc, argv, ":o:", longopts, NULL)) != -1) {
        if (driver_option_once(&seen, c, longopts, repeatable)) return 2;
        switch (c) {
        case OPT_MESH: {
            char err[300];
            if (!sweep_parse_spec(&spec, optarg, err, sizeof err)) {
                fprintf(stderr, "spmdc: error: --mesh: %s\n", err);
                return 2;
            }
            break;
        }
        case OPT_FORMAT:
            if (strcmp(optarg, "text") && strcmp(optarg, "csv") && strcmp(optarg, "json")) {
                fprintf(stderr, "spmdc: error: --format takes text, csv or json, not '%s'\n", optarg);
                return 2;
            }
            format = optarg;
            break;
        case 'o': out_path = optarg; break;
        case OPT_HELP: usage(stdout); return 0;
        case ':':
            fprintf(stderr, "spmdc: error: option '%s' needs an argument\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "spmdc: error: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "spmdc: error: sweep takes exactly one input file\n");
        usage(stderr);
        return 2;
    }
    if (spec.n_axes == 0) {
        fprintf(stderr, "spmdc: error: sweep needs --mesh with the sizes of every axis (e.g. --mesh 'model=1,2,4,8')\n");
        return 2;
    }
    int64_t n = sweep_n_rows(&spec);
    if (n > SWEEP_MAX_ROWS) {
        fprintf(stderr, "spmdc: error: --mesh gives %lld meshes; a sweep takes at most %d\n", (long long)n,
                SWEEP_MAX_ROWS);
        return 2;
    }
    const char *in_path = argv[optind];
    const char *outs[1] = {out_path}, *flags[1] = {"-o"};
    if (driver_check_outputs(in_path, outs, flags, 1)) return 2;
    size_t len;
    char *text = driver_read_file(in_path, &len);
    if (!text) return 1;
    const char *shown = strcmp(in_path, "-") ? in_path : "<stdin>";
    /* errors no mesh changes are the input's */
    DiagEngine *diag = diag_create(stderr);
    uint32_t fid = diag_add_file(diag, shown, text, len);
    HloModule *m = parse_hlo(text, len, fid, diag);
    bool ok = m && verify_module(m, diag);
    char module[128];
    snprintf(module, sizeof module, "%s", m && m->name ? m->name : "module");
    hlo_module_free(m);
    if (!ok) {
        fprintf(stderr, "spmdc: %d error%s; no sweep\n", diag_error_count(diag), diag_error_count(diag) == 1 ? "" : "s");
        diag_destroy(diag);
        free(text);
        return 1;
    }
    diag_destroy(diag);
    SweepRow *rows = xcalloc((size_t)n, sizeof(SweepRow));
    int rc = 0;
    for (int32_t r = 0; r < (int32_t)n; r++) {
        SweepRow *row = &rows[r];
        const char *names[SPMDC_MAX_MESH_AXES];
        int64_t sizes[SPMDC_MAX_MESH_AXES];
        int64_t x = r;
        for (int32_t a = spec.n_axes - 1; a >= 0; a--) {
            row->idx[a] = (int32_t)(x % spec.n_sizes[a]);
            x /= spec.n_sizes[a];
            names[a] = spec.names[a];
            sizes[a] = spec.sizes[a][row->idx[a]];
        }
        char err[200];
        if (!mesh_init(&row->mesh, spec.n_axes, names, sizes, err, sizeof err)) {
            fprintf(stderr, "spmdc: error: --mesh: %s\n", err);
            rc = 2;
            break;
        }
        row->mesh.named = true;
        row->ref = sweep_reference_row(&spec, rows, r);
        run_row(row, text, len, shown);
        sweep_compare(rows, r);
    }
    if (rc == 0) {
        StrBuf out = {0};
        if (strcmp(format, "json") == 0) print_json(&out, module, &spec, rows, (int32_t)n);
        else if (strcmp(format, "csv") == 0) print_csv(&out, rows, (int32_t)n);
        else print_text(&out, shown, &spec, rows, (int32_t)n);
        if (!driver_write_file(out_path, sb_cstr(&out), out.len)) rc = 1;
        sb_free(&out);
    }
    free(rows);
    free(text);
    return rc;
}
