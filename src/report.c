/* report.c - the communication report: cost model, text table, JSON.
 *
 * The partitioner appends one CommRecord per collective it emits (program
 * order) with report_add, plus warnings with report_warn; the driver prints
 * the report as a table for people (report_print_text) or as JSON schema
 * spmdc.report/v1 for tools (report_print_json).  Both are byte-identical
 * for the same report.  comm_bytes_per_device is the cost model of
 * docs/report.md, shared with the partitioner's strategy choices.
 *
 * Reasons are words without the cause's name ("contracting dim 1 of lhs
 * sharded on 'model'"); the printers put "dot.7 (line 7): " in front.  A
 * reason that already starts with "<cause_instruction>: " is printed without
 * that prefix, so the name never appears twice.
 */
#include "spmdc/report.h"
#include "spmdc/arena.h"
#include "spmdc/texttable.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ cost model */

const char *collective_kind_name(CollectiveKind k)
{
    switch (k) {
    case COLL_ALL_REDUCE: return "all-reduce";
    case COLL_ALL_GATHER: return "all-gather";
    case COLL_REDUCE_SCATTER: return "reduce-scatter";
    case COLL_ALL_TO_ALL: return "all-to-all";
    case COLL_COLLECTIVE_PERMUTE: return "collective-permute";
    }
    return "?";
}

__extension__ typedef __int128 Int128;

/* floor(k*(n-1)*B/n), k = 2 for all-reduce; B is the result for all-gather,
 * the operand otherwise; collective-permute sends B.  128-bit intermediate,
 * so exact for every int64 B. */
int64_t comm_bytes_per_device(CollectiveKind k, int64_t n, int64_t operand_bytes, int64_t result_bytes)
{
    int64_t b = k == COLL_ALL_GATHER ? result_bytes : operand_bytes;
    if (n <= 1 || b <= 0) return 0;
    if (k == COLL_COLLECTIVE_PERMUTE) return b;
    Int128 f = k == COLL_ALL_REDUCE ? 2 : 1;
    Int128 r = f * (Int128)(n - 1) * (Int128)b / (Int128)n;
    return r > (Int128)INT64_MAX ? INT64_MAX : (int64_t)r;
}

/* ------------------------------------------------------------ the report */

static char *dup_or_null(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}

void report_init(CommReport *r, const char *module, const Mesh *mesh)
{
    memset(r, 0, sizeof *r);
    r->module = dup_or_null(module ? module : "module");
    if (mesh) r->mesh = *mesh;
}

void report_free(CommReport *r)
{
    for (int32_t i = 0; i < r->n_records; i++) {
        free(r->records[i].instruction);
        free(r->records[i].cause_instruction);
        free(r->records[i].reason);
    }
    for (int32_t i = 0; i < r->n_warnings; i++) {
        free(r->warnings[i].kind);
        free(r->warnings[i].instruction);
        free(r->warnings[i].message);
    }
    for (int32_t i = 0; i < r->n_padding; i++) free(r->padding[i].instruction);
    free(r->records);
    free(r->warnings);
    free(r->padding);
    free(r->module);
    free(r->peak_instruction);
    memset(r, 0, sizeof *r);
}

CommRecord *report_add(CommReport *r, CollectiveKind kind, const char *instruction, const char *cause_instruction,
                       uint32_t cause_line, const char *reason)
{
    if (r->n_records == r->cap_records) {
        r->cap_records = r->cap_records ? r->cap_records * 2 : 16;
        r->records = xrealloc(r->records, sizeof(CommRecord) * (size_t)r->cap_records);
    }
    CommRecord *c = &r->records[r->n_records++];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->instruction = dup_or_null(instruction);
    c->cause_instruction = dup_or_null(cause_instruction);
    c->cause_line = cause_line;
    c->reason = dup_or_null(reason);
    c->multiplier = 1;
    c->group_size = 1;
    c->num_groups = 1;
    c->halo_dim = -1;
    return c;
}

