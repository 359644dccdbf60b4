// ring_core.c: the primitives every ring algorithm is built of (the
// algorithms themselves are ring_ring.c, ring_shot.c, ring_direct.c and
// ring_gather.c; ring_algo.c chooses among the all-reduces): waiting for a
// same-host neighbour's progress and publishing this rank's, transfers over
// MPI links, the reductions and copies on the windows, entering a collective
// and checking a peer's buffers.
#include "ring_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flight.h"
#include "kernels.h"
#include "log.h"
#include "status.h"
#include "trace.h"
#include "util.h"

#define RING_TAG 0x7269 // one tag: MPI keeps a link's messages in order

uint64_t ring_round_elems(const struct ring_core *r, size_t elem_bytes)
{
    uint64_t per_step = r->slice_bytes / elem_bytes;
    if (per_step < 16)
        per_step = 16;
    return per_step * (uint64_t)r->size;
}

void ring_chunk(uint64_t n, int parts, int c, uint64_t *lo, uint64_t *hi)
{
    const uint64_t units = (n + 15) / 16;
    uint64_t a = units * (uint64_t)c / (uint64_t)parts * 16;
    uint64_t b = units * (uint64_t)(c + 1) / (uint64_t)parts * 16;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

// ---- waiting ----

struct slow_arg_ {
    struct ring_core *r;
    int peer;
};

static void on_slow_(void *arg, double waited_s)
{
    struct slow_arg_ *a = arg;
    if (a->r->report)
        a->r->report(a->r, a->peer, 0, waited_s);
}

static int fail_timeout_(struct ring_core *r, int peer, double waited_s)
{
    r->broken = 1;
    if (r->report)
        r->report(r, peer, 1, waited_s);
    return VGPU_ETIMEOUT;
}

// The job's rank of ring rank q (a sub-ring's are its own).
static int world_(const struct ring_core *r, int q) { return r->world ? r->world[q] : q; }

int ring_wait(struct ring_core *r, struct ring_slot *slot, int rank, uint64_t target)
{
    if (shm_flag_read(&slot->progress) >= target)
        return 0;
    struct slow_arg_ arg = {r, rank};
    double waited_s = 0;
    struct shm_flag_wait_opts o = {.timeout_s = r->timeout_s,
                              .spin_count = r->spin_count,
                              .yield_s = r->yield_s,
                              .on_slow = on_slow_,
                              .arg = &arg,
                              .waited_s = &waited_s};
    flight_waiting(world_(r, rank));
    const uint64_t span = trace_begin();
    const double t0 = util_now_s();
    int rc = shm_flag_wait(&slot->progress, target, &o);
    r->waited_s += util_now_s() - t0;
    trace_end(TRACE_WAIT, 0, span, world_(r, rank), 0);
    if (rc < 0) // the time it waited, not the bound: a wait longer than its bound shows
        return fail_timeout_(r, rank, waited_s);
    flight_resumed();
    return 0;
}

int ring_wait_link(struct ring_core *r, const struct ring_link *l, uint64_t target)
{
    return ring_wait(r, l->slot, l->rank, target);
}

int ring_settle(struct ring_core *r)
{
    if (!r->mem)
        return 0;
    int rc = r->mem->settle(r->mem->ctx);
    r->broken |= rc < 0;
    return rc;
}

int ring_publish(struct ring_core *r, uint64_t value)
{
    TRY(ring_settle(r));
    r->progress = value;
    shm_flag_publish(&r->me->progress, value);
    return 0;
}

// ---- transfers over MPI links ----

struct ring_xfer ring_xfer_slot(struct ring_core *r, int k)
{
    return (struct ring_xfer){r->reqs ? r->reqs + (size_t)k * (size_t)r->xfer_parts : NULL, 0};
}

// Tests every message of x once; *done: all are complete.
static int xfer_test_(struct ring_xfer *x, int *done)
{
    *done = 1;
    for (int k = 0; k < x->parts; k++) {
        if (x->req[k] == MPI_REQUEST_NULL)
            continue;
        int flag = 0;
        if (MPI_Test(&x->req[k], &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return -1;
        *done &= flag;
    }
    return 0;
}

// Polls, then yields, then naps: MPI progresses only while we call it, but
// a rank that has nothing to do must not take the core from the ranks it
// waits for.
int ring_xfer_wait(struct ring_core *r, struct ring_xfer *x, int peer)
{
    struct util_wait_clock clock;
    util_wait_clock_start(&clock);
    int warned = 0;
    uint64_t span = 0;
    const unsigned spins = util_waits_beside_compute ? 0 : r->spin_count;
    for (unsigned i = 0;; i++) {
        int done = 0;
        if (xfer_test_(x, &done) < 0) {
            r->broken = 1;
            log_error("ring: MPI transfer with rank %d failed", peer);
            return VGPU_ECOMM;
        }
        if (done) {
            if (i > spins) {
                flight_resumed();
                trace_end(TRACE_WAIT, 0, span, world_(r, peer), 0);
            }
            return 0;
        }
        if (i < spins)
            continue;
        if (i == spins) {
            flight_waiting(world_(r, peer));
            span = trace_begin();
        }
        double waited_s = util_wait_clock_waited(&clock);
        if (r->timeout_s > 0 && waited_s >= r->timeout_s)
            return fail_timeout_(r, peer, waited_s);
        if (r->timeout_s > 0 && !warned && waited_s >= r->timeout_s / 2) {
            warned = 1;
            if (r->report)
                r->report(r, peer, 0, waited_s);
        }
        if (util_waits_beside_compute) { // naps, longer once a peer is late
            nanosleep(&(struct timespec){0, i < 2000 ? UTIL_BESIDE_NAP_NS : 1000000}, NULL);
        } else if (i < 4 * r->spin_count + 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

int ring_core_set_messages(struct ring_core *r, uint64_t msg_bytes)
{
    ring_core_free_messages(r);
    r->msg_bytes = msg_bytes ? msg_bytes : UINT64_MAX;
    const uint64_t step = r->landing_bytes; // the most a step moves: what a landing buffer holds
    const uint64_t parts = step / r->msg_bytes + (step % r->msg_bytes != 0);
    if (parts > (uint64_t)INT32_MAX / RING_XFERS)
        return VGPU_EINVAL;
    r->xfer_parts = (int)parts;
    r->reqs = malloc((size_t)RING_XFERS * (size_t)parts * sizeof *r->reqs);
    if (!r->reqs)
        return VGPU_ENOMEM;
    for (uint64_t k = 0; k < RING_XFERS * parts; k++)
        r->reqs[k] = MPI_REQUEST_NULL;
    return 0;
}

void ring_core_free_messages(struct ring_core *r)
{
    free(r->reqs);
    r->reqs = NULL;
    r->xfer_parts = 0;
}

// Posts a transfer of bytes (buf) to the right (send) or from the left:
// messages of msg_bytes and the rest; a zero-byte step is one empty message,
// which still carries the step's "I am done" to the right.
static int post_(struct ring_core *r, struct ring_xfer *x, int send, const void *buf,
                 uint64_t bytes)
{
    const uint64_t m = r->msg_bytes;
    const uint64_t parts = bytes ? bytes / m + (bytes % m != 0) : 1;
    if (parts > (uint64_t)r->xfer_parts) { // a step larger than ring_core_set_messages allowed for
        r->broken = 1;
        log_error("ring: a step of %llu bytes does not fit its %d messages",
                  (unsigned long long)bytes, r->xfer_parts);
        return VGPU_ECOMM;
    }
    x->parts = (int)parts;
    for (int k = 0; k < x->parts; k++) {
        const uint64_t off = (uint64_t)k * m, len = bytes - off < m ? bytes - off : m;
        char *p = bytes ? (char *)buf + off : r->landing;
        const int rc = send ? MPI_Isend(p, (int)len, MPI_BYTE, r->right.rank, RING_TAG, r->mpi,
                                        &x->req[k])
                            : MPI_Irecv(p, (int)len, MPI_BYTE, r->left.rank, RING_TAG, r->mpi,
                                        &x->req[k]);
        if (rc != MPI_SUCCESS) {
            r->broken = 1;
            return VGPU_ECOMM;
        }
    }
    return 0;
}

int ring_xfer_send(struct ring_core *r, struct ring_xfer *x, const void *buf, uint64_t bytes)
{
    return post_(r, x, 1, buf, bytes);
}

int ring_xfer_recv(struct ring_core *r, struct ring_xfer *x, void *buf, uint64_t bytes)
{
    return post_(r, x, 0, buf, bytes);
}

int ring_recv_left(struct ring_core *r, void *buf, uint64_t bytes)
{
    struct ring_xfer x = ring_xfer_slot(r, RING_XFER_RECV);
    TRY(ring_xfer_recv(r, &x, buf, bytes));
    return ring_xfer_wait(r, &x, r->left.rank);
}

// ---- arithmetic ----

// dst = a + b (and / d when d != 0); separate loops for the in-place case
// (dst == a) so that every loop's pointers are truly restrict and vectorise.
static void add_out_(float *restrict dst, const float *restrict a, const float *restrict b,
                     uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        dst[i] = a[i] + b[i];
}

static void add_in_(float *restrict dst, const float *restrict b, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        dst[i] += b[i];
}

static void add_div_out_(float *restrict dst, const float *restrict a, const float *restrict b,
                         uint64_t n, float d)
{
    for (uint64_t i = 0; i < n; i++)
        dst[i] = (a[i] + b[i]) / d;
}

static void add_div_in_(float *restrict dst, const float *restrict b, uint64_t n, float d)
{
    for (uint64_t i = 0; i < n; i++)
        dst[i] = (dst[i] + b[i]) / d;
}

// kernels.h numbers the operations as comm.h does.
_Static_assert((int)KERNEL_OP_SUM == (int)COMM_SUM && (int)KERNEL_OP_AVG == (int)COMM_AVG &&
                   (int)KERNEL_OP_PROD == (int)COMM_PROD && (int)KERNEL_OP_MIN == (int)COMM_MIN &&
                   (int)KERNEL_OP_MAX == (int)COMM_MAX,
               "kernels.h's operations are comm.h's");

// The other types and operations: each element as kernels.h computes it, in
// loops the compiler vectorises (a constant operation, restrict pointers: an
// out-of-place and an in-place loop each, as for the float sums).
#define ONE_LOOP_(FN, D, X, Y, OP, DIV)                                                    \
    for (uint64_t i = 0; i < n; i++)                                                       \
        FN(i, D, X, Y, OP, DIV)
#define BY_OP_(FN, D, X, Y)                                                                \
    switch (op) {                                                                          \
    case KERNEL_OP_PROD: ONE_LOOP_(FN, D, X, Y, KERNEL_OP_PROD, 0); break;                 \
    case KERNEL_OP_MIN: ONE_LOOP_(FN, D, X, Y, KERNEL_OP_MIN, 0); break;                   \
    case KERNEL_OP_MAX: ONE_LOOP_(FN, D, X, Y, KERNEL_OP_MAX, 0); break;                   \
    default: /* sum, and avg: a sum but at its last step */                                \
        if (div)                                                                           \
            ONE_LOOP_(FN, D, X, Y, KERNEL_OP_AVG, div);                                    \
        else                                                                               \
            ONE_LOOP_(FN, D, X, Y, KERNEL_OP_SUM, 0);                                      \
    }
#define REDUCE_LOOPS_(SUFFIX, T, FN)                                                       \
    static void reduce_out_##SUFFIX(T *restrict d, const T *restrict x, const T *restrict y, \
                                    uint64_t n, int op, int div)                           \
    {                                                                                      \
        BY_OP_(FN, d, x, y)                                                                \
    }                                                                                      \
    static void reduce_in_##SUFFIX(T *restrict d, const T *restrict y, uint64_t n, int op,  \
                                   int div)                                                \
    {                                                                                      \
        BY_OP_(FN, d, d, y)                                                                \
    }
REDUCE_LOOPS_(f32, float, kernel_reduce_f32)
REDUCE_LOOPS_(f64, double, kernel_reduce_f64)
REDUCE_LOOPS_(i32, int32_t, kernel_reduce_i32)
REDUCE_LOOPS_(i64, int64_t, kernel_reduce_i64)
REDUCE_LOOPS_(f16, uint16_t, kernel_reduce_f16)
REDUCE_LOOPS_(bf16, uint16_t, kernel_reduce_bf16)

// device_cuda.cu's ring reduction switches on these numbers (it does not
// include comm.h).
_Static_assert(COMM_FLOAT32 == 0 && COMM_FLOAT64 == 1 && COMM_INT32 == 2 && COMM_INT64 == 3 &&
                   COMM_FLOAT16 == 4 && COMM_BFLOAT16 == 5,
               "device_cuda.cu's ring_reduce_ numbers the types as comm.h");

static void reduce_typed_(enum comm_dtype t, enum comm_reduce_op op, void *dst, const void *a,
                          const void *b, uint64_t n, int avg_div)
{
    const int in = dst == a;
    switch (t) {
    case COMM_FLOAT32:
        in ? reduce_in_f32(dst, b, n, (int)op, avg_div) : reduce_out_f32(dst, a, b, n, (int)op, avg_div);
        break;
    case COMM_FLOAT64:
        in ? reduce_in_f64(dst, b, n, (int)op, avg_div) : reduce_out_f64(dst, a, b, n, (int)op, avg_div);
        break;
    case COMM_INT32:
        in ? reduce_in_i32(dst, b, n, (int)op, avg_div) : reduce_out_i32(dst, a, b, n, (int)op, avg_div);
        break;
    case COMM_INT64:
        in ? reduce_in_i64(dst, b, n, (int)op, avg_div) : reduce_out_i64(dst, a, b, n, (int)op, avg_div);
        break;
    case COMM_FLOAT16:
        in ? reduce_in_f16(dst, b, n, (int)op, avg_div) : reduce_out_f16(dst, a, b, n, (int)op, avg_div);
        break;
    case COMM_BFLOAT16:
        in ? reduce_in_bf16(dst, b, n, (int)op, avg_div) : reduce_out_bf16(dst, a, b, n, (int)op, avg_div);
        break;
    default:
        break;
    }
}

// The gradients' float sums keep their own vectorised loops.
int ring_reduce(struct ring_core *r, enum comm_dtype t, enum comm_reduce_op op, char *dst,
                const char *mine, const char *theirs, uint64_t n, int avg_div)
{
    if (r->mem) {
        int rc = r->mem->reduce(r->mem->ctx, dst, mine, theirs, n, (int)t, (int)op, avg_div);
        r->broken |= rc < 0;
        return rc;
    }
    if (t == COMM_FLOAT32 && (op == COMM_SUM || op == COMM_AVG)) {
        float *d = (float *)dst;
        const float *a = (const float *)mine, *b = (const float *)theirs;
        if (avg_div)
            d == a ? add_div_in_(d, b, n, (float)avg_div) : add_div_out_(d, a, b, n, (float)avg_div);
        else
            d == a ? add_in_(d, b, n) : add_out_(d, a, b, n);
    } else {
        reduce_typed_(t, op, dst, mine, theirs, n, avg_div);
    }
    return 0;
}

int ring_copy(struct ring_core *r, void *dst, const void *src, uint64_t bytes)
{
    if (r->mem) {
        int rc = r->mem->copy(r->mem->ctx, dst, src, bytes);
        r->broken |= rc < 0;
        return rc;
    }
    memmove(dst, src, bytes);
    return 0;
}

// ---- entering a collective ----

static uint64_t off_(const struct ring_core *r, const void *p)
{
    return p ? (uint64_t)((const char *)p - r->win) : 0;
}


int ring_arrive(struct ring_core *r, int kind, const void *send, const void *recv,
                uint64_t stride)
{
    r->calls++;
    atomic_store_explicit(&r->me->calls, r->calls << 2 | (uint64_t)kind, memory_order_relaxed);
    atomic_store_explicit(&r->me->send_off, off_(r, send), memory_order_relaxed);
    atomic_store_explicit(&r->me->recv_off, off_(r, recv), memory_order_relaxed);
    atomic_store_explicit(&r->me->stride, stride, memory_order_relaxed);
    return ring_publish(r, r->progress + 1);
}

int ring_peer_ptr(struct ring_core *r, const struct ring_link *l, uint64_t off, uint64_t bytes,
                  const char **out)
{
    const uint64_t theirs = atomic_load_explicit(&l->slot->calls, memory_order_relaxed);
    const uint64_t mine = atomic_load_explicit(&r->me->calls, memory_order_relaxed);
    if (theirs != mine) {
        r->broken = 1;
        log_error("ring: rank %d is in collective #%llu (kind %d) while this rank is in #%llu "
                  "(kind %d): the ranks did not call the same collectives in the same order",
                  l->rank, (unsigned long long)(theirs >> 2), (int)(theirs & 3),
                  (unsigned long long)(mine >> 2), (int)(mine & 3));
        return VGPU_ECOMM;
    }
    if (off > l->win_bytes || bytes > l->win_bytes - off) {
        r->broken = 1;
        log_error("ring: rank %d's buffer (offset %llu + %llu bytes) is outside its %llu-byte "
                  "window: did the ranks call this collective with different sizes?",
                  l->rank, (unsigned long long)off, (unsigned long long)bytes,
                  (unsigned long long)l->win_bytes);
        return VGPU_ECOMM;
    }
    *out = l->win + off;
    return 0;
}
