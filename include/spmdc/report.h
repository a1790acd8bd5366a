/* report.h - the communication report and its cost model (docs/report.md).
 *
 * Bytes each device sends, ring algorithms as NCCL's performance notes model
 * them (nccl-tests doc/PERFORMANCE.md), n = group size:
 *   all-reduce          floor(2*(n-1)*B/n), B = per-device operand bytes
 *   all-gather          floor((n-1)*B/n),   B = per-device RESULT bytes
 *   reduce-scatter      floor((n-1)*B/n),   B = per-device OPERAND bytes
 *   all-to-all          floor((n-1)*B/n),   B = per-device operand bytes
 *   collective-permute  B for a device that sends
 * The same function (comm_bytes_per_device) feeds the report and every cost
 * decision of the partitioner.
 */
#ifndef SPMDC_REPORT_H
#define SPMDC_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "spmdc/mesh.h"
#include "spmdc/shape.h"
#include "spmdc/strbuf.h"

typedef enum CollectiveKind {
    COLL_ALL_REDUCE,
    COLL_ALL_GATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALL_TO_ALL,
    COLL_COLLECTIVE_PERMUTE,
} CollectiveKind;

const char *collective_kind_name(CollectiveKind k); /* HLO spelling: "all-reduce" ... */

/* Exact per-device bytes sent; n <= 1 gives 0.  operand_bytes/result_bytes
 * are per-device buffer sizes in bytes.  Overflow-safe for B < 2^62. */
int64_t comm_bytes_per_device(CollectiveKind k, int64_t n, int64_t operand_bytes, int64_t result_bytes);

typedef struct CommRecord {
    CollectiveKind kind;
    char *instruction;         /* name in the emitted program (the report's text blocks) */
    ElemType dtype;
    int32_t operand_rank, result_rank;
    int64_t operand_dims[SPMDC_MAX_RANK], result_dims[SPMDC_MAX_RANK]; /* per device */
    int32_t n_atoms;
    int8_t atoms[SPMDC_MAX_ATOMS]; /* mesh atoms the groups run over */
    int64_t group_size, num_groups;
    int64_t bytes_per_device;  /* comm_bytes_per_device(...) * multiplier */
    int64_t multiplier;        /* times it runs per program run: the product of the known trip
                                  counts of the loops around it (1 outside loops) */
    bool per_trip;             /* some loop around it has an unknown trip count: bytes_per_device
                                  counts one trip of that loop */
    bool from_input;           /* written by the user (a collective inside a manual region), not
                                  inserted by the partitioner */
    char *cause_instruction;   /* input instruction whose sharding forced it (the report's text blocks) */
    uint32_t cause_line;       /* its line in the input (0 if none) */
    char *reason;              /* words (the report's text blocks), without the cause's name: "contracting dim 1 of lhs
                                  sharded on 'model'"; the printers add "dot.7 (line 7): " (a
                                  leading "dot.7: " is tolerated and dropped) */
    int32_t halo_dim;          /* a collective of a halo exchange: the dim of the per-device operand
                                  its rows run along; -1 (report_add's default) for any other */
    int64_t halo_lo, halo_hi;  /* rows this collective brings to a device from the shards below
                                  (lower indices) and above; an all-gather of the dim counts what
                                  the windows read beyond the device's own shard */
} CommRecord;

typedef struct CommWarning {
    char *kind;                /* "full-rematerialization", "uneven-padding", ... (heap) */
    char *instruction;
    uint32_t line;
    char *message;
} CommWarning;

/* A value whose sharding pads a dim (XLA's ceil layout: shards of
 * ceil(n/t)); one per array leaf. */
typedef struct CommPadding {
    char *instruction;         /* input instruction (heap) */
    uint32_t line;
    int32_t leaf;              /* array leaf (0 for arrays) */
    int64_t elements;          /* padding elements summed over all devices */
    int64_t bytes;             /* the same in bytes */
    int64_t max_device_bytes;  /* padding bytes of the device that holds the most */
} CommPadding;

