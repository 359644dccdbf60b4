// ring_core.c: the ring collectives' schedule on host memory: reduce-scatter
// then all-gather, in rounds of `slice_bytes` per step, over same-host links
// (direct reads from the left neighbour's mapped window) and MPI links.
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

// The transfer slots (RING_XFERS): a collective's sends alternate between
// two, so that one step's may still be in flight while the next is posted.
enum { XFER_SEND_EVEN_, XFER_SEND_ODD_, XFER_RECV_ };
_Static_assert(XFER_RECV_ + 1 == RING_XFERS, "RING_XFERS counts the transfer slots");

static inline int mod_(int64_t a, int n) { return (int)(((a % n) + n) % n); }

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

// Waits until a same-host neighbour has completed `target` steps.
static int wait_peer_(struct ring_core *r, const struct ring_link *l, uint64_t target)
{
    return ring_wait(r, l->slot, l->rank, target);
}

// Waits for what this rank issued (nothing to wait for on host memory).
static int settle_(struct ring_core *r)
{
    if (!r->mem)
        return 0;
    int rc = r->mem->settle(r->mem->ctx);
    r->broken |= rc < 0;
    return rc;
}

int ring_publish(struct ring_core *r, uint64_t value)
{
    TRY(settle_(r));
    r->progress = value;
    shm_flag_publish(&r->me->progress, value);
    return 0;
}

// A transfer: one step's messages to or from a remote neighbour.
struct xfer_ {
    MPI_Request *req; // parts requests (MPI_REQUEST_NULL once complete)
    int parts;
};

// Transfer slot k (0 .. RING_XFERS-1), with no messages (none at all on a
// ring without MPI links: it has no requests).
static struct xfer_ xfer_(struct ring_core *r, int k)
{
    return (struct xfer_){r->reqs ? r->reqs + (size_t)k * (size_t)r->xfer_parts : NULL, 0};
}

// Tests every message of x once; *done: all are complete.
static int xfer_test_(struct xfer_ *x, int *done)
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

