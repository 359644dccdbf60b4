// comm.c: the collective front end: backend registry, create/destroy, the
// public wrappers (argument checks, timing, statistics) and the
// deterministic all-reduce. (Bounded MPI waits and agreements: mpi_wait.c;
// the backend choice for comm.backend = auto: choose.c.)
#include "comm_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "kernels.h"
#include "log.h"
#include "math_ops.h"
#include "trace.h"
#include "util.h"

// Used when comm_args.timeout_s is not set (<= 0), seconds.
#define COMM_DEFAULT_TIMEOUT_S 300.0

// The registry: every collective backend of this binary. One that is not
// built answers NULL (its folder's absent.c).
static const struct comm_ops *registry_(int i)
{
    switch (i) {
    case 0: return &comm_ring_ops;
    case 1: return &comm_mpi_ops;
    case 2: return comm_nccl_backend();
    default: return NULL;
    }
}
#define REGISTRY_SIZE 3

const struct comm_ops *comm_find_ops(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < REGISTRY_SIZE; i++)
        if (registry_(i) && strcmp(registry_(i)->name, name) == 0)
            return registry_(i);
    return NULL;
}

int comm_create(comm_t **out, const struct comm_ops *ops, const struct comm_args *args)
{
    if (!out || !ops || !args || !args->dev || args->mpi_comm == MPI_COMM_NULL)
        return VGPU_EINVAL;
    *out = NULL;
    comm_t *c = calloc(1, sizeof *c);
    if (!c)
        return VGPU_ENOMEM;
    c->ops = ops;
    c->dev = args->dev;
    c->timeout_s = args->timeout_s > 0 ? args->timeout_s : COMM_DEFAULT_TIMEOUT_S;
    flight_set_backend(ops->name);
    MPI_Comm_rank(args->mpi_comm, &c->rank);
    MPI_Comm_size(args->mpi_comm, &c->size);
    if (args->world_ranks) {
        c->world = malloc((size_t)c->size * sizeof *c->world);
        if (!c->world) {
            free(c);
            return VGPU_ENOMEM;
        }
        memcpy(c->world, args->world_ranks, (size_t)c->size * sizeof *c->world);
    }
    int rc = ops->create(c, args);
    if (rc < 0) {
        free(c->world);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void comm_destroy(comm_t *c)
{
    if (!c)
        return;
    if (c->tree_scratch)
        device_free(c->dev, c->tree_scratch);
    if (c->verdict)
        device_free(c->dev, c->verdict);
    if (c->ops && c->ops->destroy)
        c->ops->destroy(c);
    comm_p2p_release(c);
    free(c->world);
    free(c);
}

const char *comm_backend_name(const comm_t *c) { return c && c->ops ? c->ops->name : "none"; }
int comm_rank(const comm_t *c) { return c ? c->rank : -1; }
int comm_size(const comm_t *c) { return c ? c->size : 0; }
int comm_failed(const comm_t *c) { return c && c->failed; }
int comm_rank_name(const comm_t *c, int q) { return c->world ? c->world[q] : q; }

void comm_mark_failed(comm_t *c)
{
    if (c)
        c->failed = 1;
}

const char *comm_algo_name(const comm_t *c, size_t bytes)
{
    if (!c)
        return "none";
    return c->ops->algo && c->impl ? c->ops->algo(c, bytes) : c->ops->name;
}

int comm_async_error(comm_t *c)
{
    return c && c->impl && c->ops->async_error ? c->ops->async_error(c) : 0;
}

struct comm_stats comm_get_stats(const comm_t *c)
{
    struct comm_stats none = {0};
    if (!c)
        return none;
    struct comm_stats s = c->stats;
    s.wait_known = c->impl && c->ops->waited;
    s.wait_seconds = s.wait_known ? c->ops->waited(c) : 0;
    return s;
}

// A device buffer of `bytes` must lie wholly inside the comm's device arena:
// a host pointer would fault on a GPU, so it is refused here on every backend.
static int check_buffer_(const comm_t *c, const void *ptr, size_t bytes, const char *what,
                         const char *call)
{
    if (bytes == 0)
        return 0;
    const arena_t *a = &c->dev->arena;
    if (!ptr || !arena_contains(a, ptr) || !arena_contains(a, (const char *)ptr + bytes - 1)) {
        log_error("%s: %s buffer %p (%zu bytes) is not device memory of this rank's device "
                  "(arena %p, %llu bytes)",
                  call, what, ptr, bytes, (void *)a->base, (unsigned long long)a->cap_bytes);
        return VGPU_EINVAL;
    }
    return 0;
}

// A collective under way: its flight recorder entry and timeline span, and
// the statistics' clock.
struct call_ {
    struct trace_call rec;
    double t0;
};

static struct call_ enter_(enum flight_kind kind, uint64_t bytes)
{
    return (struct call_){.rec = trace_call_begin(kind, bytes), .t0 = util_now_s()};
}

// The statistics of a call begun at t0 (payload `bytes`); a timeout or an
// MPI failure fails the communicator.
static void tally_(comm_t *c, double t0, size_t bytes, int rc)
{
    c->stats.seconds += util_now_s() - t0;
    c->stats.calls++;
    c->stats.bytes += bytes;
    c->failed |= rc == VGPU_ETIMEOUT || rc == VGPU_ECOMM;
}

// Ends it: recorder, timeline and statistics (payload `bytes`); returns rc.
static int account_(comm_t *c, const struct call_ *k, size_t bytes, int rc)
{
    tally_(c, k->t0, bytes, rc);
    trace_call_end(&k->rec, TRACE_COLLECTIVE, rc);
    return rc;
}

size_t comm_dtype_size(enum comm_dtype t)
{
    switch (t) {
    case COMM_FLOAT32: return sizeof(float);
    case COMM_FLOAT64: return sizeof(double);
    case COMM_INT32: return sizeof(int32_t);
    case COMM_INT64: return sizeof(int64_t);
    case COMM_FLOAT16:
    case COMM_BFLOAT16: return sizeof(uint16_t);
    default: return 0;
    }
}

const char *comm_dtype_name(enum comm_dtype t)
{
    static const char *const names[COMM_DTYPE_COUNT] = {"float32", "float64", "int32", "int64",
                                                          "float16", "bfloat16"};
    return (unsigned)t < COMM_DTYPE_COUNT ? names[t] : "?";
}

const char *comm_op_name(enum comm_reduce_op op)
{
    static const char *const names[COMM_OP_COUNT] = {"sum", "avg", "prod", "min", "max"};
    return (unsigned)op < COMM_OP_COUNT ? names[op] : "?";
}

// The element size of a typed call, or 0 when its type, operation or count
// is not one (the call is refused).
static size_t typed_size_(enum comm_dtype t, enum comm_reduce_op op, size_t count)
{
    const size_t es = comm_dtype_size(t);
    return es && (unsigned)op < COMM_OP_COUNT && count <= SIZE_MAX / es ? es : 0;
}

int comm_all_reduce_typed(comm_t *c, const void *send, void *recv, size_t count,
                          enum comm_dtype t, enum comm_reduce_op op)
{
    const size_t es = typed_size_(t, op, count);
    if (!c || !es)
        return VGPU_EINVAL;
    const size_t bytes = count * es;
    TRY(check_buffer_(c, send, bytes, "send", "comm_all_reduce"));
    TRY(check_buffer_(c, recv, bytes, "recv", "comm_all_reduce"));
    const struct call_ call = enter_(FLIGHT_ALL_REDUCE, bytes);
    int rc = c->ops->all_reduce(c, send, recv, count, t, op);
    account_(c, &call, bytes, rc);
    return rc;
}

int comm_all_reduce(comm_t *c, const float *send, float *recv, size_t count,
                    enum comm_reduce_op op)
{
    return comm_all_reduce_typed(c, send, recv, count, COMM_FLOAT32, op);
}

void comm_host_put(void *buf, size_t i, enum comm_dtype t, int64_t v)
{
    switch (t) {
    case COMM_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case COMM_FLOAT64: ((double *)buf)[i] = (double)v; break;
    case COMM_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case COMM_INT64: ((int64_t *)buf)[i] = v; break;
    case COMM_FLOAT16: ((uint16_t *)buf)[i] = kernel_f32_to_f16((float)v); break;
    case COMM_BFLOAT16: ((uint16_t *)buf)[i] = kernel_f32_to_bf16((float)v); break;
    default: break;
    }
}

void comm_divide_host(void *buf, size_t n, enum comm_dtype t, int by)
{
    switch (t) {
    case COMM_FLOAT32:
        for (size_t i = 0; i < n; i++)
            ((float *)buf)[i] /= (float)by;
        break;
    case COMM_FLOAT64:
        for (size_t i = 0; i < n; i++)
            ((double *)buf)[i] /= (double)by;
        break;
    case COMM_INT32:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)buf)[i] /= by;
        break;
    case COMM_INT64:
        for (size_t i = 0; i < n; i++)
            ((int64_t *)buf)[i] /= by;
        break;
    case COMM_FLOAT16: { // in float, rounded back: kernels.h's avg step
        uint16_t *h = buf;
        for (size_t i = 0; i < n; i++)
            h[i] = kernel_f32_to_f16(kernel_f16_to_f32(h[i]) / (float)by);
        break;
    }
    case COMM_BFLOAT16: {
        uint16_t *h = buf;
        for (size_t i = 0; i < n; i++)
            h[i] = kernel_f32_to_bf16(kernel_bf16_to_f32(h[i]) / (float)by);
        break;
    }
    default:
        break;
    }
}

