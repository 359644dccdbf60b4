// ring_shot.c: the ring backend's latency path, the one-shot and two-shot
// all-reduce among ranks of one host, through scratch buffers in the host's
// control segment (ring_internal.h's struct ring_shot). Which sizes they
// carry is ring_algo.c's table.
//
// One-shot: copy the input into my scratch, announce it (one step), wait
// until every rank has announced, then reduce all n inputs, in position
// order, into recv. One hand-over a call instead of the ring's 2(n-1).
// Two-shot: the same arrival; then each rank reduces only its chunk
// (ring_chunk) of every input, in the same order, into its scratch's output
// area and announces that (a second step); then every rank copies all the
// chunks into recv. Two hand-overs, and each rank reads 2x its data instead
// of n x. Both add the inputs in position order, so every rank, and either
// algorithm, gives the same bits.
//
// Why two buffers a rank suffice, with no wait at the end of a call: a rank
// writes buffer (s mod 2) at its s-th call here, which peers last read at
// their call s-2. Before writing, the rank finished call s-1, where it
// waited for every rank to arrive at s-1, and each arrived there only after
// finishing s-2.
#include "ring_internal.h"

#include <string.h>

#include "log.h"
#include "status.h"

// The head of a scratch buffer: what its owner's collective is, so that a
// reader meeting another collective fails instead of reading the wrong data.
struct shot_header {
    uint64_t tag;   // the collective: its number << 2 | enum ring_kind
    uint64_t bytes; // its size, bytes
};
#define SHOT_HEADER_BYTES 128 // the inputs start on their own cache lines

static uint64_t align_(uint64_t v) { return (v + 127) & ~(uint64_t)127; }

// A chunk of n holds at most count/n + 16 elements (ring_chunk), of 8 bytes at most.
static uint64_t out_bytes_(uint64_t cap_bytes, int n) { return align_(cap_bytes / n + 128); }

uint64_t ring_shot_stride(uint64_t cap_bytes, int n)
{
    return 2 * (SHOT_HEADER_BYTES + align_(cap_bytes) + out_bytes_(cap_bytes, n));
}

// Position q's buffer for the current call.
static char *buf_(const struct ring_shot *s, int q)
{
    return s->scratch + (uint64_t)q * s->stride + (s->calls & 1) * s->buf_bytes;
}

static const char *input_(const struct ring_shot *s, int q) { return buf_(s, q) + SHOT_HEADER_BYTES; }

static char *output_(const struct ring_shot *s, int q)
{
    return buf_(s, q) + SHOT_HEADER_BYTES + align_(s->cap_bytes);
}

// Waits until every other rank has done `target` steps; at the arrival
// (check set), that its buffer holds this very collective.
static int wait_all_(struct ring_core *r, uint64_t target, const struct shot_header *check)
{
    const struct ring_shot *s = r->shot;
    for (int q = 0; q < r->size; q++) {
        if (q == r->pos)
            continue;
        TRY(ring_wait(r, &s->slot[q], r->order[q], target));
        struct shot_header h;
        memcpy(&h, buf_(s, q), sizeof h);
        if (check && (h.tag != check->tag || h.bytes != check->bytes)) {
            r->broken = 1;
            log_error("ring: rank %d is in collective #%llu (kind %d, %llu bytes) while this "
                      "rank is in #%llu (kind %d, %llu bytes): the ranks did not call the same "
                      "collectives in the same order with the same sizes",
                      r->order[q], (unsigned long long)(h.tag >> 2), (int)(h.tag & 3),
                      (unsigned long long)h.bytes, (unsigned long long)(check->tag >> 2),
                      (int)(check->tag & 3), (unsigned long long)check->bytes);
            return VGPU_ECOMM;
        }
    }
    return 0;
}

