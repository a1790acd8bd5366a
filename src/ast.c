/* ast.c - stub, being written. */
#include "spmdc/arena.h"
typedef int ast_placeholder_;