// Completes a transfer within the timeout. Polls, then yields, then
// naps: MPI progresses only while we call it, but a rank that has nothing to
// do must not take the core from the ranks it waits for.
static int mpi_wait_(struct ring_core *r, struct xfer_ *x, int peer)
{
    struct util_wait_clock clock;
    util_wait_clock_start(&clock);
    int warned = 0;
    uint64_t span = 0;
    for (unsigned i = 0;; i++) {
        int done = 0;
        if (xfer_test_(x, &done) < 0) {
            r->broken = 1;
            log_error("ring: MPI transfer with rank %d failed", peer);
            return VGPU_ECOMM;
        }
        if (done) {
            if (i > r->spin_count) {
                flight_resumed();
                trace_end(TRACE_WAIT, 0, span, world_(r, peer), 0);
            }
            return 0;
        }
        if (i < r->spin_count)
            continue;
        if (i == r->spin_count) {
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
        if (i < 4 * r->spin_count + 64) {
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
static int post_(struct ring_core *r, struct xfer_ *x, int send, const void *buf, uint64_t bytes)
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

static int send_right_(struct ring_core *r, struct xfer_ *x, const void *buf, uint64_t bytes)
{
    return post_(r, x, 1, buf, bytes);
}

static int post_recv_(struct ring_core *r, struct xfer_ *x, void *buf, uint64_t bytes)
{
    return post_(r, x, 0, buf, bytes);
}

static int recv_left_(struct ring_core *r, void *buf, uint64_t bytes)
{
    struct xfer_ x = xfer_(r, XFER_RECV_);
    TRY(post_recv_(r, &x, buf, bytes));
    return mpi_wait_(r, &x, r->left.rank);
}

// ---- the all-reduce's transfers over MPI links, kept in flight ----

// Steps t = 0 .. 2(n-1)-1 of a round: reduce-scatter s = t, then all-gather
// g = t - (n-1). Where both links are MPI, a step's send to the right is not
// waited for at the end of its step: only before a later step reuses its
// request (two in flight), before the all-gather writes over the chunk it
// sent, and at the end of the round. A remote left's next reduce-scatter chunk is received
// into the other landing buffer while this one is reduced. So the link
// carries the next step's data while this rank waits for, or reduces, the
// current one, instead of idling at every step's hand-over.
struct pipe_ {
    struct xfer_ send[2]; // the sends of the last two steps, by step parity
    int send_step[2];     // their steps (-1: none)
    struct xfer_ recv;    // the next reduce-scatter chunk's receive, posted ahead
    int recv_step;        // its step (-1: none)
};

static void pipe_start_(struct ring_core *r, struct pipe_ *pp)
{
    *pp = (struct pipe_){{xfer_(r, XFER_SEND_EVEN_), xfer_(r, XFER_SEND_ODD_)}, {-1, -1},
                         xfer_(r, XFER_RECV_), -1};
}

// Waits for the send of step t, if it is still in flight.
static int pipe_sent_(struct ring_core *r, struct pipe_ *pp, int t)
{
    if (t < 0 || pp->send_step[t & 1] != t)
        return 0;
    pp->send_step[t & 1] = -1;
    return mpi_wait_(r, &pp->send[t & 1], r->right.rank);
}

// Sends step t's chunk to the remote right, after the send of step t-2.
static int pipe_send_(struct ring_core *r, struct pipe_ *pp, int t, const void *buf,
                      uint64_t bytes)
{
    TRY(pipe_sent_(r, pp, t - 2));
    TRY(send_right_(r, &pp->send[t & 1], buf, bytes));
    pp->send_step[t & 1] = t;
    // MPI moves data only inside MPI calls. A rank whose left is on its host
    // waits next on shared memory, so it sees its send through now: else the
    // right, waiting for this send, and this rank, waiting for its left, can
    // close a ring of waits around the hosts (a deadlock).
    return r->left.local ? pipe_sent_(r, pp, t) : 0;
}

// The end of a round: every send complete (its buffers are the caller's).
static int pipe_drain_(struct ring_core *r, struct pipe_ *pp)
{
    TRY(pipe_sent_(r, pp, pp->send_step[0]));
    return pipe_sent_(r, pp, pp->send_step[1]);
}

// Receives reduce-scatter step s's chunk from the remote left into landing
// buffer s mod 2 (posted ahead at step s-1, or now), and posts step s+1's.
static int pipe_recv_rs_(struct ring_core *r, struct pipe_ *pp, int s, uint64_t bytes,
                         uint64_t next_bytes, int has_next, const char **landed)
{
    char *land = r->landing + (uint64_t)(s & 1) * r->landing_bytes;
    if (pp->recv_step != s)
        TRY(post_recv_(r, &pp->recv, land, bytes));
    pp->recv_step = -1;
    TRY(mpi_wait_(r, &pp->recv, r->left.rank));
    if (has_next) {
        TRY(post_recv_(r, &pp->recv, r->landing + (uint64_t)((s + 1) & 1) * r->landing_bytes,
                       next_bytes));
        pp->recv_step = s + 1;
    }
    *landed = land;
    return 0;
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

// ---- collectives ----

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

static int left_ptr_(struct ring_core *r, uint64_t off, uint64_t bytes, const char **out)
{
    return ring_peer_ptr(r, &r->left, off, bytes, out);
}

// The all-reduce engine, on count elements of type t (es bytes each). Plain
// form: update == NULL, out == recv. Update form (float32 sums): in place on
// recv (the gradients); once this rank's chunk of a round is fully reduced,
// and before it tells the right so, update(ctx, lo, n) runs on that range;
// the all-gather phase then circulates `out` (the parameters) instead of recv.
static int all_reduce_(struct ring_core *r, const char *send, char *recv, uint64_t count,
                       enum comm_dtype t, enum comm_reduce_op op, ring_update_fn update,
                       void *ctx, char *out)
{
    if (r->broken)
        return VGPU_ECOMM;
    const int n = r->size, p = r->pos;
    const uint64_t es = comm_dtype_size(t);
    if (n == 1) { // settled like every other return: the results are there
        if (send != recv && count)
            TRY(ring_copy(r, recv, send, count * es));
        TRY(settle_(r));
        return update && count ? update(ctx, 0, count) : 0;
    }
    const enum ring_algo algo = update ? RING_ALGO_RING : ring_algo_for(r, count * es);
    if (algo == RING_ALGO_DIRECT)
        return ring_direct_all_reduce(r, send, recv, count, t, op);
    if (algo != RING_ALGO_RING)
        return ring_shot_all_reduce(r, algo, send, recv, count, t, op);
    const uint64_t base = r->progress;
    const uint64_t steps = 2 * (uint64_t)(n - 1);
    const uint64_t round = ring_round_elems(r, es);
    const uint64_t rounds = count ? (count + round - 1) / round : 1;
    const int avg_div = op == COMM_AVG ? n : 0;
    // The update form publishes the parameters as its "send" buffer: its
    // reduction is in place on recv, so the left's input is its recv.
    // Its size in `stride`: a rank that took the direct all-reduce for
    // another size must see this one's (ring_direct.c).
    if (update)
        TRY(ring_arrive(r, RING_KIND_ALL_REDUCE_UPDATE, out, recv, count * es));
    else
        TRY(ring_arrive(r, RING_KIND_ALL_REDUCE, send, recv, count * es));

    const char *lsend = NULL, *lrecv = NULL, *lout = NULL;
    if (r->left.local) {
        TRY(wait_peer_(r, &r->left, base + 1));
        const uint64_t bytes = count * es;
        const char *ls, *lr;
        TRY(left_ptr_(r, atomic_load(&r->left.slot->send_off), bytes, &ls));
        TRY(left_ptr_(r, atomic_load(&r->left.slot->recv_off), bytes, &lr));
        lrecv = lr;
        lsend = update ? lrecv : ls;
        lout = update ? ls : lrecv;
    }
    for (uint64_t k = 0; k < rounds; k++) {
        const uint64_t lo = k * round;
        const uint64_t len = count - lo < round ? count - lo : round;
        const uint64_t rb = base + 1 + k * steps; // progress before this round's first step
        uint64_t clo, chi;
        struct pipe_ pp;
        pipe_start_(r, &pp);

        // Reduce-scatter step s: my chunk c = (p-s-1) becomes my input plus
        // the left's partial sum of it (the left's input itself when s = 0).
        uint64_t phase = trace_begin();
        for (int s = 0; s < n - 1; s++) {
            if (!r->right.local) { // the chunk the right reduces at its step s
                ring_chunk(len, n, mod_(p - s, n), &clo, &chi);
                const char *src = s == 0 ? send : recv;
                TRY(pipe_send_(r, &pp, s, chi > clo ? src + (lo + clo) * es : NULL,
                               (chi - clo) * es));
            }
            ring_chunk(len, n, mod_(p - s - 1, n), &clo, &chi);
            const char *theirs;
            if (r->left.local) {
                TRY(wait_peer_(r, &r->left, s == 0 ? base + 1 : rb + s));
                theirs = chi > clo ? (s == 0 ? lsend : lrecv) + (lo + clo) * es : NULL;
            } else {
                uint64_t nlo = 0, nhi = 0;
                if (s + 1 < n - 1)
                    ring_chunk(len, n, mod_(p - s - 2, n), &nlo, &nhi);
                TRY(pipe_recv_rs_(r, &pp, s, (chi - clo) * es, (nhi - nlo) * es, s + 1 < n - 1,
                                  &theirs));
            }
            if (chi > clo)
                TRY(ring_reduce(r, t, op, recv + (lo + clo) * es, send + (lo + clo) * es, theirs,
                            chi - clo, s == n - 2 ? avg_div : 0));
            // My chunk of this round is complete: update before the right
            // may read its parameters (it waits for this step's publish).
            if (update && s == n - 2 && chi > clo) {
                int urc = update(ctx, lo + clo, chi - clo);
                if (urc < 0) {
                    r->broken = 1;
                    return urc;
                }
            }
            TRY(ring_publish(r, rb + s + 1));
        }
        trace_end(TRACE_REDUCE_SCATTER, 0, phase, 0, (int64_t)(len * es));
        // All-gather step g: my chunk c = (p-g) is copied from the left, which
        // finished it at its step g-1; the right must have read my partial of
        // c (its reduce-scatter step g) before I overwrite it. Over MPI my send
        // of that partial is complete by then (c's final value, which arrives
        // here, was summed from it), which pipe_sent_ states at the cost of
        // one test.
        phase = trace_begin();
        for (int g = 0; g < n - 1; g++) {
            const int step = n - 1 + g;
            if (!r->right.local) {
                ring_chunk(len, n, mod_(p + 1 - g, n), &clo, &chi);
                TRY(pipe_send_(r, &pp, step, chi > clo ? out + (lo + clo) * es : NULL,
                               (chi - clo) * es));
            } else {
                TRY(wait_peer_(r, &r->right, rb + (uint64_t)g + 1));
            }
            ring_chunk(len, n, mod_(p - g, n), &clo, &chi);
            TRY(pipe_sent_(r, &pp, g));
            if (r->left.local) {
                TRY(wait_peer_(r, &r->left, rb + (uint64_t)step));
                if (chi > clo)
                    TRY(ring_copy(r, out + (lo + clo) * es, lout + (lo + clo) * es, (chi - clo) * es));
            } else {
                TRY(recv_left_(r, chi > clo ? out + (lo + clo) * es : NULL, (chi - clo) * es));
            }
            TRY(ring_publish(r, rb + (uint64_t)step + 1));
        }
        TRY(pipe_drain_(r, &pp));
        trace_end(TRACE_ALL_GATHER, 0, phase, 0, (int64_t)(len * es));
    }
    // The right reads my buffers until its last step: only then may the
    // caller touch them again.
    if (r->right.local)
        TRY(wait_peer_(r, &r->right, base + 1 + rounds * steps));
    return 0;
}

int ring_core_all_reduce(struct ring_core *r, const void *send, void *recv, uint64_t count,
                         enum comm_dtype t, enum comm_reduce_op op)
{
    return all_reduce_(r, send, recv, count, t, op, NULL, NULL, recv);
}

int ring_core_all_reduce_update(struct ring_core *r, float *grads, float *params, uint64_t count,
                                ring_update_fn update, void *ctx)
{
    return all_reduce_(r, (const char *)grads, (char *)grads, count, COMM_FLOAT32, COMM_SUM,
                       update, ctx, (char *)params);
}

int ring_core_all_gather(struct ring_core *r, const char *send, char *recv, uint64_t bytes,
                         uint64_t stride)
{
    if (r->broken)
        return VGPU_ECOMM;
    const int n = r->size, p = r->pos;
    char *mine = bytes ? recv + (uint64_t)r->rank * stride : NULL;
    if (bytes && send != mine)
        TRY(ring_copy(r, mine, send, bytes));
    if (n == 1)
        return settle_(r);
    const uint64_t base = r->progress;
    const uint64_t slice = r->slice_bytes;
    const uint64_t rounds = bytes ? (bytes + slice - 1) / slice : 1;
    const uint64_t steps = (uint64_t)(n - 1);
    TRY(ring_arrive(r, RING_KIND_ALL_GATHER, NULL, recv, stride));

    const char *lrecv = NULL;
    uint64_t lstride = 0;
    if (r->left.local) {
        TRY(wait_peer_(r, &r->left, base + 1));
        lstride = atomic_load(&r->left.slot->stride);
        uint64_t need = bytes ? (uint64_t)(n - 1) * lstride + bytes : 0;
        if (lstride < bytes)
            need = UINT64_MAX;
        TRY(left_ptr_(r, atomic_load(&r->left.slot->recv_off), need, &lrecv));
    }
    for (uint64_t k = 0; k < rounds; k++) {
        const uint64_t lo = k * slice;
        const uint64_t len = bytes - lo < slice ? bytes - lo : slice;
        const uint64_t rb = base + 1 + k * steps;
        // Step t: the block of position (p-1-t) comes from the left, which
        // received it at its step t-1 (its own block is there since arrival).
        for (int t = 0; t < n - 1; t++) {
            struct xfer_ sreq = xfer_(r, XFER_SEND_EVEN_);
            if (!r->right.local) {
                const int q = r->order[mod_(p - t, n)];
                TRY(send_right_(r, &sreq, len ? recv + (uint64_t)q * stride + lo : NULL, len));
            }
            const int q = r->order[mod_(p - 1 - t, n)];
            char *dst = len ? recv + (uint64_t)q * stride + lo : NULL;
            if (r->left.local) {
                TRY(wait_peer_(r, &r->left, t == 0 ? base + 1 : rb + (uint64_t)t));
                if (len)
                    TRY(ring_copy(r, dst, lrecv + (uint64_t)q * lstride + lo, len));
            } else {
                TRY(recv_left_(r, dst, len));
            }
            TRY(ring_publish(r, rb + (uint64_t)t + 1));
            if (!r->right.local)
                TRY(mpi_wait_(r, &sreq, r->right.rank));
        }
    }
    if (r->right.local)
        TRY(wait_peer_(r, &r->right, base + 1 + rounds * steps));
    return 0;
}

int ring_core_broadcast(struct ring_core *r, char *buf, uint64_t bytes, int root_pos)
{
    if (r->broken)
        return VGPU_ECOMM;
    const int n = r->size;
    if (n == 1)
        return 0;
    // A pipelined chain root -> root+1 -> ... -> root-1: slice k moves one
    // hop per step, so the last rank has everything after n-2+rounds steps.
    const int d = mod_(r->pos - root_pos, n); // hops from the root
    const uint64_t base = r->progress;
    const uint64_t slice = r->slice_bytes;
    const uint64_t rounds = bytes ? (bytes + slice - 1) / slice : 1;
    const uint64_t final = base + 1 + rounds;
    TRY(ring_arrive(r, RING_KIND_BROADCAST, NULL, buf, 0));
    if (d == 0)
        TRY(ring_publish(r, final)); // the root holds every slice already
    const char *lbuf = NULL;
    if (d != 0 && r->left.local) {
        TRY(wait_peer_(r, &r->left, base + 1));
        TRY(left_ptr_(r, atomic_load(&r->left.slot->recv_off), bytes, &lbuf));
    }
    const int forwards = d != n - 1; // the last of the chain feeds no one
    for (uint64_t k = 0; k < rounds; k++) {
        const uint64_t lo = k * slice;
        const uint64_t len = bytes - lo < slice ? bytes - lo : slice;
        char *dst = len ? buf + lo : NULL;
        if (d != 0) {
            if (r->left.local) {
                TRY(wait_peer_(r, &r->left, base + 2 + k));
                if (len)
                    TRY(ring_copy(r, dst, lbuf + lo, len));
            } else {
                TRY(recv_left_(r, dst, len));
            }
            TRY(ring_publish(r, base + 2 + k));
        }
        if (forwards && !r->right.local) {
            struct xfer_ sreq = xfer_(r, XFER_SEND_EVEN_);
            TRY(send_right_(r, &sreq, dst, len));
            TRY(mpi_wait_(r, &sreq, r->right.rank));
        }
    }
    if (forwards && r->right.local)
        TRY(wait_peer_(r, &r->right, final));
    return 0;
}

int ring_core_barrier(struct ring_core *r)
{
    // An empty all-reduce: its reduce-scatter chain alone proves that every
    // rank has arrived (rank p's last step needs p-1's, which needs p-2's ...).
    return ring_core_all_reduce(r, NULL, NULL, 0, COMM_FLOAT32, COMM_SUM);
}
