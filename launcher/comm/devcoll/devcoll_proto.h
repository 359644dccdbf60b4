// devcoll_proto.h: the device collectives' protocol, written once for both
// sides: nvcc compiles it into the CUDA kernel (devcoll_cuda.cu), the C
// compiler into the simulated device (devcoll_sim.c), so the CPU tests run
// the GPU's schedule, flags and arithmetic. Nothing here allocates, launches
// or knows a process; devcoll.c does that.
//
// Every rank has a window (one device allocation, opened once by every
// peer): a head of mailboxes, then four data areas (in and out, each twice,
// used by round parity). A collective is cut into rounds of at most one data
// area; a round is a copy of this rank's input into its own window, a
// barrier, and reads of every window (twice for the two-shot all-reduce).
//
// Threads. A call runs as `blocks` blocks of `lanes` threads (the simulated
// device: one lane). Unit k of a round (bytes [16k, 16k + 16) of the area it
// concerns) is always handled by global thread k mod (blocks * lanes), in
// every phase and on every rank, so the data a block reads was written by
// the same block number of its owner; a barrier is therefore per block:
// block b of this rank waits only for block b of each peer.
//
// Barriers. Peer p's block b says it has passed barrier id by storing id
// (release, system scope) into mailbox [b][p] of every window; a waiter
// reads its own window's mailboxes (acquire). Ids grow with every round, so
// a mailbox is never reset. The first barrier of a round also carries the
// caller's call descriptor (kind, type, operation, root, count): a rank
// whose call differs from a peer's fails there, before it writes anything a
// peer or its caller can see.
//
// Double buffering. A rank writes area parity j mod 2 in round j; the peers
// last read it in round j - 2, and before writing it the rank passed round
// j - 1's first barrier, which each peer reached only after finishing round
// j - 2. So no round ends with a barrier.
//
// Failure. A wait gives up when the host sets `abort` in the status (its
// watchdog found a peer's process gone, or the communicator is aborted),
// when the status already holds an error, or after timeout_ns; the block
// then stores DC_POISON into its mailboxes' `failed` at every peer, whose waits fail
// at once, and the first error (kind, rank concerned, call) stays in the
// status (through the window's fault word). Every later call fails at its
// first barrier.
//
// Point-to-point. A message goes from S to R as one call on each (DC_SEND,
// DC_RECV) and touches only their windows: S copies it, one area a piece,
// into its own two areas of the parity its next round would write (no peer
// reads those before S's next collective: see Double buffering) and says
// so in R's window (`sent`, with the size and parity in `sent_desc`); R
// copies each piece out and says so in S's window (`taken`). A piece's
// mark grows with every message between the two (their count, `msg`), so
// these mailboxes are never reset either; S refills an area only once R
// took the piece before, and its call ends only once R took the last, so
// the areas are free again for S's next call. Units belong to the same
// threads on both sides: block b waits only for the peer's block b. The
// rounds' count does not move.
#ifndef VGPU_DEVCOLL_PROTO_H
#define VGPU_DEVCOLL_PROTO_H

#include <stdint.h>

#include "kernels.h"

#ifdef __CUDACC__
#define DC_FN static __device__ __forceinline__
#else
#include <sched.h>
#include <string.h>
#include <time.h>
#define DC_FN static inline
#endif

#define DC_MAX_RANKS 16
#define DC_MAX_BLOCKS 32
#define DC_UNIT 16                // bytes a thread handles at a time
// A mailbox's `failed` once its writer gave up: DC_POISON + its fault word
// (the error, DC_FAULT_P2P if a send or recv met it, and 1 + the rank it
// names, << 8), so that calls that differ fail as such on every rank,
// naming the same rank, even one that sees a peer's poison before it
// compares the descriptors itself.
#define DC_POISON 0xdead000000000000ull
#define DC_HEAD_BYTES 32768       // the head, rounded up (data areas stay aligned)
#define DC_MAX_COUNT (1ull << 44) // elements a descriptor can carry
// The status's `call` for a point-to-point call: this bit, and the rounds
// run before it.
#define DC_P2P_CALL (1ull << 63)
#define DC_FAULT_P2P 0x80u // in a fault word: the error came from a send or recv

