/* report.c - stub, being written. */
#include "spmdc/report.h"
#include <string.h>
void report_init(CommReport *r, const char *module, const Mesh *mesh) { (void)module; (void)mesh; memset(r, 0, sizeof *r); }
void report_free(CommReport *r) { (void)r; }
void report_print_text(StrBuf *b, const CommReport *r) { (void)b; (void)r; }
void report_print_json(StrBuf *b, const CommReport *r) { (void)b; (void)r; }
