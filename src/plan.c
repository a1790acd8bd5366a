/* plan.c - compiling one sharding plan (plan.h). */
#include "spmdc/plan.h"

#include <string.h>

#include "spmdc/driver.h"
#include "spmdc/memory.h"
#include "spmdc/partition.h"

bool plan_compile(const char *text, size_t len, uint32_t file_id, PassCtx *cx, Plan *p)
{
    memset(p, 0, sizeof p[0]);
    p->in = driver_load_module(text, len, file_id, cx, true);
    if (!p->in) return false;
    report_init(&p->rep, p->in->name, &p->in->mesh);
    bool ok = partition_module(p->in, &p->out, &p->rep, cx);
    arena_reset(cx->scratch);
    if (ok) memory_fill_report(&p->rep, p->in, p->out);
    return ok;
}

void plan_free(Plan *p)
{
    report_free(&p->rep);
    hlo_module_free(p->out);
    hlo_module_free(p->in);
    memset(p, 0, sizeof p[0]);
}
