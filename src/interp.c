/* interp.c - stub, being written. */
#include "spmdc/sim.h"
