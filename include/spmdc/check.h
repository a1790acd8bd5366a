/* check.h - `spmdc check`: a sharding plan judged against budgets.
 *
 *   spmdc check IN.hlo [--mesh SPEC] [--budget FILE | --no-budget-file]
 *                      [--max-bytes SIZE] [--max-collectives N] [--forbid KINDS]
 *                      [--no-remat] [--max-padding SHARE] [--max-memory SIZE]
 *                      [--limit KEY=VALUE]... [--report text|json] [--report-out FILE]
 *
 * The budgets and the budget file are described in budget.h and docs/ci.md.
 */
#ifndef SPMDC_CHECK_H
#define SPMDC_CHECK_H

/* Exit status of a plan that exceeds a budget. */
#define SPMDC_EXIT_OVER_BUDGET 3

/* Entry point (argv[0] == "check"); returns the exit status: 0 every
 * budget met, SPMDC_EXIT_OVER_BUDGET some budget exceeded, 1 an error in
 * the input or the budget file (reported as file:line:col: error: ...), 2 a
 * usage error (also a malformed budget option). */
int check_main(int argc, char **argv);

#endif