// What a call is (the descriptor's kind).
enum dc_kind {
    DC_ALL_REDUCE_ONE, // every rank reduces all inputs: one barrier
    DC_ALL_REDUCE_TWO, // rank q reduces chunk q, then everyone gathers: two
    DC_REDUCE_SCATTER,
    DC_ALL_GATHER,
    DC_BROADCAST,
    DC_REDUCE,
    DC_MARK, // no data: a barrier whose descriptor names a call made elsewhere
    DC_SEND, // point-to-point: only this rank and `peer` take part
    DC_RECV,
    DC_KINDS
};

// Element types, comm.h's enum comm_dtype's numbers (devcoll.c checks), and
// bytes, which only the collectives that move data take.
enum { DC_F32, DC_F64, DC_I32, DC_I64, DC_F16, DC_BF16, DC_BYTE, DC_TYPES };

// What the status says went wrong (0: nothing).
enum dc_error { DC_OK, DC_ERR_TIMEOUT, DC_ERR_LEFT, DC_ERR_MISMATCH, DC_ERR_ABORT };

// One mailbox: peer p's block b writes [b][p] of this window.
struct dc_mailbox {
    uint64_t passed;  // the last barrier id it passed (only grows)
    uint64_t desc[2]; // its call descriptor at the first barrier of a round, by parity
    uint64_t failed;  // DC_POISON once it gave up: in a word of its own, so that a
                      // barrier it passed before stays passed for a slow reader
    uint64_t sent;      // point-to-point: the mark of the last piece it put out for this rank
    uint64_t sent_desc; // that message's bytes << 1 | the parity of the areas holding it
    uint64_t taken;     // the mark of the last piece it took from this rank
};

struct dc_head {
    struct dc_mailbox box[DC_MAX_BLOCKS][DC_MAX_RANKS];
    // This rank's first error and 1 + the rank it names (<< 8), decided
    // here in device memory (an atomic on mapped host memory is not one
    // over PCIe) and then copied into the status by the thread that set it.
    // Only its owner touches it.
    uint32_t fault;
};

// Host-visible memory the device writes (the error, once) and the host
// writes (abort): mapped page-locked memory on a GPU. `error` is stored
// last, so a host that sees it sees peer and call.
struct dc_status {
    uint32_t error;   // enum dc_error, the first one
    int32_t peer;     // the rank it names (a peer's, or this rank's for abort)
    uint64_t call;    // the round it happened in (devcoll's count of rounds)
    uint32_t abort;   // set by the host to 1 + the rank it names: every wait gives up
    uint32_t pad_;
};

// One call as every lane sees it.
struct dc_args {
    char *win[DC_MAX_RANKS]; // every rank's window as mapped in this process
    uint64_t area_bytes;     // each of a window's four data areas, bytes
    const char *send;        // the caller's input
    char *recv;              // the caller's output
    uint64_t count;          // elements: of the buffer (all-reduce, broadcast, reduce), of one
                             // rank's block (reduce-scatter: recv; all-gather: send)
    int kind, dtype, op, root;
    int rank, n;
    uint64_t round0;         // rounds this communicator ran before this call
    uint64_t desc;           // dc_desc of the call
    struct dc_status *status;
    uint64_t timeout_ns;     // bound on one wait
    int peer;                // point-to-point: the other rank (count: bytes)
    uint64_t msg;            // messages between the two in this direction before this one
};

DC_FN uint64_t dc_desc(int kind, int dtype, int op, int root, uint64_t count)
{
    return (uint64_t)kind | (uint64_t)dtype << 4 | (uint64_t)op << 8 |
           (uint64_t)(root & 0xff) << 12 | count << 20;
}

DC_FN uint64_t dc_elem_bytes(int dtype)
{
    return dtype == DC_F64 || dtype == DC_I64     ? 8
           : dtype == DC_F16 || dtype == DC_BF16 ? 2
           : dtype == DC_BYTE                    ? 1
                                                 : 4;
}

