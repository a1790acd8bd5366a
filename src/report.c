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
#include "spmdc/diag.h"
#include "spmdc/texttable.h"

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

/* A block of record strings; blocks are chained newest first and freed
 * with the report. */
struct ReportText {
    struct ReportText *next;
    size_t used, cap;
    char data[];
};

/* Copies of s[0..n) and a NUL in the report's newest text block (a new
 * block, twice the last one's size up to 4 MiB, when it is full). */
static char *text_dup(CommReport *r, const char *s, size_t n)
{
    struct ReportText *t = r->text;
    if (!t || t->cap - t->used < n + 1) {
        size_t cap = t ? (t->cap < ((size_t)4 << 20) ? 2 * t->cap : t->cap) : (size_t)64 << 10;
        if (cap < n + 1) cap = n + 1;
        struct ReportText *b = xmalloc(sizeof *b + cap);
        b->next = t;
        b->used = 0;
        b->cap = cap;
        r->text = t = b;
    }
    char *p = t->data + t->used;
    memcpy(p, s, n);
    p[n] = 0;
    t->used += n + 1;
    return p;
}

static char *text_dup_or_null(CommReport *r, const char *s) { return s ? text_dup(r, s, strlen(s)) : NULL; }

void report_init(CommReport *r, const char *module, const Mesh *mesh)
{
    memset(r, 0, sizeof *r);
    r->module = dup_or_null(module ? module : "module");
    if (mesh) r->mesh = *mesh;
}

void report_free(CommReport *r)
{
    for (struct ReportText *t = r->text, *n; t; t = n) {
        n = t->next;
        free(t);
    }
    for (int32_t i = 0; i < r->n_warnings; i++) {
        free(r->warnings[i].kind);
        free(r->warnings[i].instruction);
        free(r->warnings[i].message);
    }
    for (int32_t i = 0; i < r->n_padding; i++) free(r->padding[i].instruction);
    arena_destroy(r->rows);
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
        int32_t cap = r->cap_records ? r->cap_records * 2 : 16;
        if (!r->rows) r->rows = arena_create();
        r->records = arena_realloc(r->rows, r->records, sizeof(CommRecord) * (size_t)r->cap_records,
                                   sizeof(CommRecord) * (size_t)cap, _Alignof(CommRecord));
        r->cap_records = cap;
    }
    CommRecord *c = &r->records[r->n_records++];
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->instruction = text_dup_or_null(r, instruction);
    c->cause_instruction = text_dup_or_null(r, cause_instruction);
    c->cause_line = cause_line;
    c->reason = text_dup_or_null(r, reason);
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

