// vnccl_coll.c: the collectives through the shared segment.
//
// A collective goes in chunks that fit a rank's stage. Each chunk:
//   1. every rank copies its part of the input into its own stage;
//   2. barrier (the first chunk's also compares every rank's description of
//      the call, so a mismatch fails on every rank before any output is written);
//   3. every rank reads what it needs out of the stages: a reduction adds the
//      ranks in rank order (the same bits on every rank and in every
//      reducing collective), an all-reduce's ranks each reduce a part into
//      the shared result area;
//   4. barrier (every stage has been read, so it may be written again);
//      the all-reduce's ranks then copy the whole result out.
// The next chunk's first barrier is what keeps the result area from being
// written while a rank still copies it out.
//
// Point-to-point goes through channels: each ordered pair of ranks has a
// slice of the sender's p2p area; the sender writes a chunk when the
// receiver has taken the last. A group's sends and receives advance together
// in one loop, so a ring of exchanges inside a group cannot deadlock.
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"
#include "vnccl.h"

static const char *const kind_names_[VNCCL_KIND_COUNT] = {
    "ncclAllReduce", "ncclReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast",
    "ncclAlltoAll",  "ncclGather", "ncclScatter",       "ncclSend",      "ncclRecv"};

const char *vnccl_kind_name(enum vnccl_kind k) { return kind_names_[k]; }

static char *stage_(struct ncclComm *c, int r) { return c->stage + (uint64_t)r * c->head->stage_bytes; }

static ncclResult_t barrier_(struct ncclComm *c, const char *what)
{
    c->step++;
    shm_flag_publish(&c->slots[c->rank].step, c->step);
    for (int r = 0; r < c->nranks; r++) {
        if (r == c->rank)
            continue;
        ncclResult_t st = vnccl_wait(c, &c->slots[r].step, c->step, r, what);
        if (st != ncclSuccess)
            return st;
    }
    return ncclSuccess;
}

static ncclResult_t copy_(struct ncclComm *c, void *dst, const void *src, size_t bytes,
                          cudaStream_t stream, const char *what)
{
    char err[256];
    ncclResult_t st = vnccl_copy(dst, src, bytes, stream, err, sizeof err);
    if (st != ncclSuccess) {
        vnccl_fail(c, ncclRemoteError, "rank %d failed in %s: %s", c->rank, what, err);
        atomic_store(&c->async_error, (int)st); // the peers' error is remote, this rank's its own
        return vnccl_error(c, st, "%s: %s", what, err);
    }
    return ncclSuccess;
}

// Every rank's description against rank 0's; the same verdict on every rank.
static ncclResult_t check_descs_(struct ncclComm *c, const char *what)
{
    const struct vnccl_desc *d0 = &c->slots[0].desc;
    for (int r = 1; r < c->nranks; r++) {
        const struct vnccl_desc *d = &c->slots[r].desc;
        if (d->kind == d0->kind && d->dtype == d0->dtype && d->op == d0->op &&
            d->root == d0->root && d->count == d0->count && d->seq == d0->seq)
            continue;
        vnccl_fail(c, ncclInvalidUsage,
                   "collective %llu differs between ranks: rank %d called %s(count %llu, %s, %s, "
                   "root %d), rank 0 %s(count %llu, %s, %s, root %d)",
                   (unsigned long long)d0->seq, r, kind_names_[d->kind % VNCCL_KIND_COUNT],
                   (unsigned long long)d->count, vnccl_type_name(d->dtype),
                   vnccl_op_name(d->op), d->root, kind_names_[d0->kind % VNCCL_KIND_COUNT],
                   (unsigned long long)d0->count, vnccl_type_name(d0->dtype),
                   vnccl_op_name(d0->op), d0->root);
        return vnccl_error(c, ncclInvalidUsage, "%s: %s", what, c->head->why);
    }
    return ncclSuccess;
}

