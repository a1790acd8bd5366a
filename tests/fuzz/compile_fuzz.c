/* compile_fuzz.c - libFuzzer entry for the whole pipeline: parse, verify,
 * bind, canonicalize, propagate, partition, print and report, on arbitrary
 * bytes, on the file's own mesh.  Every input must either compile or fail
 * with >= 1 error; a crash, sanitizer report, leak or hang is a bug.
 * Built with -DSPMDC_FUZZ=ON and clang (see parse_fuzz.c); seed it with
 * examples/ and tests/cases. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/diag.h"
#include "spmdc/driver.h"
#include "spmdc/hlo.h"
#include "spmdc/partition.h"
#include "spmdc/report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    DiagEngine *d = diag_create(NULL);
    uint32_t fid = diag_add_file(d, "fuzz.hlo", (const char *)data, size);
    Arena *scratch = arena_create();
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    PassCtx cx = {scratch, d, &opt};
    HloModule *m = driver_load_module((const char *)data, size, fid, &cx, true);
    if (!m && diag_error_count(d) == 0) abort();
    if (m && m->mesh.n_devices <= 64) {
        CommReport rep;
        report_init(&rep, m->name, &m->mesh);
        HloModule *out = NULL;
        bool ok = partition_module(m, &out, &rep, &cx);
        if (ok != (out != NULL)) abort();
        if (!ok && diag_error_count(d) == 0) abort();
        if (out) {
            StrBuf b = {0};
            HloPrintOptions po = {false, false, false};
            hlo_print_module(&b, out, &po);
            report_print_json(&b, &rep);
            report_print_text(&b, &rep);
            sb_free(&b);
        }
        hlo_module_free(out);
        report_free(&rep);
    }
    hlo_module_free(m);
    arena_destroy(scratch);
    diag_destroy(d);
    return 0;
}
