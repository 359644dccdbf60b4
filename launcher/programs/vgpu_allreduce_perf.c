// vgpu_allreduce_perf.c: all-reduce bandwidth benchmark in the manner of
// nccl-tests' all_reduce_perf, on libvgpu's public API alone (vgpu/vgpu.h;
// vgpu/vgpu_ext.h for the deterministic all-reduce), as any program of a
// user's: it starts through vgpu_join/vgpu_open, so it measures whatever the
// job binds (CPU-simulated devices, VGPU_SIM_GPUS's GPUs, real GPUs) with
// whatever backend the job's config chooses (ring, mpi, nccl: --set
// comm.backend=..., or --backend). MPI only for the fence before a timed
// round (MPI_Barrier, as nccl-tests): vgpu's host collectives nap while they
// wait, which would stagger the ranks' starts.
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vgpu/vgpu.h>
#include <vgpu/vgpu_ext.h>

#include "allreduce_perf_values.h"

#define MAX_SETS 32 // --set overrides, with the ones the options below make

struct bench_opts {
    uint64_t min_bytes;   // -b
    uint64_t max_bytes;   // -e
    double factor;        // -f: size multiplier between rows
    int iters;            // -n: timed iterations per size
    double min_ms;        // --min_ms: ... or more, until the timed calls take this long
    int warmup;           // -w: untimed iterations per size
    int check;            // -c: verify results
    vgpu_op_t op;         // -o
    vgpu_datatype_t dtype; // -d
    int sleep_rank;       // --sleep-rank: this rank stalls before the first collective
    double sleep_s;       // --sleep: for how long, seconds
    int tree;             // --tree M: the deterministic all-reduce of M partials (0 = off)
    int fresh;            // --fresh: rewrite the input before every call, untimed
    int copy_bw;          // --copy_bw: measure a device-to-device copy first
    const char *sets[MAX_SETS]; // "section.key=value" for vgpu_join, in order
    int n_sets;
    char set_text[3][96]; // the texts of -t, --backend and --slice's overrides
};

static const char *const dtype_names_[] = {"float32", "float64", "int32", "int64", "float16",
                                           "bfloat16"};
static const size_t dtype_bytes_[] = {4, 8, 4, 8, 2, 2};
static const char *const op_names_[] = {"sum", "avg", "prod", "min", "max"};
#define N_OPS 5

// Usage errors are said once, by the launcher's rank 0 (before joining, no
// rank is known otherwise).
static int loud_;
#define complain_(...)                                     \
    do {                                                   \
        if (loud_) {                                       \
            fputs("vgpu_allreduce_perf: ", stderr);        \
            fprintf(stderr, __VA_ARGS__);                  \
        }                                                  \
    } while (0)

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: vgpu_allreduce_perf [options]   (run under mpirun or vgpurun)\n"
            "  -b, --minbytes SIZE   smallest size (default 8; K/M/G suffixes)\n"
            "  -e, --maxbytes SIZE   largest size (default 64M)\n"
            "  -f, --stepfactor F    size multiplier between rows (default 2)\n"
            "  -n, --iters N         timed iterations per size (default 20)\n"
            "      --min_ms MS       ... or as many more as take MS milliseconds, counted from\n"
            "                        the first N (default 0: N); a few microseconds' call\n"
            "                        then outlasts the scheduler's time slices; '# timed'\n"
            "                        lines after each row give each column's calls and ms\n"
            "  -w, --warmup_iters N  untimed iterations per size (default 5)\n"
            "  -c, --check 0|1       verify every result (default 1)\n"
            "  -o, --op OP           sum, avg, prod, min or max (default sum)\n"
            "  -d, --datatype TYPE   float (float32), double (float64), int32, int64,\n"
            "                        float16 (half) or bfloat16 (default float)\n"
            "      --set KEY=VALUE   a setting of the job's, as vgpu_train's --set (repeatable):\n"
            "                        devices.kind=cpu, devices.memory_limit=1G, comm.backend=nccl...\n"
            "                        (docs/CONFIG.md; the VGPU_* variables apply as for any job)\n"
            "      --backend NAME    comm.backend: ring, mpi, nccl or auto (default: the job's\n"
            "                        choice, auto: the ring on CPU devices)\n"
            "  -t, --timeout S       comm.timeout_s: bound on every collective wait (default 60)\n"
            "      --slice SIZE      comm.slice_bytes: ring slice per step (default 1M)\n"
            "      --copy_bw         first time a device-to-device copy of --maxbytes on rank 0's\n"
            "                        device (-n copies; GB/s of bytes read plus written)\n"
            "      --sleep-rank R    fault injection: rank R sleeps before the first call\n"
            "      --sleep S         ... for S seconds (default 3600)\n"
            "      --tree M          time the deterministic all-reduce instead: M partials of\n"
            "                        each size split over the ranks (both columns run it)\n"
            "      --fresh           each rank rewrites its input before every call, untimed\n"
            "                        (as a backward pass writes the gradients): no call finds\n"
            "                        its data where the last one left it in the caches\n"
            "  -h, --help\n");
}