// Elements of a chunk (per block for the collectives that stage a block a rank).
static size_t chunk_elems_(const struct ncclComm *c, const struct vnccl_call *k, size_t esz)
{
    size_t per = c->head->stage_bytes / esz;
    if (k->kind == VNCCL_REDUCE_SCATTER || k->kind == VNCCL_ALL_TO_ALL || k->kind == VNCCL_SCATTER)
        per /= (size_t)c->nranks;
    return per;
}

struct chunk {
    size_t off, n, esz;          // elements from the start of each block; element size
    const unsigned char *scalar; // premultiplied sum: this rank's scalar, else NULL
};

#define AT_(p, elems) ((char *)(p) + (elems) * ch->esz)

static ncclResult_t stage_in_(struct ncclComm *c, const struct vnccl_call *k, const struct chunk *ch)
{
    const char *what = kind_names_[k->kind];
    char *mine = stage_(c, c->rank);
    const int N = c->nranks, me = c->rank;
    switch (k->kind) {
    case VNCCL_ALL_REDUCE: case VNCCL_REDUCE: case VNCCL_ALL_GATHER: case VNCCL_GATHER:
        return copy_(c, mine, AT_(k->send, ch->off), ch->n * ch->esz, k->stream, what);
    case VNCCL_BROADCAST:
        return me == k->root ? copy_(c, mine, AT_(k->send, ch->off), ch->n * ch->esz, k->stream, what)
                             : ncclSuccess;
    case VNCCL_SCATTER:
        if (me != k->root)
            return ncclSuccess;
        /* fall through */
    case VNCCL_REDUCE_SCATTER: case VNCCL_ALL_TO_ALL:
        for (int b = 0; b < N; b++) {
            ncclResult_t st = copy_(c, AT_(mine, (size_t)b * ch->n),
                                    AT_(k->send, (size_t)b * k->count + ch->off), ch->n * ch->esz,
                                    k->stream, what);
            if (st != ncclSuccess)
                return st;
        }
        return ncclSuccess;
    default:
        return ncclInternalError;
    }
}

// acc = stage(0)[at..] op ... op stage(N-1)[at..], n elements, rank order.
static void reduce_ranks_(struct ncclComm *c, const struct vnccl_call *k, void *acc, size_t at,
                          size_t n, size_t esz)
{
    const int N = c->nranks;
    memcpy(acc, stage_(c, 0) + at * esz, n * esz);
    const int avg = k->op == ncclAvg && vnccl_avg_divides(k->dtype); // floats: premultiplied
    for (int r = 1; r < N; r++)
        vnccl_reduce(acc, stage_(c, r) + at * esz, n, k->dtype, k->op, avg && r == N - 1 ? N : 0);
}

static ncclResult_t read_out_(struct ncclComm *c, const struct vnccl_call *k, const struct chunk *ch)
{
    const char *what = kind_names_[k->kind];
    const int N = c->nranks, me = c->rank;
    const size_t n = ch->n, bytes = n * ch->esz;
    ncclResult_t st = ncclSuccess;
    switch (k->kind) {
    case VNCCL_ALL_REDUCE: case VNCCL_REDUCE: { // my part of the chunk into the result area
        const size_t lo = n * (size_t)me / (size_t)N, hi = n * (size_t)(me + 1) / (size_t)N;
        reduce_ranks_(c, k, c->result + lo * ch->esz, lo, hi - lo, ch->esz);
        return ncclSuccess;
    }
    case VNCCL_REDUCE_SCATTER: {
        char *acc = c->result + (size_t)me * bytes;
        reduce_ranks_(c, k, acc, (size_t)me * n, n, ch->esz);
        return copy_(c, AT_(k->recv, ch->off), acc, bytes, k->stream, what);
    }
    case VNCCL_ALL_GATHER: case VNCCL_GATHER:
        if (k->kind == VNCCL_GATHER && me != k->root)
            return ncclSuccess;
        for (int r = 0; r < N && st == ncclSuccess; r++)
            st = copy_(c, AT_(k->recv, (size_t)r * k->count + ch->off), stage_(c, r), bytes,
                       k->stream, what);
        return st;
    case VNCCL_BROADCAST:
        return copy_(c, AT_(k->recv, ch->off), stage_(c, k->root), bytes, k->stream, what);
    case VNCCL_ALL_TO_ALL:
        for (int r = 0; r < N && st == ncclSuccess; r++)
            st = copy_(c, AT_(k->recv, (size_t)r * k->count + ch->off),
                       AT_(stage_(c, r), (size_t)me * n), bytes, k->stream, what);
        return st;
    case VNCCL_SCATTER:
        return copy_(c, AT_(k->recv, ch->off), AT_(stage_(c, k->root), (size_t)me * n), bytes,
                     k->stream, what);
    default:
        return ncclInternalError;
    }
}

