/* check.c - `spmdc check IN.hlo --mesh SPEC [budgets]`: compiles the plan
 * and judges it against communication and memory budgets (budget.h,
 * docs/ci.md).
 *
 * Budgets come from a budget file (--budget FILE, or IN's name with .hlo
 * replaced by .budget when that file exists) and then from the options,
 * which override the file key by key.  The verdict goes to standard output
 * (or --report-out): a table (text), or the report's JSON with a `verdict`
 * object added (--report json).  Exit status: 0 every budget met, 3 some
 * budget exceeded, 1 an error in the input or the budget file, 2 usage.
 */
#include "spmdc/check.h"

#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "spmdc/budget.h"
#include "spmdc/driver.h"
#include "spmdc/plan.h"

static void usage(FILE *f)
{
    fputs("usage: spmdc check IN.hlo [--mesh SPEC] [--budget FILE | --no-budget-file]\n"
          "                          [--max-bytes SIZE] [--max-collectives N] [--forbid KIND[,KIND...]]\n"
          "                          [--no-remat] [--max-padding SHARE] [--max-memory SIZE]\n"
          "                          [--limit KEY=VALUE]... [--report text|json] [--report-out FILE]\n"
          "Compiles IN for the mesh and judges the plan against the budgets (docs/ci.md).\n"
          "Exit status: 0 within budget, 3 over budget, 1 an error in an input, 2 usage.\n",
          f);
}

enum {
    OPT_MESH = 256,
    OPT_BUDGET,
    OPT_NO_BUDGET_FILE,
    OPT_MAX_BYTES,
    OPT_MAX_COLLECTIVES,
    OPT_FORBID,
    OPT_NO_REMAT,
    OPT_MAX_PADDING,
    OPT_MAX_MEMORY,
    OPT_LIMIT,
    OPT_REPORT,
    OPT_REPORT_OUT,
    OPT_HELP
};

#define MAX_SETTINGS 64

typedef struct Setting {
    char key[64];
    char value[256];
    const char *flag;
} Setting;

typedef struct CheckArgs {
    const char *in_path, *budget_path, *report_out;
    bool no_budget_file, json;
    SpmdcOptions opt;
    int n;
    Setting set[MAX_SETTINGS];
} CheckArgs;

static int add_setting(CheckArgs *a, const char *key, const char *value, const char *flag)
{
    if (a->n == MAX_SETTINGS) {
        fprintf(stderr, "spmdc: error: too many budget options (at most %d)\n", MAX_SETTINGS);
        return 2;
    }
    Setting *s = &a->set[a->n++];
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->value, sizeof s->value, "%s", value);
    s->flag = flag;
    return 0;
}

