/* hlo_print.c - stub, being written. */
#include "spmdc/hlo.h"
void hlo_print_module(StrBuf *b, const HloModule *m, const HloPrintOptions *opt) { (void)b; (void)m; (void)opt; }
void hlo_print_inst(StrBuf *b, const HloModule *m, int32_t c, int32_t i, const HloPrintOptions *opt) { (void)b; (void)m; (void)c; (void)i; (void)opt; }