// Premultiplied sums scale this rank's staged input by its scalar, and so
// does a floating type's average, by 1/nranks (NCCL's).
static void premultiply_(struct ncclComm *c, const struct vnccl_call *k, const struct chunk *ch)
{
    const int avg = k->op == ncclAvg && !vnccl_avg_divides(k->dtype);
    if (!ch->scalar && !avg)
        return;
    size_t n = ch->n;
    if (k->kind == VNCCL_REDUCE_SCATTER)
        n *= (size_t)c->nranks;
    if (avg)
        vnccl_scale_avg(stage_(c, c->rank), n, k->dtype, c->nranks);
    else
        vnccl_scale(stage_(c, c->rank), n, k->dtype, ch->scalar);
}

static ncclResult_t premul_scalar_(struct ncclComm *c, const struct vnccl_call *k,
                                   unsigned char *out, const unsigned char **scalar)
{
    *scalar = NULL;
    if ((int)k->op < ncclNumOps)
        return ncclSuccess;
    const struct vnccl_premul *p = &c->premul[k->op - ncclNumOps];
    const size_t esz = vnccl_type_size(k->dtype);
    if (p->residence == ncclScalarHostImmediate)
        memcpy(out, p->value, esz);
    else if (copy_(c, out, p->device_ptr, esz, k->stream, "a premultiplied sum's scalar"))
        return ncclUnhandledCudaError;
    *scalar = out;
    return ncclSuccess;
}

static void record_(struct ncclComm *c, double bytes, double seconds)
{
    c->stat_n += 1;
    c->stat_x += bytes;
    c->stat_y += seconds;
    c->stat_xx += bytes * bytes;
    c->stat_xy += bytes * seconds;
}

ncclResult_t vnccl_collective(struct ncclComm *c, const struct vnccl_call *k)
{
    ncclResult_t on_device;
    if (vnccl_devcoll_call(c, k, &on_device))
        return on_device;
    const char *what = kind_names_[k->kind];
    const double start_s = util_now_s();
    const size_t esz = vnccl_type_size(k->dtype), cap = chunk_elems_(c, k, esz);
    struct vnccl_desc *d = &c->slots[c->rank].desc;
    *d = (struct vnccl_desc){.kind = (uint32_t)k->kind, .dtype = (uint32_t)k->dtype,
                             .op = (int)k->op < ncclNumOps ? (uint32_t)k->op : ncclNumOps,
                             .root = k->root, .count = k->count, .seq = c->seq++};
    unsigned char scalar[8];
    struct chunk ch = {.esz = esz};
    ncclResult_t st = premul_scalar_(c, k, scalar, &ch.scalar);
    const size_t chunks = k->count ? (k->count + cap - 1) / cap : 1;
    for (size_t i = 0; i < chunks && st == ncclSuccess; i++) {
        ch.off = i * cap;
        ch.n = k->count - ch.off < cap ? k->count - ch.off : cap;
        if (k->count == 0)
            ch.n = 0;
        st = stage_in_(c, k, &ch);
        if (st != ncclSuccess)
            break;
        premultiply_(c, k, &ch);
        st = barrier_(c, what);
        if (st == ncclSuccess && i == 0)
            st = check_descs_(c, what);
        if (st == ncclSuccess)
            st = read_out_(c, k, &ch);
        if (st == ncclSuccess)
            st = barrier_(c, what);
        int copies_result = k->kind == VNCCL_ALL_REDUCE ||
                            (k->kind == VNCCL_REDUCE && c->rank == k->root);
        if (st == ncclSuccess && copies_result)
            st = copy_(c, (char *)k->recv + ch.off * esz, c->result, ch.n * esz, k->stream, what);
    }
    if (st == ncclSuccess)
        record_(c, (double)k->count * (double)esz, util_now_s() - start_s);
    return st;
}