// The largest of every rank's `mine` (0 or 1), through the backend: a verdict
// all ranks share, so that none goes on into a collective another left.
static int agree_any_(comm_t *c, int mine, int *any)
{
    if (!c->verdict)
        TRY(device_alloc(c->dev, sizeof *c->verdict, (void **)&c->verdict));
    int32_t v = mine;
    TRY(device_copy_to_device(c->dev, c->verdict, &v, sizeof v));
    TRY(c->ops->all_reduce(c, c->verdict, c->verdict, 1, COMM_INT32, COMM_MAX));
    TRY(device_copy_to_host(c->dev, &v, c->verdict, sizeof v));
    *any = v;
    return 0;
}

// Device scratch of `bytes` (> 0) for a call of the all-reduce's form on
// ranks that need it (`need`): allocated there, then every rank learns
// whether all have theirs, so that none goes into the all-reduce alone.
// VGPU_EDEVMEM on every rank when one has no room; *ptr is set only on 0.
static int scratch_agreed_(comm_t *c, int need, size_t bytes, void **ptr, const char *call,
                           const char *why)
{
    void *p = NULL;
    const int failed = need && (device_alloc(c->dev, bytes, &p) < 0 || !p);
    int any = 0;
    int rc = agree_any_(c, failed, &any);
    if (rc == 0 && any) {
        log_error("%s: %s has no room for the %zu-byte scratch the %s backend needs (%s)", call,
                  failed ? "this rank" : "another rank", bytes, c->ops->name, why);
        rc = VGPU_EDEVMEM;
    }
    if (rc < 0 && p)
        device_free(c->dev, p);
    *ptr = rc == 0 ? p : NULL;
    return rc;
}