// Elements a round carries per rank block (every rank computes the same):
// a whole number of units.
DC_FN uint64_t dc_round_elems(int kind, int dtype, int n, uint64_t area_bytes)
{
    const uint64_t per = kind == DC_REDUCE_SCATTER ? area_bytes / (uint64_t)n : area_bytes;
    return per / DC_UNIT * (DC_UNIT / dc_elem_bytes(dtype));
}

// Whether the call is a send or a recv (only two ranks take part).
DC_FN int dc_is_p2p(const struct dc_args *a) { return a->kind == DC_SEND || a->kind == DC_RECV; }

// Rounds of a call (at least one: an empty call still meets its peers,
// so that a count that differs is found; none for point-to-point).
DC_FN uint64_t dc_rounds(const struct dc_args *a)
{
    if (dc_is_p2p(a))
        return 0;
    const uint64_t per = dc_round_elems(a->kind, a->dtype, a->n, a->area_bytes);
    return a->count == 0 ? 1 : (a->count + per - 1) / per;
}

// Window q's data area: in (which = 0) or out (1), by parity.
DC_FN char *dc_area(const struct dc_args *a, int q, int which, uint64_t parity)
{
    return a->win[q] + DC_HEAD_BYTES + (2 * (uint64_t)which + parity) * a->area_bytes;
}

// ---- the target's primitives: devcoll_target.h ----

#include "devcoll_target.h"

// ---- failure ----

DC_FN struct dc_head *dc_head_of(const struct dc_args *a, int q)
{
    return (struct dc_head *)a->win[q];
}

// Records this rank's first error (the later ones are dropped): in its own
// window's fault word, then in the status for the host.
DC_FN void dc_fail(const struct dc_args *a, uint32_t error, int peer, uint64_t call)
{
    const uint32_t from_p2p = (call & DC_P2P_CALL) ? DC_FAULT_P2P : 0;
    if (!dc_claim(&dc_head_of(a, a->rank)->fault, error | from_p2p | (uint32_t)(peer + 1) << 8))
        return;
    a->status->peer = peer;
    a->status->call = call;
    dc_publish_u32(&a->status->error, error);
}

// Whether this rank has failed before (any block, any call).
DC_FN int dc_failed(const struct dc_args *a)
{
    return dc_read_u32(&dc_head_of(a, a->rank)->fault) != 0;
}

// ---- barriers ----

// Marks this block's mailboxes at every peer: it gave up (and why).
DC_FN void dc_poison(const struct dc_args *a, const struct dc_thread *t)
{
    const uint64_t poison = DC_POISON + dc_read_u32(&dc_head_of(a, a->rank)->fault);
    for (int p = t->lane; p < a->n; p += t->lanes)
        dc_store(&dc_head_of(a, p)->box[t->block][a->rank].failed, poison);
}

// Whether this rank has failed before (any block, any call), or the host
// has aborted it since (seen even by a rank whose peers are all ahead), the
// same in every lane; then this block's mailboxes are poisoned. One lane
// reads the abort word: on a GPU it is mapped host memory, read over PCIe.
DC_FN int dc_stop(const struct dc_args *a, const struct dc_thread *t, uint64_t call)
{
    const uint32_t abort = t->lane == 0 ? dc_read_u32(&a->status->abort) : 0;
    if (abort)
        dc_fail(a, DC_ERR_ABORT, (int)abort - 1, call);
    const int bad = dc_sync_or(abort || dc_failed(a));
    if (bad)
        dc_poison(a, t);
    return bad;
}