void report_pad(CommReport *r, const char *instruction, uint32_t line, int32_t leaf, int64_t elements, int64_t bytes,
                int64_t max_device_bytes)
{
    if (r->n_padding == r->cap_padding) {
        r->cap_padding = r->cap_padding ? r->cap_padding * 2 : 8;
        r->padding = xrealloc(r->padding, sizeof(CommPadding) * (size_t)r->cap_padding);
    }
    CommPadding *c = &r->padding[r->n_padding++];
    c->instruction = dup_or_null(instruction);
    c->line = line;
    c->leaf = leaf;
    c->elements = elements;
    c->bytes = bytes;
    c->max_device_bytes = max_device_bytes;
}

void report_warn(CommReport *r, const char *kind, const char *instruction, uint32_t line, const char *message)
{
    if (r->n_warnings == r->cap_warnings) {
        r->cap_warnings = r->cap_warnings ? r->cap_warnings * 2 : 8;
        r->warnings = xrealloc(r->warnings, sizeof(CommWarning) * (size_t)r->cap_warnings);
    }
    CommWarning *w = &r->warnings[r->n_warnings++];
    w->kind = dup_or_null(kind);
    w->instruction = dup_or_null(instruction);
    w->line = line;
    w->message = dup_or_null(message);
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t s;
    return __builtin_add_overflow(a, b, &s) ? INT64_MAX : s;
}

int64_t report_total_bytes(const CommReport *r)
{
    int64_t t = 0;
    for (int32_t i = 0; i < r->n_records; i++) t = sat_add(t, r->records[i].bytes_per_device);
    return t;
}

#define N_KINDS (COLL_COLLECTIVE_PERMUTE + 1)

typedef struct KindTotals {
    int64_t count[N_KINDS], bytes[N_KINDS];
} KindTotals;

static KindTotals kind_totals(const CommReport *r)
{
    KindTotals t;
    memset(&t, 0, sizeof t);
    for (int32_t i = 0; i < r->n_records; i++) {
        int k = (int)r->records[i].kind;
        if (k < 0 || k >= N_KINDS) continue;
        t.count[k]++;
        t.bytes[k] = sat_add(t.bytes[k], r->records[i].bytes_per_device);
    }
    return t;
}

/* The reason without a leading "<cause>: " (see the file comment). */
static const char *bare_reason(const char *cause, const char *reason)
{
    if (!reason) return NULL;
    size_t n = cause ? strlen(cause) : 0;
    if (n && strncmp(reason, cause, n) == 0 && reason[n] == ':' && reason[n + 1] == ' ') return reason + n + 2;
    return reason;
}

/* Every atom of atoms[0..n) is an atom of the report's mesh. */
static bool atoms_valid(const CommReport *r, const int8_t *atoms, int32_t n)
{
    if (n < 0 || n > SPMDC_MAX_ATOMS) return false;
    for (int32_t i = 0; i < n; i++)
        if (atoms[i] < 0 || atoms[i] >= r->mesh.n_atoms || r->mesh.atom_axis[atoms[i]] < 0 ||
            r->mesh.atom_axis[atoms[i]] >= r->mesh.n_axes)
            return false;
    return true;
}

/* Length of the run of atoms starting at i that belongs to one axis. */
static int32_t atom_run(const Mesh *m, const int8_t *atoms, int32_t n, int32_t i)
{
    int32_t j = i + 1;
    while (j < n && atoms[j] == atoms[j - 1] + 1 && m->atom_axis[atoms[j]] == m->atom_axis[atoms[i]]) j++;
    return j - i;
}

/* ------------------------------------------------------------ text form */

static void put_dims(StrBuf *b, const int64_t *dims, int32_t rank)
{
    if (rank < 0 || rank > SPMDC_MAX_RANK) rank = 0;
    sb_int_list(b, dims, rank, "[", ",", "]");
}

/* "model ×8, 1 group" */
static void put_axes_cell(StrBuf *b, const CommReport *r, const CommRecord *c)
{
    if (c->n_atoms > 0 && atoms_valid(r, c->atoms, c->n_atoms)) {
        mesh_atoms_name(b, &r->mesh, c->atoms, c->n_atoms);
        sb_putc(b, ' ');
    } else if (c->n_atoms > 0) {
        sb_puts(b, "? ");
    }
    sb_printf(b, "\xC3\x97%lld, %lld group%s", (long long)c->group_size, (long long)c->num_groups,
              c->num_groups == 1 ? "" : "s");
}

