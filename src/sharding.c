/* sharding.c - stub, being written. */
#include "spmdc/sharding.h"
