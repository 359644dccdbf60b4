// test_comm_collectives.c: multi-rank tests of a collective backend (run
// under mpirun, one ctest per backend and rank count): all-reduce (float32,
// and every type x operation), reduce-scatter, broadcast, all-gather and
// barrier with exact expected values (the half types too), the unique-id exchange,
// and that no shared-memory name of the job outlives comm_create; reduce
// and send/recv in comm_collectives_rooted.c.
//
// Options: --backend ring|mpi, --slice SIZE, --fake-hosts K (rank q claims
// host q % K, so ring links between "hosts" use MPI), --staging (copy
// through host staging, the CUDA path: the ring's segments, mpi's buffer), --timeout S, and the fault
// modes --sleep-rank R (rank R never enters the collective, the others must
// fail with VGPU_ETIMEOUT; the test then aborts the job, as the runtime
// would) and --recv-never (rank 0 receives from rank 1, which never sends).
// Under VGPU_TEST_DEVICE=testmem the ranks' devices are the test-only device
// without a host view (launcher/device/testmem/), which the backends must
// reach through copies as on a GPU: the device is checked to be that one.
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
#include "math_ops.h"
#include "util.h"

static int rank_, size_;
#define BIG_FLOATS ((size_t)(1u << 20) + 7) // the largest float32 all-reduce, elements
static long long failures_; // checks that failed on this rank

