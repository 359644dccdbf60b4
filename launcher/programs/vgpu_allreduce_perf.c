// vgpu_allreduce_perf.c: all-reduce bandwidth benchmark in the manner of
// nccl-tests' all_reduce_perf, for the ring and mpi backends on CPU devices.
// It sets itself up without the runtime: MPI, one CPU virtual GPU per rank,
// a communicator.
#include <getopt.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_internal.h"
#include "config.h"
#include "device_internal.h"
#include "kernels.h"
#include "log.h"
#include "util.h"

struct bench_opts {
    uint64_t min_bytes;   // -b
    uint64_t max_bytes;   // -e
    double factor;        // -f: size multiplier between rows
    int iters;            // -n: timed iterations per size
    double min_ms;        // --min_ms: ... or more, until the timed calls take this long
    int warmup;           // -w: untimed iterations per size
    int check;            // -c: verify results
    enum comm_reduce_op op;   // -o
    enum comm_dtype dtype;    // -d
    char backend[16];
    double timeout_s;     // -t
    uint64_t slice_bytes; // --slice: ring pipelining granularity (0 = default)
    int sleep_rank;       // --sleep-rank: this rank stalls before the first collective
    double sleep_s;       // --sleep: for how long, seconds
    int tree;             // --tree M: the deterministic all-reduce of M partials (0 = off)
    int fresh;            // --fresh: rewrite the input before every call, untimed
};

static void usage_(FILE *f)
{
    fprintf(f,
            "usage: vgpu_allreduce_perf [options]   (run under mpirun)\n"
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
            "      --backend ring|mpi  collective backend (default ring)\n"
            "  -t, --timeout S       bound on every collective wait, seconds (default 60)\n"
            "      --slice SIZE      ring slice per step (default: the backend's, 1M)\n"
            "      --sleep-rank R    fault injection: rank R sleeps before the first call\n"
            "      --sleep S         ... for S seconds (default 3600)\n"
            "      --tree M          time the deterministic all-reduce instead: M partials of\n"
            "                        each size split over the ranks (both columns run it)\n"
            "      --fresh           each rank rewrites its input before every call, untimed\n"
            "                        (as a backward pass writes the gradients): no call finds\n"
            "                        its data where the last one left it in the caches\n"
            "  -h, --help\n");
}