/* "234,881,024 B (224.0 MiB)", the exact part right-aligned to width w. */
static void put_bytes_cell(StrBuf *b, int64_t v, size_t w) { text_put_bytes(b, v, w); }

/* "dot.7 (line 7): reason" */
static void put_cause(StrBuf *b, const char *inst, uint32_t line, const char *reason)
{
    const char *words = bare_reason(inst, reason);
    if (inst && *inst) {
        sb_puts(b, inst);
        if (line) sb_printf(b, " (line %u)", line);
        if (words && *words) sb_puts(b, ": ");
    } else if (line) {
        sb_printf(b, "line %u", line);
        if (words && *words) sb_puts(b, ": ");
    }
    if (words) sb_puts(b, words);
    if ((!inst || !*inst) && !line && (!words || !*words)) sb_putc(b, '-');
}

static void record_row(TextTable *t, const CommReport *r, int32_t i, size_t bw)
{
    const CommRecord *c = &r->records[i];
    StrBuf cell = {0};
    sb_printf(&cell, "%d", i + 1);
    text_table_put(t, &cell);
    text_table_puts(t, collective_kind_name(c->kind));
    text_table_puts(t, c->instruction ? c->instruction : "-");
    text_table_puts(t, elem_type_name(c->dtype));
    put_dims(&cell, c->operand_dims, c->operand_rank);
    sb_puts(&cell, " -> ");
    put_dims(&cell, c->result_dims, c->result_rank);
    text_table_put(t, &cell);
    put_axes_cell(&cell, r, c);
    text_table_put(t, &cell);
    put_bytes_cell(&cell, c->bytes_per_device, bw);
    if (c->multiplier > 1) sb_printf(&cell, " in %lld loop trips", (long long)c->multiplier);
    if (c->per_trip) sb_printf(&cell, "%s per trip of a loop whose trip count is unknown", c->multiplier > 1 ? "," : "");
    text_table_put(t, &cell);
    put_cause(&cell, c->cause_instruction, c->cause_line, c->reason);
    text_table_put(t, &cell);
    sb_free(&cell);
}

static void print_records(StrBuf *b, const CommReport *r)
{
    static const char *const head[] = {"#", "kind", "instruction", "dtype", "per-device operand -> result", "axes",
                                       "bytes sent per device", "cause"};
    TextTable t = {8, 0, 0, "rllllll" "l", NULL};
    size_t bw = 0;
    for (int32_t i = 0; i < r->n_records; i++)
        if (text_bytes_width(r->records[i].bytes_per_device) > bw) bw = text_bytes_width(r->records[i].bytes_per_device);
    for (int k = 0; k < 8; k++) text_table_puts(&t, head[k]);
    for (int32_t i = 0; i < r->n_records; i++) record_row(&t, r, i, bw);
    text_table_print(b, &t);
    text_table_free(&t);
}

static void print_totals(StrBuf *b, const CommReport *r)
{
    KindTotals kt = kind_totals(r);
    int64_t total = report_total_bytes(r);
    size_t bw = text_bytes_width(total);
    TextTable t = {3, 0, 0, "lrl", NULL};
    StrBuf cell = {0};
    text_table_puts(&t, "kind");
    text_table_puts(&t, "count");
    text_table_puts(&t, "bytes sent per device");
    for (int k = 0; k < N_KINDS; k++) {
        if (!kt.count[k]) continue;
        text_table_puts(&t, collective_kind_name((CollectiveKind)k));
        sb_printf(&cell, "%lld", (long long)kt.count[k]);
        text_table_put(&t, &cell);
        put_bytes_cell(&cell, kt.bytes[k], bw);
        text_table_put(&t, &cell);
    }
    text_table_puts(&t, "total");
    sb_printf(&cell, "%d", r->n_records);
    text_table_put(&t, &cell);
    put_bytes_cell(&cell, total, bw);
    text_table_put(&t, &cell);
    sb_puts(b, "totals:\n");
    text_table_print(b, &t);
    text_table_free(&t);
    sb_free(&cell);
}

