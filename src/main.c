/* main.c - the spmdc command line.  Parses options and calls the passes;
 * owns no logic of its own.
 *
 *   spmdc compile IN.hlo [--mesh SPEC] [-o OUT.hlo] [--report text|json|none]
 *                        [--report-out FILE] [--dump-after PASS]
 *   spmdc verify IN.hlo [--mesh SPEC] [--seed N] [--program OUT.hlo]
 *   spmdc propagate IN.hlo [--mesh SPEC] [--explain] [-o OUT.hlo]
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spmdc/check.h"
#include "spmdc/diag.h"
#include "spmdc/dot.h"
#include "spmdc/driver.h"
#include "spmdc/explain.h"
#include "spmdc/hlo.h"
#include "spmdc/memory.h"
#include "spmdc/oracle.h"
#include "spmdc/pages.h"
#include "spmdc/passtime.h"
#include "spmdc/pipeline.h"
#include "spmdc/propagate.h"
#include "spmdc/report.h"
#include "spmdc/sweep.h"

#define SPMDC_VERSION "0.1.0"

static void usage(FILE *f)
{
    fputs("usage: spmdc compile IN.hlo [--mesh SPEC] [-o OUT.hlo] [--report text|json|none]\n"
          "                            [--report-out FILE] [--dump-after PASS] [--explain]\n"
          "                            [--dot FILE] [--keep-calls]\n"
          "       spmdc verify IN.hlo [--mesh SPEC] [--seed N] [--program OUT.hlo] [--keep-calls]\n"
          "       spmdc check IN.hlo [--mesh SPEC] [--budget FILE] [limits] [--report text|json]\n"
          "       spmdc sweep IN.hlo --mesh 'AXIS=N,N,... ...' [--format text|csv|json] [-o FILE]\n"
          "       spmdc propagate IN.hlo [--mesh SPEC] [--explain] [-o OUT.hlo]\n"
          "       spmdc --help | --version\n"
          "\n"
          "SPEC is a device count (8), a shape (2x4) or named axes (x=2,y=4).\n"
          "PASS is parse, verify, bind, canonicalize, propagate or partition.\n"
          "compile writes the per-device program to stdout (or -o) and the\n"
          "communication report to stderr (or --report-out).  See docs/cli.md.\n",
          f);
}

enum { OPT_MESH = 256, OPT_REPORT, OPT_REPORT_OUT, OPT_DUMP_AFTER, OPT_HELP, OPT_EXPLAIN, OPT_DOT, OPT_KEEP_CALLS };

/* The report's memory estimate (memory_fill_report), made once by the
 * first of the two printers to get to it: the program's printer when it is
 * done, the report's before its memory section (CommReport.memory_wait).
 * The two run at once (driver_write_outputs), so the estimate is made on
 * the core whose printing ends first. */
typedef struct MemoryOnce {
    pthread_mutex_t mu;
    bool done;
    PipelineState *st;
} MemoryOnce;

static void memory_once(void *ctx)
{
    MemoryOnce *o = ctx;
    pthread_mutex_lock(&o->mu);
    if (!o->done) memory_fill_report(&o->st->report, o->st->m, o->st->out);
    o->done = true;
    pthread_mutex_unlock(&o->mu);
}

/* What compile prints after partitioning, for the emit functions of its
 * outputs (DriverOutput). */
typedef struct CompileText {
    const PipelineState *st;
    const Explain *ex;
    const char *report_fmt; /* "text", "json" or "none" */
    bool explain;
    MemoryOnce *memory;     /* made after the program, if the report has not; NULL: no report */
} CompileText;

/* The per-device program. */
static void emit_program(StrBuf *b, const void *ctx)
{
    const CompileText *t = ctx;
    HloPrintOptions po = {false, false, false};
    hlo_print_module(b, t->st->out, &po);
    if (t->memory) memory_once(t->memory);
}

/* The report in its format, with --explain's part. */
static void emit_report(StrBuf *b, const void *ctx)
{
    const CompileText *t = ctx;
    bool json = strcmp(t->report_fmt, "json") == 0, text = strcmp(t->report_fmt, "text") == 0;
    if (json && t->explain) explain_print_json(b, t->ex, &t->st->report, t->st->m);
    else if (json) report_print_json(b, &t->st->report);
    else if (text) report_print_text(b, &t->st->report);
    if (text && t->explain) explain_print_text(b, t->ex, &t->st->report, t->st->m);
}

/* What a successful compile leaves to the end of the process: both
 * modules, the report and the input text when the pipeline kept it
 * (hundreds of MiB and millions of blocks on a large module), which the
 * kernel reclaims at exit for less than freeing them block by block costs.
 * Held here, so leak checkers never count them definitely lost (valgrind
 * counts the arena chunks, reached through pointers into them, "possibly
 * lost").  Builds with the arena debug allocator or AddressSanitizer free
 * everything, so their leak checks see every release.  Volatile: the
 * stores are the point. */
