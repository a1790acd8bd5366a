/* budget.c - budgets for a sharding plan and the verdict against them
 * (budget.h; the file format and the keys are documented there and in
 * docs/ci.md).
 *
 * Sizes and shares are parsed exactly (128-bit integers, never through a
 * double), so `1.5GiB` is 1,610,612,736 bytes and `12.5%` is 125/1000; a
 * share is compared as padding * den <= limit * value.
 */
#include "spmdc/budget.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spmdc/arena.h"
#include "spmdc/texttable.h"

__extension__ typedef __int128 Int128;

#define N_KINDS (COLL_COLLECTIVE_PERMUTE + 1)

static const char *const KEYS[BUDGET_N_SLOTS] = {
    "bytes_per_device",
    "collectives",
    "all-reduce.bytes_per_device",
    "all-gather.bytes_per_device",
    "reduce-scatter.bytes_per_device",
    "all-to-all.bytes_per_device",
    "collective-permute.bytes_per_device",
    "all-reduce.count",
    "all-gather.count",
    "reduce-scatter.count",
    "all-to-all.count",
    "collective-permute.count",
    "full_rematerialization",
    "padding_share",
    "peak_bytes_per_device",
    "parameter_bytes_per_device",
};

const char *budget_key(BudgetSlot s) { return s >= 0 && s < BUDGET_N_SLOTS ? KEYS[s] : "?"; }

typedef enum ValueKind { V_SIZE, V_COUNT, V_SHARE, V_FORBID } ValueKind;

static ValueKind slot_value_kind(int s)
{
    if (s == BUDGET_COLLECTIVES || (s >= BUDGET_KIND_COUNT && s < BUDGET_KIND_COUNT + N_KINDS)) return V_COUNT;
    if (s == BUDGET_PADDING) return V_SHARE;
    if (s == BUDGET_REMAT) return V_FORBID;
    return V_SIZE;
}

static int kind_by_name(const char *s, size_t n)
{
    for (int k = 0; k < N_KINDS; k++) {
        const char *name = collective_kind_name((CollectiveKind)k);
        if (strlen(name) == n && strncmp(name, s, n) == 0) return k;
    }
    return -1;
}

/* ---------------------------------------------------------------- numbers */

/* A decimal number with optional digit groups and fraction: *mant / *den
 * (den a power of ten).  Digit groups are written as the report prints
 * them: one to three digits, then groups of exactly three after ',' (or
 * '_', one separator throughout): 1,024 and 28,672 and 234_881_024, never
 * 1,0,0 or 2,8672.  *end: the first character after it.  False if there
 * are no digits, too many, or a malformed group (then *bad_group). */
static bool parse_decimal(const char *s, Int128 *mant, Int128 *den, const char **end, bool *bad_group)
{
    Int128 m = 0, d = 1;
    int digits = 0, group = 0;
    char sep = 0;
    const char *p = s;
    *bad_group = false;
    for (;; p++) {
        if (isdigit((unsigned char)*p)) {
            if (++digits > 30) return false;
            m = m * 10 + (*p - '0');
            group++;
            continue;
        }
        if ((*p == ',' || *p == '_') && p > s && isdigit((unsigned char)p[1])) {
            /* the group before a separator: 1-3 digits first, then exactly 3 */
            if ((sep ? group != 3 : group > 3) || (sep && *p != sep)) break;
            sep = *p;
            group = 0;
            continue;
        }
        break;
    }
    if (sep && group != 3) {
        *bad_group = true;
        return false;
    }
    if ((*p == ',' || *p == '_') && isdigit((unsigned char)p[1]) && p > s) {
        *bad_group = true; /* a group of more than 3 digits, or mixed separators */
        return false;
    }
    if (*p == '.' && isdigit((unsigned char)p[1])) {
        p++;
        while (isdigit((unsigned char)*p)) {
            if (++digits > 30) return false;
            m = m * 10 + (*p - '0');
            d *= 10;
            p++;
        }
    }
    if (digits == 0) return false;
    *mant = m;
    *den = d;
    *end = p;
    return true;
}

/* The message for a number with malformed digit groups. */
static bool bad_groups(const char *s, char *err, size_t errlen)
{
    snprintf(err, errlen, "'%s': digit groups are three digits after the first (1,024 or 28,672)", s);
    return false;
}

