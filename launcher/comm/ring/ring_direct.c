// ring_direct.c: the all-reduce among ranks that are all on one host with
// host windows, straight between their buffers. Every rank maps every
// other's window writable (ring_core.all); rank p reduces its chunk
// (ring_chunk's chunk p) of all n send buffers, in position order, and
// writes the result into all n recv buffers. Two hand-overs a call
// (arrival, and "my chunk is everywhere") instead of the ring's 2(n-1)
// steps a round, and no copy through scratch as in two-shot: the buffers
// are in the windows already.
//
// Why: on a few cores every byte a rank reads that another core wrote last
// (the other's input, or its share of the last result) crosses between the
// cores' caches. The ring in place reads its left's buffer twice a call
// (the input to reduce, then the result to gather); here a rank reads each
// other's input once and writes its chunk of the result into lines it has
// just read. With ranks sharing cores every hand-over costs a context
// switch, and there are two (docs/COLLECTIVES.md: the direct all-reduce).
//
// Safety without more hand-overs: rank p touches only chunk p of any
// buffer (send and recv may be the same buffer, in place, on any rank); it
// writes into another's recv only once every rank has arrived (published
// its buffers for this call), and returns only once every rank has written
// its chunk everywhere, having read all it needs of this rank's send.
// Every rank adds in position order, so all get the same bits, and the
// same as one-shot and two-shot (ring_shot.c).
#include "ring_internal.h"

#include <stdint.h>

#include "log.h"
#include "status.h"

// Reduced through a buffer on the stack this many bytes at a time: in
// place, a rank's own input is also where its result goes, so the sum
// cannot build up there; the copies out read it from the first-level cache.
#define DIRECT_BLOCK_BYTES (16u << 10)

static int usable_(const struct ring_core *r, uint64_t bytes)
{
    (void)bytes; // every size
    return r->all && !r->mem && r->size >= 2;
}

// Waits until every other rank has done `target` steps.
static int wait_all_(struct ring_core *r, uint64_t target)
{
    for (int q = 0; q < r->size; q++)
        if (q != r->pos)
            TRY(ring_wait(r, r->all[q].slot, r->all[q].rank, target));
    return 0;
}

// Position q's send and recv buffers for this call, checked: the same
// collective, the same size, inside its window.
static int buffers_(struct ring_core *r, int q, uint64_t bytes, const char **send, char **recv)
{
    const struct ring_link *l = &r->all[q];
    const uint64_t theirs = atomic_load_explicit(&l->slot->stride, memory_order_relaxed);
    if (theirs != bytes) { // the chunks would not match: fail before touching any
        r->broken = 1;
        if (theirs == RING_LEFT_CALL)
            log_error("ring: rank %d failed in this all-reduce", l->rank);
        else
            log_error("ring: rank %d's all-reduce is %llu bytes and this rank's %llu: the ranks "
                      "must call it with the same count and type",
                      l->rank, (unsigned long long)theirs, (unsigned long long)bytes);
        return VGPU_ECOMM;
    }
    const char *rv;
    TRY(ring_peer_ptr(r, l, atomic_load(&l->slot->send_off), bytes, send));
    TRY(ring_peer_ptr(r, l, atomic_load(&l->slot->recv_off), bytes, &rv));
    *recv = (char *)rv; // mapped writable (usable_)
    return 0;
}

// Whether [p, p + bytes) lies in this rank's own window (the peers check
// it too, but a rank that passed theirs would write into them regardless).
static int own_(const struct ring_core *r, const char *p, uint64_t bytes)
{
    if (!bytes)
        return 1;
    const uintptr_t at = (uintptr_t)p - (uintptr_t)r->win;
    return (uintptr_t)p >= (uintptr_t)r->win && at <= r->win_bytes && bytes <= r->win_bytes - at;
}

// Between the arrival and the end: reads every input, writes every output.
static int exchange_(struct ring_core *r, const char *send, char *recv, uint64_t count,
                     enum comm_dtype t, enum comm_reduce_op op, uint64_t base)
{
    const int n = r->size;
    const uint64_t es = comm_dtype_size(t), bytes = count * es;
    TRY(wait_all_(r, base + 1));
    const char *in[RING_DIRECT_MAX_RANKS];
    char *out[RING_DIRECT_MAX_RANKS];
    for (int q = 0; q < n; q++) {
        if (q == r->pos) {
            in[q] = send;
            out[q] = recv;
        } else {
            TRY(buffers_(r, q, bytes, &in[q], &out[q]));
        }
    }
    uint64_t lo, hi;
    ring_chunk(count, n, r->pos, &lo, &hi);
    const int avg_div = op == COMM_AVG ? n : 0;
    const uint64_t block = DIRECT_BLOCK_BYTES / es;
    _Alignas(64) char sum[DIRECT_BLOCK_BYTES];
    for (uint64_t at = lo; at < hi; at += block) {
        const uint64_t len = hi - at < block ? hi - at : block, off = at * es;
        TRY(ring_reduce(r, t, op, sum, in[0] + off, in[1] + off, len, n == 2 ? avg_div : 0));
        for (int q = 2; q < n; q++)
            TRY(ring_reduce(r, t, op, sum, sum, in[q] + off, len, q == n - 1 ? avg_div : 0));
        for (int q = 0; q < n; q++)
            TRY(ring_copy(r, out[q] + off, sum, len * es));
    }
    TRY(ring_publish(r, base + 2));
    return wait_all_(r, base + 2);
}

static int direct_all_reduce_(struct ring_core *r, const char *send, char *recv,
                              uint64_t count, enum comm_dtype t, enum comm_reduce_op op)
{
    if (r->broken)
        return VGPU_ECOMM;
    const uint64_t bytes = count * comm_dtype_size(t), base = r->progress;
    if (r->size > RING_DIRECT_MAX_RANKS || !own_(r, send, bytes) || !own_(r, recv, bytes)) {
        r->broken = 1; // comm_ring.c gives r->all to no more ranks; buffers are in the window
        log_error("ring: direct all-reduce of %d ranks, %llu bytes: a buffer outside this "
                  "rank's %llu-byte window, or more than %d ranks",
                  r->size, (unsigned long long)bytes, (unsigned long long)r->win_bytes,
                  RING_DIRECT_MAX_RANKS);
        return VGPU_EINVAL;
    }
    TRY(ring_arrive(r, RING_KIND_ALL_REDUCE, send, recv, bytes));
    const int rc = exchange_(r, send, recv, count, t, op, base);
    if (rc < 0) // a peer still checking must not write into this rank's buffers now
        atomic_store_explicit(&r->me->stride, RING_LEFT_CALL, memory_order_release);
    return rc;
}

// Forced, it carries every size where every window is mapped.
const struct ring_algo_desc ring_direct_algo = {.all_reduce = direct_all_reduce_,
                                                .usable = usable_,
                                                .forced_max_bytes = UINT64_MAX,
                                                .all_windows = 1};
