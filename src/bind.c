/* bind.c - stub, being written. */
#include "spmdc/parse.h"
bool bind_shardings(HloModule *m, PassCtx *cx) { (void)m; diag_error(cx->diag, SRC_SPAN_NONE, "bind not written yet"); return false; }