int64_t report_total_bytes(const CommReport *r)
{
    int64_t t = 0;
    for (int32_t i = 0; i < r->n_records; i++) t = bytes_add_sat(t, r->records[i].bytes_per_device);
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
        t.bytes[k] = bytes_add_sat(t.bytes[k], r->records[i].bytes_per_device);
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
    sb_puts(b, "\xC3\x97");
    sb_int(b, c->group_size);
    sb_puts(b, ", ");
    sb_int(b, c->num_groups);
    sb_puts(b, c->num_groups == 1 ? " group" : " groups");
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

#define RECORD_COLS 8

/* Column col of record i's row, into cell (cleared first). */
static void record_cell(StrBuf *cell, const CommReport *r, int32_t i, int col, size_t bw)
{
    const CommRecord *c = &r->records[i];
    sb_clear(cell);
    switch (col) {
    case 0: sb_int(cell, i + 1); break;
    case 1: sb_puts(cell, collective_kind_name(c->kind)); break;
    case 2: sb_puts(cell, c->instruction ? c->instruction : "-"); break;
    case 3: sb_puts(cell, elem_type_name(c->dtype)); break;
    case 4:
        put_dims(cell, c->operand_dims, c->operand_rank);
        sb_puts(cell, " -> ");
        put_dims(cell, c->result_dims, c->result_rank);
        break;
    case 5: put_axes_cell(cell, r, c); break;
    case 6:
        put_bytes_cell(cell, c->bytes_per_device, bw);
        if (c->multiplier != 1) sb_printf(cell, " in %lld loop trips", (long long)c->multiplier);
        if (c->per_trip)
            sb_printf(cell, "%s per trip of a loop whose trip count is unknown", c->multiplier != 1 ? "," : "");
        break;
    default: put_cause(cell, c->cause_instruction, c->cause_line, c->reason); break;
    }
}

/* The table of collectives, laid out as text_table_print lays out a table
 * (texttable.h) but row by row: the column widths are measured in a first
 * pass over the cells, the second prints them, with a flush point after
 * every row, so no cell is kept. */
static void print_records(StrBuf *b, const CommReport *r)
{
    static const char *const head[RECORD_COLS] = {"#", "kind", "instruction", "dtype", "per-device operand -> result",
                                                  "axes", "bytes sent per device", "cause"};
    static const char align[RECORD_COLS] = {'r', 'l', 'l', 'l', 'l', 'l', 'l', 'l'};
    size_t bw = 0, width[RECORD_COLS];
    for (int32_t i = 0; i < r->n_records; i++)
        if (text_bytes_width(r->records[i].bytes_per_device) > bw) bw = text_bytes_width(r->records[i].bytes_per_device);
    for (int k = 0; k < RECORD_COLS; k++) width[k] = text_width(head[k]);
    StrBuf cell = {0};
    for (int32_t i = 0; i < r->n_records; i++)
        for (int k = 0; k < RECORD_COLS - 1; k++) { /* the last column is left-aligned: never padded */
            record_cell(&cell, r, i, k, bw);
            size_t w = text_width(sb_cstr(&cell));
            if (w > width[k]) width[k] = w;
        }
    for (int k = 0; k < RECORD_COLS; k++) text_cell(b, head[k], width[k], align[k], k == RECORD_COLS - 1);
    for (int32_t i = 0; i < r->n_records; i++) {
        for (int k = 0; k < RECORD_COLS; k++) {
            record_cell(&cell, r, i, k, bw);
            text_cell(b, sb_cstr(&cell), width[k], align[k], k == RECORD_COLS - 1);
        }
        sb_flush_point(b);
    }
    sb_free(&cell);
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
    if (r->memory_wait) r->memory_wait(r->memory_wait_ctx);
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

/* ------------------------------------------------------------ JSON form
 *
 * The JSON is written as it is produced, straight into the caller's buffer
 * (which streams to the output file when it has a sink, strbuf.h), in the
 * layout jansson 2.14's json_dumps prints with JSON_INDENT(2) |
 * JSON_PRESERVE_ORDER: every member and element on a line of its own, 2
 * spaces per level, `"key": value`, the `,` at the end of the line, empty
 * arrays and objects as [] and {}, integers in decimal; strings escaped as
 * jansson escapes them (\" \\ \b \f \n \r \t, any other byte below 0x20 as
 * \u00XX with upper-case hex, UTF-8 as it is).  A string that is not valid
 * UTF-8 by jansson's rules (no overlong forms, no surrogates, nothing past
 * U+10FFFF) is written with every byte >= 0x80 as '?'.  Keys are plain
 * ASCII and written as they are.  tests/unit/report_test.c checks the
 * bytes against jansson's own dump of the same document. */

#define JSON_MAX_DEPTH 16

struct JsonOut {
    StrBuf *b;
    int depth;         /* open arrays and objects, <= JSON_MAX_DEPTH */
    uint32_t nonempty; /* bit d: the container open at depth d has an element */
    bool after_key;    /* a key was written: its value follows on the same line */
    StrBuf scratch;    /* an axis name being spelled */
    TextMemo *rows;    /* the rows' repeated fields (jo_shape_fields_memo), or NULL outside the collectives */
};

/* A newline and the indent of depth d (2*d spaces). */
static void jo_newline(JsonOut *j, int d)
{
    static const char nl[] = "\n                                "; /* 2 * JSON_MAX_DEPTH spaces */
    sb_putn(j->b, nl, 1 + 2 * (size_t)d);
}

/* Before any value: after a key nothing, else the separator and the line. */
static void jo_value(JsonOut *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth == 0) return;
    uint32_t bit = 1u << j->depth;
    if (j->nonempty & bit) sb_putc(j->b, ',');
    j->nonempty |= bit;
    jo_newline(j, j->depth);
}

static void jo_open(JsonOut *j, char c)
{
    jo_value(j);
    sb_putc(j->b, c);
    SPMDC_ASSERT(j->depth < JSON_MAX_DEPTH);
    j->depth++;
    j->nonempty &= ~(1u << j->depth);
}

static void jo_close(JsonOut *j, char c)
{
    bool had = (j->nonempty >> j->depth) & 1u;
    j->depth--;
    if (had) jo_newline(j, j->depth);
    sb_putc(j->b, c);
}

/* `"key": `; inlined so a literal key's length is known. */
static inline __attribute__((always_inline)) void jo_key(JsonOut *j, const char *key)
{
    jo_value(j);
    size_t n = strlen(key);
    StrBuf *b = j->b;
    if (b->len + n + 5 > b->cap) sb_grow(b, n + 4);
    char *d = b->data + b->len;
    d[0] = '"';
    memcpy(d + 1, key, n);
    memcpy(d + 1 + n, "\": ", 4); /* with the NUL */
    b->len += n + 4;
    j->after_key = true;
}

static void jo_int(JsonOut *j, int64_t v)
{
    jo_value(j);
    sb_int(j->b, v);
}

static void jo_bool(JsonOut *j, bool v)
{
    jo_value(j);
    if (v) sb_putn(j->b, "true", 4);
    else sb_putn(j->b, "false", 5);
}

/* Length of the valid UTF-8 sequence at s, 0 if there is none (jansson's
 * utf8_check_first/utf8_check_full; the NUL ends a truncated sequence). */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned u = s[0];
    size_t n;
    uint32_t v;
    if (u < 0x80) return 1;
    if (u >= 0xC2 && u <= 0xDF) n = 2, v = u & 0x1F;
    else if (u >= 0xE0 && u <= 0xEF) n = 3, v = u & 0x0F;
    else if (u >= 0xF0 && u <= 0xF4) n = 4, v = u & 0x07;
    else return 0;
    for (size_t i = 1; i < n; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000)) return 0;
    return n;
}

