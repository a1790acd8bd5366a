/* bench_propagate.c - times sharding propagation alone on one HLO module.
 *
 *   bench_propagate FILE.hlo [--mesh SPEC] [--repeat N]
 *
 * Loads FILE (parse, verify, bind, canonicalize: not timed), then runs
 * propagate_shardings on a fresh copy N times (default 3; each copy is
 * parsed again, untimed) and prints the instruction count, the fastest
 * and median wall time of the propagation pass (single-threaded) and its
 * fastest CPU time (less disturbed by other work on the machine).  Built only
 * on request: `cmake --build build --target bench_propagate`;
 * tools/bench_propagate.sh generates the modules and runs it.  Exit status 0,
 * 1 when the module does not load, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spmdc/driver.h"
#include "spmdc/propagate.h"

static double now_sec(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *path = NULL, *mesh = NULL;
    int repeat = 3;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mesh") == 0 && i + 1 < argc)
            mesh = argv[++i];
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!path && argv[i][0] != '-')
            path = argv[i];
        else
            path = NULL, i = argc;
    }
    if (!path || repeat < 1 || repeat > 100) {
        fputs("usage: bench_propagate FILE.hlo [--mesh SPEC] [--repeat N]\n", stderr);
        return 2;
    }
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    if (mesh) {
        char err[200];
        if (!mesh_parse_spec(mesh, &opt.mesh, err, sizeof err)) {
            fprintf(stderr, "bench_propagate: %s\n", err);
            return 2;
        }
        opt.has_mesh = true;
    }
    size_t len;
    char *text = driver_read_file(path, &len);
    if (!text)
        return 1;
    double *t = calloc((size_t)repeat, sizeof *t), *cpu = calloc((size_t)repeat, sizeof *cpu);
    long long insts = 0;
    for (int r = 0; r < repeat; r++) {
        DiagEngine *diag = diag_create(stderr);
        uint32_t fid = diag_add_file(diag, path, text, len);
        Arena *scratch = arena_create();
        PassCtx cx = {scratch, diag, &opt};
        HloModule *m = driver_load_module(text, len, fid, &cx, false);
        if (!m) {
            diag_destroy(diag);
            arena_destroy(scratch);
            free(text);
            free(t);
            free(cpu);
            return 1;
        }
        insts = 0;
        for (int32_t c = 0; c < m->n_comps; c++)
            insts += m->comps[c].n_insts;
        double t0 = now_sec(CLOCK_MONOTONIC), c0 = now_sec(CLOCK_PROCESS_CPUTIME_ID);
        propagate_shardings(m, &cx);
        t[r] = now_sec(CLOCK_MONOTONIC) - t0;
        cpu[r] = now_sec(CLOCK_PROCESS_CPUTIME_ID) - c0;
        hlo_module_free(m);
        arena_destroy(scratch);
        diag_destroy(diag);
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    qsort(cpu, (size_t)repeat, sizeof *cpu, cmp_double);
    printf("%s: %lld instructions, propagation %.3f s wall (fastest of %d, median %.3f s), %.3f s CPU, "
           "%.0f ns CPU per instruction\n",
           path, insts, t[0], repeat, t[repeat / 2], cpu[0], cpu[0] * 1e9 / (double)(insts ? insts : 1));
    free(t);
    free(cpu);
    free(text);
    return 0;
}