// dst[0, len) = input_0 op input_1 op ... op input_{n-1} at element lo, in
// position order (the same bits on every rank), / n at the end for avg.
static int reduce_inputs_(struct ring_core *r, enum comm_dtype t, enum comm_reduce_op op,
                          char *dst, uint64_t lo, uint64_t len)
{
    const struct ring_shot *s = r->shot;
    const int n = r->size, avg_div = op == COMM_AVG ? n : 0;
    const uint64_t at = lo * comm_dtype_size(t);
    TRY(ring_reduce(r, t, op, dst, input_(s, 0) + at, input_(s, 1) + at, len,
                    n == 2 ? avg_div : 0));
    for (int q = 2; q < n; q++)
        TRY(ring_reduce(r, t, op, dst, dst, input_(s, q) + at, len, q == n - 1 ? avg_div : 0));
    return 0;
}

static int usable_(const struct ring_core *r, uint64_t bytes)
{
    const struct ring_shot *s = r->shot;
    // Scratch is host memory: device windows keep the ring.
    return s && s->cap_bytes && !r->mem && r->size >= 2 && bytes <= s->cap_bytes;
}

// Either algorithm (two: two-shot).
static int shot_all_reduce_(struct ring_core *r, int two, const char *send, char *recv,
                            uint64_t count, enum comm_dtype t, enum comm_reduce_op op)
{
    if (r->broken)
        return VGPU_ECOMM;
    struct ring_shot *s = r->shot;
    const int n = r->size, p = r->pos;
    const uint64_t es = comm_dtype_size(t), bytes = count * es, base = r->progress;

    // Arrival: my input and what it is, then one step.
    r->calls++;
    const struct shot_header mine = {r->calls << 2 | RING_KIND_ALL_REDUCE, bytes};
    atomic_store_explicit(&r->me->calls, mine.tag, memory_order_relaxed);
    atomic_store_explicit(&r->me->stride, bytes, memory_order_relaxed); // for ring_direct.c
    memcpy(buf_(s, p), &mine, sizeof mine);
    if (bytes)
        TRY(ring_copy(r, buf_(s, p) + SHOT_HEADER_BYTES, send, bytes));
    TRY(ring_publish(r, base + 1));
    TRY(wait_all_(r, base + 1, &mine));

    if (!two) {
        if (count)
            TRY(reduce_inputs_(r, t, op, recv, 0, count));
    } else {
        uint64_t lo, hi;
        ring_chunk(count, n, p, &lo, &hi);
        if (hi > lo)
            TRY(reduce_inputs_(r, t, op, output_(s, p), lo, hi - lo));
        TRY(ring_publish(r, base + 2));
        TRY(wait_all_(r, base + 2, NULL));
        for (int q = 0; q < n; q++) {
            ring_chunk(count, n, q, &lo, &hi);
            if (hi > lo)
                TRY(ring_copy(r, recv + lo * es, output_(s, q), (hi - lo) * es));
        }
    }
    s->calls++;
    return 0;
}

static int one_shot_(struct ring_core *r, const char *send, char *recv, uint64_t count,
                     enum comm_dtype t, enum comm_reduce_op op)
{
    return shot_all_reduce_(r, 0, send, recv, count, t, op);
}

static int two_shot_(struct ring_core *r, const char *send, char *recv, uint64_t count,
                     enum comm_dtype t, enum comm_reduce_op op)
{
    return shot_all_reduce_(r, 1, send, recv, count, t, op);
}

// Forced, either carries up to the scratch each rank then commits, 4 MiB;
// two-shot leaves a barrier (0 bytes: nothing to split) to one-shot.
const struct ring_algo_desc ring_one_shot_algo = {
    .all_reduce = one_shot_, .usable = usable_, .forced_max_bytes = 4u << 20, .scratch = 1};
const struct ring_algo_desc ring_two_shot_algo = {
    .all_reduce = two_shot_, .usable = usable_, .forced_max_bytes = 4u << 20,
    .forced_min_bytes = 1, .scratch = 1};