// Reduce-scatter as an all-reduce of the whole into scratch (a second copy
// of send's size, for the call), keeping this rank's block (backends without
// their own).
int comm_reduce_scatter_by_all_reduce(comm_t *c, const void *send, void *recv, size_t recv_count,
                                      enum comm_dtype t, enum comm_reduce_op op)
{
    const size_t es = comm_dtype_size(t), block = recv_count * es;
    void *all = NULL;
    if (block)
        TRY(scratch_agreed_(c, 1, block * (size_t)c->size, &all, "comm_reduce_scatter",
                            "twice the send buffer in all"));
    int rc = c->ops->all_reduce(c, send, all, recv_count * (size_t)c->size, t, op);
    if (rc == 0 && block)
        rc = device_copy(c->dev, recv, (char *)all + (size_t)c->rank * block, block);
    if (all)
        device_free(c->dev, all);
    return rc;
}

int comm_reduce_scatter(comm_t *c, const void *send, void *recv, size_t recv_count,
                        enum comm_dtype t, enum comm_reduce_op op)
{
    const size_t es = typed_size_(t, op, recv_count);
    if (!c || !es || (c->size > 0 && recv_count * es > SIZE_MAX / (size_t)c->size))
        return VGPU_EINVAL;
    const size_t block = recv_count * es, total = block * (size_t)c->size;
    TRY(check_buffer_(c, send, total, "send", "comm_reduce_scatter"));
    TRY(check_buffer_(c, recv, block, "recv", "comm_reduce_scatter"));
    const struct call_ call = enter_(FLIGHT_REDUCE_SCATTER, total);
    int rc = c->ops->reduce_scatter
                 ? c->ops->reduce_scatter(c, send, recv, recv_count, t, op)
                 : comm_reduce_scatter_by_all_reduce(c, send, recv, recv_count, t, op);
    account_(c, &call, total, rc);
    return rc;
}