typedef struct CommReport {
    char *module;              /* heap */
    Mesh mesh;
    int32_t n_records, cap_records;
    CommRecord *records;       /* program order */
    int32_t n_warnings, cap_warnings;
    CommWarning *warnings;
    int64_t parameter_bytes_per_device;
    int64_t parameter_bytes_unpartitioned;
    /* Per-device memory of the partitioned program (memory.h), printed only
     * when has_memory_estimate (memory_fill_report sets it). */
    bool has_memory_estimate;
    int64_t peak_bytes_per_device;     /* peak of live buffers on one device, bytes */
    char *peak_instruction;            /* per-device program instruction at the peak (heap), or NULL */
    int64_t padding_bytes_per_device;  /* padding of uneven shards on the most padded device, bytes */
    int64_t value_bytes_per_device;    /* every value's local bytes, summed (the padding share's
                                          denominator) */
    int32_t n_padding, cap_padding;
    CommPadding *padding;      /* padded values, program order */
    /* Optional sink of the partitioner's decisions and of each collective's
     * chain (explain.h; `compile --explain`); NULL: off.  Not owned. */
    struct Explain *explain;
    /* Optional: when set, the memory estimate may still be in the making
     * on another thread (main.c prints the program and the report at once
     * and makes the estimate on whichever gets there first): the printers
     * call memory_wait(memory_wait_ctx), which returns once the estimate
     * is in, before they read has_memory_estimate and the fields above it. */
    void (*memory_wait)(void *ctx);
    void *memory_wait_ctx;
    /* The records' strings, packed into blocks the report owns (report.c):
     * one copy per record instead of three heap strings. */
    struct ReportText *text;
    /* Where records lives (report.c): an arena whose large blocks grow in
     * place (mremap on Linux), so a growing report copies no rows. */
    struct Arena *rows;
} CommReport;

/* An empty report for module (copied) on mesh (copied; NULL = no mesh). */
void report_init(CommReport *r, const char *module, const Mesh *mesh);
/* Frees every string and array; r is left empty (report_init again to reuse). */
void report_free(CommReport *r);
/* Appends a record (strings copied, NULL allowed) and returns it for the
 * caller to fill (dtype, dims, atoms, bytes_per_device); multiplier,
 * group_size and num_groups start at 1.  The pointer is valid until the next
 * report_add. */
CommRecord *report_add(CommReport *r, CollectiveKind kind, const char *instruction, const char *cause_instruction,
                       uint32_t cause_line, const char *reason);
void report_warn(CommReport *r, const char *kind, const char *instruction, uint32_t line, const char *message);
/* Appends a padded value (instruction copied). */
void report_pad(CommReport *r, const char *instruction, uint32_t line, int32_t leaf, int64_t elements, int64_t bytes,
                int64_t max_device_bytes);
/* Sum of bytes_per_device over the records (saturates at INT64_MAX). */
int64_t report_total_bytes(const CommReport *r);
/* The text table (docs/report.md "Text form"): title, one row per record,
 * totals per kind, parameter memory, warnings; "no communication" when
 * there are no records. */
void report_print_text(StrBuf *b, const CommReport *r);
/* JSON, schema spmdc.report/v1, keys in a fixed order, 2-space indent, trailing newline. */
void report_print_json(StrBuf *b, const CommReport *r);

/* The report's JSON writer (report.c), for members a caller adds to each
 * collective's object: it writes into the report as it goes, in the layout
 * report_print_json uses (jansson's JSON_INDENT(2) | JSON_PRESERVE_ORDER
 * dump, strings escaped as jansson escapes them, NULL as null).  A hook
 * writes a member as report_json_key then one value: a scalar, or an
 * object or array opened and closed around further members or values,
 * nested at most 16 deep in all. */
typedef struct JsonOut JsonOut;
void report_json_key(JsonOut *j, const char *key);
void report_json_open(JsonOut *j, char c); /* '{' or '[' */
void report_json_close(JsonOut *j, char c);
void report_json_str(JsonOut *j, const char *s);
void report_json_int(JsonOut *j, int64_t v);
void report_json_bool(JsonOut *j, bool v);
void report_json_null(JsonOut *j);
/* A value already in JSON text (a jansson json_dumps with JSON_INDENT(2) |
 * JSON_PRESERVE_ORDER, no trailing newline), indented to where it goes. */
void report_json_raw(JsonOut *j, const char *text);
/* Called at the end of collective `record`'s object, and with record -1 at
 * the end of the document's object, to add members. */
typedef void (*ReportJsonHook)(JsonOut *j, int32_t record, void *ctx);
/* report_print_json with hook(j, i, ctx) adding members to record i and
 * hook(j, -1, ctx) to the document. */
void report_print_json_with(StrBuf *b, const CommReport *r, ReportJsonHook hook, void *ctx);

#endif
