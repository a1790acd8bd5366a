/* driver.c - file I/O and the front half of the pipeline shared by the
 * subcommands (see driver.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#define _DEFAULT_SOURCE     /* MAP_ANONYMOUS, MAP_POPULATE */
#include "spmdc/driver.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spmdc/passtime.h"
#include "spmdc/pipeline.h"

uint64_t driver_max_input_bytes(void)
{
    const char *e = getenv("SPMDC_MAX_INPUT_BYTES");
    if (!e || !*e) return SPMDC_DEFAULT_MAX_INPUT;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(e, &end, 10);
    uint64_t unit = 1;
    if (*end == 'K' || *end == 'k') unit = 1024, end++;
    else if (*end == 'M' || *end == 'm') unit = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g') unit = 1024 * 1024 * 1024, end++;
    if (errno || *end || e[0] == '-' || v == 0 || v > SPMDC_HARD_MAX_INPUT / unit) return 0;
    return (uint64_t)v * unit;
}

char *driver_read_file(const char *path, size_t *len) { return driver_read_file_fd(path, len, NULL, NULL); }

/* The mapped input (map_file), for the SIGBUS handler: a fault inside it
 * means the file shrank under the mapping. */
static char *volatile g_map;
static volatile size_t g_map_len;
static char g_map_msg[512];
static size_t g_map_msg_len;
static void remove_temps_at_exit(void);

static void input_gone(int sig, siginfo_t *si, void *uctx)
{
    (void)uctx;
    const char *a = si ? (const char *)si->si_addr : NULL;
    if (g_map && a >= g_map && a < g_map + g_map_len) {
        ssize_t w = write(STDERR_FILENO, g_map_msg, g_map_msg_len);
        (void)w;
        remove_temps_at_exit();
        _exit(1);
    }
    signal(sig, SIG_DFL); /* not the input: the fault happens again, with the default action */
}

/* The regular file open as f (st its fstat, path its name) mapped, for
 * driver_read_file_fd; NULL when it is smaller than DRIVER_MAP_MIN or larger
 * than max, another file is mapped, or it cannot be mapped: the caller reads
 * it instead, from the same descriptor (a path is opened once: a second open
 * could find another file, or, for a FIFO, lose what its writer wrote). */