// A size with an optional K, M, G or T suffix (powers of 1024; "KiB", "MB"
// too); fractions of a unit are rounded down to whole bytes. -1: not one.
static int parse_size_(const char *text, uint64_t *bytes)
{
    char *end;
    if (*text == '-' || *text == '+')
        return -1;
    double v = strtod(text, &end), mult = 1;
    if (end == text || !isfinite(v) || v < 0)
        return -1;
    switch (*end) {
    case 'K': case 'k': mult = 1024.0; end++; break;
    case 'M': case 'm': mult = 1024.0 * 1024; end++; break;
    case 'G': case 'g': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'T': case 't': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    const double b = mult > 1 ? floor(v * mult) : v;
    if (*end || b != floor(b) || b >= 18446744073709551615.0)
        return -1;
    *bytes = (uint64_t)b;
    return 0;
}

// Adds "key=value" to the overrides (text lives in o or argv).
static int add_set_(struct bench_opts *o, const char *text)
{
    if (o->n_sets == MAX_SETS) {
        complain_("more than %d settings\n", MAX_SETS);
        return -1;
    }
    o->sets[o->n_sets++] = text;
    return 0;
}

// -o NAME: the reduction; -1 on an unknown name (said).
static int parse_op_(const char *name, vgpu_op_t *op)
{
    for (int k = 0; k < N_OPS; k++)
        if (!strcmp(name, op_names_[k])) {
            *op = (vgpu_op_t)k;
            return 0;
        }
    complain_("-o takes sum, avg, prod, min or max, not '%s'\n", name);
    return -1;
}

// -d NAME: the element type (nccl-tests' names and vgpu's); -1 on an
// unknown name (said).
static int parse_dtype_(const char *name, vgpu_datatype_t *t)
{
    static const struct {
        const char *name, *alias;
        vgpu_datatype_t type;
    } types[] = {{"float", "float32", vgpu_float32},  {"double", "float64", vgpu_float64},
                 {"int32", "int", vgpu_int32},        {"int64", "int64", vgpu_int64},
                 {"float16", "half", vgpu_float16},   {"bfloat16", "bfloat16", vgpu_bfloat16}};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        if (!strcmp(name, types[k].name) || !strcmp(name, types[k].alias)) {
            *t = types[k].type;
            return 0;
        }
    complain_("-d takes float, double, int32, int64, float16 or bfloat16, not '%s'\n", name);
    return -1;
}

// The job's settings: the options' first, so that a --set of the same key wins.
static void job_settings_(struct bench_opts *o, double timeout_s, const char *backend,
                          const char *slice, const char *const *sets, int n_sets)
{
    snprintf(o->set_text[0], sizeof o->set_text[0], "comm.timeout_s=%.17g", timeout_s);
    add_set_(o, o->set_text[0]);
    if (backend) {
        snprintf(o->set_text[1], sizeof o->set_text[1], "comm.backend=%s", backend);
        add_set_(o, o->set_text[1]);
    }
    if (slice) {
        snprintf(o->set_text[2], sizeof o->set_text[2], "comm.slice_bytes=%s", slice);
        add_set_(o, o->set_text[2]);
    }
    for (int i = 0; i < n_sets; i++)
        add_set_(o, sets[i]);
}

// Parses the command line; -1 on a bad one (said), 1 for --help.
static int parse_opts_(int argc, char **argv, struct bench_opts *o)
{
    *o = (struct bench_opts){.min_bytes = 8, .max_bytes = 64 << 20, .factor = 2,
                             .iters = 20, .warmup = 5, .check = 1, .op = vgpu_sum,
                             .dtype = vgpu_float32, .sleep_rank = -1, .sleep_s = 3600};
    double timeout_s = 60;
    const char *backend = NULL, *slice = NULL;
    const char *sets[MAX_SETS];
    int n_sets = 0;
    static const struct option longopts[] = {
        {"minbytes", required_argument, 0, 'b'},   {"maxbytes", required_argument, 0, 'e'},
        {"stepfactor", required_argument, 0, 'f'}, {"iters", required_argument, 0, 'n'},
        {"warmup_iters", required_argument, 0, 'w'}, {"check", required_argument, 0, 'c'},
        {"op", required_argument, 0, 'o'},         {"datatype", required_argument, 0, 'd'},
        {"backend", required_argument, 0, 'B'},    {"set", required_argument, 0, 's'},
        {"timeout", required_argument, 0, 't'},    {"slice", required_argument, 0, 'S'},
        {"sleep-rank", required_argument, 0, 'R'}, {"sleep", required_argument, 0, 'Z'},
        {"tree", required_argument, 0, 'T'},       {"min_ms", required_argument, 0, 'M'},
        {"fresh", no_argument, 0, 'F'},            {"copy_bw", no_argument, 0, 'C'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    int ch;
    opterr = loud_;
    while ((ch = getopt_long(argc, argv, "b:e:f:n:w:c:o:d:t:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b':
        case 'e':
            if (parse_size_(optarg, ch == 'b' ? &o->min_bytes : &o->max_bytes) < 0) {
                complain_("bad size '%s'\n", optarg);
                return -1;
            }
            break;
        case 'f': o->factor = atof(optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'c': o->check = atoi(optarg); break;
        case 'o':
            if (parse_op_(optarg, &o->op) < 0)
                return -1;
            break;
        case 'd':
            if (parse_dtype_(optarg, &o->dtype) < 0)
                return -1;
            break;
        case 'B': backend = optarg; break;
        case 'S': slice = optarg; break;
        case 's':
            if (n_sets == MAX_SETS - 3) {
                complain_("more than %d --set\n", MAX_SETS - 3);
                return -1;
            }
            sets[n_sets++] = optarg;
            break;
        case 't': timeout_s = atof(optarg); break;
        case 'R': o->sleep_rank = atoi(optarg); break;
        case 'Z': o->sleep_s = atof(optarg); break;
        case 'T': o->tree = atoi(optarg); break;
        case 'F': o->fresh = 1; break;
        case 'C': o->copy_bw = 1; break;
        case 'M': {
            char *end;
            o->min_ms = strtod(optarg, &end);
            if (end == optarg || *end)
                o->min_ms = -1; // refused below
            break;
        }
        case 'h': return 1;
        default:
            if (loud_)
                usage_(stderr);
            return -1;
        }
    }
    if (optind < argc || o->min_bytes > o->max_bytes || o->factor <= 1 || o->iters < 1 ||
        o->warmup < 0 || !(timeout_s > 0) || o->max_bytes == 0 || o->tree < 0 || o->tree > 4096 ||
        !(o->min_ms >= 0 && o->min_ms <= 60000)) {
        complain_("need -b <= -e, -e > 0, -f > 1, -n >= 1, -w >= 0, "
                        "-t > 0, --min_ms 0 to 60000 and no extra arguments\n");
        return -1;
    }
    if (o->tree && (o->dtype != vgpu_float32 || o->op != vgpu_sum)) {
        complain_("--tree sums float32 (no -d or -o)\n");
        return -1;
    }
    job_settings_(o, timeout_s, backend, slice, sets, n_sets);
    return 0;
}

static double now_s_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---- the benchmark ----

struct bench {
    vgpu_t *v;
    const struct bench_opts *o;
    int rank, size;
    int *parts_per_rank; // --tree: every rank's partials
    void *host;          // host staging: the inputs, and a result to check
    char *dsend, *drecv; // device buffers (dsend: all of a rank's partials with --tree)
};

// Every failure ends the job: the others are waiting in a collective.
static void die_(const struct bench *b, int rc, const char *what)
{
    fprintf(stderr, "[rank %d] vgpu_allreduce_perf: %s failed: %s\n", b->rank, what,
            vgpu_status_string(rc));
    vgpu_abort(b->v, 2);
}

// The slowest rank's value (times), or the ranks' sum (wrong elements).
static double job_max_(const struct bench *b, double x)
{
    double m = 0;
    int rc = vgpu_ctrl_all_reduce(&x, &m, 1, vgpu_float64, vgpu_max, b->v);
    if (rc < 0)
        die_(b, rc, "vgpu_ctrl_all_reduce");
    return m;
}

static long long job_sum_(const struct bench *b, long long x)
{
    int64_t in = x, sum = 0;
    int rc = vgpu_ctrl_all_reduce(&in, &sum, 1, vgpu_int64, vgpu_sum, b->v);
    if (rc < 0)
        die_(b, rc, "vgpu_ctrl_all_reduce");
    return (long long)sum;
}

static void fence_(void) { MPI_Barrier(MPI_COMM_WORLD); }

static int call_once_(const struct bench *b, char *out, size_t count)
{
    if (b->o->tree)
        return vgpu_all_reduce_tree((const float *)b->dsend, b->parts_per_rank, (float *)out,
                                    count, b->v);
    return vgpu_all_reduce(b->dsend, out, count, b->o->dtype, b->o->op, b->v);
}

// The inputs of a call: this rank's values (or partials) into dsend; the bytes.
static size_t input_bytes_(const struct bench *b, size_t count)
{
    const int mine = b->o->tree ? perf_tree_parts(b->o->tree, b->rank, b->size) : 1;
    return (size_t)mine * count * dtype_bytes_[b->o->dtype];
}

static void fill_input_(const struct bench *b, size_t count)
{
    if (b->o->tree)
        perf_tree_fill(b->o->tree, b->rank, b->size, b->host, count);
    else
        perf_fill(b->host, count, b->rank, b->o->dtype, b->o->op);
}

// The round of timed calls that a column's time comes from.
struct timed_round {
    int calls;         // in the round
    double planned_us; // the round before's time a call, which sized it (0: the first)
};

// Times `iters` calls (max over ranks, microseconds per call; *timed says
// which round that is from) and, with check, counts wrong elements of one
// more call on fresh data (summed over ranks).
static void run_case_(const struct bench *b, size_t count, int in_place, double *us,
                      struct timed_round *timed, long long *wrong)
{
    const struct bench_opts *o = b->o;
    const size_t bytes = count * dtype_bytes_[o->dtype], in_bytes = input_bytes_(b, count);
    char *out = in_place && !o->tree ? b->dsend : b->drecv;
    fill_input_(b, count);
    int rc = vgpu_memcpy_htod(b->v, b->dsend, b->host, in_bytes);
    for (int i = 0; rc == 0 && i < o->warmup; i++)
        rc = call_once_(b, out, count);
    if (rc < 0) // before the fence: a rank that timed out must not wait there
        die_(b, rc, "warm-up");
    // -n calls, timed; with --min_ms, again with as many as the last round's
    // time a call says will last that long, until a round does (a slow first
    // round underestimates; at most 4 rounds). The count comes from the
    // slowest rank's time, so every rank makes the same calls.
    // With --fresh each call is timed on its own, once every rank has
    // written its input (a rank still writing would count in the others' time).
    *timed = (struct timed_round){0};
    for (int n = o->iters, round = 1;; round++) {
        fence_();
        double t0 = now_s_(), inside = 0;
        for (int i = 0; rc == 0 && i < n; i++) {
            if (o->fresh) {
                rc = vgpu_memcpy_htod(b->v, b->dsend, b->host, in_bytes);
                fence_();
                t0 = now_s_();
            }
            if (rc == 0)
                rc = call_once_(b, out, count);
            if (o->fresh)
                inside += now_s_() - t0;
        }
        double t = (o->fresh ? inside : now_s_() - t0) / n * 1e6;
        if (rc < 0)
            die_(b, rc, "vgpu_all_reduce");
        *us = job_max_(b, t);
        timed->calls = n;
        if (*us * n >= o->min_ms * 1e3 || round == 4 || n == 10000000)
            break;
        timed->planned_us = *us;
        const double want = ceil(1.1 * o->min_ms * 1e3 / (*us > 0.01 ? *us : 0.01));
        n = want > 1e7 ? 10000000 : want > n ? (int)want : n;
    }
    long long bad = 0;
    if (o->check) {
        fill_input_(b, count);
        if ((rc = vgpu_memcpy_htod(b->v, b->dsend, b->host, in_bytes)) < 0 ||
            (out != b->dsend && (rc = vgpu_memzero(b->v, out, bytes)) < 0) ||
            (rc = call_once_(b, out, count)) < 0 ||
            (rc = vgpu_memcpy_dtoh(b->v, b->host, out, bytes)) < 0)
            die_(b, rc, "check");
        for (size_t i = 0; i < count; i++)
            bad += o->tree ? ((float *)b->host)[i] != perf_expected_tree(o->tree, i)
                           : !perf_right(b->host, i, b->size, o->dtype, o->op);
    }
    *wrong = job_sum_(b, bad);
}

// A device-to-device copy of `bytes` on rank 0's device while the others
// wait: GB/s of bytes read plus bytes written, the bound a same-device
// collective moves its data against. 0 on the other ranks.
static double copy_gbps_(const struct bench *b, size_t bytes, int iters)
{
    double gbps = 0;
    int rc = 0;
    fence_();
    if (b->rank == 0) {
        if ((rc = vgpu_memcpy_dtod(b->v, b->drecv, b->dsend, bytes)) == 0) // warm-up
            rc = vgpu_synchronize(b->v);
        const double t0 = now_s_();
        for (int i = 0; rc == 0 && i < iters; i++)
            rc = vgpu_memcpy_dtod(b->v, b->drecv, b->dsend, bytes);
        if (rc == 0)
            rc = vgpu_synchronize(b->v);
        if (rc < 0)
            die_(b, rc, "vgpu_memcpy_dtod");
        gbps = 2.0 * (double)bytes * iters / (now_s_() - t0) / 1e9;
    }
    fence_();
    return gbps;
}

// The table's title and column heads (rank 0), as nccl-tests prints them.
static void print_header_(const struct bench *b, double copy_gbps)
{
    const struct bench_opts *o = b->o;
    printf("# vgpu_allreduce_perf: %d ranks on %d host(s), device %s, %d physical device(s)%s, "
           "backend %s, op %s, iters %d%s, warmup %d, check %d%s%s\n",
           b->size, vgpu_host_count(b->v), vgpu_device_kind(b->v), vgpu_physical_device_count(b->v),
           vgpu_is_simulated(b->v) ? " (simulated GPUs)" : "", vgpu_backend(b->v), op_names_[o->op],
           o->iters, o->min_ms > 0 ? " (or more: at least --min_ms of calls)" : "", o->warmup,
           o->check, o->tree ? ", deterministic tree" : "",
           o->fresh ? ", fresh input every call" : "");
    if (o->tree)
        printf("# tree: %d partials of each size split over the ranks, summed in the "
               "canonical tree (both columns)\n", o->tree);
    if (o->copy_bw)
        printf("# device-to-device copy on rank 0's device: %.1f GB/s (read + write, %llu "
               "bytes)\n", copy_gbps, (unsigned long long)(o->max_bytes / dtype_bytes_[o->dtype] *
                                                          dtype_bytes_[o->dtype]));
    printf("#%77s%36s\n", "out-of-place", "in-place");
    printf("#%11s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s  %s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong", "algorithm");
    printf("#%11s %12s %8s %6s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "(B)", "(elements)", "",
           "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
}

// One size's row: out-of-place then in-place (root -1: an all-reduce has
// none, as nccl-tests prints it); each column adds half its bus bandwidth to
// *bus_sum, so a row adds the mean of its two.
static void print_row_(const struct bench *b, double bytes, size_t count, const double us[2],
                       const long long wrong[2], const char *algo, double *bus_sum)
{
    printf(" %11.0f %12zu %8s %6s %6d", bytes, count, dtype_names_[b->o->dtype],
           op_names_[b->o->op], -1);
    for (int ip = 0; ip < 2; ip++) {
        double algbw = bytes / us[ip] / 1e3; // GB/s
        double busbw = algbw * 2.0 * (b->size - 1) / b->size;
        *bus_sum += busbw / 2;
        printf(" %9.1f %8.2f %8.2f %6lld", us[ip], algbw, busbw, wrong[ip]);
    }
    printf("  %s\n", algo);
    fflush(stdout);
}

static size_t aligned_(size_t bytes)
{
    return (bytes + VGPU_MALLOC_ALIGN - 1) / VGPU_MALLOC_ALIGN * VGPU_MALLOC_ALIGN;
}

int main(int argc, char **argv)
{
    loud_ = vgpu_launcher_rank() == 0;
    struct bench_opts o;
    const int parsed = parse_opts_(argc, argv, &o);
    if (parsed != 0) { // --help, or a bad line: said once, before joining
        if (parsed > 0 && loud_)
            usage_(stdout);
        return parsed > 0 ? 0 : 2;
    }
    const size_t es = dtype_bytes_[o.dtype], max_count = o.max_bytes / es;
    struct vgpu_options vo = {.overrides = o.sets, .n_overrides = o.n_sets, .quiet = 1,
                              .largest_collective_bytes = o.max_bytes};
    struct bench b = {.o = &o};
    int rc = vgpu_join(&b.v, &argc, &argv, &vo);
    if (rc < 0) {
        complain_("vgpu_join: %s\n", vgpu_status_string(rc));
        return 1;
    }
    b.rank = vgpu_rank(b.v);
    b.size = vgpu_size(b.v);
    // The device memory it takes: the inputs (every partial of this rank's
    // with --tree, and the tree's scratch) and the output.
    const int most = o.tree ? (o.tree + b.size - 1) / b.size : 1;
    const size_t need = aligned_((size_t)most * max_count * es) + aligned_(max_count * es) +
                        (o.tree ? aligned_(vgpu_tree_scratch_bytes(b.size, most, max_count)) : 0);
    const struct vgpu_open_options oo = {.min_device_bytes = need,
                                         .largest_collective_bytes = (size_t)most * o.max_bytes,
                                         .deterministic = o.tree > 0, .quiet = 1};
    if ((rc = vgpu_open(b.v, &oo)) < 0 || (rc = vgpu_startup_done(b.v)) < 0) {
        if (b.rank == 0)
            fprintf(stderr, "vgpu_allreduce_perf: vgpu_open: %s\n", vgpu_status_string(rc));
        vgpu_finalize(b.v);
        return 1;
    }
    if (o.tree && !(b.parts_per_rank = malloc((size_t)b.size * sizeof *b.parts_per_rank)))
        die_(&b, VGPU_ENOMEM, "host allocation");
    for (int r = 0; o.tree && r < b.size; r++)
        b.parts_per_rank[r] = perf_tree_parts(o.tree, r, b.size);
    b.host = malloc((size_t)most * (max_count ? max_count : 1) * es);
    if (!b.host)
        die_(&b, VGPU_ENOMEM, "host allocation");
    if ((rc = vgpu_malloc(b.v, (void **)&b.dsend, (size_t)most * max_count * es)) < 0 ||
        (rc = vgpu_malloc(b.v, (void **)&b.drecv, max_count * es)) < 0)
        die_(&b, rc, "buffer allocation");

    const double copy = o.copy_bw ? copy_gbps_(&b, max_count * es, o.iters) : 0;
    if (b.rank == 0)
        print_header_(&b, copy);
    if (b.rank == o.sleep_rank) {
        fprintf(stderr, "[rank %d] vgpu_allreduce_perf: fault injection: sleeping %.0f s before "
                        "the first collective\n", b.rank, o.sleep_s);
        usleep((useconds_t)(o.sleep_s * 1e6));
    }

    double bus_sum = 0;
    int rows = 0;
    long long wrong_total = 0;
    for (double s = (double)o.min_bytes; s <= (double)o.max_bytes; s *= o.factor) {
        const size_t count = (size_t)s / es;
        const double bytes = (double)count * (double)es;
        double us[2];
        struct timed_round timed[2];
        long long wrong[2];
        for (int ip = 0; ip < 2; ip++)
            run_case_(&b, count, ip, &us[ip], &timed[ip], &wrong[ip]);
        if (b.rank == 0)
            print_row_(&b, bytes, count, us, wrong,
                       o.tree ? "tree" : vgpu_all_reduce_algorithm(b.v, (size_t)bytes), &bus_sum);
        // What the row's times rest on (--min_ms promises its length), and
        // the round before's time a call that sized it.
        for (int ip = 0; b.rank == 0 && o.min_ms > 0 && ip < 2; ip++)
            printf("# timed %.0f B %s: %d calls in %.1f ms, sized from %.9g us a call\n", bytes,
                   ip ? "in-place" : "out-of-place", timed[ip].calls,
                   us[ip] * timed[ip].calls / 1e3, timed[ip].planned_us);
        wrong_total += wrong[0] + wrong[1];
        rows++;
        if (count == 0)
            break; // a factor cannot grow 0 bytes
    }
    struct vgpu_comm_stats st = {0};
    vgpu_get_comm_stats(b.v, &st);
    if ((rc = vgpu_free(b.v, b.dsend)) < 0 || (rc = vgpu_free(b.v, b.drecv)) < 0)
        die_(&b, rc, "vgpu_free");
    free(b.host);
    free(b.parts_per_rank);
    const int ok = wrong_total == 0;
    if (b.rank == 0) {
        printf("# Out of bounds values : %lld %s\n", wrong_total, ok ? "OK" : "FAILED");
        printf("# Avg bus bandwidth    : %.3f\n", rows ? bus_sum / rows : 0.0);
        printf("# rank 0: %llu collectives, %.3f s inside them\n", (unsigned long long)st.calls,
               st.seconds);
        printf("%s\n", ok ? "OK" : "FAILED");
        fflush(stdout);
    }
    rc = vgpu_finalize(b.v);
    return !ok ? 1 : rc < 0 ? 1 : 0;
}