/* 0 = parsed, -1 = --help printed, else the exit status. */
static int parse_args(int argc, char **argv, CheckArgs *a)
{
    static const struct option longopts[] = {
        {"mesh", required_argument, NULL, OPT_MESH},
        {"budget", required_argument, NULL, OPT_BUDGET},
        {"no-budget-file", no_argument, NULL, OPT_NO_BUDGET_FILE},
        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
        {"max-collectives", required_argument, NULL, OPT_MAX_COLLECTIVES},
        {"forbid", required_argument, NULL, OPT_FORBID},
        {"no-remat", no_argument, NULL, OPT_NO_REMAT},
        {"max-padding", required_argument, NULL, OPT_MAX_PADDING},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"report", required_argument, NULL, OPT_REPORT},
        {"report-out", required_argument, NULL, OPT_REPORT_OUT},
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    int c, rc = 0;
    optind = 1;
    opterr = 0;
    DriverOptionsSeen seen = {{0}, 0};
    static const int repeatable[] = {OPT_LIMIT, OPT_FORBID, 0}; /* a list of settings each */
    while (rc == 0 && (c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        if (driver_option_once(&seen, c, longopts, repeatable)) return 2;
        switch (c) {
        case OPT_MESH:
            if (driver_parse_mesh(optarg, &a->opt)) return 2;
            break;
        case OPT_BUDGET: a->budget_path = optarg; break;
        case OPT_NO_BUDGET_FILE: a->no_budget_file = true; break;
        case OPT_MAX_BYTES: rc = add_setting(a, "bytes_per_device", optarg, "--max-bytes"); break;
        case OPT_MAX_COLLECTIVES: rc = add_setting(a, "collectives", optarg, "--max-collectives"); break;
        case OPT_FORBID: rc = add_setting(a, "forbid", optarg, "--forbid"); break;
        case OPT_NO_REMAT: rc = add_setting(a, "full_rematerialization", "forbid", "--no-remat"); break;
        case OPT_MAX_PADDING: rc = add_setting(a, "padding_share", optarg, "--max-padding"); break;
        case OPT_MAX_MEMORY: rc = add_setting(a, "peak_bytes_per_device", optarg, "--max-memory"); break;
        case OPT_LIMIT: {
            const char *eq = strchr(optarg, '=');
            char key[64];
            if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof key) {
                fprintf(stderr, "spmdc: error: --limit takes KEY=VALUE (e.g. all-gather.count=0), not '%s'\n",
                        optarg);
                return 2;
            }
            memcpy(key, optarg, (size_t)(eq - optarg));
            key[eq - optarg] = 0;
            rc = add_setting(a, key, eq + 1, "--limit");
            break;
        }
        case OPT_REPORT:
            if (strcmp(optarg, "text") && strcmp(optarg, "json")) {
                fprintf(stderr, "spmdc: error: --report takes text or json, not '%s'\n", optarg);
                return 2;
            }
            a->json = strcmp(optarg, "json") == 0;
            break;
        case OPT_REPORT_OUT: a->report_out = optarg; break;
        case OPT_HELP: usage(stdout); return -1;
        case ':':
            fprintf(stderr, "spmdc: error: option '%s' needs an argument\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "spmdc: error: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (rc) return rc;
    if (optind != argc - 1) {
        fprintf(stderr, "spmdc: error: check takes exactly one input file\n");
        usage(stderr);
        return 2;
    }
    if (a->budget_path && a->no_budget_file) {
        fprintf(stderr, "spmdc: error: --budget and --no-budget-file exclude each other\n");
        return 2;
    }
    a->in_path = argv[optind];
    if (a->budget_path && strcmp(a->budget_path, "-") == 0 && strcmp(a->in_path, "-") == 0) {
        fprintf(stderr, "spmdc: error: the input and --budget cannot both be standard input\n");
        return 2;
    }
    return 0;
}

/* IN's budget file: IN with a trailing .hlo replaced by .budget (or .budget
 * appended), heap-allocated; NULL for standard input. */
static char *default_budget_path(const char *in)
{
    if (strcmp(in, "-") == 0) return NULL;
    size_t n = strlen(in);
    if (n > 4 && strcmp(in + n - 4, ".hlo") == 0) n -= 4;
    char *p = xmalloc(n + sizeof ".budget");
    memcpy(p, in, n);
    memcpy(p + n, ".budget", sizeof ".budget");
    return p;
}

/* The verdict member at the end of the report's JSON (report_print_json_with's hook). */
static void verdict_member(JsonOut *j, int32_t record, void *ctx)
{
    if (record >= 0) return;
    char *s = json_dumps(ctx, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!s) spmdc_oom();
    report_json_key(j, "verdict");
    report_json_raw(j, s);
    free(s);
}

/* The report's JSON with the verdict added, written as the report is. */
static void print_json(StrBuf *out, const CommReport *rep, json_t *verdict)
{
    report_print_json_with(out, rep, verdict_member, verdict);
}

int check_main(int argc, char **argv)
{
    CheckArgs a;
    memset(&a, 0, sizeof a);
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    /* option values are checked before anything is read: a malformed one is a usage error */
    Budget probe;
    memset(&probe, 0, sizeof probe);
    const char *set_by[BUDGET_N_SLOTS + 1] = {0}; /* the option that set each slot, and the mesh */
    if (a.opt.has_mesh) set_by[BUDGET_N_SLOTS] = "--mesh";
    for (int k = 0; k < a.n; k++) {
        char err[400];
        if (!budget_set(&probe, a.set[k].key, a.set[k].value, a.set[k].flag, err, sizeof err)) {
            fprintf(stderr, "spmdc: error: %s: %s\n", a.set[k].flag, err);
            return 2;
        }
        /* the options set each key once, as a budget file does: which of
         * two would win is no guess the user should have to make */
        uint32_t slots = budget_key_slots(a.set[k].key, a.set[k].value);
        for (int s = 0; s <= BUDGET_N_SLOTS; s++) {
            if (!(slots & (1u << s))) continue;
            if (set_by[s]) {
                fprintf(stderr, "spmdc: error: %s sets '%s', already set by %s\n", a.set[k].flag,
                        s == BUDGET_N_SLOTS ? "mesh" : budget_key((BudgetSlot)s), set_by[s]);
                return 2;
            }
            set_by[s] = a.set[k].flag;
        }
    }
    char *auto_path = NULL;
    const char *budget_path = a.budget_path;
    if (!budget_path && !a.no_budget_file) {
        struct stat st;
        auto_path = default_budget_path(a.in_path);
        if (auto_path && stat(auto_path, &st) == 0) budget_path = auto_path;
    }
    /* neither the input nor the budget file is ever the report's file */
    const char *outs[1] = {a.report_out ? a.report_out : "-"}, *flags[1] = {"--report-out"};
    if (driver_check_outputs(a.in_path, outs, flags, 1) ||
        (budget_path && driver_check_outputs_keep(budget_path, "the budget file", outs, flags, 1))) {
        free(auto_path);
        return 2;
    }

    DiagEngine *diag = diag_create(stderr);
    Arena *scratch = arena_create();
    PassCtx cx = {scratch, diag, &a.opt};
    Budget budget;
    memset(&budget, 0, sizeof budget);
    char *in_text = NULL, *budget_text = NULL;
    Plan plan;
    memset(&plan, 0, sizeof plan);
    StrBuf out = {0};
    rc = 1;
    if (budget_path) {
        size_t blen;
        budget_text = driver_read_file(budget_path, &blen);
        if (!budget_text) goto done;
        uint32_t bfid = diag_add_file(diag, budget_path, budget_text, blen);
        if (!budget_read(&budget, budget_text, blen, bfid, budget_path, diag)) goto done;
    }
    for (int k = 0; k < a.n; k++) {
        char err[400];
        bool ok = budget_set(&budget, a.set[k].key, a.set[k].value, a.set[k].flag, err, sizeof err);
        SPMDC_ASSERT(ok); /* checked above */
    }
    if (!a.opt.has_mesh && budget.has_mesh) {
        a.opt.mesh = budget.mesh;
        a.opt.has_mesh = true;
        a.opt.mesh_from = budget.mesh_source;
    }
    size_t len;
    in_text = driver_read_file(a.in_path, &len);
    if (!in_text) goto done;
    uint32_t fid = diag_add_file(diag, strcmp(a.in_path, "-") ? a.in_path : "<stdin>", in_text, len);
    if (!plan_compile(in_text, len, fid, &cx, &plan)) goto done;
    Verdict v;
    budget_judge(&budget, &plan.rep, &v);
    if (a.json) {
        json_t *vj = budget_verdict_json(&budget, &v, budget_path);
        print_json(&out, &plan.rep, vj);
        json_decref(vj);
    } else {
        sb_printf(&out, "check %s on mesh ", strcmp(a.in_path, "-") ? a.in_path : "<stdin>");
        mesh_print(&out, &plan.rep.mesh);
        sb_printf(&out, " (%lld device%s), budgets from %s%s%s\n\n", (long long)plan.rep.mesh.n_devices,
                  plan.rep.mesh.n_devices == 1 ? "" : "s", budget_path ? budget_path : "",
                  budget_path && a.n ? " and " : "", a.n ? "the options" : budget_path ? "" : "nowhere");
        budget_print_text(&out, &budget, &v);
    }
    DriverOutput o = {outs[0], sb_cstr(&out), out.len, NULL, NULL, NULL};
    if (!driver_write_outputs(&o, 1)) goto done;
    rc = v.n_over ? SPMDC_EXIT_OVER_BUDGET : 0;
done:
    if (rc == 1 && diag_error_count(diag) > 0)
        fprintf(stderr, "spmdc: %d error%s; no verdict\n", diag_error_count(diag),
                diag_error_count(diag) == 1 ? "" : "s");
    sb_free(&out);
    plan_free(&plan);
    free(in_text);
    free(budget_text);
    free(auto_path);
    arena_destroy(scratch);
    diag_destroy(diag);
    return rc;
}