// Waits until peer p's `word` in mailbox m of this rank's window reaches
// `target` (acquire). Returns 0, or 1 once this rank has an error (recorded
// here when this wait finds it: the peer's poison, the host's abort, the
// timeout).
DC_FN int dc_wait(const struct dc_args *a, const struct dc_mailbox *m, const uint64_t *word,
                  uint64_t target, int p, uint64_t call)
{
    const uint64_t start = dc_now_ns();
    for (unsigned spins = 0;; spins++) {
        if (dc_load(word) >= target)
            return 0;
        const uint64_t failed = dc_load(&m->failed);
        if (failed >= DC_POISON) {
            // A mismatch of the same sort of call (collective or message)
            // names the rank the peer named, the one that differs; anything
            // else, the peer that gave up.
            const uint64_t why = failed - DC_POISON;
            const int named = (int)(why >> 8 & 0xff) - 1;
            const int p2p = dc_is_p2p(a);
            const int from_p2p = (why & DC_FAULT_P2P) != 0;
            if ((why & 0x7f) == DC_ERR_MISMATCH && from_p2p == p2p)
                dc_fail(a, DC_ERR_MISMATCH, p2p || named < 0 ? p : named, call);
            else
                dc_fail(a, DC_ERR_LEFT, p, call);
            return 1;
        }
        // Now and then: the other blocks' errors (device memory), the
        // host's abort (PCIe), the clock.
        if (spins % 64 == 63 && dc_failed(a))
            return 1;
        const uint32_t aborted = spins % 1024 == 1023 ? dc_read_u32(&a->status->abort) : 0;
        if (aborted) {
            dc_fail(a, DC_ERR_ABORT, (int)aborted - 1, call);
            return 1;
        }
        if (spins % 1024 == 1023 && dc_now_ns() - start > a->timeout_ns) {
            dc_fail(a, DC_ERR_TIMEOUT, p, call);
            return 1;
        }
        dc_pause(spins);
    }
}

// Whether peer q's block announced barrier id, waiting for it as long as
// q may still come (not poisoned, within the timeout): a rank announces a
// barrier at every peer before it compares anything, so every rank that
// reaches this call is seen.
DC_FN int dc_arrives(const struct dc_args *a, const struct dc_mailbox *m, uint64_t id)
{
    const uint64_t start = dc_now_ns();
    for (unsigned spins = 0;; spins++) {
        if (dc_load(&m->passed) >= id)
            return 1;
        if (dc_load(&m->failed) >= DC_POISON ||
            (spins % 1024 == 1023 && dc_now_ns() - start > a->timeout_ns))
            return 0;
        dc_pause(spins);
    }
}

// The rank whose call differs, found at barrier id: of the ranks that
// announced it, the one whose descriptor the fewest share; on a tie (two
// ranks), the peer p it compared with. Every rank that finds the mismatch
// waits for the same ranks, so they name the same one (and those that
// learn of it from a poison take the name it carries).
DC_FN int dc_odd_one(const struct dc_args *a, const struct dc_thread *t, uint64_t id,
                     int parity, int p)
{
    uint64_t desc[DC_MAX_RANKS];
    int seen[DC_MAX_RANKS];
    for (int q = 0; q < a->n; q++) {
        const struct dc_mailbox *m = &dc_head_of(a, a->rank)->box[t->block][q];
        seen[q] = q == a->rank || dc_arrives(a, m, id);
        desc[q] = q == a->rank ? a->desc : seen[q] ? dc_volatile(&m->desc[parity]) : 0;
    }
    int odd = p, fewest = DC_MAX_RANKS + 1;
    for (int q = 0; q < a->n; q++) {
        int alike = 0;
        for (int r = 0; seen[q] && r < a->n; r++)
            alike += seen[r] && desc[r] == desc[q];
        if (seen[q] && (alike < fewest || (alike == fewest && q == p))) {
            odd = q;
            fewest = alike;
        }
    }
    return odd;
}

