/* verify.c - stub, being written. */
#include "spmdc/verify.h"
bool verify_module(const HloModule *m, DiagEngine *diag) { (void)m; (void)diag; return true; }