// ---- point-to-point ----

struct p2p_state {
    size_t bytes, done;
    int started;
};

static struct vnccl_chan *chan_(struct ncclComm *c, int from, int to)
{
    return &c->chans[(size_t)from * (size_t)c->nranks + (size_t)to];
}

static size_t slice_bytes_(const struct ncclComm *c)
{
    return (c->head->stage_bytes / (uint64_t)c->nranks) & ~(uint64_t)63;
}

static char *slice_(struct ncclComm *c, int from, int to)
{
    return c->p2p + (uint64_t)from * c->head->stage_bytes + (uint64_t)to * slice_bytes_(c);
}

// One step of a send; returns 1 when it moved data, 0 when it must wait, <0 on failure.
static int send_step_(struct ncclComm *c, const struct vnccl_call *k, struct p2p_state *s)
{
    struct vnccl_chan *ch = chan_(c, c->rank, k->root);
    uint64_t *sent = &c->p2p_sent[k->root];
    if (shm_flag_read(&ch->taken) != *sent)
        return 0; // the receiver has not taken the last chunk
    if (!s->started) {
        atomic_store(&ch->msg_len, s->bytes);
        atomic_store(&ch->msg_at, *sent);
        s->started = 1;
    }
    size_t n = s->bytes - s->done < slice_bytes_(c) ? s->bytes - s->done : slice_bytes_(c);
    if (copy_(c, slice_(c, c->rank, k->root), (const char *)k->send + s->done, n, k->stream,
              "ncclSend"))
        return -1;
    s->done += n;
    *sent += n;
    shm_flag_publish(&ch->sent, *sent);
    return 1;
}

static int recv_step_(struct ncclComm *c, const struct vnccl_call *k, struct p2p_state *s)
{
    struct vnccl_chan *ch = chan_(c, k->root, c->rank);
    uint64_t *taken = &c->p2p_taken[k->root];
    uint64_t sent = shm_flag_read(&ch->sent);
    if (sent == *taken)
        return 0;
    if (!s->started) {
        uint64_t len = atomic_load(&ch->msg_len);
        if (atomic_load(&ch->msg_at) != *taken || len != s->bytes) {
            vnccl_fail(c, ncclInvalidUsage,
                       "rank %d sent %llu bytes to rank %d, which receives %zu (ncclSend and "
                       "ncclRecv counts and types must match)",
                       k->root, (unsigned long long)len, c->rank, s->bytes);
            return -1;
        }
        s->started = 1;
    }
    size_t n = (size_t)(sent - *taken);
    if (copy_(c, (char *)k->recv + s->done, slice_(c, k->root, c->rank), n, k->stream, "ncclRecv"))
        return -1;
    s->done += n;
    *taken += n;
    shm_flag_publish(&ch->taken, *taken);
    return 1;
}

