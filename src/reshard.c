/* reshard.c - stub, being written. */
#include "spmdc/partition.h"
