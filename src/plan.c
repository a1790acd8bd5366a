/* plan.c - compiling one sharding plan (plan.h). */
#include "spmdc/plan.h"

#include <string.h>

#include "spmdc/memory.h"
#include "spmdc/pipeline.h"

bool plan_compile(const char *text, size_t len, uint32_t file_id, PassCtx *cx, Plan *p)
{
    memset(p, 0, sizeof p[0]);
    PipelineState st;
    memset(&st, 0, sizeof st);
    st.text = text;
    st.len = len;
    st.file_id = file_id;
    if (!pipeline_run(&st, cx, PASS_PARSE, PASS_PROPAGATE)) {
        pipeline_state_free(&st); /* no module that did not get through propagation */
        return false;
    }
    bool ok = pipeline_run(&st, cx, PASS_PARTITION, PASS_PARTITION);
    /* the plan takes what the passes made (the report's strings too) */
    p->in = st.m;
    p->out = st.out;
    p->rep = st.report;
    if (ok && p->out)
        memory_fill_report(&p->rep, p->in, p->out);
    return ok && p->out;
}

void plan_free(Plan *p)
{
    report_free(&p->rep);
    hlo_module_free(p->out);
    hlo_module_free(p->in);
    memset(p, 0, sizeof p[0]);
}
