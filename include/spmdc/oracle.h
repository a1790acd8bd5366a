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

/* Exit statuses of `spmdc verify` (docs/cli.md): */
#define ORACLE_EXIT_EQUAL 0          /* every output matches */
#define ORACLE_EXIT_MISMATCH 1       /* a wrong program: an output differs, the per-device program does not
                                        fit the input (--program) or its devices disagree while it runs */
#define ORACLE_EXIT_CANNOT_VERIFY 4  /* the module is too large to simulate, uses an op or element type
                                        the simulator does not run, or a run passes the work budget */
#define ORACLE_EXIT_INPUT_ERROR 5    /* an input file cannot be read, has an error, or spmdc cannot
                                        partition it (the errors compile reports) */

/* Entry point of `spmdc verify IN.hlo [--mesh SPEC] [--seed N] [--program OUT.hlo]`
 * (argv[0] == "verify"); prints the comparison to stdout and diagnostics to
 * stderr, and returns the exit status: one of the above, 2 a usage error. */
int oracle_main(int argc, char **argv);

#endif