static bool utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = utf8_seq(p);
        if (!n) return false;
        p += n;
    }
    return true;
}

/* Whether the 8 bytes of w are all printable ASCII other than '"' and
 * '\\' (JSON strings copy them as they are).  Bit tricks over the whole
 * word (Anderson, "Bit Twiddling Hacks": determine if a word has a byte
 * less than n / equal to n), exact once no byte has its high bit set. */
static inline bool plain8(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = w ^ (ones * '"'), bs = w ^ (ones * '\\');
    return !(w & high) && !((w - ones * 0x20) & ~w & high) && !((q - ones) & ~q & high) &&
           !((bs - ones) & ~bs & high);
}

/* A JSON string; NULL -> null (see the section comment). */
static void jo_str(JsonOut *j, const char *s)
{
    jo_value(j);
    StrBuf *b = j->b;
    if (!s) {
        sb_putn(b, "null", 4);
        return;
    }
    static const char hex[] = "0123456789ABCDEF";
    int utf8 = -1; /* unknown until the first byte >= 0x80 */
    const unsigned char *p = (const unsigned char *)s, *run = p, *end = p + strlen(s);
    sb_putc(b, '"');
    for (;; p++) {
        for (uint64_t w; end - p >= 8 && (memcpy(&w, p, 8), plain8(w));) /* the common case, a word at a time */
            p += 8;
        unsigned c = *p;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') continue;
        if (c == 0) break;
        if (c >= 0x80) {
            if (utf8 < 0) utf8 = utf8_valid(s);
            if (utf8) continue;
        }
        sb_putn(b, (const char *)run, (size_t)(p - run));
        run = p + 1;
        char e[6] = {'\\', 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (c) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
            if (c >= 0x80) {
                e[0] = '?';
                n = 1;
            } else {
                memcpy(e + 1, "u00", 3);
                e[4] = hex[c >> 4];
                e[5] = hex[c & 15];
                n = 6;
            }
        }
        sb_putn(b, e, n);
    }
    sb_putn(b, (const char *)run, (size_t)(p - run));
    sb_putc(b, '"');
}

