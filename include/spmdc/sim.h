/* sim.h - reference interpreter, N-device SPMD simulator and `spmdc verify`.
 * (Being written: see issue "spmdc verify".) */
#ifndef SPMDC_SIM_H
#define SPMDC_SIM_H

/* Entry point of `spmdc verify ...` (argv[0] == "verify"); returns the exit status. */
int sim_verify_main(int argc, char **argv);

#endif