// Nothing moved: a bounded, polite wait (a pause, then the core given away);
// every ~50 ms the processes of the peers still owed data, and the bound.
static void p2p_idle_(struct ncclComm *c, const struct vnccl_call *calls,
                      const struct p2p_state *s, int n, struct util_wait_clock *clock,
                      unsigned *idle)
{
    ++*idle;
    if (*idle < 1000)
        return;
    if (*idle < 3000) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
    if (*idle % 1000)
        return;
    int late = -1;
    for (int i = 0; i < n; i++)
        if (s[i].done < s[i].bytes) {
            late = calls[i].root;
            if (vnccl_watch(c, late, "send/recv") >= 0)
                return;
        }
    if (util_wait_clock_waited(clock) > c->timeout_s)
        vnccl_fail(c, ncclSystemError,
                   "rank %d did not take part within %.0f s (VGPU_COMM_TIMEOUT_S) in send/recv",
                   late, c->timeout_s);
}

// Messages between two ranks go in the order posted: call i waits while an
// earlier send (receive) to (from) the same peer is unfinished.
static int first_to_peer_(const struct vnccl_call *calls, const struct p2p_state *s, int i)
{
    for (int j = 0; j < i; j++)
        if (calls[j].kind == calls[i].kind && calls[j].root == calls[i].root &&
            s[j].done < s[j].bytes)
            return 0;
    return 1;
}

ncclResult_t vnccl_p2p(struct ncclComm *c, const struct vnccl_call *calls, int n)
{
    struct p2p_state *s = calloc((size_t)n, sizeof *s);
    if (!s)
        return vnccl_error(c, ncclSystemError, "out of host memory");
    int left = 0;
    for (int i = 0; i < n; i++) {
        s[i].bytes = calls[i].count * vnccl_type_size(calls[i].dtype);
        left += s[i].bytes > 0;
    }
    struct util_wait_clock clock;
    util_wait_clock_start(&clock);
    unsigned idle = 0;
    int failed = 0;
    while (left > 0 && !failed) {
        int moved = 0;
        for (int i = 0; i < n && !failed; i++) {
            if (s[i].done == s[i].bytes || !first_to_peer_(calls, s, i))
                continue;
            int r = calls[i].kind == VNCCL_SEND ? send_step_(c, &calls[i], &s[i])
                                                : recv_step_(c, &calls[i], &s[i]);
            failed = r < 0;
            moved += r > 0;
            if (r > 0 && s[i].done == s[i].bytes)
                left--;
        }
        failed |= atomic_load(&c->head->failed) != 0;
        if (!failed && !moved) {
            p2p_idle_(c, calls, s, n, &clock, &idle);
        } else if (moved) {
            idle = 0;
            util_wait_clock_start(&clock);
        }
    }
    free(s);
    if (!failed)
        return ncclSuccess;
    ncclResult_t st = (ncclResult_t)atomic_load(&c->async_error); // this rank's own failure
    if (st == ncclSuccess || st == ncclInProgress)
        st = (ncclResult_t)atomic_load(&c->head->fail_status);
    atomic_store(&c->async_error, (int)st);
    return vnccl_error(c, st, "send/recv: %s", c->head->why);
}

ncclResult_t vnccl_host_all_gather(struct ncclComm *c, const void *mine, void *out, size_t bytes)
{
    memcpy(stage_(c, c->rank), mine, bytes);
    ncclResult_t st = barrier_(c, "ncclCommSplit");
    if (st != ncclSuccess)
        return st;
    for (int r = 0; r < c->nranks; r++)
        memcpy((char *)out + (size_t)r * bytes, stage_(c, r), bytes);
    return barrier_(c, "ncclCommSplit");
}

double vnccl_estimate_s(const struct ncclComm *c, const struct vnccl_call *k)
{
    if (!c || c->stat_n < 1)
        return 0;
    const double n = c->stat_n, bytes = (double)k->count * (double)vnccl_type_size(k->dtype);
    const double var = n * c->stat_xx - c->stat_x * c->stat_x;
    double beta = var > 0 ? (n * c->stat_xy - c->stat_x * c->stat_y) / var : 0;
    if (beta < 0)
        beta = 0;
    double alpha = (c->stat_y - beta * c->stat_x) / n;
    if (alpha < 0)
        alpha = 0;
    return alpha + beta * bytes;
}
