/* compile_fuzz.c - libFuzzer entry for the whole pipeline (pipeline.h:
 * parse, verify, bind, canonicalize, propagate, partition), then printing
 * and both report forms, on arbitrary bytes, on the file's own mesh.  Every
 * input must either compile or fail with >= 1 error; a crash, sanitizer
 * report, leak or hang is a bug.  Built with -DSPMDC_FUZZ=ON and clang in
 * Debug (so the IR verifier also runs after every pass); run by
 * tools/fuzz.sh, which seeds it with tests/fuzz/corpus/, tests/cases and
 * examples. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"
#include "spmdc/pipeline.h"
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
    PipelineState st;
    memset(&st, 0, sizeof st);
    st.text = (const char *)data;
    st.len = size;
    st.file_id = fid;
    bool ok = pipeline_run(&st, &cx, PASS_PARSE, PASS_PROPAGATE);
    if (!ok && diag_error_count(d) == 0) abort();
    if (ok && st.m->mesh.n_devices <= 64) {
        ok = pipeline_run(&st, &cx, PASS_PARTITION, PASS_PARTITION);
        if (ok != (st.out != NULL)) abort();
        if (!ok && diag_error_count(d) == 0) abort();
        if (st.out) {
            StrBuf b = {0};
            HloPrintOptions po = {false, false, false};
            hlo_print_module(&b, st.out, &po);
            report_print_json(&b, &st.report);
            report_print_text(&b, &st.report);
            sb_free(&b);
        }
    }
    pipeline_state_free(&st);
    arena_destroy(scratch);
    diag_destroy(d);
    return 0;
}