static inline __attribute__((always_inline)) void jo_key_int(JsonOut *j, const char *key, int64_t v)
{
    jo_key(j, key);
    jo_int(j, v);
}

static inline __attribute__((always_inline)) void jo_key_str(JsonOut *j, const char *key, const char *s)
{
    jo_key(j, key);
    jo_str(j, s);
}

static void jo_dims(JsonOut *j, const char *key, const int64_t *dims, int32_t rank)
{
    jo_key(j, key);
    jo_open(j, '[');
    for (int32_t d = 0; d < rank && d < SPMDC_MAX_RANK; d++) jo_int(j, dims[d]);
    jo_close(j, ']');
}

/* ["model"], ["x", "y:(2)2"]: one entry per run of atoms of one axis. */
static void jo_axes(JsonOut *j, const CommReport *r, const CommRecord *c)
{
    jo_key(j, "axes");
    jo_open(j, '[');
    if (atoms_valid(r, c->atoms, c->n_atoms))
        for (int32_t i = 0; i < c->n_atoms;) {
            int32_t n = atom_run(&r->mesh, c->atoms, c->n_atoms, i);
            sb_clear(&j->scratch);
            mesh_atoms_name(&j->scratch, &r->mesh, c->atoms + i, n);
            jo_str(j, sb_cstr(&j->scratch));
            i += n;
        }
    jo_close(j, ']');
}

/* The fields of a record between "dtype" and "source", which rows of one
 * report repeat (a layer's collective is the next layer's), as the bytes a
 * memo compares: everything jo_shape_fields reads (the report's mesh aside,
 * which is one per document), unused dims and atoms zero. */
typedef struct RowShapeKey {
    int64_t operand_dims[SPMDC_MAX_RANK], result_dims[SPMDC_MAX_RANK];
    int64_t group_size, num_groups, bytes_per_device, multiplier;
    int32_t dtype, operand_rank, result_rank, n_atoms;
    int8_t atoms[SPMDC_MAX_ATOMS];
    uint8_t per_trip, from_input, pad[6];
} RowShapeKey;

static void row_shape_key(const CommRecord *c, RowShapeKey *k)
{
    memset(k, 0, sizeof *k);
    k->dtype = (int32_t)c->dtype;
    k->operand_rank = c->operand_rank;
    k->result_rank = c->result_rank;
    for (int32_t d = 0; d < c->operand_rank && d < SPMDC_MAX_RANK; d++) k->operand_dims[d] = c->operand_dims[d];
    for (int32_t d = 0; d < c->result_rank && d < SPMDC_MAX_RANK; d++) k->result_dims[d] = c->result_dims[d];
    k->n_atoms = c->n_atoms;
    for (int32_t a = 0; a < c->n_atoms && a < SPMDC_MAX_ATOMS; a++) k->atoms[a] = c->atoms[a];
    k->group_size = c->group_size;
    k->num_groups = c->num_groups;
    k->bytes_per_device = c->bytes_per_device;
    k->multiplier = c->multiplier;
    k->per_trip = c->per_trip;
    k->from_input = c->from_input;
}

/* The record's fields from "dtype" to "source", inside its object (after
 * "instruction"). */
static void jo_shape_fields(JsonOut *j, const CommReport *r, const CommRecord *c)
{
    jo_key_str(j, "dtype", elem_type_name(c->dtype));
    jo_dims(j, "operand_shape", c->operand_dims, c->operand_rank);
    jo_dims(j, "result_shape", c->result_dims, c->result_rank);
    jo_axes(j, r, c);
    jo_key_int(j, "group_size", c->group_size);
    jo_key_int(j, "num_groups", c->num_groups);
    jo_key_int(j, "bytes_per_device", c->bytes_per_device);
    jo_key_int(j, "multiplier", c->multiplier);
    jo_key(j, "per_trip");
    jo_bool(j, c->per_trip);
    jo_key_str(j, "source", c->from_input ? "input" : "partitioner");
}

