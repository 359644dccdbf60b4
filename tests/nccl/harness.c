// harness.c: nccl_api_test's main: forks N ranks per named case (or one
// process for the single-process cases), bounds them in time, collects each
// rank's first failure and checks that nothing named vgpu* is left in
// /dev/shm. Usage: nccl_api_test --ranks N --case NAME[,NAME...]|all.
#include "nccl_test.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NT_PRINT_LIMIT 8 // failures printed to stderr per rank and case

// ---- failures ----

int nt_fail(struct nt_ctx *ctx, const char *file, int line, const char *fmt, ...)
{
    struct nt_slot *slot = &ctx->shared->slot[ctx->rank];
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    if (slot->failures == 0)
        snprintf(slot->first, sizeof slot->first, "%s, at %s:%d", what, base, line);
    if (slot->failures++ < NT_PRINT_LIMIT)
        fprintf(stderr, "[rank %d] %s: %s:%d: %s\n", ctx->rank, ctx->case_name, base, line, what);
    return -1;
}

int nt_fail_nccl(struct nt_ctx *ctx, const char *file, int line, const char *call, ncclResult_t rc,
                 ncclComm_t comm)
{
    const char *last = ncclGetLastError(comm);
    return nt_fail(ctx, file, line, "%s: %s (%d)%s%s", call, ncclGetErrorString(rc), (int)rc,
                   last && *last ? "; last error: " : "", last ? last : "");
}

int nt_fail_cuda(struct nt_ctx *ctx, const char *file, int line, const char *call, cudaError_t rc)
{
    return nt_fail(ctx, file, line, "%s: %s", call, cudaGetErrorString(rc));
}

// ---- helpers for the cases ----

int nt_comm_init(struct nt_ctx *ctx, ncclComm_t *comm, int id_index)
{
    *comm = NULL;
    NT_NCCL(ctx, NULL, ncclCommInitRank(comm, ctx->nranks, ctx->ids[id_index], ctx->rank));
    NT_REQUIRE(ctx, *comm != NULL, "ncclCommInitRank succeeded with a NULL communicator");
    return 0;
}

void *nt_dev_alloc(struct nt_ctx *ctx, size_t bytes, const void *src)
{
    void *dev = NULL;
    if (bytes == 0)
        bytes = 1;
    cudaError_t ce = cudaMalloc(&dev, bytes);
    if (ce != cudaSuccess) {
        nt_fail_cuda(ctx, __FILE__, __LINE__, "cudaMalloc", ce);
        return NULL;
    }
    void *host = malloc(bytes);
    if (!host) {
        nt_fail(ctx, __FILE__, __LINE__, "malloc(%zu) failed", bytes);
        cudaFree(dev);
        return NULL;
    }
    if (src)
        memcpy(host, src, bytes);
    else
        memset(host, NT_SENTINEL, bytes);
    ce = cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
    free(host);
    if (ce != cudaSuccess) {
        nt_fail_cuda(ctx, __FILE__, __LINE__, "cudaMemcpy(HostToDevice)", ce);
        cudaFree(dev);
        return NULL;
    }
    return dev;
}