static void print_memory(StrBuf *b, const CommReport *r)
{
    int64_t dev = r->parameter_bytes_per_device, all = r->parameter_bytes_unpartitioned;
    sb_puts(b, "parameter memory per device: ");
    put_bytes_cell(b, dev, 0);
    sb_puts(b, " of ");
    put_bytes_cell(b, all, 0);
    sb_puts(b, " unpartitioned");
    if (all > 0) sb_printf(b, " (%.1f%%)", 100.0 * (double)dev / (double)all);
    sb_putc(b, '\n');
    if (!r->has_memory_estimate) return;
    sb_puts(b, "peak memory per device: ");
    put_bytes_cell(b, r->peak_bytes_per_device, 0);
    if (r->peak_instruction) sb_printf(b, " at %s", r->peak_instruction);
    sb_puts(b, " (live buffers in program order, an estimate)\n");
    if (r->padding_bytes_per_device > 0) {
        sb_puts(b, "padding per device: ");
        put_bytes_cell(b, r->padding_bytes_per_device, 0);
        if (r->value_bytes_per_device > 0)
            sb_printf(b, ", %.1f%% of", 100.0 * (double)r->padding_bytes_per_device / (double)r->value_bytes_per_device);
        else
            sb_puts(b, " of");
        sb_puts(b, " the ");
        put_bytes_cell(b, r->value_bytes_per_device, 0);
        sb_puts(b, " its values take (uneven shards)");
        sb_putc(b, '\n');
    }
}

static void print_warnings(StrBuf *b, const CommReport *r)
{
    if (r->n_warnings == 0) {
        sb_puts(b, "warnings: none\n");
        return;
    }
    TextTable t = {2, 0, 0, "ll", NULL};
    StrBuf cell = {0};
    for (int32_t i = 0; i < r->n_warnings; i++) {
        const CommWarning *w = &r->warnings[i];
        text_table_puts(&t, w->kind ? w->kind : "warning");
        put_cause(&cell, w->instruction, w->line, w->message);
        text_table_put(&t, &cell);
    }
    sb_printf(b, "warnings (%d):\n", r->n_warnings);
    text_table_print(b, &t);
    text_table_free(&t);
    sb_free(&cell);
}

void report_print_text(StrBuf *b, const CommReport *r)
{
    sb_printf(b, "communication report for module %s", r->module ? r->module : "?");
    if (r->mesh.n_axes > 0) {
        sb_puts(b, " on mesh ");
        mesh_print(b, &r->mesh);
        sb_printf(b, " (%lld device%s)", (long long)r->mesh.n_devices, r->mesh.n_devices == 1 ? "" : "s");
    }
    sb_puts(b, "\n\n");
    if (r->n_records == 0) {
        sb_puts(b, "no communication: the partitioned program has no collectives\n\n");
    } else {
        print_records(b, r);
        sb_putc(b, '\n');
        print_totals(b, r);
        sb_putc(b, '\n');
    }
    print_memory(b, r);
    print_warnings(b, r);
}

/* ------------------------------------------------------------ JSON form */

/* A JSON string; NULL -> null; bytes that are not valid UTF-8 become '?'. */
static json_t *jstr(const char *s)
{
    if (!s) return json_null();
    json_t *j = json_string(s);
    if (j) return j;
    char *c = dup_or_null(s);
    for (char *p = c; *p; p++)
        if ((unsigned char)*p >= 0x80) *p = '?';
    j = json_string(c);
    free(c);
    return j ? j : json_null();
}

static json_t *jint(int64_t v) { return json_integer((json_int_t)v); }

static json_t *jdims(const int64_t *dims, int32_t rank)
{
    json_t *a = json_array();
    for (int32_t d = 0; d < rank && d <= SPMDC_MAX_RANK; d++) json_array_append_new(a, jint(dims[d]));
    return a;
}

