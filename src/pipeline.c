/* pipeline.c - the pass table and the loop that runs it (see pipeline.h). */
#include "spmdc/pipeline.h"
#include "spmdc/pages.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spmdc/canonicalize.h"
#include "spmdc/driver.h"
#include "spmdc/parse.h"
#include "spmdc/passtime.h"
#include "spmdc/partition.h"
#include "spmdc/propagate.h"
#include "spmdc/verify.h"

static bool run_parse(PipelineState *st, PassCtx *cx)
{
    st->m = parse_hlo(st->text, st->len, st->file_id, cx->diag);
    if (st->owned_text && st->text_fd >= 0) {
        /* a mapped input written while it was parsed: the module may hold
         * bytes of two versions of the file */
        if (driver_text_changed(st->owned_text, st->text_fd, &st->text_stamp)) {
            diag_error(cx->diag, SRC_SPAN_NONE, "%s changed while it was read", diag_file_path(cx->diag, st->file_id));
            hlo_module_free(st->m);
            st->m = NULL;
        }
        diag_release_text(cx->diag, st->file_id, st->text_fd, &st->text_stamp);
        driver_free_text(st->owned_text, st->len);
        st->owned_text = NULL;
        st->text = NULL;
        st->text_fd = -1;
    }
    return st->m != NULL;
}

static bool run_verify(PipelineState *st, PassCtx *cx) { return verify_module(st->m, cx->diag); }
static bool run_bind(PipelineState *st, PassCtx *cx) { return bind_shardings(st->m, cx); }
static bool run_canonicalize(PipelineState *st, PassCtx *cx) { return canonicalize_module(st->m, cx); }
static bool run_propagate(PipelineState *st, PassCtx *cx) { return propagate_shardings(st->m, cx); }

static bool run_partition(PipelineState *st, PassCtx *cx)
{
    report_init(&st->report, st->m->name, &st->m->mesh);
    for (int32_t k = 0; k < st->m->n_input_warnings; k++) { /* the passes' before partition's */
        const HloInputWarning *w = &st->m->input_warnings[k];
        report_warn(&st->report, w->kind, w->instruction, w->line, w->message);
    }
    st->report.explain = st->explain;
    st->has_report = true;
    bool ok = partition_module_ahead(st->m, &st->out, &st->report, cx, st->names_ahead);
    partition_names_free(st->names_ahead);
    st->names_ahead = NULL;
    return ok;
}

static const PassInfo PASSES[PASS_COUNT] = {
    {PASS_PARSE, "parse", run_parse, false},
    {PASS_VERIFY, "verify", run_verify, false},
    {PASS_BIND, "bind", run_bind, false},
    {PASS_CANONICALIZE, "canonicalize", run_canonicalize, false},
    {PASS_PROPAGATE, "propagate", run_propagate, false},
    {PASS_PARTITION, "partition", run_partition, true},
};

const PassInfo *pipeline_pass(PassId id)
{
    SPMDC_ASSERT(id >= 0 && id < PASS_COUNT && PASSES[id].id == id);
    return &PASSES[id];
}

const PassInfo *pipeline_find(const char *name)
{
    for (int k = 0; k < PASS_COUNT; k++)
        if (strcmp(PASSES[k].name, name) == 0) return &PASSES[k];
    return NULL;
}

const char *pipeline_pass_names(void) { return "parse, verify, bind, canonicalize, propagate, partition"; }

const HloModule *pipeline_module(const PipelineState *st, PassId after)
{
    return pipeline_pass(after)->on_output ? st->out : st->m;
}

#if defined(SPMDC_VERIFY_EACH_PASS)
/* The IR verifier on what pass p produced; its findings are internal errors. */
static bool verify_after(PipelineState *st, PassCtx *cx, const PassInfo *p)
{
    if (p->id <= PASS_VERIFY) return true; /* parse is checked by the verify pass itself */
    const HloModule *m = pipeline_module(st, p->id);
    if (!m) return true;
    int before = diag_error_count(cx->diag);
    if (verify_module(m, cx->diag)) return true;
    diag_error(cx->diag, SRC_SPAN_NONE, "internal error: the module fails the IR verifier after pass %s (%d error%s "
               "above); please report it", p->name, diag_error_count(cx->diag) - before,
               diag_error_count(cx->diag) - before == 1 ? "" : "s");
    return false;
}
#endif

bool pipeline_run(PipelineState *st, PassCtx *cx, PassId first, PassId last)
{
    bool ok = true;
    for (int k = first; k <= (int)last && ok; k++) {
        const PassInfo *p = pipeline_pass((PassId)k);
        int errors = diag_error_count(cx->diag);
        if (p->id == PASS_PROPAGATE && last >= PASS_PARTITION && !st->names_ahead)
            st->names_ahead = partition_names_start(st->m);
        ok = p->run(st, cx);
        /* A pass that reported an error failed, whatever it returned: no
         * later pass, output file or exit status 0 follows an error. */
        if (diag_error_count(cx->diag) > errors) ok = false;
        arena_reset(cx->scratch);
        /* the pages the passes freed go back to the kernel before printing */
        if (k == (int)last || !ok) pages_trim();
        passtime_stage(p->name);
#if defined(SPMDC_VERIFY_EACH_PASS)
        if (ok) ok = verify_after(st, cx, p);
#endif
    }
    if (!ok) { /* partition will not take it */
        partition_names_free(st->names_ahead);
        st->names_ahead = NULL;
    }
    return ok;
}

void pipeline_state_free(PipelineState *st)
{
    partition_names_free(st->names_ahead);
    st->names_ahead = NULL;
    hlo_module_free(st->out);
    hlo_module_free(st->m);
    if (st->has_report) report_free(&st->report);
    if (st->owned_text) {
        driver_free_text(st->owned_text, st->len);
        if (st->text_fd >= 0) close(st->text_fd);
        st->owned_text = NULL;
        st->text = NULL;
    }
    st->out = st->m = NULL;
    st->has_report = false;
}