static const char *skip_space(const char *p)
{
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

bool budget_parse_size(const char *s, int64_t *bytes, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int64_t unit;
    } units[] = {
        {"", 1},
        {"B", 1},
        {"K", INT64_C(1) << 10},
        {"KiB", INT64_C(1) << 10},
        {"M", INT64_C(1) << 20},
        {"MiB", INT64_C(1) << 20},
        {"G", INT64_C(1) << 30},
        {"GiB", INT64_C(1) << 30},
        {"T", INT64_C(1) << 40},
        {"TiB", INT64_C(1) << 40},
        {"P", INT64_C(1) << 50},
        {"PiB", INT64_C(1) << 50},
        {"KB", 1000},
        {"MB", 1000000},
        {"GB", 1000000000},
        {"TB", INT64_C(1000000000000)},
        {"PB", INT64_C(1000000000000000)},
    };
    Int128 mant, den;
    const char *p = skip_space(s);
    bool grp;
    if (!parse_decimal(p, &mant, &den, &p, &grp)) {
        if (grp) return bad_groups(s, err, errlen);
        snprintf(err, errlen, "'%s' is not a size (a number of bytes with an optional unit: 512MiB, 1.5GB)", s);
        return false;
    }
    p = skip_space(p);
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        if (strlen(units[u].name) != n || strncasecmp(units[u].name, p, n) != 0) continue;
        /* mant * unit / den without forming mant * unit (up to 10^30 * 2^50,
         * past 128 bits): with g = gcd(unit, den), unit/g and den/g are
         * coprime, so the bytes are whole exactly when den/g divides mant,
         * and then they are (mant / (den/g)) * (unit/g). */
        Int128 unit = units[u].unit, g = unit, r = den;
        while (r) {
            Int128 t = g % r;
            g = r;
            r = t;
        }
        unit /= g;
        Int128 d = den / g;
        if (mant % d != 0) {
            snprintf(err, errlen, "'%s' is not a whole number of bytes", s);
            return false;
        }
        Int128 q = mant / d;
        if (q > (Int128)INT64_MAX / unit) {
            snprintf(err, errlen, "'%s' is too large (at most 2^63-1 bytes)", s);
            return false;
        }
        *bytes = (int64_t)(q * unit);
        return true;
    }
    snprintf(err, errlen, "'%s': unknown unit '%.*s' (B, KiB, MiB, GiB, TiB, PiB or kB, MB, GB, TB, PB)", s, (int)n,
             p);
    return false;
}

bool budget_parse_share(const char *s, int64_t *num, int64_t *den, char *err, size_t errlen)
{
    Int128 m, d;
    const char *p = skip_space(s);
    bool grp;
    if (!parse_decimal(p, &m, &d, &p, &grp) || d > (Int128)INT64_C(1000000000000)) {
        if (grp) return bad_groups(s, err, errlen);
        snprintf(err, errlen, "'%s' is not a share (a fraction such as 0.05, or a percentage such as 5%%)", s);
        return false;
    }
    p = skip_space(p);
    if (*p == '%') {
        d *= 100;
        p = skip_space(p + 1);
    }
    if (*p) {
        snprintf(err, errlen, "'%s' is not a share (a fraction such as 0.05, or a percentage such as 5%%)", s);
        return false;
    }
    if (m > d) {
        snprintf(err, errlen, "'%s' is more than the whole (a share is at most 1, or 100%%)", s);
        return false;
    }
    *num = (int64_t)m;
    *den = (int64_t)d;
    return true;
}

static bool parse_count(const char *s, int64_t *out, char *err, size_t errlen)
{
    Int128 m, d;
    const char *p = skip_space(s);
    bool grp;
    if (!parse_decimal(p, &m, &d, &p, &grp) || d != 1 || *skip_space(p) || m > (Int128)INT64_MAX) {
        if (grp) return bad_groups(s, err, errlen);
        snprintf(err, errlen, "'%s' is not a count (a whole number such as 0 or 12)", s);
        return false;
    }
    *out = (int64_t)m;
    return true;
}

/* ---------------------------------------------------------------- setting */

static void set_slot(Budget *b, int s, int64_t limit, int64_t den, const char *source)
{
    BudgetLimit *l = &b->slot[s];
    l->set = true;
    l->limit = limit;
    l->den = den;
    snprintf(l->source, sizeof l->source, "%s", source ? source : "");
}