// This block's side of barrier `id` of round `call`: every lane's writes
// are made visible, the block announces it at every peer (with the call's
// descriptor where `parity` >= 0), and waits until each peer's same block
// has announced id. Returns 0, or nonzero in every lane once the status
// holds an error (this block's mailboxes at the peers are poisoned then).
DC_FN int dc_barrier(const struct dc_args *a, const struct dc_thread *t, uint64_t id,
                     int parity, uint64_t call)
{
    dc_fence();
    if (dc_stop(a, t, call))
        return 1;
    int bad = 0;
    for (int p = t->lane; p < a->n; p += t->lanes) {
        struct dc_mailbox *m = &dc_head_of(a, p)->box[t->block][a->rank];
        if (parity >= 0)
            m->desc[parity] = a->desc;
        dc_store(&m->passed, id);
    }
    for (int p = t->lane; p < a->n && !bad; p += t->lanes) {
        const struct dc_mailbox *m = &dc_head_of(a, a->rank)->box[t->block][p];
        bad = dc_wait(a, m, &m->passed, id, p, call);
        if (!bad && parity >= 0 && dc_volatile(&m->desc[parity]) != a->desc) {
            dc_fail(a, DC_ERR_MISMATCH, dc_odd_one(a, t, id, parity, p), call);
            bad = 1;
        }
    }
    bad = dc_sync_or(bad);
    if (bad)
        dc_poison(a, t);
    return bad;
}

// ---- data: units of one round ----

// Iterates k over the units [lo, hi) of a run whose unit 0 is unit `base`
// of the area the round concerns, those this thread owns ((base + k) mod G).
#define DC_UNITS_(t, base, lo, hi, k)                                                        \
    for (uint64_t g_ = (uint64_t)(t)->blocks * (uint64_t)(t)->lanes,                          \
                  k = (lo) + ((uint64_t)(t)->block * (uint64_t)(t)->lanes + (uint64_t)(t)->lane + \
                              g_ - ((base) + (lo)) % g_) % g_;                                \
         k < (hi); k += g_)

// Copies bytes [16 lo, min(16 hi, bytes)) of a run from src to dst.
DC_FN void dc_copy_units(const struct dc_thread *t, char *dst, const char *src, uint64_t base,
                         uint64_t lo, uint64_t hi, uint64_t bytes)
{
    DC_UNITS_(t, base, lo, hi, k)
    {
        const uint64_t at = k * DC_UNIT;
        if (at < bytes)
            dc_copy16(dst + at, src + at, bytes - at < DC_UNIT ? bytes - at : DC_UNIT);
    }
}

// One unit of the reduction of n inputs in position order (the host
// paths' order: ((x0 op x1) op x2) ..., / n at the end for avg), held in a
// local accumulator so that dst may be an input. srcs[q]: input q at the
// unit; `elems` (<= a unit's) are reduced.
#define DC_REDUCE_N_(T, FN, a, srcs, dst, elems)                                             \
    do {                                                                                     \
        T acc_[DC_UNIT / sizeof(T)] = {0}, x_[DC_UNIT / sizeof(T)] = {0};                    \
        for (uint64_t i_ = 0; i_ < (elems); i_++)                                            \
            acc_[i_] = ((const T *)(srcs)[0])[i_];                                           \
        for (int q_ = 1; q_ < (a)->n; q_++) {                                                \
            const int div_ = (a)->op == KERNEL_OP_AVG && q_ == (a)->n - 1 ? (a)->n : 0;      \
            for (uint64_t i_ = 0; i_ < (elems); i_++)                                        \
                x_[i_] = ((const T *)(srcs)[q_])[i_];                                        \
            for (uint64_t i_ = 0; i_ < (elems); i_++)                                        \
                FN(i_, acc_, acc_, x_, (a)->op, div_);                                       \
        }                                                                                    \
        for (uint64_t i_ = 0; i_ < (elems); i_++)                                            \
            ((T *)(dst))[i_] = acc_[i_];                                                     \
    } while (0)
// A whole unit with a constant count (the compiler keeps it in registers),
// else the run's last, partial one.
#define DC_REDUCE_UNIT_(T, FN, a, srcs, dst, elems)                                          \
    do {                                                                                     \
        if ((elems) == DC_UNIT / sizeof(T))                                                  \
            DC_REDUCE_N_(T, FN, a, srcs, dst, DC_UNIT / sizeof(T));                          \
        else                                                                                 \
            DC_REDUCE_N_(T, FN, a, srcs, dst, elems);                                        \
    } while (0)