#define CHECK(cond, fmt, ...)                                                    \
    do {                                                                         \
        if (!(cond)) {                                                           \
            failures_++;                                                         \
            if (failures_ < 20)                                                  \
                log_error("check failed at line %d: " fmt, __LINE__, ##__VA_ARGS__); \
        }                                                                        \
    } while (0)

// Calls a collective; a failure here is a test failure, not a crash.
#define CALL(expr)                                                        \
    do {                                                                  \
        int call_rc_ = (expr);                                            \
        if (call_rc_ < 0) {                                               \
            log_error("%s -> %s", #expr, status_str(call_rc_));           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                 \
        }                                                                 \
    } while (0)

// Partial m of the deterministic all-reduce: values whose sums round, with
// magnitudes that differ by partial.
static float partial_value_(int m, size_t i)
{
    uint64_t h = util_hash64((uint64_t)m * 0x9e3779b97f4a7c15ull + 1, &i, sizeof i);
    return (float)((double)(h % 200001) / 100000.0 - 1.0) * (float)(1 << (m % 5)) / 3.0f;
}

// comm_all_reduce_tree with `total` partials split over the ranks by
// `weights` (NULL = equal): every rank's result must be bit-identical to
// comm_tree_sum over all partials on one device, whatever the split.
static void test_tree_(comm_t *c, device_t *dev, size_t count, int total, const int *split)
{
    int per_rank[64], first = 0;
    for (int r = 0; r < size_; r++) {
        per_rank[r] = split ? split[r] : total / size_ + (r < total % size_);
        first += r < rank_ ? per_rank[r] : 0;
    }
    const int mine = per_rank[rank_];
    const size_t bytes = count * sizeof(float);
    float *host = malloc((size_t)total * bytes + sizeof(float));
    float *got = malloc(bytes + sizeof(float)), *want = malloc(bytes + sizeof(float));
    float *dparts = NULL, *dout = NULL, *dall = NULL;
    CALL(device_alloc(dev, (size_t)(mine ? mine : 1) * bytes + 4, (void **)&dparts));
    CALL(device_alloc(dev, bytes + 4, (void **)&dout));
    CALL(device_alloc(dev, (size_t)total * bytes + 4, (void **)&dall));
    for (int m = 0; m < total; m++)
        for (size_t i = 0; i < count; i++)
            host[(size_t)m * count + i] = partial_value_(m, i);
    if (mine && count)
        CALL(device_copy_to_device(dev, dparts, host + (size_t)first * count, (size_t)mine * bytes));
    CALL(comm_all_reduce_tree(c, dparts, per_rank, dout, count));
    if (count)
        CALL(device_copy_to_host(dev, got, dout, bytes));
    // The single-device reference through the same tree.
    float *leaves[64];
    for (int m = 0; m < total; m++)
        leaves[m] = dall + (size_t)m * count;
    if (count) {
        CALL(device_copy_to_device(dev, dall, host, (size_t)total * bytes));
        CALL(comm_tree_sum(dev, leaves, total, count));
        CALL(device_copy_to_host(dev, want, dall, bytes));
    }
    long long wrong = 0;
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        double exact = 0;
        for (int m = 0; m < total; m++)
            exact += host[(size_t)m * count + i];
        double err = fabs(exact - got[i]);
        worst = err > worst ? err : worst;
        wrong += memcmp(&got[i], &want[i], sizeof(float)) != 0;
    }
    CHECK(wrong == 0, "tree all-reduce: %lld of %zu floats differ from the one-device tree "
          "(%d partials, %d here)", wrong, count, total, mine);
    CHECK(worst < 1e-4 * total, "tree all-reduce: off the exact sum by %g", worst);
    CALL(device_free(dev, dall));
    CALL(device_free(dev, dout));
    CALL(device_free(dev, dparts));
    free(host);
    free(got);
    free(want);
}

// Wrong elements summed over ranks; every rank gets the total.
static long long total_(long long wrong)
{
    long long all = 0;
    MPI_Allreduce(&wrong, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return all;
}

static float value_(int rank, size_t i) { return (float)((rank * 7 + i * 3) % 11 + 1); }

// comm_all_reduce_update: params -= sum of grads, each element updated by
// exactly one rank (or by every rank on a backend without the sharded form),
// and params identical everywhere afterwards.
struct update_ctx {
    device_t *dev;
    float *grads, *params;
    int *updated; // host: times each element was updated here
};

static int update_range_(void *arg, size_t first, size_t n)
{
    struct update_ctx *u = arg;
    for (size_t i = first; i < first + n; i++)
        u->updated[i]++;
    // The CPU device's math; the test-only device has none (no host view,
    // math_ops.c), so the host does the update there.
    if (device_host_addressable(u->dev))
        return math_axpby(u->dev, u->params + first, -1.0f, u->grads + first, 1.0f, n);
    float *g = malloc(2 * n * sizeof(float) + 1), *p = g + n;
    int rc = g ? 0 : VGPU_ENOMEM;
    if (rc == 0 && n)
        rc = device_copy_to_host(u->dev, g, u->grads + first, n * sizeof(float));
    if (rc == 0 && n)
        rc = device_copy_to_host(u->dev, p, u->params + first, n * sizeof(float));
    for (size_t i = 0; rc == 0 && i < n; i++)
        p[i] -= g[i];
    if (rc == 0 && n)
        rc = device_copy_to_device(u->dev, u->params + first, p, n * sizeof(float));
    free(g);
    return rc;
}

static void test_all_reduce_update_(comm_t *c, device_t *dev, size_t count)
{
    const size_t bytes = count * sizeof(float);
    float *host = malloc(bytes + sizeof(float));
    int *updated = calloc(count + 1, sizeof(int)), *total = calloc(count + 1, sizeof(int));
    struct update_ctx u = {.dev = dev, .updated = updated};
    CALL(device_alloc(dev, bytes + 4, (void **)&u.grads));
    CALL(device_alloc(dev, bytes + 4, (void **)&u.params));
    for (size_t i = 0; i < count; i++)
        host[i] = value_(rank_, i);
    if (count)
        CALL(device_copy_to_device(dev, u.grads, host, bytes));
    for (size_t i = 0; i < count; i++)
        host[i] = 1000.0f + (float)(i % 97);
    if (count)
        CALL(device_copy_to_device(dev, u.params, host, bytes));
    CALL(comm_all_reduce_update(c, u.grads, u.params, count, update_range_, &u));
    if (count)
        CALL(device_copy_to_host(dev, host, u.params, bytes));
    long long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        float sum = 0;
        for (int q = 0; q < size_; q++)
            sum += value_(q, i);
        wrong += host[i] != 1000.0f + (float)(i % 97) - sum;
    }
    MPI_Allreduce(updated, total, (int)count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    // (the device collectives take the plain form: every rank updates all)
    const int sharded = strcmp(comm_backend_name(c), "ring") == 0 && !getenv("VGPU_RING_STAGING") &&
                        device_host_addressable(dev) &&
                        strncmp(comm_algo_name(c, bytes), "device ", 7) != 0;
    long long bad_cover = 0;
    for (size_t i = 0; i < count; i++)
        bad_cover += total[i] != (sharded ? 1 : size_);
    CHECK(wrong == 0, "all_reduce_update count %zu: %lld wrong parameters", count, wrong);
    CHECK(bad_cover == 0, "all_reduce_update count %zu: %lld elements not updated %s", count,
          bad_cover, sharded ? "exactly once" : "on every rank");
    CALL(device_free(dev, u.params));
    CALL(device_free(dev, u.grads));
    free(host);
    free(updated);
    free(total);
}

// Collectives issued through comm_* so far and their bytes: comm_get_stats
// must count exactly these.
static uint64_t issued_calls_, issued_bytes_;

static void issued_(size_t bytes)
{
    issued_calls_++;
    issued_bytes_ += bytes;
}

static void test_all_reduce_(comm_t *c, device_t *dev, size_t count, int in_place,
                             enum comm_reduce_op op)
{
    const size_t bytes = count * sizeof(float);
    float *host = malloc(bytes + sizeof(float));
    float *dsend = NULL, *drecv = NULL;
    CALL(device_alloc(dev, bytes, (void **)&dsend));
    CALL(device_alloc(dev, bytes, (void **)&drecv));
    for (size_t i = 0; i < count; i++)
        host[i] = value_(rank_, i);
    CALL(device_copy_to_device(dev, dsend, host, bytes));
    if (!in_place) { // a marker that must be overwritten
        for (size_t i = 0; i < count; i++)
            host[i] = -1.0f;
        CALL(device_copy_to_device(dev, drecv, host, bytes));
    }
    float *out = in_place ? dsend : drecv;
    CALL(comm_all_reduce(c, dsend, out, count, op));
    issued_(bytes);
    CALL(device_copy_to_host(dev, host, out, bytes));
    long long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < count; i++) {
        float sum = 0;
        for (int q = 0; q < size_; q++)
            sum += value_(q, i);
        float want = op == COMM_AVG ? sum / (float)size_ : sum;
        if (host[i] != want && !wrong++)
            first = i;
    }
    if (wrong)
        log_error("all_reduce count %zu %s %s: %lld wrong, first at %zu: %g", count,
                  in_place ? "in-place" : "out-of-place", op == COMM_AVG ? "avg" : "sum", wrong,
                  first, (double)host[first]);
    if (!in_place) { // the input must be untouched
        CALL(device_copy_to_host(dev, host, dsend, bytes));
        for (size_t i = 0; i < count; i++)
            wrong += host[i] != value_(rank_, i);
    }
    long long all = total_(wrong);
    CHECK(all == 0, "all_reduce count %zu %s %s: %lld wrong elements over all ranks", count,
          in_place ? "in-place" : "out-of-place", op == COMM_AVG ? "avg" : "sum", all);
    device_free(dev, dsend);
    device_free(dev, drecv);
    free(host);
}

// ---- the typed collectives: every type and operation, exact values ----

static int half_(enum comm_dtype t) { return t == COMM_FLOAT16 || t == COMM_BFLOAT16; }

// Rank q's element i: small signed integers, so that sums, products (of up
// to 5 ranks: at most 5^5) and averages are exact in every type. The half
// types' products take -2..2 instead: +-powers of two up to 32, where 5^4
// would need 10 significant bits and bfloat16 has 8 (their sums, at most
// 25, are exact in both).
static int64_t typed_value_(int q, size_t i, enum comm_dtype t, enum comm_reduce_op op)
{
    if (half_(t) && op == COMM_PROD)
        return (int64_t)((q * 7 + i * 3) % 5) - 2;
    return (int64_t)((q * 7 + i * 3) % 11) - 5;
}

// Whether element i of buf is the reduction over all ranks of element i
// (computed here in int64, then in the type as the backends must give it);
// *got gets what is there, for the message.
static int typed_right_(const void *buf, size_t i, enum comm_dtype t, enum comm_reduce_op op,
                        double *got)
{
    int64_t acc = typed_value_(0, i, t, op);
    for (int q = 1; q < size_; q++) {
        const int64_t v = typed_value_(q, i, t, op);
        acc = op == COMM_PROD ? acc * v
            : op == COMM_MIN  ? (v < acc ? v : acc)
            : op == COMM_MAX  ? (v > acc ? v : acc)
                              : acc + v;
    }
    switch (t) {
    case COMM_FLOAT32: {
        const float want = op == COMM_AVG ? (float)acc / (float)size_ : (float)acc;
        *got = ((const float *)buf)[i];
        return ((const float *)buf)[i] == want;
    }
    case COMM_FLOAT64: {
        const double want = op == COMM_AVG ? (double)acc / (double)size_ : (double)acc;
        *got = ((const double *)buf)[i];
        return ((const double *)buf)[i] == want;
    }
    case COMM_INT32:
        *got = ((const int32_t *)buf)[i];
        return ((const int32_t *)buf)[i] == (int32_t)(op == COMM_AVG ? acc / size_ : acc);
    case COMM_FLOAT16:
    case COMM_BFLOAT16: {
        // The exact sum (or product, ...) is in the type; avg divides it in
        // float and rounds to nearest even. Compared as values (-0 == 0).
        const float exact = op == COMM_AVG ? (float)acc / (float)size_ : (float)acc;
        const uint16_t h = ((const uint16_t *)buf)[i];
        const float want = t == COMM_FLOAT16 ? kernel_f16_to_f32(kernel_f32_to_f16(exact))
                                             : kernel_bf16_to_f32(kernel_f32_to_bf16(exact));
        *got = t == COMM_FLOAT16 ? kernel_f16_to_f32(h) : kernel_bf16_to_f32(h);
        return *got == want;
    }
    default:
        *got = (double)((const int64_t *)buf)[i];
        return ((const int64_t *)buf)[i] == (op == COMM_AVG ? acc / size_ : acc);
    }
}

static void test_typed_all_reduce_(comm_t *c, device_t *dev, size_t count, enum comm_dtype t,
                                   enum comm_reduce_op op, int in_place)
{
    const size_t es = comm_dtype_size(t), bytes = count * es;
    char *host = malloc(bytes + 8);
    void *dsend = NULL, *drecv = NULL;
    CALL(device_alloc(dev, bytes + 8, &dsend));
    CALL(device_alloc(dev, bytes + 8, &drecv));
    for (size_t i = 0; i < count; i++)
        comm_host_put(host, i, t, typed_value_(rank_, i, t, op));
    CALL(device_copy_to_device(dev, dsend, host, bytes));
    void *out = in_place ? dsend : drecv;
    CALL(comm_all_reduce_typed(c, dsend, out, count, t, op));
    issued_(bytes);
    CALL(device_copy_to_host(dev, host, out, bytes));
    long long wrong = 0;
    double first_got = 0;
    size_t first = 0;
    for (size_t i = 0; i < count; i++) {
        double got;
        if (!typed_right_(host, i, t, op, &got) && !wrong++) {
            first = i;
            first_got = got;
        }
    }
    if (wrong)
        log_error("all_reduce %s %s count %zu %s: %lld wrong, first at %zu: %g", comm_dtype_name(t),
                  comm_op_name(op), count, in_place ? "in-place" : "out-of-place", wrong, first,
                  first_got);
    long long all = total_(wrong);
    CHECK(all == 0, "all_reduce %s %s count %zu: %lld wrong elements over all ranks",
          comm_dtype_name(t), comm_op_name(op), count, all);
    device_free(dev, dsend);
    device_free(dev, drecv);
    free(host);
}

// Rank r receives block r of the reduction of everyone's size * recv_count
// elements; in place, its recv is its own block r of send.
static void test_reduce_scatter_(comm_t *c, device_t *dev, size_t recv_count, enum comm_dtype t,
                                 enum comm_reduce_op op, int in_place)
{
    const size_t es = comm_dtype_size(t), block = recv_count * es, n = (size_t)size_;
    char *host = malloc(n * block + 8);
    char *dsend = NULL, *drecv = NULL;
    CALL(device_alloc(dev, n * block + 8, (void **)&dsend));
    CALL(device_alloc(dev, block + 8, (void **)&drecv));
    for (size_t i = 0; i < n * recv_count; i++)
        comm_host_put(host, i, t, typed_value_(rank_, i, t, op));
    CALL(device_copy_to_device(dev, dsend, host, n * block));
    char *out = in_place ? dsend + (size_t)rank_ * block : drecv;
    CALL(comm_reduce_scatter(c, dsend, out, recv_count, t, op));
    issued_(n * block);
    CALL(device_copy_to_host(dev, host + (size_t)rank_ * block, out, block));
    long long wrong = 0;
    for (size_t i = 0; i < recv_count; i++) {
        double got;
        wrong += !typed_right_(host, (size_t)rank_ * recv_count + i, t, op, &got);
    }
    long long all = total_(wrong);
    CHECK(all == 0, "reduce_scatter %s %s recv_count %zu %s: %lld wrong elements over all ranks",
          comm_dtype_name(t), comm_op_name(op), recv_count, in_place ? "in-place" : "out-of-place",
          all);
    device_free(dev, dsend);
    device_free(dev, drecv);
    free(host);
}

static unsigned char byte_(int who, size_t i) { return (unsigned char)((who * 31 + i * 5 + 1) & 0xff); }

static void test_broadcast_(comm_t *c, device_t *dev, size_t bytes, int root)
{
    unsigned char *host = malloc(bytes + 1);
    void *dbuf = NULL;
    CALL(device_alloc(dev, bytes, &dbuf));
    for (size_t i = 0; i < bytes; i++)
        host[i] = rank_ == root ? byte_(root, i) : 0xee;
    CALL(device_copy_to_device(dev, dbuf, host, bytes));
    CALL(comm_broadcast(c, dbuf, bytes, root));
    issued_(bytes);
    CALL(device_copy_to_host(dev, host, dbuf, bytes));
    long long wrong = 0;
    for (size_t i = 0; i < bytes; i++)
        wrong += host[i] != byte_(root, i);
    long long all = total_(wrong);
    CHECK(all == 0, "broadcast %zu bytes from %d: %lld wrong bytes", bytes, root, all);
    device_free(dev, dbuf);
    free(host);
}

static void test_all_gather_(comm_t *c, device_t *dev, size_t bytes, int in_place)
{
    const size_t total = bytes * (size_t)size_;
    unsigned char *host = malloc(total + 1);
    char *dsend = NULL, *drecv = NULL;
    CALL(device_alloc(dev, bytes, (void **)&dsend));
    CALL(device_alloc(dev, total, (void **)&drecv));
    memset(host, 0xee, total);
    CALL(device_copy_to_device(dev, drecv, host, total));
    for (size_t i = 0; i < bytes; i++)
        host[i] = byte_(rank_, i);
    char *send = in_place ? drecv + (size_t)rank_ * bytes : dsend;
    CALL(device_copy_to_device(dev, send, host, bytes));
    CALL(comm_all_gather(c, bytes ? send : drecv, drecv, bytes));
    issued_(bytes); // each rank's part
    CALL(device_copy_to_host(dev, host, drecv, total));
    long long wrong = 0;
    for (int q = 0; q < size_; q++)
        for (size_t i = 0; i < bytes; i++)
            wrong += host[(size_t)q * bytes + i] != byte_(q, i);
    long long all = total_(wrong);
    CHECK(all == 0, "all_gather %zu bytes %s: %lld wrong bytes", bytes,
          in_place ? "in-place" : "out-of-place", all);
    device_free(dev, dsend);
    device_free(dev, drecv);
    free(host);
}

// The barrier must hold everyone until the last rank arrives.
static void test_barrier_(comm_t *c)
{
    const double late_s = 0.2;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = util_now_s();
    if (rank_ == size_ - 1)
        usleep((useconds_t)(late_s * 1e6));
    CALL(comm_barrier(c));
    issued_(0);
    double waited = util_now_s() - t0;
    CHECK(size_ == 1 || waited >= late_s * 0.9, "barrier returned after %.3f s, before the late rank",
          waited);
    for (int i = 0; i < 20; i++) {
        CALL(comm_barrier(c));
        issued_(0);
    }
}

#include "comm_collectives_rooted.c"

// The job's shared memory has no name: the arena (and, staging, the staging
// window and the ring's control segment) are memfds, nothing is in /dev/shm.
// open: whether the device and communicator are open (else nothing of them
// may still be mapped).
static void check_no_names_(int open, const char *when)
{
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL, "cannot read /proc/self/maps");
    char line[512];
    int arena = 0, any = 0;
    while (f && fgets(line, sizeof line, f)) {
        CHECK(!strstr(line, "/dev/shm/vgpu"), "a named segment is mapped %s: %s", when, line);
        arena += strstr(line, "/memfd:vgpu-arena") != NULL;
        any += strstr(line, "/memfd:vgpu-") != NULL;
    }
    if (f)
        fclose(f);
    if (open) // the test-only device's arena is plain memory, no memfd
        CHECK(arena >= 2 || getenv("VGPU_TEST_DEVICE"), "the arena is not a memfd mapped twice %s",
              when);
    else
        CHECK(any == 0, "%d vgpu memfd mappings are left %s", any, when);
}