/* The kinds a forbid list names, as a mask of CollectiveKind bits; false
 * with a message in err on an unknown name, a name given twice or an empty
 * list. */
static bool forbid_kinds(const char *value, uint32_t *kinds, char *err, size_t errlen)
{
    const char *p = value;
    *kinds = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) break;
        const char *q = p;
        while (*q && *q != ' ' && *q != '\t' && *q != ',') q++;
        int k = kind_by_name(p, (size_t)(q - p));
        if (k < 0) {
            snprintf(err, errlen, "'%.*s' is not a collective (all-reduce, all-gather, reduce-scatter, all-to-all, "
                     "collective-permute)", (int)(q - p), p);
            return false;
        }
        if (*kinds & (1u << k)) {
            snprintf(err, errlen, "forbid names '%.*s' twice", (int)(q - p), p);
            return false;
        }
        *kinds |= 1u << k;
        p = q;
    }
    if (*kinds == 0) {
        snprintf(err, errlen, "forbid takes a list of collectives (e.g. all-to-all, collective-permute)");
        return false;
    }
    return true;
}

uint32_t budget_key_slots(const char *key, const char *value)
{
    if (strcmp(key, "mesh") == 0) return BUDGET_MESH_BIT;
    if (strcmp(key, "forbid") == 0) {
        uint32_t kinds;
        char err[200];
        return forbid_kinds(value, &kinds, err, sizeof err) ? kinds << BUDGET_KIND_COUNT : 0;
    }
    for (int s = 0; s < BUDGET_N_SLOTS; s++)
        if (strcmp(KEYS[s], key) == 0) return 1u << s;
    return 0;
}

bool budget_set(Budget *b, const char *key, const char *value, const char *source, char *err, size_t errlen)
{
    if (strcmp(key, "mesh") == 0) {
        char merr[200];
        if (!mesh_parse_spec(value, &b->mesh, merr, sizeof merr)) {
            /* mesh_parse_spec speaks of --mesh; this mesh is a budget line's */
            bool flag = strncmp(merr, "bad --mesh ", 11) == 0;
            snprintf(err, errlen, "%s%s", flag ? "bad mesh " : "", flag ? merr + 11 : merr);
            return false;
        }
        b->has_mesh = true;
        snprintf(b->mesh_source, sizeof b->mesh_source, "%s", source ? source : "");
        return true;
    }
    if (strcmp(key, "forbid") == 0) {
        uint32_t kinds;
        if (!forbid_kinds(value, &kinds, err, errlen)) return false;
        for (int k = 0; k < N_KINDS; k++)
            if (kinds & (1u << k)) set_slot(b, BUDGET_KIND_COUNT + k, 0, 1, source);
        return true;
    }
    int s = 0;
    while (s < BUDGET_N_SLOTS && strcmp(KEYS[s], key) != 0) s++;
    if (s == BUDGET_N_SLOTS) {
        snprintf(err, errlen, "unknown budget '%s' (bytes_per_device, collectives, <kind>.bytes_per_device, "
                 "<kind>.count, forbid, full_rematerialization, padding_share, peak_bytes_per_device, "
                 "parameter_bytes_per_device, mesh)", key);
        return false;
    }
    int64_t v = 0, den = 1;
    switch (slot_value_kind(s)) {
    case V_SIZE:
        if (!budget_parse_size(value, &v, err, errlen)) return false;
        break;
    case V_COUNT:
        if (!parse_count(value, &v, err, errlen)) return false;
        break;
    case V_SHARE:
        if (!budget_parse_share(value, &v, &den, err, errlen)) return false;
        break;
    case V_FORBID:
        if (strcmp(value, "allow") == 0) {
            memset(&b->slot[s], 0, sizeof b->slot[s]);
            return true;
        }
        if (strcmp(value, "forbid") != 0) {
            snprintf(err, errlen, "full_rematerialization takes forbid or allow, not '%s'", value);
            return false;
        }
        break;
    }
    set_slot(b, s, v, den, source);
    return true;
}

/* ---------------------------------------------------------------- the file */

static SrcSpan span_at(uint32_t fid, uint32_t line, uint32_t col, uint32_t width)
{
    SrcSpan sp;
    sp.begin.file_id = sp.end.file_id = fid;
    sp.begin.line = sp.end.line = line;
    sp.begin.col = col;
    sp.end.col = col + (width ? width - 1 : 0);
    return sp;
}