DC_FN void dc_reduce_unit(const struct dc_args *a, const char *const *srcs, char *dst,
                          uint64_t elems)
{
    switch (a->dtype) {
    case DC_F64: DC_REDUCE_UNIT_(double, kernel_reduce_f64, a, srcs, dst, elems); break;
    case DC_I32: DC_REDUCE_UNIT_(int32_t, kernel_reduce_i32, a, srcs, dst, elems); break;
    case DC_I64: DC_REDUCE_UNIT_(int64_t, kernel_reduce_i64, a, srcs, dst, elems); break;
    case DC_F16: DC_REDUCE_UNIT_(uint16_t, kernel_reduce_f16, a, srcs, dst, elems); break;
    case DC_BF16: DC_REDUCE_UNIT_(uint16_t, kernel_reduce_bf16, a, srcs, dst, elems); break;
    default: DC_REDUCE_UNIT_(float, kernel_reduce_f32, a, srcs, dst, elems); break;
    }
}

// dst = the reduction over q of src[q], units [lo, hi) of a run of `bytes`
// (unit 0 is the area's unit `base`); src[q] and dst are the run's starts.
DC_FN void dc_reduce_units(const struct dc_args *a, const struct dc_thread *t,
                           const char *const *src, char *dst, uint64_t base, uint64_t lo,
                           uint64_t hi, uint64_t bytes)
{
    const uint64_t es = dc_elem_bytes(a->dtype);
    DC_UNITS_(t, base, lo, hi, k)
    {
        const uint64_t at = k * DC_UNIT;
        if (at >= bytes)
            continue;
        const char *at_src[DC_MAX_RANKS];
        for (int q = 0; q < a->n; q++)
            at_src[q] = src[q] + at;
        const uint64_t len = bytes - at < DC_UNIT ? bytes - at : DC_UNIT;
        dc_reduce_unit(a, at_src, dst + at, len / es);
    }
}

// [lo, hi) of chunk c of `units` units cut into n balanced chunks.
DC_FN void dc_chunk(uint64_t units, int n, int c, uint64_t *lo, uint64_t *hi)
{
    *lo = units * (uint64_t)c / (uint64_t)n;
    *hi = units * (uint64_t)(c + 1) / (uint64_t)n;
}

// ---- the collectives: one round each ----