static int parse_opts_(int argc, char **argv, struct bench_opts *o)
{
    *o = (struct bench_opts){.min_bytes = 8, .max_bytes = 64 << 20, .factor = 2,
                             .iters = 20, .warmup = 5, .check = 1, .op = COMM_SUM,
                             .backend = "ring", .timeout_s = 60, .sleep_rank = -1,
                             .sleep_s = 3600};
    static const struct option longopts[] = {
        {"minbytes", required_argument, 0, 'b'},   {"maxbytes", required_argument, 0, 'e'},
        {"stepfactor", required_argument, 0, 'f'}, {"iters", required_argument, 0, 'n'},
        {"warmup_iters", required_argument, 0, 'w'}, {"check", required_argument, 0, 'c'},
        {"op", required_argument, 0, 'o'},         {"datatype", required_argument, 0, 'd'},
        {"backend", required_argument, 0, 'B'},
        {"timeout", required_argument, 0, 't'},    {"slice", required_argument, 0, 'S'},
        {"sleep-rank", required_argument, 0, 'R'}, {"sleep", required_argument, 0, 'Z'},
        {"tree", required_argument, 0, 'T'},       {"min_ms", required_argument, 0, 'M'},
        {"fresh", no_argument, 0, 'F'},            {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "b:e:f:n:w:c:o:d:t:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b':
        case 'e':
        case 'S': {
            uint64_t v;
            if (config_parse_size(optarg, &v) < 0) {
                fprintf(stderr, "vgpu_allreduce_perf: bad size '%s'\n", optarg);
                return VGPU_EINVAL;
            }
            *(ch == 'b' ? &o->min_bytes : ch == 'e' ? &o->max_bytes : &o->slice_bytes) = v;
            break;
        }
        case 'f': o->factor = atof(optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'c': o->check = atoi(optarg); break;
        case 'o': {
            int k = 0;
            while (k < COMM_OP_COUNT && strcmp(optarg, comm_op_name((enum comm_reduce_op)k)))
                k++;
            if (k == COMM_OP_COUNT) {
                fprintf(stderr, "vgpu_allreduce_perf: -o takes sum, avg, prod, min or max, not "
                                "'%s'\n", optarg);
                return VGPU_EINVAL;
            }
            o->op = (enum comm_reduce_op)k;
            break;
        }
        case 'd':
            if (!strcmp(optarg, "float") || !strcmp(optarg, "float32"))
                o->dtype = COMM_FLOAT32;
            else if (!strcmp(optarg, "double") || !strcmp(optarg, "float64"))
                o->dtype = COMM_FLOAT64;
            else if (!strcmp(optarg, "int32") || !strcmp(optarg, "int"))
                o->dtype = COMM_INT32;
            else if (!strcmp(optarg, "int64"))
                o->dtype = COMM_INT64;
            else if (!strcmp(optarg, "float16") || !strcmp(optarg, "half"))
                o->dtype = COMM_FLOAT16;
            else if (!strcmp(optarg, "bfloat16"))
                o->dtype = COMM_BFLOAT16;
            else {
                fprintf(stderr, "vgpu_allreduce_perf: -d takes float, double, int32, int64, "
                                "float16 or bfloat16, not '%s'\n", optarg);
                return VGPU_EINVAL;
            }
            break;
        case 'B': snprintf(o->backend, sizeof o->backend, "%s", optarg); break;
        case 't': o->timeout_s = atof(optarg); break;
        case 'R': o->sleep_rank = atoi(optarg); break;
        case 'Z': o->sleep_s = atof(optarg); break;
        case 'T': o->tree = atoi(optarg); break;
        case 'F': o->fresh = 1; break;
        case 'M': {
            char *end;
            o->min_ms = strtod(optarg, &end);
            if (end == optarg || *end)
                o->min_ms = -1; // refused below
            break;
        }
        case 'h': usage_(stdout); exit(0);
        default: usage_(stderr); return VGPU_EINVAL;
        }
    }
    if (optind < argc || o->min_bytes > o->max_bytes || o->factor <= 1 || o->iters < 1 ||
        o->warmup < 0 || o->timeout_s <= 0 || o->max_bytes == 0 || o->tree < 0 || o->tree > 4096 ||
        !(o->min_ms >= 0 && o->min_ms <= 60000)) {
        fprintf(stderr, "vgpu_allreduce_perf: need -b <= -e, -e > 0, -f > 1, -n >= 1, -w >= 0, "
                        "-t > 0, --min_ms 0 to 60000 and no extra arguments\n");
        return VGPU_EINVAL;
    }
    if (o->tree && (o->dtype != COMM_FLOAT32 || o->op != COMM_SUM)) {
        fprintf(stderr, "vgpu_allreduce_perf: --tree sums float32 (no -d or -o)\n");
        return VGPU_EINVAL;
    }
    if (strcmp(o->backend, "ring") && strcmp(o->backend, "mpi")) {
        fprintf(stderr, "vgpu_allreduce_perf: --backend takes ring or mpi, not '%s'\n",
                o->backend);
        return VGPU_EINVAL;
    }
    return 0;
}

// Host index: ranks that share memory (one MPI_COMM_TYPE_SHARED group) get
// the same number, numbered by their lowest world rank.
static int node_index_(int rank, int size)
{
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    int leader = rank;
    MPI_Bcast(&leader, 1, MPI_INT, 0, node);
    MPI_Comm_free(&node);
    int *leaders = malloc((size_t)size * sizeof *leaders);
    MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, MPI_COMM_WORLD);
    int index = 0;
    for (int q = 0; q < size; q++)
        index += leaders[q] == q && q < leader;
    free(leaders);
    return index;
}

// Small integers: their sum is exact in any order, so each element's
// expected value is known exactly (products: 1s and 2s, exact to 2^24).
static float value_(int rank, size_t i) { return (float)((rank * 7 + i) % 13); }

// The half types: 0..2, so every partial sum stays an integer bfloat16
// holds exactly (8 significant bits: up to 256) for up to 128 ranks;
// products of 1s and 2s are powers of two (float16 overflows to infinity
// past 2^15, and so does the expected value).
static int64_t typed_value_(int rank, size_t i, enum comm_reduce_op op, enum comm_dtype t)
{
    if (op == COMM_PROD)
        return (int64_t)((rank + i) % 2 + 1);
    const int half = t == COMM_FLOAT16 || t == COMM_BFLOAT16;
    return (int64_t)((rank * 7 + i) % (half ? 3 : 13));
}