bool budget_read(Budget *b, const char *text, size_t len, uint32_t file_id, const char *path, DiagEngine *diag)
{
    bool ok = true;
    size_t i = 0;
    /* where each slot (and the mesh, bit BUDGET_N_SLOTS) was set: a file sets
     * each once, so a second setting is an error, never a silent override */
    uint32_t seen = 0, set_line[BUDGET_N_SLOTS + 1], set_col[BUDGET_N_SLOTS + 1], set_width[BUDGET_N_SLOTS + 1];
    int settings = 0;
    /* A UTF-8 byte-order mark at the start is skipped, as in HLO input
     * (columns still count its bytes). */
    size_t bom = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    for (uint32_t line = 1; i < len; line++) {
        size_t start = i;
        while (i < len && !diag_is_line_end(text, len, i)) i++;
        size_t stop = i; /* the line is text[start..stop) without its end */
        if (stop > start && text[stop - 1] == '\r') stop--;
        i++;
        size_t from = line == 1 ? start + bom : start;
        size_t hash = from;
        while (hash < stop && text[hash] != '#') hash++;
        size_t a = from, z = hash;
        while (a < z && (text[a] == ' ' || text[a] == '\t')) a++;
        while (z > a && (text[z - 1] == ' ' || text[z - 1] == '\t')) z--;
        if (a == z) continue;
        size_t eq = a;
        while (eq < z && text[eq] != '=') eq++;
        uint32_t col = (uint32_t)(a - start) + 1;
        settings++;
        if (eq == z) {
            diag_error(diag, span_at(file_id, line, col, (uint32_t)(z - a)),
                       "expected 'key = value' (e.g. bytes_per_device = 256MiB)");
            ok = false;
            continue;
        }
        size_t ke = eq, vb = eq + 1;
        while (ke > a && (text[ke - 1] == ' ' || text[ke - 1] == '\t')) ke--;
        while (vb < z && (text[vb] == ' ' || text[vb] == '\t')) vb++;
        const char *nul = memchr(text + a, 0, z - a);
        if (nul) {
            diag_error(diag, span_at(file_id, line, (uint32_t)(nul - (text + start)) + 1, 1),
                       "NUL byte in the budget file (a budget file must not contain NUL)");
            ok = false;
            continue;
        }
        if (ke == a || vb == z) {
            diag_error(diag, span_at(file_id, line, col, (uint32_t)(z - a)),
                       ke == a ? "a budget line needs a key before '='" : "a budget line needs a value after '='");
            ok = false;
            continue;
        }
        char key[64], value[512], err[400], source[96];
        if (ke - a >= sizeof key || z - vb >= sizeof value) {
            diag_error(diag, span_at(file_id, line, col, (uint32_t)(z - a)), "budget line too long");
            ok = false;
            continue;
        }
        memcpy(key, text + a, ke - a);
        key[ke - a] = 0;
        memcpy(value, text + vb, z - vb);
        value[z - vb] = 0;
        snprintf(source, sizeof source, "%s:%u", path, line);
        uint32_t slots = budget_key_slots(key, value), twice = slots & seen;
        if (twice) {
            int s = __builtin_ctz(twice);
            const char *name = s == BUDGET_N_SLOTS ? "mesh" : KEYS[s];
            size_t at = a, w = ke - a;
            if (strcmp(key, "forbid") == 0) { /* at the kind's name in the list */
                const char *kind = collective_kind_name((CollectiveKind)(s - BUDGET_KIND_COUNT));
                size_t kn = strlen(kind);
                for (size_t j = vb; j + kn <= z; j++)
                    if (memcmp(text + j, kind, kn) == 0 && (j == vb || strchr(" \t,", text[j - 1])) &&
                        (j + kn == z || strchr(" \t,", text[j + kn]))) {
                        at = j;
                        w = kn;
                        break;
                    }
            }
            diag_error(diag, span_at(file_id, line, (uint32_t)(at - start) + 1, (uint32_t)w),
                       "'%s' is already set at %s:%u (a budget file sets each key once)", name, path, set_line[s]);
            diag_note(diag, span_at(file_id, set_line[s], set_col[s], set_width[s]), "'%s' set here", name);
            ok = false;
            continue;
        }
        if (!budget_set(b, key, value, source, err, sizeof err)) {
            bool bad_key = strncmp(err, "unknown budget", 14) == 0;
            size_t at = bad_key ? a : vb, w = bad_key ? ke - a : z - vb;
            diag_error(diag, span_at(file_id, line, (uint32_t)(at - start) + 1, (uint32_t)w), "%s", err);
            ok = false;
            continue;
        }
        for (int s = 0; s <= BUDGET_N_SLOTS; s++)
            if (slots & (1u << s)) {
                set_line[s] = line;
                set_col[s] = col;
                set_width[s] = (uint32_t)(z - a);
            }
        seen |= slots;
    }
    if (settings == 0) {
        diag_error(diag, span_at(file_id, 1, 1, 0),
                   "the budget file sets no budget: it has no 'key = value' line (e.g. bytes_per_device = 256MiB)");
        ok = false;
    }
    return ok;
}