// One round of the call, `call` the communicator's round number: elements
// [e0, e0 + len) of each rank block. Returns nonzero once the status holds
// an error.
DC_FN int dc_round(const struct dc_args *a, const struct dc_thread *t, uint64_t call,
                   uint64_t e0, uint64_t len)
{
    const uint64_t es = dc_elem_bytes(a->dtype), par = call % 2;
    const uint64_t bytes = len * es, off = e0 * es;
    const uint64_t units = (bytes + DC_UNIT - 1) / DC_UNIT;
    const uint64_t id = 2 * call + 1; // this round's barriers: id, id + 1
    const int me = a->rank, n = a->n;
    char *in = dc_area(a, me, 0, par);
    const char *src[DC_MAX_RANKS];
    // A rank that failed writes nothing more: its barriers no longer hold
    // it back, and a slow peer may still be reading the area this round
    // would fill (the last round of the call before the failed one).
    if (dc_stop(a, t, call))
        return 1;
    switch (a->kind) {
    case DC_ALL_REDUCE_ONE:
        dc_copy_units(t, in, a->send + off, 0, 0, units, bytes);
        if (dc_barrier(a, t, id, (int)par, call))
            return 1;
        for (int q = 0; q < n; q++)
            src[q] = q == me ? a->send + off : dc_area(a, q, 0, par);
        dc_reduce_units(a, t, src, a->recv + off, 0, 0, units, bytes);
        return 0;
    case DC_ALL_REDUCE_TWO: {
        uint64_t lo, hi;
        dc_chunk(units, n, me, &lo, &hi);
        // The peers read every chunk of this input but this rank's own.
        dc_copy_units(t, in, a->send + off, 0, 0, lo, bytes);
        dc_copy_units(t, in, a->send + off, 0, hi, units, bytes);
        if (dc_barrier(a, t, id, (int)par, call))
            return 1;
        for (int q = 0; q < n; q++)
            src[q] = q == me ? a->send + off : dc_area(a, q, 0, par);
        char *out = dc_area(a, me, 1, par);
        dc_reduce_units(a, t, src, out, 0, lo, hi, bytes);
        dc_copy_units(t, a->recv + off, out, 0, lo, hi, bytes);
        if (dc_barrier(a, t, id + 1, -1, call))
            return 1;
        for (int q = 0; q < n; q++) {
            if (q == me)
                continue;
            uint64_t qlo, qhi;
            dc_chunk(units, n, q, &qlo, &qhi);
            dc_copy_units(t, a->recv + off, dc_area(a, q, 1, par), 0, qlo, qhi, bytes);
        }
        return 0;
    }
    case DC_REDUCE_SCATTER: {
        // Rank q's piece of the round lies at q * stride of the in area,
        // whose unit numbering the owners of units follow.
        const uint64_t stride = dc_round_elems(a->kind, a->dtype, n, a->area_bytes) * es;
        const uint64_t block = a->count * es, su = stride / DC_UNIT;
        for (int q = 0; q < n; q++)
            if (q != me)
                dc_copy_units(t, in + q * stride, a->send + q * block + off, q * su, 0, units,
                              bytes);
        if (dc_barrier(a, t, id, (int)par, call))
            return 1;
        for (int q = 0; q < n; q++)
            src[q] = q == me ? a->send + me * block + off : dc_area(a, q, 0, par) + me * stride;
        dc_reduce_units(a, t, src, a->recv + off, me * su, 0, units, bytes);
        return 0;
    }
    case DC_ALL_GATHER: {
        const uint64_t block = a->count * es;
        dc_copy_units(t, in, a->send + off, 0, 0, units, bytes);
        if (dc_barrier(a, t, id, (int)par, call))
            return 1;
        for (int q = 0; q < n; q++) {
            const char *from = q == me ? a->send + off : dc_area(a, q, 0, par);
            char *to = a->recv + q * block + off;
            if (to != from) // in place: this rank's block is there already
                dc_copy_units(t, to, from, 0, 0, units, bytes);
        }
        return 0;
    }
    case DC_MARK:
        return dc_barrier(a, t, id, (int)par, call);
    case DC_BROADCAST:
        if (me == a->root)
            dc_copy_units(t, in, a->send + off, 0, 0, units, bytes);
        if (dc_barrier(a, t, id, (int)par, call))
            return 1;
        if (me != a->root)
            dc_copy_units(t, a->recv + off, dc_area(a, a->root, 0, par), 0, 0, units, bytes);
        else if (a->recv != a->send)
            dc_copy_units(t, a->recv + off, a->send + off, 0, 0, units, bytes);
        return 0;
    default: // DC_REDUCE
        if (me != a->root)
            dc_copy_units(t, in, a->send + off, 0, 0, units, bytes);
        if (dc_barrier(a, t, id, (int)par, call))
            return 1;
        if (me == a->root) {
            for (int q = 0; q < n; q++)
                src[q] = q == me ? a->send + off : dc_area(a, q, 0, par);
            dc_reduce_units(a, t, src, a->recv + off, 0, 0, units, bytes);
        }
        return 0;
    }
}

// ---- point-to-point ----

// Pieces of a message (at least one: an empty message still meets its
// peer, so that a size that differs is found) and the mark of piece i.
DC_FN uint64_t dc_pieces(const struct dc_args *a)
{
    return a->count == 0 ? 1 : (a->count + a->area_bytes - 1) / a->area_bytes;
}
DC_FN uint64_t dc_piece_mark(const struct dc_args *a, uint64_t i)
{
    return a->msg << 32 | (i + 1);
}

// Lane 0 waits for the peer's `word` (and, receiving, checks the size the
// sender announced); every lane learns the outcome. Nonzero: failed.
DC_FN int dc_p2p_wait(const struct dc_args *a, const struct dc_thread *t,
                      const struct dc_mailbox *m, const uint64_t *word, uint64_t target)
{
    int bad = 0;
    if (t->lane == 0) {
        bad = dc_wait(a, m, word, target, a->peer, DC_P2P_CALL | a->round0);
        if (!bad && a->kind == DC_RECV && dc_volatile(&m->sent_desc) >> 1 != a->count) {
            dc_fail(a, DC_ERR_MISMATCH, a->peer, DC_P2P_CALL | a->round0);
            bad = 1;
        }
    }
    bad = dc_sync_or(bad);
    if (bad)
        dc_poison(a, t);
    return bad;
}