/* jo_shape_fields through j->rows: the same fields at the same depth (the
 * record's object, nonempty) print the same bytes, so they are printed
 * into a memo slot the first time and copied from it after. */
static void jo_shape_fields_memo(JsonOut *j, const CommReport *r, const CommRecord *c)
{
    RowShapeKey key;
    row_shape_key(c, &key);
    const StrBuf *t = text_memo_find(j->rows, &key, sizeof key);
    if (!t) {
        JsonOut sub = *j; /* the state here, printing into the slot */
        StrBuf *w = text_memo_put(j->rows, &key, sizeof key);
        sub.b = w;
        sub.scratch = (StrBuf){0};
        jo_shape_fields(&sub, r, c);
        sb_free(&sub.scratch);
        /* it ends where it began: nonempty bits above the depth are cleared
         * by the next jo_open before they are read */
        SPMDC_ASSERT(sub.depth == j->depth && !sub.after_key &&
                     ((sub.nonempty ^ j->nonempty) & ((2u << j->depth) - 1)) == 0);
        t = w;
    }
    sb_putn(j->b, t->data, t->len);
}

/* Record c (number i of r) as an object; hook (if any) adds members at its end. */
static void jo_record(JsonOut *j, const CommReport *r, const CommRecord *c, ReportJsonHook hook, void *ctx, int32_t i)
{
    jo_open(j, '{');
    jo_key_str(j, "kind", collective_kind_name(c->kind));
    jo_key_str(j, "instruction", c->instruction);
    if (j->rows) jo_shape_fields_memo(j, r, c);
    else jo_shape_fields(j, r, c);
    jo_key(j, "cause");
    jo_open(j, '{');
    jo_key_str(j, "instruction", c->cause_instruction);
    jo_key_int(j, "line", c->cause_line);
    jo_key_str(j, "reason", bare_reason(c->cause_instruction, c->reason));
    jo_close(j, '}');
    if (c->halo_dim >= 0) {
        jo_key(j, "halo");
        jo_open(j, '{');
        jo_key_int(j, "dim", c->halo_dim);
        jo_key_int(j, "rows_below", c->halo_lo);
        jo_key_int(j, "rows_above", c->halo_hi);
        jo_close(j, '}');
    }
    if (hook) hook(j, i, ctx);
    jo_close(j, '}');
}

static void jo_mesh(JsonOut *j, const Mesh *m)
{
    jo_key(j, "mesh");
    jo_open(j, '{');
    jo_key_int(j, "devices", m->n_axes > 0 ? m->n_devices : 1);
    jo_key(j, "axes");
    jo_open(j, '[');
    for (int32_t i = 0; i < m->n_axes && i < SPMDC_MAX_MESH_AXES; i++) {
        char name[sizeof m->axes[i].name + 1];
        memcpy(name, m->axes[i].name, sizeof m->axes[i].name);
        name[sizeof m->axes[i].name] = 0;
        jo_open(j, '{');
        jo_key_str(j, "name", name);
        jo_key_int(j, "size", m->axes[i].size);
        jo_close(j, '}');
    }
    jo_close(j, ']');
    jo_close(j, '}');
}

static void jo_totals(JsonOut *j, const CommReport *r)
{
    KindTotals kt = kind_totals(r);
    jo_key(j, "totals");
    jo_open(j, '{');
    jo_key_int(j, "count", r->n_records);
    jo_key_int(j, "bytes_per_device", report_total_bytes(r));
    jo_key(j, "by_kind");
    jo_open(j, '{');
    for (int k = 0; k < N_KINDS; k++) {
        if (!kt.count[k]) continue;
        jo_key(j, collective_kind_name((CollectiveKind)k));
        jo_open(j, '{');
        jo_key_int(j, "count", kt.count[k]);
        jo_key_int(j, "bytes_per_device", kt.bytes[k]);
        jo_close(j, '}');
    }
    jo_close(j, '}');
    jo_close(j, '}');
}

