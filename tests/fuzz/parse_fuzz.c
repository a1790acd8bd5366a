/* parse_fuzz.c - libFuzzer entry: parse_hlo on arbitrary bytes.
 *
 * Built only with -DSPMDC_FUZZ=ON and clang (which also instruments the
 * library with -fsanitize=fuzzer-no-link, so the fuzzer sees coverage); run
 * it with tools/fuzz.sh (2,000 inputs in the test command, 10 minutes per
 * target by default), which seeds it with tests/fuzz/corpus/.
 *
 * Every input must come back as a module or as NULL with >= 1 error, and a
 * module that came without a message must be what the LAC parser alone
 * reads (the first parse's coarse tokens change nothing); any crash,
 * sanitizer report, leak or hang is a bug in the front end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"
#include "spmdc/parse.h"
#include "spmdc/strbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    DiagEngine *d = diag_create(NULL);
    diag_set_show_source(d, size < 4096); /* exercise the excerpt printer too */
    const char *text = (const char *)data;
    uint32_t fid = diag_add_file(d, "fuzz.hlo", text, size);
    HloModule *m = parse_hlo(text, size, fid, d);
    if (!m && diag_error_count(d) == 0) abort(); /* failure without a message */
    if (m && diag_error_count(d) != 0) abort();  /* success with errors */
    if (m && diag_text(d)[0] == 0) {
        /* the first parse (coarse tokens, no LAC) may have given this module:
         * the LAC parser alone must read the input the same way */
        DiagEngine *d2 = diag_create(NULL);
        uint32_t fid2 = diag_add_file(d2, "fuzz.hlo", text, size);
        parse_set_fast_first(false);
        HloModule *m2 = parse_hlo(text, size, fid2, d2);
        parse_set_fast_first(true);
        if (!m2 || diag_text(d2)[0] != 0) abort();
        StrBuf a = {0}, b = {0};
        HloPrintOptions all = {true, true, true};
        hlo_print_module(&a, m, &all);
        hlo_print_module(&b, m2, &all);
        if (a.len != b.len || memcmp(sb_cstr(&a), sb_cstr(&b), a.len) != 0) abort();
        sb_free(&a);
        sb_free(&b);
        hlo_module_free(m2);
        diag_destroy(d2);
    }
    hlo_module_free(m);
    diag_destroy(d);
    return 0;
}