// Bytes of piece i and where it starts in the message.
DC_FN uint64_t dc_piece_bytes(const struct dc_args *a, uint64_t i, uint64_t *off)
{
    *off = i * a->area_bytes;
    return a->count - *off < a->area_bytes ? a->count - *off : a->area_bytes;
}

DC_FN void dc_send(const struct dc_args *a, const struct dc_thread *t)
{
    const uint64_t pieces = dc_pieces(a), par = a->round0 % 2;
    struct dc_mailbox *there = &dc_head_of(a, a->peer)->box[t->block][a->rank];
    const struct dc_mailbox *here = &dc_head_of(a, a->rank)->box[t->block][a->peer];
    for (uint64_t i = 0; i < pieces; i++) {
        if (dc_stop(a, t, DC_P2P_CALL | a->round0))
            return;
        // Area i % 2 held piece i - 2: taken?
        if (i >= 2 && dc_p2p_wait(a, t, here, &here->taken, dc_piece_mark(a, i - 2)))
            return;
        uint64_t off;
        const uint64_t bytes = dc_piece_bytes(a, i, &off);
        dc_copy_units(t, dc_area(a, a->rank, (int)(i % 2), par), a->send + off, 0, 0,
                      (bytes + DC_UNIT - 1) / DC_UNIT, bytes);
        dc_fence();
        if (dc_stop(a, t, DC_P2P_CALL | a->round0))
            return;
        if (t->lane == 0) {
            there->sent_desc = a->count << 1 | par;
            dc_store(&there->sent, dc_piece_mark(a, i));
        }
    }
    dc_p2p_wait(a, t, here, &here->taken, dc_piece_mark(a, pieces - 1));
}

DC_FN void dc_recv(const struct dc_args *a, const struct dc_thread *t)
{
    const uint64_t pieces = dc_pieces(a);
    const struct dc_mailbox *here = &dc_head_of(a, a->rank)->box[t->block][a->peer];
    struct dc_mailbox *there = &dc_head_of(a, a->peer)->box[t->block][a->rank];
    for (uint64_t i = 0; i < pieces; i++) {
        if (dc_stop(a, t, DC_P2P_CALL | a->round0) ||
            dc_p2p_wait(a, t, here, &here->sent, dc_piece_mark(a, i)))
            return;
        const uint64_t par = dc_volatile(&here->sent_desc) & 1;
        uint64_t off;
        const uint64_t bytes = dc_piece_bytes(a, i, &off);
        dc_copy_units(t, a->recv + off, dc_area(a, a->peer, (int)(i % 2), par), 0, 0,
                      (bytes + DC_UNIT - 1) / DC_UNIT, bytes);
        dc_fence(); // the reads are done before the sender may refill the area
        if (dc_stop(a, t, DC_P2P_CALL | a->round0))
            return;
        if (t->lane == 0)
            dc_store(&there->taken, dc_piece_mark(a, i));
    }
}

// A whole call, as one block's lanes run it: its rounds in order.
DC_FN void dc_run(const struct dc_args *a, const struct dc_thread *t)
{
    if (dc_is_p2p(a)) {
        (a->kind == DC_SEND ? dc_send : dc_recv)(a, t);
        return;
    }
    const uint64_t per = dc_round_elems(a->kind, a->dtype, a->n, a->area_bytes);
    const uint64_t rounds = dc_rounds(a);
    for (uint64_t j = 0; j < rounds; j++) {
        const uint64_t e0 = j * per;
        const uint64_t len = a->count - e0 < per ? a->count - e0 : per;
        if (dc_round(a, t, a->round0 + j, e0, len))
            return;
    }
}

#endif
