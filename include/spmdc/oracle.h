/* oracle.h - the numerical oracle behind `spmdc verify` (src/oracle.c).
 *
 * It runs the unpartitioned module on the reference interpreter, the
 * per-device program (partitioned here, or read with --program) on every
 * device of the mesh in the simulator (sim.h), and compares every output
 * shard by shard within tolerances (docs/verify.md).  Not to be confused
 * with the IR verifier (verify.h), which checks that a module is
 * well-formed.
 */
#ifndef SPMDC_ORACLE_H
#define SPMDC_ORACLE_H

/* Entry point of `spmdc verify IN.hlo [--mesh SPEC] [--seed N] [--program OUT.hlo]`
 * (argv[0] == "verify"); prints the comparison to stdout and diagnostics to
 * stderr, and returns the exit status (docs/cli.md): 0 every output
 * matches; 1 a mismatch, an error in an input file, a module too large to
 * simulate or a simulation error; 2 a usage error. */
int oracle_main(int argc, char **argv);

#endif
