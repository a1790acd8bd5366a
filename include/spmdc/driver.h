/* driver.h - the pipeline the CLI runs: read, parse, verify, bind, propagate,
 * partition, and the file helpers the subcommands share.
 */
#ifndef SPMDC_DRIVER_H
#define SPMDC_DRIVER_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spmdc/hlo.h"
#include "spmdc/pass.h"
#include "spmdc/strbuf.h"

/* The input limit: 2 GiB unless SPMDC_MAX_INPUT_BYTES says otherwise
 * (bytes, or with a K/M/G suffix: powers of 1024), at most 4 GiB - 1 (the
 * front end keeps byte offsets in 32 bits). */
#define SPMDC_DEFAULT_MAX_INPUT (UINT64_C(2) << 30)
#define SPMDC_HARD_MAX_INPUT ((UINT64_C(4) << 30) - 1)
/* The limit in force: SPMDC_DEFAULT_MAX_INPUT, or SPMDC_MAX_INPUT_BYTES from
 * the environment; 0 when that variable is malformed or out of range. */
uint64_t driver_max_input_bytes(void);
/* Reads a whole file into a heap buffer (NUL-terminated, *len without the
 * NUL).  "-" reads stdin.  A regular file larger than the input limit is
 * refused before it is read, a stream (a pipe, /dev/zero) as soon as it
 * passes the limit.  NULL after printing `spmdc: error: cannot read PATH:
 * reason` or `spmdc: error: PATH is larger than the input limit ...`. */
char *driver_read_file(const char *path, size_t *len);
/* driver_read_file, and in *fd a descriptor of the file, left open, when it
 * is a regular file (-1 for stdin, a pipe or a device): the caller may free
 * the text once it is parsed and let the diagnostics re-read it from fd
 * (PipelineState.owned_text, diag_release_text).  *fd is -1 on failure.
 * With fd, a regular file of DRIVER_MAP_MIN bytes or more is mapped
 * (private, read ahead in one call) instead of copied into the heap; its
 * text is NUL-terminated all the same (the zero tail of its last page, or
 * one more page).  Should the file shrink under the mapping, the access
 * that finds it gone ends the run with `spmdc: error: PATH changed while it
 * was read` (exit 1, temporaries removed) instead of a crash.  At most one
 * file is mapped at a time.  Release the text with driver_free_text. */
#define DRIVER_MAP_MIN ((size_t)1 << 20)
/* as_read (when *fd >= 0) gets fd's fstat taken before the text was read:
 * what the text is the content of (driver_text_changed, diag_release_text).
 * A regular file that changes while it is read (its fstat after the read is
 * not as_read) is refused with `spmdc: error: PATH changed while it was
 * read`. */
struct stat;
char *driver_read_file_fd(const char *path, size_t *len, int *fd, struct stat *as_read);
/* Whether text, read by driver_read_file_fd with fd and as_read, may not be
 * the file's content as it was read: true when it is the mapping and the
 * file has changed since (fstat differs from as_read: a mapping shows the
 * file's pages as they are now, so a parse may have read bytes of two
 * versions).  A copied text is the file as it was read: always false. */
bool driver_text_changed(const char *text, int fd, const struct stat *as_read);
/* Releases text from driver_read_file or driver_read_file_fd (len bytes as
 * they returned): the mapping, or the heap buffer.  NULL is a no-op. */
void driver_free_text(char *text, size_t len);
/* One output of a run for path ("-" = standard output): data[0..len), or,
 * when emit is set, the text emit(b, ctx) appends to b.  The driver gives
 * emit a buffer that streams into the file (a StrBuf with a sink,
 * strbuf.h), so that text is never held whole; emit runs once, while the
 * outputs are written.  stage, if set, names the SPMDC_TIME_PASSES stage
 * (passtime.h) that ends when emit's text is written. */
typedef struct DriverOutput {
    const char *path;
    const char *data;
    size_t len;
    void (*emit)(StrBuf *b, const void *ctx);
    const void *ctx;
    const char *stage;
} DriverOutput;

/* Writes every output of a run, all or none (docs/cli.md, "Where output
 * goes"): regular files through a temporary in the target's directory
 * renamed into place after every output was written, keeping an existing
 * file's mode, through symlinks to their targets; devices, pipes, standard
 * output and writable files in unwritable directories in place; a read-only
 * existing file is refused and left as it is.  On any failure no file is
 * replaced and no temporary remains, also when SIGINT, SIGTERM, SIGHUP,
 * SIGPIPE or SIGABRT arrives or the process exits meanwhile.  At most 8
 * outputs.  False after printing
 * `spmdc: error: cannot write PATH: reason`. */
bool driver_write_outputs(const DriverOutput *outs, int n);
/* emit's text (DriverOutput) streamed to the open descriptor fd (standard
 * error: a report shown rather than saved), stdio's buffers flushed first;
 * stage as in DriverOutput.  False with errno set if a write failed. */
bool driver_stream(int fd, void (*emit)(StrBuf *b, const void *ctx), const void *ctx, const char *stage);
/* driver_write_outputs for one output. */
bool driver_write_file(const char *path, const char *data, size_t len);
/* Usage check before a run: paths[0..n) (at most 8; "-" = standard
 * output), described by what[k] ("-o", "--report-out"), must name n
 * different files by any spelling (relative, absolute, through `..` or a
 * symlink, existing or not; devices such as /dev/null may repeat), and none
 * may be the input file (input may be NULL; "-" = standard input).  Returns
 * 0, or 2 after printing `spmdc: error: ...` (the usage exit status). */
int driver_check_outputs(const char *input, const char *const *paths, const char *const *what, int n);
/* driver_check_outputs with the file not to overwrite described by
 * input_what ("the budget file"), for a command that reads more than one
 * file: call it once per file read. */
int driver_check_outputs_keep(const char *input, const char *input_what, const char *const *paths,
                              const char *const *what, int n);

/* Options read so far (driver_option_once). */
typedef struct DriverOptionsSeen {
    int code[32];
    int n;
} DriverOptionsSeen;

/* Usage check while reading options with getopt_long: an option that takes
 * a value (required_argument in longopts; the short `-o` is the long option
 * whose val is 'o') given twice is ambiguous (`-o a.hlo -o b.hlo`: which
 * file?), unless its code is in repeatable[0..) (0-terminated, may be NULL;
 * e.g. check's --limit).  Returns 0, or 2 after printing `spmdc: error:
 * -o/--output given twice; it takes one value` (the usage exit status). */
int driver_option_once(DriverOptionsSeen *seen, int code, const struct option *longopts, const int *repeatable);

/* --mesh SPEC (mesh_parse_spec: a device count, a shape or named axes) into
 * opt->mesh, setting opt->has_mesh.  Returns 0, or 2 after printing
 * `spmdc: error: ...` (a malformed --mesh is a usage error). */
int driver_parse_mesh(const char *spec, SpmdcOptions *opt);

/* The pipeline (pipeline.h) from parse through canonicalize, and propagate
 * when asked, on text already registered as file_id.  The module, owned by
 * the caller, or NULL after errors were reported through cx->diag. */
HloModule *driver_load_module(const char *text, size_t len, uint32_t file_id, PassCtx *cx, bool propagate);

#endif