// Ranks on `hosts` hosts (rank q on host q % hosts): equal hosts of 2 ranks
// or more take the hierarchical all-reduce, unless VGPU_RING_ALGO names an
// algorithm; else the flat ring.
static void check_algo_(comm_t *c, int hosts)
{
    const char *algo = getenv("VGPU_RING_ALGO");
    const int forced = algo && *algo && strcmp(algo, "auto") != 0;
    const int hier = !forced && hosts >= 2 && size_ % hosts == 0 && size_ / hosts >= 2;
    const char *got = comm_algo_name(c, 1 << 20);
    if (hosts >= 2) // (one host: the latency path may name another)
        CHECK(!strcmp(got, hier ? "hierarchical" : "ring"), "%d ranks on %d hosts: algorithm %s, not %s",
              size_, hosts, got, hier ? "hierarchical" : "ring");
}

// The ring over MPI links, in every fast ring test: a second communicator on
// which rank q claims host q % 2 (as --fake-hosts 2), so that every link
// between neighbours of different parity is an MPI link (same-host links
// never send over MPI: a wrong chunk sent there passed every same-host run).
// One pass of each collective; --fake-hosts runs the whole set that way.
static void mpi_link_pass_(device_t *dev, const char *host, double timeout_s, uint64_t slice)
{
    struct comm_args args = {.mpi_comm = MPI_COMM_WORLD, .dev = dev, .timeout_s = timeout_s,
                             .slice_bytes = slice, .node_index = rank_ % 2, .host = host};
    comm_t *c = NULL;
    CALL(comm_create(&c, comm_find_ops("ring"), &args));
    check_algo_(c, 2);
    const size_t n = (size_t)size_;
    const size_t counts[] = {1, n + 1, 1000, 100003};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        test_all_reduce_(c, dev, counts[k], (int)(k % 2), COMM_SUM);
        test_all_reduce_(c, dev, counts[k], (int)(k % 2 == 0), COMM_AVG);
        test_broadcast_(c, dev, counts[k] * 4 + 1, size_ - 1);
        test_all_gather_(c, dev, counts[k] * 4 + 3, (int)(k % 2));
        test_reduce_scatter_(c, dev, counts[k], COMM_FLOAT32, COMM_SUM, (int)(k % 2));
        test_all_reduce_update_(c, dev, counts[k]);
    }
    test_barrier_(c);
    comm_destroy(c);
}