/* ---------------------------------------------------------------- judging */

static bool is_remat(const CommWarning *w) { return w->kind && strcmp(w->kind, "full-rematerialization") == 0; }

/* "all-gather x.1 sending 1,048,576 B (1.0 MiB), for h (line 36)" */
static void put_record(StrBuf *b, const CommRecord *c)
{
    sb_printf(b, "%s %s sending ", collective_kind_name(c->kind), c->instruction ? c->instruction : "-");
    text_put_bytes(b, c->bytes_per_device, 0);
    if (c->cause_instruction && *c->cause_instruction) {
        sb_printf(b, ", for %s", c->cause_instruction);
        if (c->cause_line) sb_printf(b, " (line %u)", (unsigned)c->cause_line);
    }
}

/* The record with the most bytes among those of kind k (-1: any kind). */
static const CommRecord *largest(const CommReport *r, int k)
{
    const CommRecord *best = NULL;
    for (int32_t i = 0; i < r->n_records; i++) {
        const CommRecord *c = &r->records[i];
        if ((k < 0 || (int)c->kind == k) && (!best || c->bytes_per_device > best->bytes_per_device)) best = c;
    }
    return best;
}

static void set_detail(VerdictItem *it, const char *s) { snprintf(it->detail, sizeof it->detail, "%s", s); }

static void detail_of(const CommReport *r, int s, VerdictItem *it)
{
    StrBuf b = {0};
    if (s == BUDGET_BYTES || (s >= BUDGET_KIND_BYTES && s < BUDGET_KIND_BYTES + N_KINDS)) {
        const CommRecord *c = largest(r, s == BUDGET_BYTES ? -1 : s - BUDGET_KIND_BYTES);
        if (c) {
            sb_puts(&b, "the largest is ");
            put_record(&b, c);
        }
    } else if (s == BUDGET_COLLECTIVES) {
        int64_t n[N_KINDS] = {0};
        for (int32_t i = 0; i < r->n_records; i++) n[r->records[i].kind]++;
        bool first = true;
        for (int k = 0; k < N_KINDS; k++)
            if (n[k]) {
                sb_printf(&b, "%s%lld %s", first ? "" : ", ", (long long)n[k], collective_kind_name((CollectiveKind)k));
                first = false;
            }
    } else if (s >= BUDGET_KIND_COUNT && s < BUDGET_KIND_COUNT + N_KINDS) {
        for (int32_t i = 0; i < r->n_records; i++)
            if ((int)r->records[i].kind == s - BUDGET_KIND_COUNT) {
                sb_puts(&b, "the first is ");
                put_record(&b, &r->records[i]);
                break;
            }
    } else if (s == BUDGET_REMAT) {
        for (int32_t i = 0; i < r->n_warnings; i++)
            if (is_remat(&r->warnings[i])) {
                const CommWarning *w = &r->warnings[i];
                sb_printf(&b, "the first is at %s", w->instruction ? w->instruction : "-");
                if (w->line) sb_printf(&b, " (line %u)", (unsigned)w->line);
                if (w->message) sb_printf(&b, ": %s", w->message);
                break;
            }
    } else if (s == BUDGET_PEAK && r->peak_instruction) {
        sb_printf(&b, "reached at %s", r->peak_instruction);
    }
    set_detail(it, sb_cstr(&b));
    sb_free(&b);
}