/* ["model"], ["x", "y:(2)2"]: one entry per run of atoms of one axis. */
static json_t *jaxes(const CommReport *r, const CommRecord *c)
{
    json_t *a = json_array();
    if (!atoms_valid(r, c->atoms, c->n_atoms)) return a;
    StrBuf b = {0};
    for (int32_t i = 0; i < c->n_atoms;) {
        int32_t n = atom_run(&r->mesh, c->atoms, c->n_atoms, i);
        sb_clear(&b);
        mesh_atoms_name(&b, &r->mesh, c->atoms + i, n);
        json_array_append_new(a, jstr(sb_cstr(&b)));
        i += n;
    }
    sb_free(&b);
    return a;
}

static json_t *jrecord(const CommReport *r, const CommRecord *c)
{
    json_t *o = json_object(), *cause = json_object();
    json_object_set_new(o, "kind", json_string(collective_kind_name(c->kind)));
    json_object_set_new(o, "instruction", jstr(c->instruction));
    json_object_set_new(o, "dtype", json_string(elem_type_name(c->dtype)));
    json_object_set_new(o, "operand_shape", jdims(c->operand_dims, c->operand_rank));
    json_object_set_new(o, "result_shape", jdims(c->result_dims, c->result_rank));
    json_object_set_new(o, "axes", jaxes(r, c));
    json_object_set_new(o, "group_size", jint(c->group_size));
    json_object_set_new(o, "num_groups", jint(c->num_groups));
    json_object_set_new(o, "bytes_per_device", jint(c->bytes_per_device));
    json_object_set_new(o, "multiplier", jint(c->multiplier));
    json_object_set_new(o, "per_trip", json_boolean(c->per_trip));
    json_object_set_new(o, "source", json_string(c->from_input ? "input" : "partitioner"));
    json_object_set_new(cause, "instruction", jstr(c->cause_instruction));
    json_object_set_new(cause, "line", jint(c->cause_line));
    json_object_set_new(cause, "reason", jstr(bare_reason(c->cause_instruction, c->reason)));
    json_object_set_new(o, "cause", cause);
    if (c->halo_dim >= 0) {
        json_t *h = json_object();
        json_object_set_new(h, "dim", jint(c->halo_dim));
        json_object_set_new(h, "rows_below", jint(c->halo_lo));
        json_object_set_new(h, "rows_above", jint(c->halo_hi));
        json_object_set_new(o, "halo", h);
    }
    return o;
}

static json_t *jmesh(const Mesh *m)
{
    json_t *o = json_object(), *axes = json_array();
    json_object_set_new(o, "devices", jint(m->n_axes > 0 ? m->n_devices : 1));
    for (int32_t i = 0; i < m->n_axes && i < SPMDC_MAX_MESH_AXES; i++) {
        json_t *ax = json_object();
        char name[sizeof m->axes[i].name + 1];
        memcpy(name, m->axes[i].name, sizeof m->axes[i].name);
        name[sizeof m->axes[i].name] = 0;
        json_object_set_new(ax, "name", jstr(name));
        json_object_set_new(ax, "size", jint(m->axes[i].size));
        json_array_append_new(axes, ax);
    }
    json_object_set_new(o, "axes", axes);
    return o;
}

static json_t *jtotals(const CommReport *r)
{
    KindTotals kt = kind_totals(r);
    json_t *o = json_object(), *by = json_object();
    json_object_set_new(o, "count", jint(r->n_records));
    json_object_set_new(o, "bytes_per_device", jint(report_total_bytes(r)));
    for (int k = 0; k < N_KINDS; k++) {
        if (!kt.count[k]) continue;
        json_t *e = json_object();
        json_object_set_new(e, "count", jint(kt.count[k]));
        json_object_set_new(e, "bytes_per_device", jint(kt.bytes[k]));
        json_object_set_new(by, collective_kind_name((CollectiveKind)k), e);
    }
    json_object_set_new(o, "by_kind", by);
    return o;
}

static json_t *jwarnings(const CommReport *r)
{
    json_t *a = json_array();
    for (int32_t i = 0; i < r->n_warnings; i++) {
        const CommWarning *w = &r->warnings[i];
        json_t *o = json_object();
        json_object_set_new(o, "kind", jstr(w->kind));
        json_object_set_new(o, "instruction", jstr(w->instruction));
        json_object_set_new(o, "line", jint(w->line));
        json_object_set_new(o, "message", jstr(bare_reason(w->instruction, w->message)));
        json_array_append_new(a, o);
    }
    return a;
}