int nt_dev_read(struct nt_ctx *ctx, void *host, const void *dev, size_t bytes)
{
    if (bytes == 0)
        return 0;
    NT_CUDA(ctx, cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

int nt_sync(struct nt_ctx *ctx)
{
    NT_CUDA(ctx, cudaStreamSynchronize(ctx->stream));
    return 0;
}

int nt_untouched(struct nt_ctx *ctx, const void *dev, size_t bytes, const char *what)
{
    unsigned char *host = malloc(bytes ? bytes : 1);
    NT_REQUIRE(ctx, host, "malloc(%zu) failed", bytes);
    int rc = nt_dev_read(ctx, host, dev, bytes);
    for (size_t i = 0; rc == 0 && i < bytes; i++) {
        if (host[i] != NT_SENTINEL) {
            nt_fail(ctx, __FILE__, __LINE__, "%s was written: byte %zu of %zu is 0x%02x", what, i,
                    bytes, host[i]);
            rc = -1;
        }
    }
    free(host);
    return rc;
}

void nt_barrier(struct nt_ctx *ctx)
{
    struct nt_shared *sh = ctx->shared;
    unsigned round = atomic_load(&sh->barrier_round);
    if (atomic_fetch_add(&sh->barrier_arrived, 1) + 1 == (unsigned)ctx->nranks) {
        atomic_store(&sh->barrier_arrived, 0);
        atomic_fetch_add(&sh->barrier_round, 1);
        return;
    }
    while (atomic_load(&sh->barrier_round) == round)
        usleep(100);
}

double nt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int nt_names_rank(const char *msg, int rank)
{
    char want[32];
    int n = snprintf(want, sizeof want, "rank %d", rank);
    for (const char *p = msg ? strstr(msg, want) : NULL; p; p = strstr(p + 1, want)) {
        if (p[n] < '0' || p[n] > '9')
            return 1;
    }
    return 0;
}

// ---- the case table ----

static const struct nt_case *const case_tables[] = {nt_cases_reduce, nt_cases_move, nt_cases_p2p,
                                                    nt_cases_comm, nt_cases_fault};

static const struct nt_case *case_find_(const char *name)
{
    for (size_t t = 0; t < sizeof case_tables / sizeof case_tables[0]; t++)
        for (const struct nt_case *c = case_tables[t]; c->name; c++)
            if (strcmp(c->name, name) == 0)
                return c;
    return NULL;
}

// ---- a rank's process ----

// The rank's work: its device, its stream, the case; the exit status.
static int rank_main_(struct nt_ctx *ctx, const struct nt_case *c)
{
    int devices = 0;
    cudaError_t ce = cudaGetDeviceCount(&devices);
    if (ce != cudaSuccess || devices < 1) {
        nt_fail(ctx, __FILE__, __LINE__, "no CUDA device: cudaGetDeviceCount: %s (%d devices)",
                cudaGetErrorString(ce), devices);
        return 1;
    }
    ctx->device = ctx->rank % devices;
    if (cudaSetDevice(ctx->device) != cudaSuccess ||
        cudaStreamCreate(&ctx->stream) != cudaSuccess) {
        nt_fail(ctx, __FILE__, __LINE__, "cudaSetDevice(%d) / cudaStreamCreate failed",
                ctx->device);
        return 1;
    }
    int rc = c->fn(ctx);
    cudaStreamDestroy(ctx->stream);
    return rc == 0 && ctx->shared->slot[ctx->rank].failures == 0 ? 0 : 1;
}

static void hex_encode_(char *out, const void *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", ((const unsigned char *)bytes)[i]);
}

static int hex_decode_(void *bytes, const char *hex, size_t n)
{
    if (strlen(hex) != 2 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
            return -1;
        ((unsigned char *)bytes)[i] = (unsigned char)v;
    }
    return 0;
}

// A case with an environment of its own: the rank execs this program anew
// (so that the library reads it at load), which finds its way back here
// through --rank-exec CASE RANK NRANKS FD IDS.
static void rank_exec_(const struct nt_ctx *ctx, const struct nt_case *c, int shared_fd)
{
    static char ids_hex[NT_MAX_IDS * sizeof(ncclUniqueId) * 2 + 1];
    char rank[16], nranks[16], fd[16];
    hex_encode_(ids_hex, ctx->ids, sizeof ctx->ids);
    snprintf(rank, sizeof rank, "%d", ctx->rank);
    snprintf(nranks, sizeof nranks, "%d", ctx->nranks);
    snprintf(fd, sizeof fd, "%d", shared_fd);
    putenv((char *)c->env);
    char *argv[] = {"nccl_api_test", "--rank-exec", (char *)c->name, rank, nranks, fd,
                    ids_hex,         NULL};
    execv("/proc/self/exe", argv);
    fprintf(stderr, "[rank %d] %s: execv(/proc/self/exe): %s\n", ctx->rank, c->name,
            strerror(errno));
    _exit(1);
}

static int rank_exec_main_(char **argv)
{
    const struct nt_case *c = case_find_(argv[0]);
    struct nt_ctx ctx = {.rank = atoi(argv[1]), .nranks = atoi(argv[2])};
    int fd = atoi(argv[3]);
    ctx.shared = mmap(NULL, sizeof *ctx.shared, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (!c || ctx.shared == MAP_FAILED || ctx.rank < 0 || ctx.rank >= NT_MAX_RANKS ||
        hex_decode_(ctx.ids, argv[4], sizeof ctx.ids) != 0) {
        fprintf(stderr, "nccl_api_test: bad --rank-exec arguments\n");
        return 1;
    }
    ctx.case_name = c->name;
    return rank_main_(&ctx, c);
}

// ---- the parent ----

// The names in /dev/shm that start with vgpu into list, each after a
// newline and the last followed by one ("\na\nb\n"; "\n" when none).
static void shm_list_(char *list, size_t bytes)
{
    size_t used = 1;
    list[0] = '\n';
    list[1] = 0;
    DIR *dir = opendir("/dev/shm");
    for (struct dirent *e; dir && (e = readdir(dir));) {
        if (strncmp(e->d_name, "vgpu", 4) == 0 && used + strlen(e->d_name) + 2 < bytes)
            used += (size_t)snprintf(list + used, bytes - used, "%s\n", e->d_name);
    }
    if (dir)
        closedir(dir);
}

// name is mapped by a live process (another job's, a concurrent test's).
static int shm_mapped_(const char *name)
{
    char path[300], line[600], want[300];
    if (snprintf(want, sizeof want, "/dev/shm/%s", name) >= (int)sizeof want)
        return 0;
    DIR *proc = opendir("/proc");
    int found = 0;
    for (struct dirent *e; !found && proc && (e = readdir(proc));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/maps", e->d_name);
        FILE *f = fopen(path, "r");
        while (f && !found && fgets(line, sizeof line, f))
            found = strstr(line, want) != NULL;
        if (f)
            fclose(f);
    }
    if (proc)
        closedir(proc);
    return found;
}

// The vgpu* entries of /dev/shm that are new since before and mapped by no
// live process, into left ("" when none).
static void shm_leaks_(const char *before, char *left, size_t bytes)
{
    static char now[1 << 16];
    shm_list_(now, sizeof now);
    left[0] = 0;
    size_t used = 0;
    for (char *line = now + 1, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        *nl = 0;
        char needle[300];
        if (snprintf(needle, sizeof needle, "\n%s\n", line) >= (int)sizeof needle)
            continue; // (no name in /dev/shm is that long)
        if (!strstr(before, needle) && !shm_mapped_(line) && used + strlen(line) + 12 < bytes)
            used +=
                (size_t)snprintf(left + used, bytes - used, "%s/dev/shm/%s", used ? " " : "", line);
    }
}

struct run_opts {
    int nranks;
    double timeout_s; // bound on one case, all its ranks together
};

// Waits for the pids (n of them) until deadline; kills the rest then. status
// gets each one's wait status; returns the count still running at the deadline.
static int wait_all_(pid_t *pids, int *status, int n, double deadline)
{
    int left = n;
    while (left > 0 && nt_now_s() < deadline) {
        for (int i = 0; i < n; i++) {
            if (pids[i] > 0 && waitpid(pids[i], &status[i], WNOHANG) == pids[i]) {
                pids[i] = -pids[i];
                left--;
            }
        }
        if (left > 0)
            usleep(5000);
    }
    int late = left;
    for (int i = 0; i < n; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGKILL);
    for (int i = 0; i < n; i++) {
        if (pids[i] > 0) {
            waitpid(pids[i], &status[i], 0);
            status[i] = -1; // timed out
        }
    }
    return late;
}

// The verdict of one rank's process, into why; 0 when it passed.
static int rank_verdict_(const struct nt_slot *slot, int status, int rank, char *why, size_t bytes)
{
    if (status == -1)
        snprintf(why, bytes, "rank %d still running at the time limit (killed)%s%s", rank,
                 slot->failures ? "; first failure: " : "", slot->failures ? slot->first : "");
    else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && slot->expect_killed)
        return 0;
    else if (WIFSIGNALED(status))
        snprintf(why, bytes, "rank %d killed by signal %d (%s)", rank, WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else if (slot->failures)
        snprintf(why, bytes, "%s (rank %d, %d failed check%s)", slot->first, rank, slot->failures,
                 slot->failures == 1 ? "" : "s");
    else if (WEXITSTATUS(status) != 0)
        snprintf(why, bytes, "rank %d exited %d", rank, WEXITSTATUS(status));
    else
        return 0;
    return -1;
}

enum { CASE_OK, CASE_SKIPPED, CASE_FAILED };

// Forks the case's processes; returns their count, pids in pids.
static int fork_ranks_(const struct nt_case *c, const struct run_opts *o, struct nt_ctx *ctx,
                       int shared_fd, pid_t *pids)
{
    int procs = c->flags & NT_ONE_PROCESS ? 1 : o->nranks;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < procs; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            ctx->rank = r;
            if (c->env)
                rank_exec_(ctx, c, shared_fd);
            exit(rank_main_(ctx, c));
        }
        if (pids[r] < 0) {
            fprintf(stderr, "nccl_api_test: fork: %s\n", strerror(errno));
            return r;
        }
    }
    return procs;
}

static int run_case_(const struct nt_case *c, const struct run_opts *o, struct nt_shared *shared,
                     int shared_fd)
{
    static char before[1 << 16], left[4096];
    char why[1024] = "";
    if (o->nranks < c->min_ranks) {
        printf("%-16s skipped (needs %d ranks)\n", c->name, c->min_ranks);
        return CASE_SKIPPED;
    }
    shm_list_(before, sizeof before);
    struct nt_ctx ctx = {.nranks = o->nranks, .shared = shared, .case_name = c->name};
    for (int k = 0; k < c->ids; k++) {
        ncclResult_t rc = ncclGetUniqueId(&ctx.ids[k]);
        if (rc != ncclSuccess) {
            printf("%-16s FAILED: ncclGetUniqueId in the parent: %s\n", c->name,
                   ncclGetErrorString(rc));
            return CASE_FAILED;
        }
    }
    memset(shared, 0, sizeof *shared);
    pid_t pids[NT_MAX_RANKS];
    int status[NT_MAX_RANKS];
    double t0 = nt_now_s();
    int procs = fork_ranks_(c, o, &ctx, shared_fd, pids);
    int late = wait_all_(pids, status, procs, t0 + o->timeout_s);
    double secs = nt_now_s() - t0;
    int failed = procs < (c->flags & NT_ONE_PROCESS ? 1 : o->nranks);
    if (failed)
        snprintf(why, sizeof why, "could not fork every rank");
    if (late && !failed) {
        snprintf(why, sizeof why, "timed out after %.0f s (%d process%s still running, killed)",
                 o->timeout_s, late, late == 1 ? "" : "es");
        failed = 1;
    }
    // The first failing rank's verdict in full; the others by number (their
    // own lines went to stderr).
    char others[256] = "";
    int told = 0; // a rank's verdict is in why
    for (int r = 0; r < procs; r++) {
        char one[600];
        if (rank_verdict_(&shared->slot[r], status[r], r, one, sizeof one) == 0)
            continue;
        if (!told++)
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s%s", why[0] ? "; " : "",
                     one);
        else
            snprintf(others + strlen(others), sizeof others - strlen(others), " %d", r);
        failed = 1;
    }
    if (others[0])
        snprintf(why + strlen(why), sizeof why - strlen(why), "; failed too: rank%s", others);
    shm_leaks_(before, left, sizeof left);
    if (left[0]) {
        snprintf(why + strlen(why), sizeof why - strlen(why), "%sleft in /dev/shm: %s",
                 why[0] ? "; " : "", left);
        failed = 1;
    }
    if (failed)
        printf("%-16s FAILED: %s\n", c->name, why);
    else
        printf("%-16s ok (%.2f s)\n", c->name, secs);
    fflush(stdout);
    return failed ? CASE_FAILED : CASE_OK;
}