void budget_judge(const Budget *b, const CommReport *r, Verdict *v)
{
    memset(v, 0, sizeof *v);
    int64_t kbytes[N_KINDS] = {0}, kcount[N_KINDS] = {0}, remat = 0;
    for (int32_t i = 0; i < r->n_records; i++) {
        int k = (int)r->records[i].kind;
        if (k < 0 || k >= N_KINDS) continue;
        kcount[k]++;
        kbytes[k] = bytes_add_sat(kbytes[k], r->records[i].bytes_per_device);
    }
    for (int32_t i = 0; i < r->n_warnings; i++) remat += is_remat(&r->warnings[i]);
    for (int s = 0; s < BUDGET_N_SLOTS; s++) {
        VerdictItem *it = &v->item[s];
        it->slot = (BudgetSlot)s;
        it->of = 1;
        if (s == BUDGET_BYTES) it->measured = report_total_bytes(r);
        else if (s == BUDGET_COLLECTIVES) it->measured = r->n_records;
        else if (s < BUDGET_KIND_COUNT) it->measured = kbytes[s - BUDGET_KIND_BYTES];
        else if (s < BUDGET_REMAT) it->measured = kcount[s - BUDGET_KIND_COUNT];
        else if (s == BUDGET_REMAT) it->measured = remat;
        else if (s == BUDGET_PADDING) {
            it->measured = r->padding_bytes_per_device;
            it->of = r->value_bytes_per_device;
        } else if (s == BUDGET_PEAK) it->measured = r->peak_bytes_per_device;
        else it->measured = r->parameter_bytes_per_device;
        const BudgetLimit *l = &b->slot[s];
        if (!l->set) continue;
        it->has_limit = true;
        v->n_set++;
        if (s == BUDGET_PADDING)
            it->over = (Int128)it->measured * l->den > (Int128)l->limit * (it->of > 0 ? it->of : 0);
        else
            it->over = it->measured > l->limit;
        if (it->over) {
            v->n_over++;
            detail_of(r, s, it);
        }
    }
}

/* ---------------------------------------------------------------- printing */

/* Whether a measure gets a line: every total, a kind's only when it occurs
 * or has a budget. */
static bool shown(const VerdictItem *it)
{
    int s = it->slot;
    if (s >= BUDGET_KIND_BYTES && s < BUDGET_REMAT) return it->has_limit || it->measured > 0;
    return true;
}

static double share_pct(int64_t num, int64_t den) { return den > 0 ? 100.0 * (double)num / (double)den : 0.0; }

static void put_share(StrBuf *b, int64_t num, int64_t den, int digits)
{
    sb_printf(b, "%.*g%%", digits, share_pct(num, den));
}

/* The significant digits a share row prints with: at least 4, and as many
 * as it takes for the limit to print as given (99.99999% is not 100%) and
 * for a measure that differs from the limit to print differently (never
 * "11% > 11%" for 11.0016% over 11%). */
static int share_digits(const VerdictItem *it, const BudgetLimit *l)
{
    if (!it->has_limit) return 4;
    double lim = share_pct(l->limit, l->den), got = share_pct(it->measured, it->of);
    bool same = (Int128)it->measured * l->den == (Int128)l->limit * it->of;
    for (int d = 4; d < 17; d++) {
        char a[64], m[64];
        snprintf(a, sizeof a, "%.*g", d, lim);
        snprintf(m, sizeof m, "%.*g", d, got);
        if (strtod(a, NULL) == lim && (same || strcmp(a, m) != 0)) return d;
    }
    return 17;
}

static void put_value(StrBuf *b, int s, int64_t v, int64_t of, int digits)
{
    switch (slot_value_kind(s)) {
    case V_SIZE: text_put_bytes(b, v, 0); break;
    case V_SHARE:
        put_share(b, v, of, digits);
        sb_puts(b, " (");
        text_put_grouped(b, v);
        sb_puts(b, " B of ");
        text_put_grouped(b, of);
        sb_puts(b, " B)");
        break;
    default: sb_printf(b, "%lld", (long long)v); break;
    }
}

static void put_limit(StrBuf *b, int s, const BudgetLimit *l, int digits)
{
    switch (slot_value_kind(s)) {
    case V_SIZE: text_put_bytes(b, l->limit, 0); break;
    case V_SHARE: put_share(b, l->limit, l->den, digits); break;
    case V_FORBID: sb_puts(b, "0 (forbidden)"); break;
    default: sb_printf(b, "%lld", (long long)l->limit); break;
    }
}