static void fill_(void *buf, size_t count, int rank, const struct bench_opts *o)
{
    for (size_t i = 0; i < count; i++)
        comm_host_put(buf, i, o->dtype, typed_value_(rank, i, o->op, o->dtype));
}

// Whether element i of buf is what the reduction over size ranks gives.
static int right_(const void *buf, size_t i, int size, const struct bench_opts *o)
{
    int64_t acc = typed_value_(0, i, o->op, o->dtype);
    for (int q = 1; q < size; q++) {
        const int64_t v = typed_value_(q, i, o->op, o->dtype);
        acc = o->op == COMM_PROD ? acc * v
            : o->op == COMM_MIN  ? (v < acc ? v : acc)
            : o->op == COMM_MAX  ? (v > acc ? v : acc)
                                 : acc + v;
    }
    const int avg = o->op == COMM_AVG;
    switch (o->dtype) {
    case COMM_FLOAT32:
        return ((const float *)buf)[i] == (avg ? (float)acc / (float)size : (float)acc);
    case COMM_FLOAT64:
        return ((const double *)buf)[i] == (avg ? (double)acc / (double)size : (double)acc);
    case COMM_INT32:
        return ((const int32_t *)buf)[i] == (int32_t)(avg ? acc / size : acc);
    case COMM_FLOAT16: // the exact sum, divided in float and rounded (the avg step)
        return ((const uint16_t *)buf)[i] ==
               kernel_f32_to_f16(avg ? (float)acc / (float)size : (float)acc);
    case COMM_BFLOAT16:
        return ((const uint16_t *)buf)[i] ==
               kernel_f32_to_bf16(avg ? (float)acc / (float)size : (float)acc);
    default:
        return ((const int64_t *)buf)[i] == (avg ? acc / size : acc);
    }
}

static float expected_tree_(int partials, size_t i)
{
    float sum = 0;
    for (int q = 0; q < partials; q++)
        sum += value_(q, i);
    return sum;
}

// The deterministic all-reduce of o->tree partials (value_(m, i) for partial
// m), split as evenly as they go: every rank holds parts_per_rank[rank] of them.
static int tree_call_(comm_t *c, const struct bench_opts *o, float *parts, float *out, size_t count)
{
    int per_rank[1024];
    const int size = comm_size(c);
    for (int r = 0; r < size && r < 1024; r++)
        per_rank[r] = o->tree / size + (r < o->tree % size);
    return comm_all_reduce_tree(c, parts, per_rank, out, count);
}

static void tree_fill_(comm_t *c, const struct bench_opts *o, float *host, size_t count)
{
    const int rank = comm_rank(c), size = comm_size(c);
    int first = 0;
    for (int r = 0; r < rank; r++)
        first += o->tree / size + (r < o->tree % size);
    const int mine = o->tree / size + (rank < o->tree % size);
    for (int k = 0; k < mine; k++)
        for (size_t i = 0; i < count; i++)
            host[(size_t)k * count + i] = value_(first + k, i);
}

static void die_(comm_t *c, int rc, const char *what)
{
    log_error("%s failed: %s", what, status_str(rc));
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, 2);
}

// The round of timed calls that a column's time comes from.
struct timed_round {
    int calls;         // in the round
    double planned_us; // the round before's time a call, which sized it (0: the first)
};

