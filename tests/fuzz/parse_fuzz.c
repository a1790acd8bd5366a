/* parse_fuzz.c - libFuzzer entry: parse_hlo on arbitrary bytes.
 *
 * Built only with -DSPMDC_FUZZ=ON and clang (which also instruments the
 * library with -fsanitize=fuzzer-no-link, so the fuzzer sees coverage); run
 * it with tools/fuzz.sh (2,000 inputs in the test command, 10 minutes per
 * target by default), which seeds it with tests/fuzz/corpus/.
 *
 * Every input must come back as a module or as NULL with >= 1 error; any
 * crash, sanitizer report, leak or hang is a bug in the front end.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "spmdc/diag.h"
#include "spmdc/hlo.h"
#include "spmdc/parse.h"

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
    hlo_module_free(m);
    diag_destroy(d);
    return 0;
}
