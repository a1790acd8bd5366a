/* passtime.h - per-stage wall time and memory of a run, for benchmarks.
 *
 * With the environment variable SPMDC_TIME_PASSES set to anything but ""
 * or "0", every stage of a run (read, the passes of pipeline.h, print,
 * report, write) ends with one line on stderr:
 *
 *   spmdc: time-passes: parse 0.412 s, rss 377.1 MiB, peak 377.3 MiB, cpu 0.410 s
 *
 * wall seconds since the previous stage ended (the first stage counts from
 * the first passtime_enabled call, which main makes on entry),
 * the resident set size at the end of the stage (/proc/self/statm) and the
 * peak resident set size so far (VmHWM of /proc/self/status), in MiB of 2^20
 * bytes, and the CPU seconds (user + system, getrusage) the stage took
 * (less sensitive than wall time to other jobs on the machine).  A last
 * line "total" gives the time since that first call.
 * Off (the default), every call is a cheap no-op and nothing is printed, so
 * golden output never changes.  tools/bench_scale.py reads these lines.
 */
#ifndef SPMDC_PASSTIME_H
#define SPMDC_PASSTIME_H

#include <stdbool.h>

/* Whether SPMDC_TIME_PASSES asks for the lines (read once). */
bool passtime_enabled(void);
/* Ends stage `name` (static string): prints its line when enabled. */
void passtime_stage(const char *name);
/* Prints the "total" line when enabled. */
void passtime_total(void);

#endif