// Reduce as the all-reduce (the same bits): into recv on root, into
// scratch of send's size on the other ranks (backends without their own).
int comm_reduce_by_all_reduce(comm_t *c, const void *send, void *recv, size_t count,
                              enum comm_dtype t, enum comm_reduce_op op, int root)
{
    const size_t bytes = count * comm_dtype_size(t);
    void *scratch = NULL;
    if (bytes) // (every rank alike: count is the same everywhere)
        TRY(scratch_agreed_(c, c->rank != root, bytes, &scratch, "comm_reduce",
                            "a copy of the send buffer on the ranks but root"));
    int rc = c->ops->all_reduce(c, send, c->rank == root ? recv : scratch, count, t, op);
    if (scratch)
        device_free(c->dev, scratch);
    return rc;
}

int comm_reduce(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                enum comm_reduce_op op, int root)
{
    const size_t es = typed_size_(t, op, count);
    if (!c || !es || root < 0 || root >= c->size)
        return VGPU_EINVAL;
    const size_t bytes = count * es;
    TRY(check_buffer_(c, send, bytes, "send", "comm_reduce"));
    if (c->rank == root)
        TRY(check_buffer_(c, recv, bytes, "recv", "comm_reduce"));
    const struct call_ call = enter_(FLIGHT_REDUCE, bytes);
    int rc = c->ops->reduce ? c->ops->reduce(c, send, c->rank == root ? recv : NULL, count, t, op,
                                             root)
                            : comm_reduce_by_all_reduce(c, send, recv, count, t, op, root);
    account_(c, &call, bytes, rc);
    return rc;
}

// comm_send (send = 1) and comm_recv: checked, timed and counted like the
// collectives, and a span of the timeline (kind send or recv, the peer's
// job rank for its number); no flight recorder entry (only two ranks take
// part, and the recorder numbers calls that every rank makes).
static int p2p_(comm_t *c, void *buf, size_t bytes, int peer, int send)
{
    const char *call = send ? "comm_send" : "comm_recv";
    if (!c)
        return VGPU_EINVAL;
    if (peer < 0 || peer >= c->size || peer == c->rank) {
        log_error("%s: peer %d is %s", call, peer,
                  peer == c->rank ? "this rank (a device copy does that; NCCL allows it only in a "
                                    "group)"
                                  : "not a rank of the communicator");
        return VGPU_EINVAL;
    }
    TRY(check_buffer_(c, buf, bytes, "buf", call));
    if (send ? !c->ops->send : !c->ops->recv) {
        log_error("%s: the %s backend has no point-to-point", call, c->ops->name);
        return VGPU_EUNSUPPORTED;
    }
    const uint64_t start_us = trace_begin();
    const double t0 = util_now_s();
    const int rc = send ? c->ops->send(c, buf, bytes, peer) : c->ops->recv(c, buf, bytes, peer);
    tally_(c, t0, bytes, rc);
    trace_end(TRACE_COLLECTIVE, send ? FLIGHT_SEND : FLIGHT_RECV, start_us,
              comm_rank_name(c, peer), (int64_t)bytes);
    return rc;
}