static void jo_memory(JsonOut *j, const CommReport *r)
{
    if (r->memory_wait) r->memory_wait(r->memory_wait_ctx);
    jo_key(j, "memory");
    jo_open(j, '{');
    jo_key_int(j, "parameter_bytes_per_device", r->parameter_bytes_per_device);
    jo_key_int(j, "parameter_bytes_unpartitioned", r->parameter_bytes_unpartitioned);
    if (r->has_memory_estimate) {
        jo_key_int(j, "peak_bytes_per_device", r->peak_bytes_per_device);
        jo_key_str(j, "peak_instruction", r->peak_instruction);
        jo_key_int(j, "padding_bytes_per_device", r->padding_bytes_per_device);
        jo_key_int(j, "value_bytes_per_device", r->value_bytes_per_device);
    }
    jo_close(j, '}');
}

/* Members in the order of docs/report.md; a flush point after every
 * collective, warning and padded value, so a buffer with a sink never holds
 * more than about SB_SINK_CHUNK bytes of the document. */
void report_json_key(JsonOut *j, const char *key) { jo_key(j, key); }
void report_json_open(JsonOut *j, char c) { jo_open(j, c); }
void report_json_close(JsonOut *j, char c) { jo_close(j, c); }
void report_json_str(JsonOut *j, const char *s) { jo_str(j, s); }
void report_json_int(JsonOut *j, int64_t v) { jo_int(j, v); }
void report_json_bool(JsonOut *j, bool v) { jo_bool(j, v); }

void report_json_null(JsonOut *j)
{
    jo_value(j);
    sb_putn(j->b, "null", 4);
}

void report_json_raw(JsonOut *j, const char *text)
{
    jo_value(j);
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        if (!nl) {
            sb_puts(j->b, p);
            return;
        }
        sb_putn(j->b, p, (size_t)(nl - p));
        jo_newline(j, j->depth);
        p = nl + 1;
    }
}

void report_print_json(StrBuf *b, const CommReport *r) { report_print_json_with(b, r, NULL, NULL); }

void report_print_json_with(StrBuf *b, const CommReport *r, ReportJsonHook hook, void *ctx)
{
    JsonOut j = {b, 0, 0, false, {0}, NULL};
    jo_open(&j, '{');
    jo_key_str(&j, "schema", "spmdc.report/v1");
    jo_key_str(&j, "module", r->module);
    jo_mesh(&j, &r->mesh);
    jo_key(&j, "collectives");
    jo_open(&j, '[');
    TextMemo *rows = xcalloc(1, sizeof *rows);
    j.rows = rows;
    for (int32_t i = 0; i < r->n_records; i++) {
        jo_record(&j, r, &r->records[i], hook, ctx, i);
        sb_flush_point(b);
    }
    j.rows = NULL;
    text_memo_free(rows);
    free(rows);
    jo_close(&j, ']');
    jo_totals(&j, r);
    jo_memory(&j, r);
    jo_key(&j, "warnings");
    jo_open(&j, '[');
    for (int32_t i = 0; i < r->n_warnings; i++) {
        const CommWarning *w = &r->warnings[i];
        jo_open(&j, '{');
        jo_key_str(&j, "kind", w->kind);
        jo_key_str(&j, "instruction", w->instruction);
        jo_key_int(&j, "line", w->line);
        jo_key_str(&j, "message", bare_reason(w->instruction, w->message));
        jo_close(&j, '}');
        sb_flush_point(b);
    }
    jo_close(&j, ']');
    if (r->n_padding > 0) {
        jo_key(&j, "padding");
        jo_open(&j, '[');
        for (int32_t i = 0; i < r->n_padding; i++) {
            const CommPadding *c = &r->padding[i];
            jo_open(&j, '{');
            jo_key_str(&j, "instruction", c->instruction);
            jo_key_int(&j, "line", c->line);
            jo_key_int(&j, "leaf", c->leaf);
            jo_key_int(&j, "elements", c->elements);
            jo_key_int(&j, "bytes", c->bytes);
            jo_key_int(&j, "max_device_bytes", c->max_device_bytes);
            jo_close(&j, '}');
            sb_flush_point(b);
        }
        jo_close(&j, ']');
    }
    if (hook) hook(&j, -1, ctx);
    jo_close(&j, '}');
    sb_putc(b, '\n');
    sb_free(&j.scratch);
}
