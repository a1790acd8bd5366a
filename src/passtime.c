/* passtime.c - per-stage wall time and memory lines (see passtime.h). */
#include "spmdc/passtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int g_enabled = -1; /* -1 = not read yet */
static double g_start = -1, g_last = -1, g_last_cpu = 0;

/* User + system CPU seconds of the process so far. */
static double cpu_s(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool passtime_enabled(void)
{
    if (g_enabled < 0) {
        const char *e = getenv("SPMDC_TIME_PASSES");
        g_enabled = e && *e && strcmp(e, "0") != 0;
        if (g_enabled) {
            g_start = g_last = now_s();
            g_last_cpu = cpu_s();
        }
    }
    return g_enabled;
}

static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long long size = 0, res = 0;
    int ok = fscanf(f, "%llu %llu", &size, &res) == 2;
    fclose(f);
    return ok ? (double)res * (double)sysconf(_SC_PAGESIZE) / 1048576.0 : 0;
}

/* The process's own peak resident memory: VmHWM of /proc/self/status
 * (getrusage's ru_maxrss also counts the parent's peak before exec, since
 * Linux keeps it across execve). */
static double peak_mib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        unsigned long long kib = 0;
        bool found = false;
        while (!found && fgets(line, sizeof line, f))
            found = sscanf(line, "VmHWM: %llu kB", &kib) == 1;
        fclose(f);
        if (found) return (double)kib / 1024.0;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

void passtime_stage(const char *name)
{
    if (!passtime_enabled()) return;
    double t = now_s(), c = cpu_s();
    fprintf(stderr, "spmdc: time-passes: %s %.3f s, rss %.1f MiB, peak %.1f MiB, cpu %.3f s\n", name, t - g_last,
            rss_mib(), peak_mib(), c - g_last_cpu);
    g_last = now_s(); /* the line's own cost is not the next stage's */
    g_last_cpu = cpu_s();
}

void passtime_total(void)
{
    if (!passtime_enabled()) return;
    fprintf(stderr, "spmdc: time-passes: total %.3f s, rss %.1f MiB, peak %.1f MiB, cpu %.3f s\n", now_s() - g_start,
            rss_mib(), peak_mib(), cpu_s());
}