void budget_print_text(StrBuf *out, const Budget *b, const Verdict *v)
{
    TextTable t = {5, 0, 0, "lllll", NULL};
    StrBuf cell = {0};
    static const char *const head[] = {"status", "budget", "measured", "limit", "set by"};
    for (int k = 0; k < 5; k++) text_table_puts(&t, head[k]);
    for (int s = 0; s < BUDGET_N_SLOTS; s++) {
        const VerdictItem *it = &v->item[s];
        if (!shown(it)) continue;
        text_table_puts(&t, !it->has_limit ? "-" : it->over ? "OVER" : "ok");
        text_table_puts(&t, KEYS[s]);
        int digits = share_digits(it, &b->slot[s]);
        put_value(&cell, s, it->measured, it->of, digits);
        text_table_put(&t, &cell);
        if (it->has_limit) put_limit(&cell, s, &b->slot[s], digits);
        else sb_putc(&cell, '-');
        text_table_put(&t, &cell);
        text_table_puts(&t, it->has_limit ? b->slot[s].source : "-");
    }
    text_table_print(out, &t);
    text_table_free(&t);
    sb_free(&cell);
    if (v->n_over) {
        sb_puts(out, "\nover budget:\n");
        for (int s = 0; s < BUDGET_N_SLOTS; s++) {
            const VerdictItem *it = &v->item[s];
            if (!it->over) continue;
            sb_printf(out, "  %s: ", KEYS[s]);
            int digits = share_digits(it, &b->slot[s]);
            put_value(out, s, it->measured, it->of, digits);
            sb_puts(out, " > ");
            put_limit(out, s, &b->slot[s], digits);
            if (it->detail[0]) sb_printf(out, "; %s", it->detail);
            sb_putc(out, '\n');
        }
    }
    sb_putc(out, '\n');
    if (v->n_over)
        sb_printf(out, "check: OVER BUDGET (%d of %d budget%s exceeded)\n", v->n_over, v->n_set, v->n_set == 1 ? "" : "s");
    else if (v->n_set)
        sb_printf(out, "check: OK (%d budget%s met)\n", v->n_set, v->n_set == 1 ? "" : "s");
    else
        sb_puts(out, "check: OK (no budgets set: give --budget FILE or limits such as --max-bytes)\n");
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

static json_t *jvalue(int s, int64_t v, int64_t of)
{
    if (slot_value_kind(s) == V_SHARE) return json_real(of > 0 ? (double)v / (double)of : 0.0);
    return json_integer((json_int_t)v);
}

json_t *budget_verdict_json(const Budget *b, const Verdict *v, const char *budget_file)
{
    json_t *o = json_object(), *items = json_array();
    json_object_set_new(o, "status", json_string(v->n_over ? "over-budget" : "ok"));
    json_object_set_new(o, "budget_file", budget_file ? jstr(budget_file) : json_null());
    json_object_set_new(o, "budgets_set", json_integer(v->n_set));
    json_object_set_new(o, "budgets_over", json_integer(v->n_over));
    for (int s = 0; s < BUDGET_N_SLOTS; s++) {
        const VerdictItem *it = &v->item[s];
        if (!shown(it)) continue;
        const BudgetLimit *l = &b->slot[s];
        json_t *e = json_object();
        json_object_set_new(e, "budget", json_string(KEYS[s]));
        if (!it->has_limit) json_object_set_new(e, "limit", json_null());
        else if (slot_value_kind(s) == V_SHARE) json_object_set_new(e, "limit", json_real((double)l->limit / (double)l->den));
        else json_object_set_new(e, "limit", json_integer((json_int_t)l->limit));
        json_object_set_new(e, "measured", jvalue(s, it->measured, it->of));
        json_object_set_new(e, "status", json_string(!it->has_limit ? "unbudgeted" : it->over ? "over" : "ok"));
        json_object_set_new(e, "source", it->has_limit ? jstr(l->source) : json_null());
        json_object_set_new(e, "detail", it->over && it->detail[0] ? jstr(it->detail) : json_null());
        json_array_append_new(items, e);
    }
    json_object_set_new(o, "budgets", items);
    return o;
}