#if defined(SPMDC_ARENA_DEBUG) || defined(__SANITIZE_ADDRESS__)
#define SPMDC_FREE_AT_EXIT 1
#else
#define SPMDC_FREE_AT_EXIT 0
#endif
static PipelineState *volatile g_kept_state; /* a heap copy of the state */

static int cmd_compile(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"mesh", required_argument, NULL, OPT_MESH},
        {"report", required_argument, NULL, OPT_REPORT},
        {"report-out", required_argument, NULL, OPT_REPORT_OUT},
        {"dump-after", required_argument, NULL, OPT_DUMP_AFTER},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, OPT_HELP},
        {"explain", no_argument, NULL, OPT_EXPLAIN},
        {"dot", required_argument, NULL, OPT_DOT},
        {"keep-calls", no_argument, NULL, OPT_KEEP_CALLS},
        {NULL, 0, NULL, 0},
    };
    bool explain = false;
    const char *dot_path = NULL;
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    const char *out_path = "-", *report_fmt = "text", *report_out = NULL;
    const PassInfo *dump_after = NULL;
    int c;
    optind = 1;
    DriverOptionsSeen seen = {{0}, 0};
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        if (driver_option_once(&seen, c, longopts, NULL)) return 2;
        switch (c) {
        case OPT_MESH:
            if (driver_parse_mesh(optarg, &opt)) return 2;
            break;
        case OPT_REPORT:
            if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "none")) {
                fprintf(stderr, "spmdc: error: --report takes text, json or none, not '%s'\n", optarg);
                return 2;
            }
            report_fmt = optarg;
            break;
        case OPT_REPORT_OUT: report_out = optarg; break;
        case OPT_DUMP_AFTER:
            dump_after = pipeline_find(optarg);
            if (!dump_after) {
                fprintf(stderr, "spmdc: error: --dump-after takes a pass (%s), not '%s'\n", pipeline_pass_names(),
                        optarg);
                return 2;
            }
            break;
        case 'o': out_path = optarg; break;
        case OPT_HELP: usage(stdout); return 0;
        case OPT_EXPLAIN: explain = true; break;
        case OPT_DOT: dot_path = optarg; break;
        case OPT_KEEP_CALLS: opt.keep_calls = true; break;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "spmdc: error: compile takes exactly one input file\n");
        usage(stderr);
        return 2;
    }
    if (dot_path && dump_after) {
        fprintf(stderr, "spmdc: error: --dot draws the partitioned program: it excludes --dump-after\n");
        return 2;
    }
    if (explain && (dump_after || strcmp(report_fmt, "none") == 0)) {
        fprintf(stderr, "spmdc: error: --explain adds to the report: it needs --report text or json and no --dump-after\n");
        return 2;
    }
    const char *in_path = argv[optind];
    bool report_file = report_out && strcmp(report_fmt, "none") != 0;
    const char *outs[3] = {out_path, report_file ? report_out : dot_path, dot_path};
    const char *flags[3] = {"-o", report_file ? "--report-out" : "--dot", "--dot"};
    int usage_rc = driver_check_outputs(in_path, outs, flags, 1 + report_file + (dot_path != NULL));
    if (usage_rc) return usage_rc;
    size_t len;
    int text_fd;
    struct stat text_stamp;
    char *text = driver_read_file_fd(in_path, &len, &text_fd, &text_stamp);
    if (!text) return 1;
    passtime_stage("read");

    DiagEngine *diag = diag_create(stderr);
    uint32_t fid = diag_add_file(diag, strcmp(in_path, "-") ? in_path : "<stdin>", text, len);
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, diag, &opt};
    int rc = 1;
    StrBuf prog = {0}, graph = {0};
    PipelineState st;
    memset(&st, 0, sizeof st);
    st.text = st.owned_text = text;
    st.len = len;
    st.file_id = fid;
    st.text_fd = text_fd;
    if (text_fd >= 0) st.text_stamp = text_stamp;
    Explain ex;
    explain_init(&ex);
    if (explain || dot_path) st.explain = &ex;
    if (!pipeline_run(&st, &cx, PASS_PARSE, dump_after ? dump_after->id : PASS_PARTITION)) goto done;
    if (dump_after) {
        /* the module as it stands after that pass; after partition the per-device program */
        bool whole = !dump_after->on_output;
        HloPrintOptions po = {whole, whole, whole};
        hlo_print_module(&prog, pipeline_module(&st, dump_after->id), &po);
        if (driver_write_file(out_path, sb_cstr(&prog), prog.len)) rc = 0;
        goto done;
    }
    /* the program and a report file stream into their files (driver.h) */
    MemoryOnce mem = {PTHREAD_MUTEX_INITIALIZER, false, &st};
    st.report.memory_wait = memory_once;
    st.report.memory_wait_ctx = &mem;
    CompileText ct = {&st, &ex, report_fmt, explain, strcmp(report_fmt, "none") ? &mem : NULL};
    DriverOutput files[3] = {{out_path, NULL, 0, emit_program, &ct, "print"},
                             {report_out, NULL, 0, emit_report, &ct, "report"}, {dot_path, NULL, 0, NULL, NULL, NULL}};
    int n_files = report_file ? 2 : 1;
    if (dot_path) {
        dot_print(&graph, st.m, &st.report, &ex);
        files[n_files++] = (DriverOutput){dot_path, sb_cstr(&graph), graph.len, NULL, NULL, NULL};
    }
    if (!driver_write_outputs(files, n_files)) goto done;
    passtime_stage("write");
    if (!report_out && strcmp(report_fmt, "none") != 0 && !driver_stream(STDERR_FILENO, emit_report, &ct, "report")) {
        /* the program is written; a report lost on the way is still a failed run */
        fprintf(stderr, "spmdc: error: cannot write the report to standard error: %s\n", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    st.report.memory_wait = NULL; /* mem ends here */
    if (rc != 0 && diag_error_count(diag) > 0)
        fprintf(stderr, "spmdc: %d error%s; no output written\n", diag_error_count(diag),
                diag_error_count(diag) == 1 ? "" : "s");
    sb_free(&prog);
    sb_free(&graph);
    if (!SPMDC_FREE_AT_EXIT && rc == 0) {
        PipelineState *kept = xmalloc(sizeof st);
        *kept = st;
        g_kept_state = kept;
    } else {
        pipeline_state_free(&st);
    }
    explain_free(&ex);
    arena_destroy(scratch);
    diag_destroy(diag);
    passtime_stage("free");
    passtime_total();
    return rc;
}

/* spmdc propagate: the module with every value's sharding (XLA's spelling)
 * to stdout or -o; with --explain, where each came from to stderr. */
static int cmd_propagate(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"mesh", required_argument, NULL, OPT_MESH},
        {"explain", no_argument, NULL, OPT_EXPLAIN},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    SpmdcOptions opt;
    memset(&opt, 0, sizeof opt);
    const char *out_path = "-";
    bool explain = false;
    int c;
    optind = 1;
    DriverOptionsSeen seen = {{0}, 0};
    while ((c = getopt_long(argc, argv, "o:", longopts, NULL)) != -1) {
        if (driver_option_once(&seen, c, longopts, NULL)) return 2;
        switch (c) {
        case OPT_MESH:
            if (driver_parse_mesh(optarg, &opt)) return 2;
            break;
        case OPT_EXPLAIN: explain = true; break;
        case 'o': out_path = optarg; break;
        case OPT_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "spmdc: error: propagate takes exactly one input file\n");
        usage(stderr);
        return 2;
    }
    const char *in_path = argv[optind];
    const char *flag = "-o";
    int usage_rc = driver_check_outputs(in_path, &out_path, &flag, 1);
    if (usage_rc) return usage_rc;
    size_t len;
    char *text = driver_read_file(in_path, &len);
    if (!text) return 1;
    DiagEngine *diag = diag_create(stderr);
    uint32_t fid = diag_add_file(diag, strcmp(in_path, "-") ? in_path : "<stdin>", text, len);
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, diag, &opt};
    StrBuf out = {0}, why = {0};
    int rc = 1;
    PipelineState st;
    memset(&st, 0, sizeof st);
    st.text = text;
    st.len = len;
    st.file_id = fid;
    if (pipeline_run(&st, &cx, PASS_PARSE, PASS_CANONICALIZE) &&
        propagate_shardings_explained(st.m, &cx, explain ? &why : NULL)) {
        HloPrintOptions po = {true, true, true};
        hlo_print_module_quoted(&out, st.m, &po);
        if (driver_write_file(out_path, sb_cstr(&out), out.len)) {
            rc = 0;
            if (why.len && (fputs(sb_cstr(&why), stderr) == EOF || fflush(stderr) != 0)) {
                fprintf(stderr, "spmdc: error: cannot write the explanation to standard error: %s\n", strerror(errno));
                rc = 1;
            }
        }
    }
    if (rc != 0 && diag_error_count(diag) > 0)
        fprintf(stderr, "spmdc: %d error%s; no output written\n", diag_error_count(diag),
                diag_error_count(diag) == 1 ? "" : "s");
    sb_free(&out);
    sb_free(&why);
    pipeline_state_free(&st);
    arena_destroy(scratch);
    diag_destroy(diag);
    free(text);
    return rc;
}

int main(int argc, char **argv)
{
    passtime_enabled(); /* starts the clock of SPMDC_TIME_PASSES */
    pages_setup_heap();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        puts("spmdc " SPMDC_VERSION);
        return 0;
    }
    if (strcmp(argv[1], "compile") == 0) return cmd_compile(argc - 1, argv + 1);
    if (strcmp(argv[1], "verify") == 0) return oracle_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "check") == 0) return check_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "sweep") == 0) return sweep_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "propagate") == 0) return cmd_propagate(argc - 1, argv + 1);
    fprintf(stderr, "spmdc: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