int comm_send(comm_t *c, const void *buf, size_t bytes, int peer)
{
    return p2p_(c, (void *)buf, bytes, peer, 1);
}

int comm_recv(comm_t *c, void *buf, size_t bytes, int peer) { return p2p_(c, buf, bytes, peer, 0); }

int comm_broadcast(comm_t *c, void *buf, size_t bytes, int root)
{
    if (!c || root < 0 || root >= c->size)
        return VGPU_EINVAL;
    TRY(check_buffer_(c, buf, bytes, "buf", "comm_broadcast"));
    const struct call_ call = enter_(FLIGHT_BROADCAST, bytes);
    int rc = c->ops->broadcast(c, buf, bytes, root);
    account_(c, &call, bytes, rc);
    return rc;
}

int comm_all_gather(comm_t *c, const void *send, void *recv, size_t bytes)
{
    if (!c || (c->size > 0 && bytes > SIZE_MAX / (size_t)c->size))
        return VGPU_EINVAL;
    TRY(check_buffer_(c, send, bytes, "send", "comm_all_gather"));
    TRY(check_buffer_(c, recv, bytes * (size_t)c->size, "recv", "comm_all_gather"));
    const struct call_ call = enter_(FLIGHT_ALL_GATHER, bytes * (uint64_t)c->size);
    int rc = c->ops->all_gather(c, send, recv, bytes);
    account_(c, &call, bytes, rc);
    return rc;
}
// ---- the deterministic all-reduce ----

int comm_tree_sum(device_t *dev, float *const *leaves, int n, size_t count)
{
    // The pairs depend only on n and the leaf index, never on who holds a
    // leaf, and float addition of the same two values is exact-repeatable.
    for (int stride = 1; stride < n; stride *= 2)
        for (int i = 0; i + stride < n; i += 2 * stride)
            TRY(math_axpby(dev, leaves[i], 1.0f, leaves[i + stride], 1.0f, count));
    return 0;
}

// Floats of each rank's chunk: count split N ways, rounded up to 64 floats
// (256 bytes) so chunks stay aligned.
static size_t tree_chunk_(int nranks, size_t count)
{
    size_t chunk = (count + (size_t)nranks - 1) / (size_t)nranks;
    return (chunk + 63) & ~(size_t)63;
}

uint64_t comm_tree_scratch_bytes(int nranks, int max_parts_per_rank, size_t count)
{
    const uint64_t block = (uint64_t)max_parts_per_rank * tree_chunk_(nranks, count);
    // send and receive blocks for every rank, plus the gathered result.
    return (2 * block * (uint64_t)nranks + tree_chunk_(nranks, count) * (uint64_t)nranks) *
           sizeof(float);
}