// A process of its own asks for a CUDA device (the parent stays free of
// CUDA, which does not survive fork): 0 when there is one, else says why.
static int probe_device_(char *why, size_t bytes)
{
    int fds[2];
    if (pipe(fds) != 0)
        return snprintf(why, bytes, "pipe: %s", strerror(errno)), -1;
    pid_t pid = fork();
    if (pid == 0) {
        int n = 0;
        cudaError_t ce = cudaGetDeviceCount(&n);
        char msg[256];
        int len = snprintf(msg, sizeof msg, "cudaGetDeviceCount: %s, %d devices",
                           cudaGetErrorString(ce), n);
        if (write(fds[1], msg, (size_t)len) < 0)
            _exit(3);
        _exit(ce == cudaSuccess && n > 0 ? 0 : 1);
    }
    close(fds[1]);
    ssize_t got = pid > 0 ? read(fds[0], why, bytes - 1) : -1;
    why[got > 0 ? got : 0] = 0;
    close(fds[0]);
    int status = 1;
    if (pid > 0)
        waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: nccl_api_test [--ranks N] [--case NAME[,NAME...]|all] [--timeout S] [--list]\n"
            "  -n, --ranks N     processes (ranks) per case, 1..%d (default 2)\n"
            "  -c, --case LIST   cases to run, comma-separated, or all (default)\n"
            "  -t, --timeout S   bound on one case, seconds (default 60)\n"
            "  -l, --list        list the cases\n"
            "  -h, --help        this text\n"
            "Exit status: 0 when every case passed, 1 otherwise, 77 when no CUDA device.\n",
            NT_MAX_RANKS);
}

