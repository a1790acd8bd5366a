/* budget.h - communication and memory budgets for a sharding plan, and the
 * verdict of a plan against them (`spmdc check`, docs/ci.md).
 *
 * A budget is a set of limits, each an upper bound on one measure of the
 * report (report.h) of the plan compiled for one mesh:
 *
 *   key                          measure (report JSON)                    value
 *   bytes_per_device             totals.bytes_per_device                  size
 *   collectives                  totals.count                             count
 *   <kind>.bytes_per_device      totals.by_kind[<kind>].bytes_per_device  size
 *   <kind>.count                 totals.by_kind[<kind>].count             count
 *   full_rematerialization       full-rematerialization warnings          forbid | allow
 *   padding_share                memory.padding_bytes_per_device /        share: 5%, 0.05
 *                                memory.value_bytes_per_device
 *   peak_bytes_per_device        memory.peak_bytes_per_device             size
 *   parameter_bytes_per_device   memory.parameter_bytes_per_device        size
 *
 * <kind> is a collective's HLO name (all-reduce, all-gather, reduce-scatter,
 * all-to-all, collective-permute).  `forbid = all-to-all, collective-permute`
 * sets those kinds' counts to 0; `full_rematerialization = forbid` limits
 * the warnings to 0.  A size is a number with an optional unit: B; KiB,
 * MiB, GiB, TiB, PiB (powers of 1024; K, M, G, T, P mean the same); kB, KB,
 * MB, GB, TB, PB (powers of 1000); decimals and digit groups are allowed
 * (`1.5GB`, `234,881,024`: 1-3 digits, then groups of exactly 3 after ','
 * or '_') as long as the result is a whole number of bytes.
 *
 * A budget file holds one `key = value` per line, `#` starts a comment,
 * blank lines are ignored; `mesh = SPEC` gives the mesh the budgets are
 * for (as --mesh).  A file sets each key once (a `forbid` list sets the
 * counts of the kinds it names, each named once); a second setting is an
 * error at its line and column.  Command-line limits are applied after the
 * file and override it key by key; the options too set each key once.
 */
#ifndef SPMDC_BUDGET_H
#define SPMDC_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "spmdc/diag.h"
#include "spmdc/mesh.h"
#include "spmdc/report.h"
#include "spmdc/strbuf.h"

/* The budgets, in the order verdicts list them. */
typedef enum BudgetSlot {
    BUDGET_BYTES,                                        /* bytes_per_device */
    BUDGET_COLLECTIVES,                                  /* collectives */
    BUDGET_KIND_BYTES,                                   /* + CollectiveKind: <kind>.bytes_per_device */
    BUDGET_KIND_COUNT = BUDGET_KIND_BYTES + 5,           /* + CollectiveKind: <kind>.count */
    BUDGET_REMAT = BUDGET_KIND_COUNT + 5,                /* full_rematerialization */
    BUDGET_PADDING,                                      /* padding_share */
    BUDGET_PEAK,                                         /* peak_bytes_per_device */
    BUDGET_PARAMS,                                       /* parameter_bytes_per_device */
    BUDGET_N_SLOTS
} BudgetSlot;

typedef struct BudgetLimit {
    bool set;
    int64_t limit;             /* bytes or count; padding_share: numerator of limit/den */
    int64_t den;               /* padding_share: the share is limit/den (den > 0); else 1 */
    char source[96];           /* where it was set: "mlp.budget:3", "--max-bytes" */
} BudgetLimit;

typedef struct Budget {
    BudgetLimit slot[BUDGET_N_SLOTS];
    bool has_mesh;             /* the budget file said `mesh = ...` */
    Mesh mesh;
    char mesh_source[96];      /* where: "mlp.budget:1", "--limit" */
} Budget;

/* The key of a slot ("bytes_per_device", "all-gather.count", ...). */
const char *budget_key(BudgetSlot s);

/* Parses a size (see above) into *bytes; false with a message in err. */
bool budget_parse_size(const char *s, int64_t *bytes, char *err, size_t errlen);
/* Parses a share ("5%", "0.05") as num/den exactly; false with a message in
 * err when it is not a number in [0, 1]. */
bool budget_parse_share(const char *s, int64_t *num, int64_t *den, char *err, size_t errlen);

/* The bit of the mesh in budget_key_slots' mask. */
#define BUDGET_MESH_BIT (1u << BUDGET_N_SLOTS)
_Static_assert(BUDGET_N_SLOTS < 32, "budget_key_slots' mask holds every slot and the mesh in 32 bits");

/* The slots a setting of key to value sets, as a mask of 1 << BudgetSlot
 * (BUDGET_MESH_BIT for `mesh`; a `forbid` list: its kinds' counts); 0 when
 * key or, for forbid, value is malformed (budget_set says why). */
uint32_t budget_key_slots(const char *key, const char *value);

/* Sets key to value (the budget file's syntax: "bytes_per_device",
 * "256MiB"; "forbid", "all-to-all, collective-permute"; "mesh", "model=8"),
 * recording source.  False with a message in err on an unknown key or a
 * malformed value. */
bool budget_set(Budget *b, const char *key, const char *value, const char *source, char *err, size_t errlen);

/* Reads a budget file (text[0..len), registered in diag as file_id,
 * display path `path`; a leading UTF-8 byte-order mark is skipped) into b.  Errors are `path:line:col: error: ...`
 * through diag; false if there was any. */
bool budget_read(Budget *b, const char *text, size_t len, uint32_t file_id, const char *path, DiagEngine *diag);

/* One line of a verdict. */
typedef struct VerdictItem {
    BudgetSlot slot;
    bool has_limit;            /* a budget is set for it */
    bool over;                 /* measured > limit */
    int64_t measured;          /* bytes or count; padding_share: padding bytes (share = measured/of) */
    int64_t of;                /* padding_share: value bytes; else 1 */
    char detail[512];          /* over: what exceeds it ("the first is all-gather x.1 for h (line 36)") */
} VerdictItem;

typedef struct Verdict {
    VerdictItem item[BUDGET_N_SLOTS];
    int32_t n_set, n_over;
} Verdict;

/* Judges the report of a plan (memory filled by memory_fill_report)
 * against b. */
void budget_judge(const Budget *b, const CommReport *rep, Verdict *v);
/* The verdict as a table: one row per measure (status ok / OVER / - for no
 * budget, measure, measured, limit, where the limit came from), then a line
 * per exceeded budget with its detail, then
 * `check: OK (N budgets met)` or `check: OVER BUDGET (K of N budgets exceeded)`. */
void budget_print_text(StrBuf *out, const Budget *b, const Verdict *v);
/* The `verdict` object of check's JSON report (docs/ci.md): {"status":
 * "ok" | "over-budget", "budget_file", "budgets_set", "budgets_over",
 * "budgets": [{"budget", "limit", "measured", "status", "source",
 * "detail"}]}, one entry per measure, in slot order.  The caller owns it
 * (json_decref). */
json_t *budget_verdict_json(const Budget *b, const Verdict *v, const char *budget_file);

#endif