// Times `iters` calls (max over ranks, microseconds per call; *timed says
// which round that is from) and, with check, counts wrong elements of one
// more call on fresh data (summed over ranks).
static void run_case_(comm_t *c, device_t *dev, const struct bench_opts *o, void *host,
                      char *dsend, char *drecv, size_t count, int in_place, double *us,
                      struct timed_round *timed, long long *wrong)
{
    const int rank = comm_rank(c), size = comm_size(c);
    const size_t es = comm_dtype_size(o->dtype), bytes = count * es;
    char *out = in_place && !o->tree ? dsend : drecv;
    const int mine = o->tree ? o->tree / size + (rank < o->tree % size) : 1;
    if (o->tree)
        tree_fill_(c, o, host, count);
    else
        fill_(host, count, rank, o);
    int rc = device_copy_to_device(dev, dsend, host, (size_t)mine * bytes);
#define CALL_ONCE_() (o->tree ? tree_call_(c, o, (float *)dsend, (float *)out, count) \
                              : comm_all_reduce_typed(c, dsend, out, count, o->dtype, o->op))
    for (int i = 0; rc == 0 && i < o->warmup; i++)
        rc = CALL_ONCE_();
    if (rc < 0) // before the barrier: a rank that timed out must not wait there
        die_(c, rc, "warm-up");
    // -n calls, timed; with --min_ms, again with as many as the last round's
    // time a call says will last that long, until a round does (a slow first
    // round underestimates; at most 4 rounds). The count comes from the
    // slowest rank's time, so every rank makes the same calls.
    // With --fresh each call is timed on its own, once every rank has
    // written its input (a rank still writing would count in the others' time).
    *timed = (struct timed_round){0};
    for (int n = o->iters, round = 1;; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = util_now_s(), inside = 0;
        for (int i = 0; rc == 0 && i < n; i++) {
            if (o->fresh) {
                rc = device_copy_to_device(dev, dsend, host, (size_t)mine * bytes);
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = util_now_s();
            }
            if (rc == 0)
                rc = CALL_ONCE_();
            if (o->fresh)
                inside += util_now_s() - t0;
        }
        double t = (o->fresh ? inside : util_now_s() - t0) / n * 1e6;
        if (rc < 0)
            die_(c, rc, "comm_all_reduce");
        MPI_Allreduce(&t, us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        timed->calls = n;
        if (*us * n >= o->min_ms * 1e3 || round == 4 || n == 10000000)
            break;
        timed->planned_us = *us;
        const double want = ceil(1.1 * o->min_ms * 1e3 / (*us > 0.01 ? *us : 0.01));
        n = want > 1e7 ? 10000000 : want > n ? (int)want : n;
    }
    long long bad = 0;
    if (o->check) {
        if (o->tree)
            tree_fill_(c, o, host, count);
        else
            fill_(host, count, rank, o);
        if ((rc = device_copy_to_device(dev, dsend, host, (size_t)mine * bytes)) < 0 ||
            (out != dsend && (rc = device_zero(dev, out, bytes)) < 0) ||
            (rc = CALL_ONCE_()) < 0 ||
            (rc = device_copy_to_host(dev, host, out, bytes)) < 0)
            die_(c, rc, "check");
        for (size_t i = 0; i < count; i++)
            bad += o->tree ? ((float *)host)[i] != expected_tree_(o->tree, i)
                           : !right_(host, i, size, o);
    }
#undef CALL_ONCE_
    MPI_Allreduce(&bad, wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
}

// The table's title and column heads (rank 0), as nccl-tests prints them.
static void print_header_(const struct bench_opts *o, int size, int hosts)
{
    printf("# vgpu_allreduce_perf: %d ranks on %d host(s), backend %s, op %s, "
           "iters %d%s, warmup %d, check %d%s%s\n",
           size, hosts, o->backend, comm_op_name(o->op), o->iters,
           o->min_ms > 0 ? " (or more: at least --min_ms of calls)" : "", o->warmup, o->check,
           o->tree ? ", deterministic tree" : "", o->fresh ? ", fresh input every call" : "");
    if (o->tree)
        printf("# tree: %d partials of each size split over the ranks, summed in the "
               "canonical tree (both columns)\n", o->tree);
    printf("#%70s%36s\n", "out-of-place", "in-place");
    printf("#%11s %12s %8s %6s %9s %8s %8s %6s %9s %8s %8s %6s  %s\n", "size", "count", "type",
           "redop", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
           "algorithm");
    printf("#%11s %12s %8s %6s %9s %8s %8s %6s %9s %8s %8s %6s\n", "(B)", "(elements)", "",
           "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
}

// One size's row: out-of-place then in-place; each column adds half its bus
// bandwidth to *bus_sum, so a row adds the mean of its two.
static void print_row_(const struct bench_opts *o, int size, double bytes, size_t count,
                       const double us[2], const long long wrong[2], const char *algo,
                       double *bus_sum)
{
    printf(" %11.0f %12zu %8s %6s", bytes, count, comm_dtype_name(o->dtype), comm_op_name(o->op));
    for (int ip = 0; ip < 2; ip++) {
        double algbw = bytes / us[ip] / 1e3; // GB/s
        double busbw = algbw * 2.0 * (size - 1) / size;
        *bus_sum += busbw / 2;
        printf(" %9.1f %8.2f %8.2f %6lld", us[ip], algbw, busbw, wrong[ip]);
    }
    printf("  %s\n", algo);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    log_set_identity(rank, host);
    struct bench_opts o;
    if (parse_opts_(argc, argv, &o) < 0) {
        MPI_Finalize();
        return 2;
    }
    const int node = node_index_(rank, size);
    int hosts = node + 1;
    MPI_Allreduce(MPI_IN_PLACE, &hosts, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);

    struct device_info info;
    int ndev = 0, rc;
    if ((rc = device_discover(DEVICE_KIND_CPU, &info, 1, &ndev, NULL, 0)) < 0 || ndev < 1)
        die_(NULL, rc, "device_discover");
    device_t dev;
    // Tree mode: the partials, plus the all-reduce's scratch.
    const int most = o.tree ? (o.tree + size - 1) / size : 1;
    const uint64_t cap = (uint64_t)(most + 1) * (o.max_bytes + ARENA_ALIGN) + ARENA_ALIGN +
                         (o.tree ? comm_tree_scratch_bytes(size, most, o.max_bytes / sizeof(float)) +
                                   ARENA_ALIGN : 0);
    if ((rc = device_open(&dev, &info, rank, host, cap, 1)) < 0)
        die_(NULL, rc, "device_open");
    struct comm_args args = {.mpi_comm = MPI_COMM_WORLD, .dev = &dev,
                             .timeout_s = o.timeout_s, .slice_bytes = o.slice_bytes,
                             .node_index = node, .host = host};
    comm_t *c = NULL;
    if ((rc = comm_create(&c, comm_find_ops(o.backend), &args)) < 0)
        die_(NULL, rc, "comm_create");

    char *dsend, *drecv;
    const size_t es = comm_dtype_size(o.dtype), max_count = o.max_bytes / es;
    void *host_buf = malloc((size_t)most * (max_count ? max_count : 1) * es);
    if (!host_buf || (rc = device_alloc(&dev, (size_t)most * max_count * es, (void **)&dsend)) < 0 ||
        (rc = device_alloc(&dev, max_count * es, (void **)&drecv)) < 0)
        die_(c, rc ? rc : VGPU_ENOMEM, "buffer allocation");

    if (rank == 0)
        print_header_(&o, size, hosts);
    if (rank == o.sleep_rank) {
        log_warn("fault injection: sleeping %.0f s before the first collective", o.sleep_s);
        usleep((useconds_t)(o.sleep_s * 1e6));
    }

    double bus_sum = 0;
    int rows = 0;
    long long wrong_total = 0;
    for (double b = (double)o.min_bytes; b <= (double)o.max_bytes; b *= o.factor) {
        const size_t count = (size_t)b / es;
        const double bytes = (double)count * (double)es;
        double us[2];
        struct timed_round timed[2];
        long long wrong[2];
        for (int ip = 0; ip < 2; ip++)
            run_case_(c, &dev, &o, host_buf, dsend, drecv, count, ip, &us[ip], &timed[ip],
                      &wrong[ip]);
        if (rank == 0)
            print_row_(&o, size, bytes, count, us, wrong,
                       o.tree ? "tree" : comm_algo_name(c, (size_t)bytes), &bus_sum);
        // What the row's times rest on (--min_ms promises its length), and
        // the round before's time a call that sized it.
        for (int ip = 0; rank == 0 && o.min_ms > 0 && ip < 2; ip++)
            printf("# timed %.0f B %s: %d calls in %.1f ms, sized from %.9g us a call\n", bytes,
                   ip ? "in-place" : "out-of-place", timed[ip].calls,
                   us[ip] * timed[ip].calls / 1e3, timed[ip].planned_us);
        wrong_total += wrong[0] + wrong[1];
        rows++;
        if (count == 0)
            break; // a factor cannot grow 0 bytes
    }
    struct comm_stats st = comm_get_stats(c);
    comm_destroy(c);
    device_close(&dev);
    free(host_buf);
    int ok = wrong_total == 0;
    if (rank == 0) {
        printf("# Out of bounds values : %lld %s\n", wrong_total, ok ? "OK" : "FAILED");
        printf("# Avg bus bandwidth    : %.3f\n", rows ? bus_sum / rows : 0.0);
        printf("# rank 0: %llu collectives, %.3f s inside them\n",
               (unsigned long long)st.calls, st.seconds);
        printf("%s\n", ok ? "OK" : "FAILED");
    }
    MPI_Finalize();
    return ok ? 0 : 1;
}
