/* pipeline.h - the passes of spmdc, in order, in one table.
 *
 *   parse         HLO text -> HloModule (parse.h)
 *   verify        the IR verifier: operand counts, attributes, shapes (verify.h)
 *   bind          the mesh is chosen and written shardings are bound (parse.h)
 *   canonicalize  tuple calls inlined, ... (canonicalize.h)
 *   propagate     every value gets a sharding (propagate.h)
 *   partition     the per-device program and the communication report (partition.h)
 *
 * Every command runs a prefix of this table (`spmdc compile` all of it,
 * `--dump-after NAME` up to NAME, `spmdc verify` all of it on its input).
 * After each pass the driver resets the scratch arena.  In builds with
 * SPMDC_VERIFY_EACH_PASS (CMake's Debug builds define it) the IR verifier
 * also runs after every pass from bind on, on the per-device program after
 * partition; a module a pass leaves invalid is then an internal error
 * naming the pass, never a wrong program.
 */
#ifndef SPMDC_PIPELINE_H
#define SPMDC_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "spmdc/hlo.h"
#include "spmdc/pass.h"
#include "spmdc/report.h"

typedef enum PassId {
    PASS_PARSE,
    PASS_VERIFY,
    PASS_BIND,
    PASS_CANONICALIZE,
    PASS_PROPAGATE,
    PASS_PARTITION,
    PASS_COUNT
} PassId;

/* What the passes read and write.  The caller sets text/len/file_id (the
 * text registered with diag_add_file) and zeroes the rest; everything else
 * is owned by the state (pipeline_state_free). */
typedef struct PipelineState {
    const char *text;
    size_t len;
    uint32_t file_id;
    HloModule *m;       /* from parse on: the module (shardings bound from bind, propagated from propagate) */
    HloModule *out;     /* after partition: the per-device program */
    CommReport report;  /* after partition: its communication report */
    bool has_report;
    struct Explain *explain; /* set by the caller: the partition pass's explain sink (explain.h), or NULL */
    /* Optional, set by the caller: text (a heap buffer) handed over to the
     * state, and text_fd, an open descriptor of the regular file it was read
     * from (driver_read_file_fd), or -1.  With a descriptor the text is freed
     * as soon as it is parsed (the parse keeps no pointer into it) and the
     * diagnostics re-read the file if an excerpt needs it
     * (diag_release_text); else pipeline_state_free frees it. */
    char *owned_text;
    int text_fd;
    struct stat text_stamp; /* with text_fd: its fstat before the text was read (driver_read_file_fd) */
    /* The entry's input names for partition, gathered on a second thread
     * while propagate runs (partition_names_start), or NULL. */
    struct PartNames *names_ahead;
} PipelineState;

/* One pass: true on success; false after reporting >= 1 error through cx->diag. */
typedef bool (*PassFn)(PipelineState *st, PassCtx *cx);

typedef struct PassInfo {
    PassId id;
    const char *name;    /* as --dump-after spells it */
    PassFn run;
    bool on_output;      /* works on st->out (partition) rather than st->m */
} PassInfo;

/* The table, in pipeline order: pipeline_pass(id) for id < PASS_COUNT. */
const PassInfo *pipeline_pass(PassId id);
/* The pass called name, or NULL. */
const PassInfo *pipeline_find(const char *name);
/* "parse, verify, bind, canonicalize, propagate, partition" (static). */
const char *pipeline_pass_names(void);

/* Runs passes first..last in order (first > PASS_PARSE needs the state the
 * earlier passes left).  Stops at the first pass that fails.  True iff
 * every pass succeeded. */
bool pipeline_run(PipelineState *st, PassCtx *cx, PassId first, PassId last);
/* The module as it stands after pass `after` (st->out after partition). */
const HloModule *pipeline_module(const PipelineState *st, PassId after);
/* Frees the modules and the report.  The state can be reused after it. */
void pipeline_state_free(PipelineState *st);

#endif