/* json_dump_callback sink: appends to a StrBuf, `indent` spaces after every
 * newline (a JSON text has raw newlines only in its layout: strings escape
 * theirs), so a value dumped on its own lines up as nested that deep. */
typedef struct IndentSink {
    StrBuf *b;
    int indent;
} IndentSink;

static int put_indented(const char *buf, size_t size, void *data)
{
    static const char spaces[] = "                ";
    IndentSink *d = data;
    const char *p = buf, *end = buf + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            sb_putn(d->b, p, (size_t)(end - p));
            break;
        }
        sb_putn(d->b, p, (size_t)(nl + 1 - p));
        sb_putn(d->b, spaces, (size_t)d->indent);
        p = nl + 1;
    }
    return 0;
}

/* Appends v (reference consumed) as jansson's JSON_INDENT(2) layout prints
 * it `indent` (<= 16) spaces deep inside an enclosing value. */
static void put_json(StrBuf *b, json_t *v, int indent)
{
    IndentSink d = {b, indent};
    if (!v || json_dump_callback(v, put_indented, &d, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) != 0)
        spmdc_oom();
    json_decref(v);
}

/* One member of the root object: `  "key": value` and its separator. */
static void put_member(StrBuf *b, const char *key, json_t *v, bool last)
{
    sb_puts(b, "  \"");
    sb_puts(b, key);
    sb_puts(b, "\": ");
    put_json(b, v, 2);
    sb_puts(b, last ? "\n" : ",\n");
}

/* The document is written member by member, each collective dumped on its
 * own (jansson, to a callback): the same bytes as one json_dumps of the
 * whole tree, without holding the tree of every collective at once. */
void report_print_json(StrBuf *b, const CommReport *r)
{
    json_t *mem = json_object();
    sb_puts(b, "{\n");
    put_member(b, "schema", json_string("spmdc.report/v1"), false);
    put_member(b, "module", jstr(r->module), false);
    put_member(b, "mesh", jmesh(&r->mesh), false);
    if (r->n_records == 0) {
        sb_puts(b, "  \"collectives\": [],\n");
    } else {
        sb_puts(b, "  \"collectives\": [\n");
        for (int32_t i = 0; i < r->n_records; i++) {
            sb_puts(b, "    ");
            put_json(b, jrecord(r, &r->records[i]), 4);
            sb_puts(b, i + 1 < r->n_records ? ",\n" : "\n");
        }
        sb_puts(b, "  ],\n");
    }
    put_member(b, "totals", jtotals(r), false);
    json_object_set_new(mem, "parameter_bytes_per_device", jint(r->parameter_bytes_per_device));
    json_object_set_new(mem, "parameter_bytes_unpartitioned", jint(r->parameter_bytes_unpartitioned));
    if (r->has_memory_estimate) {
        json_object_set_new(mem, "peak_bytes_per_device", jint(r->peak_bytes_per_device));
        json_object_set_new(mem, "peak_instruction", jstr(r->peak_instruction));
        json_object_set_new(mem, "padding_bytes_per_device", jint(r->padding_bytes_per_device));
        json_object_set_new(mem, "value_bytes_per_device", jint(r->value_bytes_per_device));
    }
    put_member(b, "memory", mem, false);
    put_member(b, "warnings", jwarnings(r), r->n_padding == 0);
    if (r->n_padding > 0) {
        json_t *pad = json_array();
        for (int32_t i = 0; i < r->n_padding; i++) {
            const CommPadding *c = &r->padding[i];
            json_t *o = json_object();
            json_object_set_new(o, "instruction", jstr(c->instruction));
            json_object_set_new(o, "line", jint(c->line));
            json_object_set_new(o, "leaf", jint(c->leaf));
            json_object_set_new(o, "elements", jint(c->elements));
            json_object_set_new(o, "bytes", jint(c->bytes));
            json_object_set_new(o, "max_device_bytes", jint(c->max_device_bytes));
            json_array_append_new(pad, o);
        }
        put_member(b, "padding", pad, true);
    }
    sb_puts(b, "}\n");
}