int comm_all_reduce_tree(comm_t *c, const float *parts, const int *parts_per_rank, float *out,
                         size_t count)
{
    if (!c || !parts_per_rank || count > SIZE_MAX / sizeof(float) / 4)
        return VGPU_EINVAL;
    if (!c->ops->all_to_all) {
        log_error("comm_all_reduce_tree: the %s backend has no all-to-all; deterministic mode "
                  "needs comm.backend = ring or mpi", c->ops->name);
        return VGPU_EUNSUPPORTED;
    }
    const int n = c->size, me = c->rank;
    int total = 0, most = 0;
    for (int r = 0; r < n; r++) {
        if (parts_per_rank[r] < 0)
            return VGPU_EINVAL;
        total += parts_per_rank[r];
        most = parts_per_rank[r] > most ? parts_per_rank[r] : most;
    }
    const int mine = parts_per_rank[me];
    TRY(check_buffer_(c, parts, (size_t)mine * count * sizeof(float), "parts", "comm_all_reduce_tree"));
    TRY(check_buffer_(c, out, count * sizeof(float), "out", "comm_all_reduce_tree"));
    if (total == 0 || count == 0)
        return total == 0 && count ? device_zero(c->dev, out, count * sizeof(float)) : 0;

    const struct call_ call = enter_(FLIGHT_ALL_REDUCE_TREE, count * sizeof(float));
    const size_t chunk = tree_chunk_(n, count), block = (size_t)most * chunk;
    const size_t need = comm_tree_scratch_bytes(n, most, count);
    if (c->tree_scratch_bytes < need) {
        if (c->tree_scratch)
            device_free(c->dev, c->tree_scratch);
        c->tree_scratch = NULL;
        c->tree_scratch_bytes = 0;
        TRY(device_alloc(c->dev, need, &c->tree_scratch));
        // Padding is never read back, but zeroes keep it out of any NaN story.
        TRY(device_zero(c->dev, c->tree_scratch, need));
        c->tree_scratch_bytes = need;
    }
    float *send = c->tree_scratch, *recv = send + block * (size_t)n, *gathered = recv + block * (size_t)n;

    // send block q = chunk q of each of my partials: [q][k][chunk].
    for (int q = 0; q < n; q++) {
        const size_t lo = (size_t)q * chunk;
        const size_t len = lo >= count ? 0 : count - lo < chunk ? count - lo : chunk;
        for (int k = 0; k < mine && len; k++)
            TRY(device_copy(c->dev, send + (size_t)q * block + (size_t)k * chunk,
                            parts + (size_t)k * count + lo, len * sizeof(float)));
    }
    int rc = c->ops->all_to_all(c, send, recv, block * sizeof(float));
    // Leaf m of my chunk sits in the block from its holder, at its index there.
    float **leaves = rc == 0 ? malloc((size_t)total * sizeof *leaves) : NULL;
    if (rc == 0 && !leaves)
        rc = VGPU_ENOMEM;
    for (int r = 0, m = 0; rc == 0 && r < n; r++)
        for (int k = 0; k < parts_per_rank[r]; k++, m++)
            leaves[m] = recv + (size_t)r * block + (size_t)k * chunk;
    if (rc == 0)
        rc = comm_tree_sum(c->dev, leaves, total, chunk);
    if (rc == 0)
        rc = c->ops->all_gather(c, leaves[0], gathered, chunk * sizeof(float));
    free(leaves);
    if (rc == 0)
        rc = device_copy(c->dev, out, gathered, count * sizeof(float));
    account_(c, &call, count * sizeof(float), rc);
    return rc;
}

int comm_all_reduce_update(comm_t *c, float *grads, float *params, size_t count,
                           comm_update_fn update, void *ctx)
{
    if (!c || !update || count > SIZE_MAX / sizeof(float))
        return VGPU_EINVAL;
    const size_t bytes = count * sizeof(float);
    TRY(check_buffer_(c, grads, bytes, "grads", "comm_all_reduce_update"));
    TRY(check_buffer_(c, params, bytes, "params", "comm_all_reduce_update"));
    const struct call_ call = enter_(FLIGHT_ALL_REDUCE_UPDATE, bytes);
    int rc;
    if (c->ops->all_reduce_update) {
        rc = c->ops->all_reduce_update(c, grads, params, count, update, ctx);
    } else {
        rc = c->ops->all_reduce(c, grads, grads, count, COMM_FLOAT32, COMM_SUM);
        if (rc == 0 && count)
            rc = update(ctx, 0, count);
    }
    account_(c, &call, bytes, rc);
    return rc;
}

int comm_barrier(comm_t *c)
{
    if (!c)
        return VGPU_EINVAL;
    const struct call_ call = enter_(FLIGHT_BARRIER, 0);
    int rc = c->ops->barrier(c);
    account_(c, &call, 0, rc);
    return rc;
}