static int node_index_(void)
{
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    int leader = rank_;
    MPI_Bcast(&leader, 1, MPI_INT, 0, node);
    MPI_Comm_free(&node);
    int *leaders = malloc((size_t)size_ * sizeof *leaders);
    MPI_Allgather(&leader, 1, MPI_INT, leaders, 1, MPI_INT, MPI_COMM_WORLD);
    int index = 0;
    for (int q = 0; q < size_; q++)
        index += leaders[q] == q && q < leader;
    free(leaders);
    return index;
}

// Every collective, type and size on c (the ring's MPI-link pass aside).
static void run_all_(comm_t *c, device_t *dev, const char *backend, const char *test_device)
{
    const size_t n = (size_t)size_;
    const size_t counts[] = {0, 1, n - 1, n, n + 1, 1000, BIG_FLOATS};
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int in_place = 0; in_place < 2; in_place++) {
            test_all_reduce_(c, dev, counts[k], in_place, COMM_SUM);
            test_all_reduce_(c, dev, counts[k], in_place, COMM_AVG);
        }
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        const size_t bytes = counts[k] * 4 + counts[k] % 3; // odd byte counts too
        test_broadcast_(c, dev, bytes, 0);
        test_broadcast_(c, dev, bytes, size_ - 1);
        test_all_gather_(c, dev, bytes, 0);
        test_all_gather_(c, dev, bytes, 1);
    }
    test_barrier_(c);
    const size_t typed_counts[] = {0, 1, n + 1, 1000, 300007};
    for (int t = 0; t < COMM_DTYPE_COUNT; t++)
        for (int op = 0; op < COMM_OP_COUNT; op++)
            for (size_t k = 0; k < sizeof typed_counts / sizeof typed_counts[0]; k++)
                test_typed_all_reduce_(c, dev, typed_counts[k], (enum comm_dtype)t,
                                       (enum comm_reduce_op)op, (int)(k % 2));
    const size_t scatter_counts[] = {0, 1, 1000, 100003};
    for (int t = 0; t < COMM_DTYPE_COUNT; t++)
        for (size_t k = 0; k < sizeof scatter_counts / sizeof scatter_counts[0]; k++) {
            test_reduce_scatter_(c, dev, scatter_counts[k], (enum comm_dtype)t, COMM_SUM, 0);
            test_reduce_scatter_(c, dev, scatter_counts[k], (enum comm_dtype)t,
                                 k % 2 ? COMM_MAX : COMM_AVG, 1);
        }
    test_rooted_(c, dev);

    struct comm_stats st = comm_get_stats(c);
    CHECK(st.calls == issued_calls_ && st.bytes == issued_bytes_,
          "stats: %llu calls, %llu bytes; issued %llu calls, %llu bytes",
          (unsigned long long)st.calls, (unsigned long long)st.bytes,
          (unsigned long long)issued_calls_, (unsigned long long)issued_bytes_);

    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        test_all_reduce_update_(c, dev, counts[k]);

    // The deterministic all-reduce: on the ring through host windows only (a
    // staged ring has no all-to-all; mpi stages it as it would on a GPU). Its
    // sums are device math, which the test-only device does not have.
    if ((!getenv("VGPU_RING_STAGING") || strcmp(backend, "ring") != 0) && !test_device) {
        const size_t tree_counts[] = {0, 1, 1000, (1u << 17) + 3};
        const int totals[] = {1, 3, 8, 12};
        for (size_t k = 0; k < sizeof tree_counts / sizeof tree_counts[0]; k++)
            for (size_t t = 0; t < sizeof totals / sizeof totals[0]; t++)
                if (totals[t] >= size_ || totals[t] == 8)
                    test_tree_(c, dev, tree_counts[k], totals[t], NULL);
        // Uneven: rank 0 holds most, the last rank none (when there are two or more).
        int split[64] = {0}, total = 0;
        for (int r = 0; r < size_; r++)
            total += split[r] = r == size_ - 1 && size_ > 1 ? 0 : (r == 0 ? 5 : 1);
        test_tree_(c, dev, 1000, total, split);
        test_tree_(c, dev, (1u << 17) + 3, total, split);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    log_set_identity(rank_, host);

    const char *backend = "ring";
    uint64_t slice = 0;
    int fake_hosts = 0, sleep_rank = -1, recv_never = 0;
    double timeout_s = 30;
    static const struct option longopts[] = {
        {"backend", required_argument, 0, 'b'}, {"slice", required_argument, 0, 's'},
        {"fake-hosts", required_argument, 0, 'f'}, {"staging", no_argument, 0, 'g'},
        {"timeout", required_argument, 0, 't'}, {"sleep-rank", required_argument, 0, 'r'},
        {"recv-never", no_argument, 0, 'n'}, {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (ch) {
        case 'b': backend = optarg; break;
        case 's':
            if (config_parse_size(optarg, &slice) < 0)
                FATAL(2, "bad --slice %s", optarg);
            break;
        case 'f': fake_hosts = atoi(optarg); break;
        case 'g': // the GPU data path on CPU devices, whichever the backend
            setenv("VGPU_RING_STAGING", "1", 1);
            setenv("VGPU_MPI_STAGING", "1", 1);
            break;
        case 't': timeout_s = atof(optarg); break;
        case 'r': sleep_rank = atoi(optarg); break;
        case 'n': recv_never = 1; break;
        default: FATAL(2, "usage: test_comm_collectives [--backend B] [--slice S] "
                          "[--fake-hosts K] [--staging] [--timeout S] [--sleep-rank R] "
                          "[--recv-never]");
        }
    }
    const struct comm_ops *ops = comm_find_ops(backend);
    if (!ops)
        FATAL(2, "unknown backend %s", backend);

    // + room for the deterministic all-reduce of up to 12 partials of 512 KiB.
    const uint64_t cap = ((uint64_t)size_ + 4) * (BIG_FLOATS * sizeof(float) + 4096) + (48ull << 20);
    struct device_info info;
    int ndev = 0;
    CALL(device_discover(DEVICE_KIND_CPU, &info, 1, &ndev, NULL, 0));
    device_t dev;
    CALL(device_open(&dev, &info, rank_, host, cap, 1));
    const char *test_device = getenv("VGPU_TEST_DEVICE");
    if (test_device && !*test_device)
        test_device = NULL;
    if (test_device) {
        if (strcmp(device_kind(&dev), test_device) != 0) // a build without the tests' backends
            FATAL(2, "VGPU_TEST_DEVICE=%s, but the device is %s", test_device, device_kind(&dev));
        CHECK(!device_host_addressable(&dev) && !device_host_view(&dev, dev.arena.base),
              "the %s device has a host view", test_device);
    }
    const int node = fake_hosts > 0 ? rank_ % fake_hosts : node_index_();
    struct comm_args args = {.mpi_comm = MPI_COMM_WORLD, .dev = &dev,
                             .timeout_s = timeout_s, .slice_bytes = slice,
                             .node_index = node, .host = host};
    comm_t *c = NULL;
    CALL(comm_create(&c, ops, &args));
    if (!strcmp(backend, "ring") && fake_hosts > 0)
        check_algo_(c, fake_hosts);
    CHECK(!strcmp(comm_backend_name(c), backend), "backend is %s", comm_backend_name(c));
    // VGPU_DEVCOLL=1 on one host: the device collectives carry the calls
    // (comm/devcoll/), whichever algorithm a size takes.
    const char *devcoll = getenv("VGPU_DEVCOLL");
    const int on_device = devcoll && !strcmp(devcoll, "1") && !strcmp(backend, "ring") &&
                          fake_hosts == 0 && size_ > 1;
    if (on_device)
        CHECK(!strncmp(comm_algo_name(c, 8), "device ", 7) &&
                  !strncmp(comm_algo_name(c, 64 << 20), "device ", 7),
              "VGPU_DEVCOLL=1: the algorithm is %s", comm_algo_name(c, 8));
    CHECK(comm_rank(c) == rank_ && comm_size(c) == size_, "rank/size mismatch");
    MPI_Barrier(MPI_COMM_WORLD);
    check_no_names_(1, "after comm_create");

    if (sleep_rank >= 0)
        never_arrives_(c, &dev, sleep_rank);
    if (recv_never)
        never_sends_(c, &dev, timeout_s);
    else
        run_all_(c, &dev, backend, test_device);

    comm_destroy(c);
    // (pretend hosts only where every rank is on one real host)
    int one_host = node_index_() == 0;
    MPI_Allreduce(MPI_IN_PLACE, &one_host, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!strcmp(backend, "ring") && fake_hosts == 0 && size_ > 1 && !getenv("VGPU_RING_STAGING") &&
        one_host && !recv_never)
        mpi_link_pass_(&dev, host, timeout_s, slice);
    device_close(&dev);
    check_no_names_(0, "at the end");

    long long all = total_(failures_);
    if (rank_ == 0)
        printf("test_comm_collectives: backend %s, %d ranks%s%s%s%s%s: %s (%lld failed checks)\n",
               backend, size_, test_device ? ", device " : "", test_device ? test_device : "",
               on_device ? ", device collectives" : "",
               fake_hosts ? ", fake hosts" : recv_never ? ", a recv that times out"
               : !strcmp(backend, "ring") && size_ > 1 && !getenv("VGPU_RING_STAGING")
                   ? " (and a pass over MPI links)" : "",
               getenv("VGPU_RING_STAGING") ? ", staging" : "", all ? "FAILED" : "OK", all);
    MPI_Finalize();
    return all ? 1 : 0;
}