static char *map_file(int f, const struct stat *st, const char *path, uint64_t max, size_t *len)
{
    if (g_map || !S_ISREG(st->st_mode) || (uint64_t)st->st_size < DRIVER_MAP_MIN || (uint64_t)st->st_size > max)
        return NULL;
    size_t n = (size_t)st->st_size, page = (size_t)sysconf(_SC_PAGESIZE);
    size_t whole = (n + 1 + page - 1) / page * page; /* room for the NUL */
    /* the file over an anonymous reservation: a size that is a multiple of
     * the page gets a zero page after it; read-only, so nothing is copied */
    char *r = mmap(NULL, whole, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *p = r == MAP_FAILED ? MAP_FAILED : mmap(r, n, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_POPULATE, f, 0);
    if (p == MAP_FAILED) {
        if (r != MAP_FAILED) munmap(r, whole);
        return NULL;
    }
    int msg = snprintf(g_map_msg, sizeof g_map_msg, "spmdc: error: %s changed while it was read\n", path);
    g_map_msg_len = msg < 0 ? 0 : (size_t)msg < sizeof g_map_msg ? (size_t)msg : sizeof g_map_msg - 1;
    g_map_len = whole;
    g_map = p;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = input_gone;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    *len = n;
    return p;
}

bool driver_text_changed(const char *text, int fd, const struct stat *as_read)
{
    struct stat now;
    if (!text || text != g_map || fd < 0 || !as_read) return false;
    return fstat(fd, &now) != 0 || !diag_same_file_state(&now, as_read);
}

void driver_free_text(char *text, size_t len)
{
    (void)len;
    if (text && text == g_map) {
        signal(SIGBUS, SIG_DFL);
        munmap(text, g_map_len);
        g_map = NULL;
        g_map_len = 0;
        return;
    }
    free(text);
}

char *driver_read_file_fd(const char *path, size_t *len, int *fd, struct stat *as_read)
{
    if (fd) *fd = -1;
    uint64_t max = driver_max_input_bytes();
    if (max == 0) {
        fprintf(stderr, "spmdc: error: SPMDC_MAX_INPUT_BYTES='%s' is not a size between 1 and %llu bytes "
                        "(e.g. 3G)\n", getenv("SPMDC_MAX_INPUT_BYTES"), (unsigned long long)SPMDC_HARD_MAX_INPUT);
        return NULL;
    }
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "spmdc: error: cannot read %s: %s\n", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    bool regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    char *mapped = fd && regular && f != stdin ? map_file(fileno(f), &st, path, max, len) : NULL;
    if (mapped) {
        int kept = dup(fileno(f));
        if (kept >= 0) {
            fclose(f);
            *fd = kept;
            if (as_read) *as_read = st;
            return mapped;
        }
        driver_free_text(mapped, *len); /* no descriptor to check it by: read instead */
    }
    bool too_big = regular && (uint64_t)st.st_size > max;
    size_t cap = 1 << 16, n = 0;
    char *buf = too_big ? NULL : xmalloc(cap);
    while (!too_big) {
        if (n + 1 >= cap) {
            cap = cap > max ? (size_t)max + 2 : cap * 2; /* room for one byte past the limit */
            buf = xrealloc(buf, cap);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > max) too_big = true;
        if (got == 0) break;
    }
    int bad = !too_big && ferror(f), saved = errno;
    bool read_whole = regular && !too_big && !bad;
    /* a file written while it was read: the text may hold bytes of two versions */
    struct stat after;
    bool changed = read_whole && (fstat(fileno(f), &after) != 0 || !diag_same_file_state(&after, &st));
    if (fd && read_whole && !changed && f != stdin) {
        *fd = dup(fileno(f));
        if (as_read) *as_read = st;
    }
    if (f != stdin) fclose(f);
    if (too_big) {
        fprintf(stderr, "spmdc: error: %s is larger than the input limit of %llu bytes (set SPMDC_MAX_INPUT_BYTES, "
                        "e.g. 3G, to raise it up to %llu)\n", strcmp(path, "-") ? path : "standard input",
                (unsigned long long)max,
                (unsigned long long)SPMDC_HARD_MAX_INPUT);
        free(buf);
        return NULL;
    }
    if (bad) {
        fprintf(stderr, "spmdc: error: cannot read %s: %s\n", path, strerror(saved));
        free(buf);
        return NULL;
    }
    if (changed) {
        fprintf(stderr, "spmdc: error: %s changed while it was read\n", strcmp(path, "-") ? path : "standard input");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* A file descriptor as a StrSink (strbuf.h): every byte written, EINTR
 * retried; the errno of a failure kept for the message. */
typedef struct FdSink {
    int fd;
    int err;
} FdSink;

static bool fd_write(void *ctx, const char *data, size_t len)
{
    FdSink *s = ctx;
    while (len > 0) {
        ssize_t w = write(s->fd, data, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            s->err = w < 0 ? errno : EIO;
            return false;
        }
        data += w;
        len -= (size_t)w;
    }
    return true;
}

/* Writes one output's text to fd: its data, or what its emit function
 * produces, streamed through a buffer of about SB_SINK_CHUNK bytes.  False
 * with errno set on a failed write. */
static bool write_text(int fd, const DriverOutput *o)
{
    FdSink fs = {fd, 0};
    bool ok;
    if (o->emit) {
        StrSink sink = {fd_write, &fs, false};
        StrBuf b = {0};
        b.sink = &sink;
        o->emit(&b, o->ctx);
        sb_flush(&b);
        sb_free(&b);
        ok = !sink.failed;
        if (o->stage) passtime_stage(o->stage);
    } else {
        ok = fd_write(&fs, o->data, o->len);
    }
    if (!ok) errno = fs.err;
    return ok;
}

/* write_text, then close(fd); false with errno set on any failure. */
static bool write_text_close(int fd, const DriverOutput *o)
{
    bool ok = write_text(fd, o);
    int e = errno;
    if (close(fd) != 0 && ok) return false;
    errno = e;
    return ok;
}

/* The path a dangling symlink points to (relative targets resolved against
 * the link's directory), heap-allocated; NULL if path is no symlink. */
static char *dangling_target(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISLNK(st.st_mode)) return NULL;
    char link[4096];
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0) return NULL;
    link[n] = 0;
    const char *slash = strrchr(path, '/');
    size_t dir = (link[0] == '/' || !slash) ? 0 : (size_t)(slash - path) + 1;
    char *t = xmalloc(dir + (size_t)n + 1);
    memcpy(t, path, dir);
    memcpy(t + dir, link, (size_t)n + 1);
    return t;
}

/* ---------------------------------------------------------------- outputs
 *
 * Every output of a run is written in one transaction (driver_write_outputs):
 *  1. plan: each path is resolved (a symlink, dangling or not, to its
 *     target); standard output, devices and pipes are written in place; an
 *     existing regular file without write permission (or with no write bit
 *     at all, which root would otherwise ignore) is refused; a writable file
 *     in a directory we cannot write is written in place;
 *  2. every other file is written to a temporary `.spmdc-XXXXXX` (13 bytes,
 *     so any valid name works: NAME_MAX is never exceeded) in its target's
 *     directory, with the target's mode (new files 0666 & ~umask);
 *  3. in-place outputs are written;
 *  4. the temporaries are renamed over their targets.
 * An output with an emit function is produced while it is written (its
 * text streams into the file and is never held whole), so the printers
 * run inside steps 2 and 3.  A failure in 1-3 removes every temporary and
 * renames nothing.  A signal whose default action ends the process (SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGABRT, SIGALRM, SIGUSR1, SIGUSR2, and
 * the resource limits' SIGXCPU and SIGXFSZ) while temporaries exist removes
 * them before the signal takes its default action (signals the caller
 * ignores, as nohup does, stay ignored); so does an exit meanwhile (running
 * out of memory in a printer: spmdc_oom).  An in-place output (a file in a
 * directory spmdc cannot write, a device) is written where it is: it cannot
 * be replaced all at once. */

#define MAX_TEMPS 8
static char *volatile g_temps[MAX_TEMPS]; /* live temporaries, for the handler */
static volatile sig_atomic_t g_n_temps;

static void remove_temps_and_reraise(int sig)
{
    for (int k = 0; k < (int)g_n_temps; k++)
        if (g_temps[k]) unlink(g_temps[k]);
    g_n_temps = 0;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void remove_temps_at_exit(void)
{
    for (int k = 0; k < (int)g_n_temps; k++)
        if (g_temps[k]) unlink(g_temps[k]);
    g_n_temps = 0;
}

static const int CLEANUP_SIGNALS[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGPIPE, SIGABRT,
                                      SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ};
#define N_CLEANUP_SIGNALS ((int)(sizeof CLEANUP_SIGNALS / sizeof CLEANUP_SIGNALS[0]))

static void cleanup_signal_set(sigset_t *set)
{
    sigemptyset(set);
    for (int k = 0; k < N_CLEANUP_SIGNALS; k++) sigaddset(set, CLEANUP_SIGNALS[k]);
}

typedef enum OutKind { OUT_STDOUT, OUT_IN_PLACE, OUT_RENAME } OutKind;

typedef struct OutPlan {
    const DriverOutput *o;
    OutKind kind;
    char *target; /* heap: the file written or renamed over */
    char *tmp;    /* heap: the temporary (OUT_RENAME), NULL once renamed or removed */
    int slot;     /* its index in g_temps */
    mode_t mode;
    bool exists;
    uid_t uid;
    gid_t gid;
} OutPlan;

static char *dup_str(const char *s, size_t n)
{
    char *r = xmalloc(n + 1);
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

/* Directory part of path ("." when it has none), heap-allocated. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return dup_str(".", 1);
    if (slash == path) return dup_str("/", 1);
    return dup_str(path, (size_t)(slash - path));
}

static bool out_error(const char *path, const char *why)
{
    fprintf(stderr, "spmdc: error: cannot write %s: %s\n", path, why);
    return false;
}

/* Step 1 for one output. */
static bool plan_output(const DriverOutput *o, OutPlan *p)
{
    memset(p, 0, sizeof *p);
    p->o = o;
    if (strcmp(o->path, "-") == 0) {
        p->kind = OUT_STDOUT;
        return true;
    }
    struct stat st;
    p->exists = stat(o->path, &st) == 0; /* follows symlinks */
    if (p->exists && !S_ISREG(st.st_mode)) {
        p->kind = OUT_IN_PLACE; /* a device or pipe (-o /dev/null, a FIFO): never renamed over */
        p->target = dup_str(o->path, strlen(o->path));
        return true;
    }
    char *target = p->exists ? realpath(o->path, NULL) : dangling_target(o->path);
    p->target = target ? target : dup_str(o->path, strlen(o->path));
    if (p->exists) {
        if ((st.st_mode & 0222) == 0 || access(p->target, W_OK) != 0)
            return out_error(o->path, "the file is read-only; it is left as it is");
        p->mode = st.st_mode & 07777;
        p->uid = st.st_uid;
        p->gid = st.st_gid;
    } else {
        mode_t mask = umask(0);
        umask(mask);
        p->mode = 0666 & ~mask;
    }
    char *dir = dir_of(p->target);
    bool dir_writable = access(dir, W_OK) == 0;
    free(dir);
    p->kind = dir_writable || !p->exists ? OUT_RENAME : OUT_IN_PLACE;
    return true;
}

/* Step 2 for one output: creates p's temporary (registered for removal)
 * with the target's mode and, for root, owner; *fd open on it.  False
 * after printing why. */
static bool open_temp(OutPlan *p, int *fd_out)
{
    char *dir = dir_of(p->target);
    size_t n = strlen(dir) + sizeof "/.spmdc-XXXXXX";
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s/.spmdc-XXXXXX", dir);
    free(dir);
    /* the temporary is registered before a cleanup signal can arrive */
    sigset_t set, old;
    cleanup_signal_set(&set);
    sigprocmask(SIG_BLOCK, &set, &old);
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        p->tmp = tmp;
        p->slot = g_n_temps;
        g_temps[g_n_temps] = tmp;
        g_n_temps++;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return out_error(p->o->path, strerror(e));
    }
    if (fchmod(fd, p->mode) != 0) {
        int e = errno;
        close(fd);
        return out_error(p->o->path, strerror(e));
    }
    if (p->exists && geteuid() == 0) (void)!fchown(fd, p->uid, p->gid); /* root keeps the owner */
    *fd_out = fd;
    return true;
}

/* One temporary's text being written (write_temps). */
typedef struct TempJob {
    DriverOutput o;  /* the output; on a thread of its own without its stage */
    int fd;
    bool ok;
    int err;         /* errno of a failed write */
    bool threaded;
    pthread_t thread;
} TempJob;

static void *temp_job(void *arg)
{
    TempJob *j = arg;
    j->ok = write_text_close(j->fd, &j->o);
    j->err = errno;
    return NULL;
}

/* Writes the n planned temporaries (fds[k] open for each OUT_RENAME plan,
 * closed here) at once: the first on this thread, every other one that is
 * printed (an emit function) on a thread of its own, so a run's program and
 * report are printed on two cores (the printers only read what they print,
 * and each streams into its own file).  The stage lines (passtime) keep
 * their order: a threaded output's stage ends when it is joined.  False on
 * a failure: printed when nothing ran on a second thread; else *again is
 * set and nothing printed, since which of two files written at once fails
 * under a shared limit (a full disk) depends on timing: the caller writes
 * them again one by one (rewrite_temps), which fails where a run writing
 * them in turn fails. */
static bool write_temps(OutPlan *plans, const int *fds, int n, bool *again)
{
    bool parallel = false;
    TempJob jobs[MAX_TEMPS];
    bool first = true;
    for (int k = 0; k < n; k++) {
        if (plans[k].kind != OUT_RENAME) continue;
        memset(&jobs[k], 0, sizeof jobs[k]);
        jobs[k].o = *plans[k].o;
        jobs[k].fd = fds[k];
        if (!first && plans[k].o->emit) {
            jobs[k].o.stage = NULL; /* passtime is not for two threads */
            jobs[k].threaded = pthread_create(&jobs[k].thread, NULL, temp_job, &jobs[k]) == 0;
            if (!jobs[k].threaded) jobs[k].o.stage = plans[k].o->stage;
            parallel |= jobs[k].threaded;
        }
        first = false;
    }
    for (int k = 0; k < n; k++)
        if (plans[k].kind == OUT_RENAME && !jobs[k].threaded) temp_job(&jobs[k]);
    for (int k = 0; k < n; k++) {
        if (plans[k].kind != OUT_RENAME || !jobs[k].threaded) continue;
        pthread_join(jobs[k].thread, NULL);
        if (plans[k].o->stage) passtime_stage(plans[k].o->stage);
    }
    for (int k = 0; k < n; k++) {
        if (plans[k].kind != OUT_RENAME || jobs[k].ok) continue;
        if (parallel) {
            *again = true;
            return false;
        }
        return out_error(plans[k].o->path, strerror(jobs[k].err));
    }
    return true;
}

/* The temporaries written again one by one, in order, after write_temps
 * failed with two at once: each is emptied first, so the space in use as
 * each is written is what a run writing them in turn uses.  False after
 * printing the first failure. */
static bool rewrite_temps(OutPlan *plans, int n)
{
    for (int k = 0; k < n; k++)
        if (plans[k].kind == OUT_RENAME && truncate(plans[k].tmp, 0) != 0)
            return out_error(plans[k].o->path, strerror(errno));
    for (int k = 0; k < n; k++) {
        if (plans[k].kind != OUT_RENAME) continue;
        int fd = open(plans[k].tmp, O_WRONLY | O_TRUNC);
        DriverOutput o = *plans[k].o;
        o.stage = NULL; /* its stage line was printed by the first attempt */
        if (fd < 0 || !write_text_close(fd, &o)) return out_error(plans[k].o->path, strerror(errno));
    }
    return true;
}

/* Removes every temporary still present (failure path). */
static void remove_temps(OutPlan *plans, int n)
{
    sigset_t set, old;
    cleanup_signal_set(&set);
    sigprocmask(SIG_BLOCK, &set, &old);
    for (int k = 0; k < n; k++)
        if (plans[k].tmp) {
            unlink(plans[k].tmp);
            free(plans[k].tmp);
            plans[k].tmp = NULL;
        }
    g_n_temps = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
}

bool driver_write_outputs(const DriverOutput *outs, int n)
{
    SPMDC_ASSERT(n >= 0 && n <= MAX_TEMPS);
    OutPlan plans[MAX_TEMPS];
    int planned = 0;
    bool ok = true;
    static bool exit_hook;
    if (!exit_hook) exit_hook = atexit(remove_temps_at_exit) == 0;
    for (; planned < n && ok; planned++) ok = plan_output(&outs[planned], &plans[planned]);
    struct sigaction sa, saved[N_CLEANUP_SIGNALS];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = remove_temps_and_reraise;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < N_CLEANUP_SIGNALS; k++) { /* an ignored signal (nohup) stays ignored */
        sigaction(CLEANUP_SIGNALS[k], NULL, &saved[k]);
        if (saved[k].sa_handler != SIG_IGN) sigaction(CLEANUP_SIGNALS[k], &sa, NULL);
    }
    int fds[MAX_TEMPS], opened = 0;
    for (; opened < planned && ok; opened++)
        if (plans[opened].kind == OUT_RENAME) ok = open_temp(&plans[opened], &fds[opened]);
    if (ok) {
        bool again = false;
        ok = write_temps(plans, fds, planned, &again); /* closes them */
        if (again) ok = rewrite_temps(plans, planned);
    } else {
        for (int k = 0; k + 1 < opened; k++) /* the last one tried is not open */
            if (plans[k].kind == OUT_RENAME) close(fds[k]);
    }
    for (int k = 0; k < planned && ok; k++) {
        if (plans[k].kind == OUT_IN_PLACE) {
            int fd = open(plans[k].target, O_WRONLY | O_CREAT | O_TRUNC, 0666);
            ok = fd >= 0 && write_text_close(fd, plans[k].o);
            if (!ok) out_error(plans[k].o->path, strerror(errno));
        } else if (plans[k].kind == OUT_STDOUT) {
            ok = fflush(stdout) == 0 && write_text(STDOUT_FILENO, plans[k].o);
            if (!ok) fprintf(stderr, "spmdc: error: cannot write standard output\n");
        }
    }
    for (int k = 0; k < planned && ok; k++) {
        if (!plans[k].tmp) continue;
        sigset_t set, old;
        cleanup_signal_set(&set);
        sigprocmask(SIG_BLOCK, &set, &old);
        if (rename(plans[k].tmp, plans[k].target) == 0) {
            g_temps[plans[k].slot] = NULL;
            free(plans[k].tmp);
            plans[k].tmp = NULL;
        } else {
            ok = out_error(plans[k].o->path, strerror(errno));
        }
        sigprocmask(SIG_SETMASK, &old, NULL);
    }
    remove_temps(plans, planned);
    for (int k = 0; k < N_CLEANUP_SIGNALS; k++) sigaction(CLEANUP_SIGNALS[k], &saved[k], NULL);
    for (int k = 0; k < planned; k++) free(plans[k].target);
    return ok;
}

bool driver_stream(int fd, void (*emit)(StrBuf *b, const void *ctx), const void *ctx, const char *stage)
{
    DriverOutput o = {NULL, NULL, 0, emit, ctx, stage};
    fflush(NULL);
    return write_text(fd, &o);
}

bool driver_write_file(const char *path, const char *data, size_t len)
{
    DriverOutput o = {path, data, len, NULL, NULL, NULL};
    return driver_write_outputs(&o, 1);
}

/* ---------------------------------------------------------------- naming the same file */

/* What a path names, for comparing paths by any spelling: the device and
 * inode of an existing file, else the canonical path it would be created
 * at (its directory resolved, a dangling symlink followed). */
typedef struct FileId {
    bool is_stdout, exists, regular;
    dev_t dev;
    ino_t ino;
    char *canon; /* heap or NULL */
} FileId;

static FileId file_id_of(const char *path)
{
    FileId id;
    memset(&id, 0, sizeof id);
    struct stat st;
    if (strcmp(path, "-") == 0) {
        id.is_stdout = true;
        if (fstat(STDOUT_FILENO, &st) != 0) return id;
    } else if (stat(path, &st) != 0) {
        char *t = dangling_target(path);
        const char *p = t ? t : path;
        const char *slash = strrchr(p, '/');
        char *dir = dir_of(p), *rdir = realpath(dir, NULL);
        if (rdir) {
            const char *base = slash ? slash + 1 : p;
            size_t n = strlen(rdir) + strlen(base) + 2;
            id.canon = xmalloc(n);
            snprintf(id.canon, n, "%s/%s", rdir, base);
        } else {
            id.canon = dup_str(p, strlen(p));
        }
        free(rdir);
        free(dir);
        free(t);
        return id;
    }
    id.exists = true;
    id.regular = S_ISREG(st.st_mode);
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return id;
}

/* Whether a and b are the same file that a write could clobber (a device
 * such as /dev/null may be named twice; both "-" is one stream). */
static bool same_target(const FileId *a, const FileId *b)
{
    if (a->is_stdout && b->is_stdout) return true;
    if (a->exists != b->exists) return false;
    if (a->exists) return a->regular && a->dev == b->dev && a->ino == b->ino;
    return a->canon && b->canon && strcmp(a->canon, b->canon) == 0;
}

int driver_option_once(DriverOptionsSeen *seen, int code, const struct option *longopts, const int *repeatable)
{
    const struct option *o = longopts;
    while (o->name && o->val != code) o++;
    if (!o->name || o->has_arg != required_argument) return 0;
    for (const int *r = repeatable; r && *r; r++)
        if (*r == code) return 0;
    for (int k = 0; k < seen->n; k++) {
        if (seen->code[k] != code) continue;
        if (code < 128) fprintf(stderr, "spmdc: error: -%c/--%s given twice; it takes one value\n", code, o->name);
        else fprintf(stderr, "spmdc: error: --%s given twice; it takes one value\n", o->name);
        return 2;
    }
    if (seen->n < (int)(sizeof seen->code / sizeof seen->code[0])) seen->code[seen->n++] = code;
    return 0;
}

int driver_check_outputs(const char *input, const char *const *paths, const char *const *what, int n)
{
    return driver_check_outputs_keep(input, "the input file", paths, what, n);
}

int driver_check_outputs_keep(const char *input, const char *input_what, const char *const *paths,
                              const char *const *what, int n)
{
    int rc = 0;
    FileId in;
    memset(&in, 0, sizeof in);
    if (input) {
        struct stat st;
        if (strcmp(input, "-") == 0 ? fstat(STDIN_FILENO, &st) == 0 : stat(input, &st) == 0) {
            in.exists = true;
            in.regular = S_ISREG(st.st_mode);
            in.dev = st.st_dev;
            in.ino = st.st_ino;
        }
    }
    FileId ids[MAX_TEMPS];
    SPMDC_ASSERT(n >= 0 && n <= MAX_TEMPS);
    for (int k = 0; k < n; k++) ids[k] = file_id_of(paths[k]);
    for (int k = 0; k < n && rc == 0; k++) {
        if (in.exists && in.regular && ids[k].exists && same_target(&in, &ids[k])) {
            fprintf(stderr, "spmdc: error: %s %s names %s; refusing to overwrite it\n", what[k], paths[k],
                    input_what);
            rc = 2;
        }
        for (int j = 0; j < k && rc == 0; j++)
            if (same_target(&ids[j], &ids[k])) {
                fprintf(stderr, "spmdc: error: %s and %s name the same file ('%s' and '%s'); one output would "
                                "overwrite the other\n", what[j], what[k], paths[j], paths[k]);
                rc = 2;
            }
    }
    for (int k = 0; k < n; k++) free(ids[k].canon);
    return rc;
}

HloModule *driver_load_module(const char *text, size_t len, uint32_t file_id, PassCtx *cx, bool propagate)
{
    PipelineState st;
    memset(&st, 0, sizeof st);
    st.text = text;
    st.len = len;
    st.file_id = file_id;
    bool ok = pipeline_run(&st, cx, PASS_PARSE, propagate ? PASS_PROPAGATE : PASS_CANONICALIZE);
    HloModule *m = ok ? st.m : NULL;
    if (ok) st.m = NULL;
    pipeline_state_free(&st);
    return m;
}

int driver_parse_mesh(const char *spec, SpmdcOptions *opt)
{
    char err[200];
    if (!mesh_parse_spec(spec, &opt->mesh, err, sizeof err)) {
        fprintf(stderr, "spmdc: error: %s\n", err);
        return 2;
    }
    opt->has_mesh = true;
    return 0;
}
