// ring_direct.c: the all-reduce of two ranks on one host with host windows,
// straight between their buffers. Each rank maps the other's window
// writable; rank p reduces its half (the chunk the ring would give it,
// mine op theirs, so the bits are the ring's) out of both send buffers and
// writes the sum into both recv buffers. One hand-over (arrival) and one
// wait for the other's half, instead of the ring's two steps a round.
//
// Why it exists: on two cores, every byte that the other rank wrote last
// (its input, or the other half of its previous result) crosses between
// the cores' caches when read. The ring in place reads the other's buffer
// twice a call (its input for the reduction, its result for the
// all-gather); here a rank reads only the other's input, and writes lines
// it has just read, so its half of the other's result is already where it
// is written (docs/COLLECTIVES.md, "Two ranks on one host").
//
// Safety without more hand-overs: the two ranks touch disjoint halves of
// each buffer (send and recv may be the same buffer, in place, on either
// rank); a rank writes into the other's recv only after the other has
// arrived (published its buffers for this call), and returns only once the
// other has written its half into this rank's recv, having read all it
// needs of this rank's send.
#include "ring_internal.h"

#include "log.h"
#include "status.h"

// Reduced, then copied, this many bytes at a time: the copy reads what the
// reduction just wrote while it is still in the first-level cache.
#define DIRECT_BLOCK_BYTES (16u << 10)

int ring_direct_usable(const struct ring_core *r)
{
    return r->size == 2 && r->left.local && r->left.writable && !r->mem;
}

int ring_direct_all_reduce(struct ring_core *r, const char *send, char *recv, uint64_t count,
                           enum comm_dtype t, enum comm_reduce_op op)
{
    if (r->broken)
        return VGPU_ECOMM;
    const uint64_t es = comm_dtype_size(t), bytes = count * es, base = r->progress;
    struct ring_link *peer = &r->left; // for two ranks, also the right
    r->calls++;
    atomic_store_explicit(&r->me->calls, r->calls << 2 | RING_KIND_ALL_REDUCE,
                          memory_order_relaxed);
    atomic_store_explicit(&r->me->send_off, send ? (uint64_t)(send - r->win) : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&r->me->recv_off, recv ? (uint64_t)(recv - r->win) : 0,
                          memory_order_relaxed);
    atomic_store_explicit(&r->me->stride, bytes, memory_order_relaxed);
    TRY(ring_publish(r, base + 1));
    TRY(ring_wait(r, peer->slot, peer->rank, base + 1));

    const char *psend, *pr;
    TRY(ring_left_ptr(r, atomic_load(&peer->slot->send_off), bytes, &psend));
    TRY(ring_left_ptr(r, atomic_load(&peer->slot->recv_off), bytes, &pr));
    const uint64_t theirs = atomic_load_explicit(&peer->slot->stride, memory_order_relaxed);
    if (theirs != bytes) { // the halves would overlap: fail before touching either
        r->broken = 1;
        log_error("ring: rank %d's all-reduce is %llu bytes and this rank's %llu: the ranks "
                  "must call it with the same count and type",
                  peer->rank, (unsigned long long)theirs, (unsigned long long)bytes);
        return VGPU_ECOMM;
    }
    char *precv = (char *)pr; // mapped writable (ring_direct_usable)
    uint64_t lo, hi;
    ring_chunk(count, 2, 1 - r->pos, &lo, &hi); // the ring's chunk for this position
    const int avg_div = op == COMM_AVG ? 2 : 0;
    const uint64_t block = DIRECT_BLOCK_BYTES / es;
    for (uint64_t at = lo; at < hi; at += block) {
        const uint64_t len = hi - at < block ? hi - at : block;
        TRY(ring_reduce(r, t, op, recv + at * es, send + at * es, psend + at * es, len, avg_div));
        TRY(ring_copy(r, precv + at * es, recv + at * es, len * es));
    }
    TRY(ring_publish(r, base + 2));
    return ring_wait(r, peer->slot, peer->rank, base + 2);
}
