/* verify_run.c - stub, being written. */
#include "spmdc/sim.h"
#include <stdio.h>
int sim_verify_main(int argc, char **argv) { (void)argc; (void)argv; fputs("spmdc: error: verify not written yet\n", stderr); return 2; }