static void list_cases_(void)
{
    for (size_t t = 0; t < sizeof case_tables / sizeof case_tables[0]; t++)
        for (const struct nt_case *c = case_tables[t]; c->name; c++)
            printf("%-16s %s\n", c->name, c->what);
}

// Runs the cases of list ("all" or names joined by commas); counts[] by verdict.
static int run_list_(const char *list, const struct run_opts *o, struct nt_shared *shared, int fd,
                     int *counts)
{
    if (strcmp(list, "all") == 0) {
        for (size_t t = 0; t < sizeof case_tables / sizeof case_tables[0]; t++)
            for (const struct nt_case *c = case_tables[t]; c->name; c++)
                counts[run_case_(c, o, shared, fd)]++;
        return 0;
    }
    char *copy = strdup(list), *save = NULL;
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        const struct nt_case *c = case_find_(name);
        if (!c) {
            fprintf(stderr, "nccl_api_test: no case '%s' (--list names them)\n", name);
            free(copy);
            return -1;
        }
        counts[run_case_(c, o, shared, fd)]++;
    }
    free(copy);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--rank-exec") == 0)
        return rank_exec_main_(argv + 2);
    static const struct option longopts[] = {
        {"ranks", required_argument, NULL, 'n'},   {"case", required_argument, NULL, 'c'},
        {"timeout", required_argument, NULL, 't'}, {"list", no_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    struct run_opts o = {.nranks = 2, .timeout_s = 60};
    const char *list = "all";
    for (int ch; (ch = getopt_long(argc, argv, "n:c:t:lh", longopts, NULL)) != -1;) {
        switch (ch) {
        case 'n': o.nranks = atoi(optarg); break;
        case 'c': list = optarg; break;
        case 't': o.timeout_s = atof(optarg); break;
        case 'l': list_cases_(); return 0;
        case 'h': usage_(stdout); return 0;
        default: usage_(stderr); return 2;
        }
    }
    if (optind != argc || o.nranks < 1 || o.nranks > NT_MAX_RANKS || o.timeout_s <= 0) {
        fprintf(stderr, "nccl_api_test: --ranks must be 1..%d and --timeout positive\n",
                NT_MAX_RANKS);
        usage_(stderr);
        return 2;
    }
    char why[512];
    if (probe_device_(why, sizeof why) != 0) {
        printf("nccl_api_test: SKIP: no CUDA device to run on (%s)\n", why);
        return 77;
    }
    int fd = memfd_create("nccl_api_test", 0); // inherited across exec (rank_exec_)
    struct nt_shared *shared = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, sizeof *shared) == 0)
        shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shared == MAP_FAILED) {
        fprintf(stderr, "nccl_api_test: shared memory for the verdicts: %s\n", strerror(errno));
        return 1;
    }
    int version = 0;
    ncclGetVersion(&version);
    Dl_info nccl_so = {0}, cudart_so = {0}; // which libraries the loader chose
    dladdr((void *)ncclAllReduce, &nccl_so);
    dladdr((void *)cudaMalloc, &cudart_so);
    printf("nccl_api_test: %d rank%s, NCCL %d (header %d) from %s, CUDA runtime from %s, "
           "case time limit %.0f s\n",
           o.nranks, o.nranks == 1 ? "" : "s", version, NCCL_VERSION_CODE,
           nccl_so.dli_fname ? nccl_so.dli_fname : "?",
           cudart_so.dli_fname ? cudart_so.dli_fname : "?", o.timeout_s);
    int counts[3] = {0, 0, 0};
    if (run_list_(list, &o, shared, fd, counts) != 0)
        return 2;
    printf("nccl_api_test: %d ranks: %d ok, %d skipped, %d FAILED: %s\n", o.nranks, counts[CASE_OK],
           counts[CASE_SKIPPED], counts[CASE_FAILED], counts[CASE_FAILED] ? "FAILED" : "OK");
    return counts[CASE_FAILED] ? 1 : 0;
}
