// ring_ring.c: the ring algorithm's all-reduce, and its form with a sharded
// update: reduce-scatter then all-gather around the ring, in rounds of
// `slice_bytes` a step, over same-host links (read straight out of the left
// neighbour's mapped window) and MPI links (transfers kept in flight). It
// carries what no other algorithm takes (ring_algo.c), on every kind of
// window.
#include "ring_internal.h"

#include "log.h"
#include "status.h"
#include "trace.h"

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
    struct ring_xfer send[2]; // the sends of the last two steps, by step parity
    int send_step[2];         // their steps (-1: none)
    struct ring_xfer recv;    // the next reduce-scatter chunk's receive, posted ahead
    int recv_step;            // its step (-1: none)
};

static void pipe_start_(struct ring_core *r, struct pipe_ *pp)
{
    *pp = (struct pipe_){
        {ring_xfer_slot(r, RING_XFER_SEND_EVEN), ring_xfer_slot(r, RING_XFER_SEND_ODD)},
        {-1, -1},
        ring_xfer_slot(r, RING_XFER_RECV),
        -1};
}

// Waits for the send of step t, if it is still in flight.
static int pipe_sent_(struct ring_core *r, struct pipe_ *pp, int t)
{
    if (t < 0 || pp->send_step[t & 1] != t)
        return 0;
    pp->send_step[t & 1] = -1;
    return ring_xfer_wait(r, &pp->send[t & 1], r->right.rank);
}

// Sends step t's chunk to the remote right, after the send of step t-2.
static int pipe_send_(struct ring_core *r, struct pipe_ *pp, int t, const void *buf,
                      uint64_t bytes)
{
    TRY(pipe_sent_(r, pp, t - 2));
    TRY(ring_xfer_send(r, &pp->send[t & 1], buf, bytes));
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
        TRY(ring_xfer_recv(r, &pp->recv, land, bytes));
    pp->recv_step = -1;
    TRY(ring_xfer_wait(r, &pp->recv, r->left.rank));
    if (has_next) {
        TRY(ring_xfer_recv(r, &pp->recv, r->landing + (uint64_t)((s + 1) & 1) * r->landing_bytes,
                       next_bytes));
        pp->recv_step = s + 1;
    }
    *landed = land;
    return 0;
}


// ---- the all-reduce ----

// One call, as each of its steps sees it. Plain form: update == NULL, out ==
// recv. Update form (float32 sums): in place on recv (the gradients); once
// this rank's chunk of a round is fully reduced, and before it tells the
// right so, update(ctx, lo, n) runs on that range; the all-gather phase then
// circulates `out` (the parameters) instead of recv.
struct call_ {
    const char *send;      // this rank's input
    char *recv;            // the sum's destination
    char *out;             // what the all-gather circulates
    const char *lsend;     // the same-host left's send, recv and out (NULL: a remote left)
    const char *lrecv;
    const char *lout;
    enum comm_dtype t;
    enum comm_reduce_op op;
    uint64_t es;           // bytes an element
    int avg_div;           // COMM_AVG: the rank count, at the last step; else 0
    ring_update_fn update; // NULL: the plain form
    void *ctx;             // for update
};

// Reduce-scatter step s: my chunk c = (p-s-1) becomes my input plus the
// left's partial sum of it (the left's input itself when s = 0). The round's
// elements are [lo, lo + len); rb: the progress before its first step.
static int reduce_scatter_(struct ring_core *r, const struct call_ *a, struct pipe_ *pp,
                           uint64_t lo, uint64_t len, uint64_t base, uint64_t rb)
{
    const int n = r->size, p = r->pos;
    const uint64_t es = a->es;
    uint64_t clo, chi;
    const uint64_t phase = trace_begin();
    for (int s = 0; s < n - 1; s++) {
        if (!r->right.local) { // the chunk the right reduces at its step s
            ring_chunk(len, n, ring_mod(p - s, n), &clo, &chi);
            const char *src = s == 0 ? a->send : a->recv;
            TRY(pipe_send_(r, pp, s, chi > clo ? src + (lo + clo) * es : NULL, (chi - clo) * es));
        }
        ring_chunk(len, n, ring_mod(p - s - 1, n), &clo, &chi);
        const char *theirs;
        if (r->left.local) {
            TRY(ring_wait_link(r, &r->left, s == 0 ? base + 1 : rb + s));
            theirs = chi > clo ? (s == 0 ? a->lsend : a->lrecv) + (lo + clo) * es : NULL;
        } else {
            uint64_t nlo = 0, nhi = 0;
            if (s + 1 < n - 1)
                ring_chunk(len, n, ring_mod(p - s - 2, n), &nlo, &nhi);
            TRY(pipe_recv_rs_(r, pp, s, (chi - clo) * es, (nhi - nlo) * es, s + 1 < n - 1,
                              &theirs));
        }
        if (chi > clo)
            TRY(ring_reduce(r, a->t, a->op, a->recv + (lo + clo) * es, a->send + (lo + clo) * es,
                            theirs, chi - clo, s == n - 2 ? a->avg_div : 0));
        // My chunk of this round is complete: update before the right
        // may read its parameters (it waits for this step's publish).
        if (a->update && s == n - 2 && chi > clo) {
            int urc = a->update(a->ctx, lo + clo, chi - clo);
            if (urc < 0) {
                r->broken = 1;
                return urc;
            }
        }
        TRY(ring_publish(r, rb + s + 1));
    }
    trace_end(TRACE_REDUCE_SCATTER, 0, phase, 0, (int64_t)(len * es));
    return 0;
}

// All-gather step g: my chunk c = (p-g) is copied from the left, which
// finished it at its step g-1; the right must have read my partial of c (its
// reduce-scatter step g) before I overwrite it. Over MPI my send of that
// partial is complete by then (c's final value, which arrives here, was
// summed from it), which pipe_sent_ states at the cost of one test.
static int all_gather_(struct ring_core *r, const struct call_ *a, struct pipe_ *pp, uint64_t lo,
                       uint64_t len, uint64_t rb)
{
    const int n = r->size, p = r->pos;
    const uint64_t es = a->es;
    uint64_t clo, chi;
    const uint64_t phase = trace_begin();
    for (int g = 0; g < n - 1; g++) {
        const int step = n - 1 + g;
        if (!r->right.local) {
            ring_chunk(len, n, ring_mod(p + 1 - g, n), &clo, &chi);
            TRY(pipe_send_(r, pp, step, chi > clo ? a->out + (lo + clo) * es : NULL,
                           (chi - clo) * es));
        } else {
            TRY(ring_wait_link(r, &r->right, rb + (uint64_t)g + 1));
        }
        ring_chunk(len, n, ring_mod(p - g, n), &clo, &chi);
        TRY(pipe_sent_(r, pp, g));
        if (r->left.local) {
            TRY(ring_wait_link(r, &r->left, rb + (uint64_t)step));
            if (chi > clo)
                TRY(ring_copy(r, a->out + (lo + clo) * es, a->lout + (lo + clo) * es,
                              (chi - clo) * es));
        } else {
            TRY(ring_recv_left(r, chi > clo ? a->out + (lo + clo) * es : NULL, (chi - clo) * es));
        }
        TRY(ring_publish(r, rb + (uint64_t)step + 1));
    }
    TRY(pipe_drain_(r, pp));
    trace_end(TRACE_ALL_GATHER, 0, phase, 0, (int64_t)(len * es));
    return 0;
}

// The all-reduce on count elements, either form (struct call_).
static int all_reduce_(struct ring_core *r, struct call_ *a, uint64_t count)
{
    if (r->broken)
        return VGPU_ECOMM;
    const int n = r->size;
    const uint64_t es = a->es;
    if (n == 1) { // settled like every other return: the results are there
        if (a->send != a->recv && count)
            TRY(ring_copy(r, a->recv, a->send, count * es));
        TRY(ring_settle(r));
        return a->update && count ? a->update(a->ctx, 0, count) : 0;
    }
    const uint64_t base = r->progress;
    const uint64_t steps = 2 * (uint64_t)(n - 1);
    const uint64_t round = ring_round_elems(r, es);
    const uint64_t rounds = count ? (count + round - 1) / round : 1;
    // The update form publishes the parameters as its "send" buffer: its
    // reduction is in place on recv, so the left's input is its recv.
    // Its size in `stride`: a rank that took the direct all-reduce for
    // another size must see this one's (ring_direct.c).
    if (a->update)
        TRY(ring_arrive(r, RING_KIND_ALL_REDUCE_UPDATE, a->out, a->recv, count * es));
    else
        TRY(ring_arrive(r, RING_KIND_ALL_REDUCE, a->send, a->recv, count * es));

    if (r->left.local) {
        TRY(ring_wait_link(r, &r->left, base + 1));
        const uint64_t bytes = count * es;
        const char *ls, *lr;
        TRY(ring_peer_ptr(r, &r->left, atomic_load(&r->left.slot->send_off), bytes, &ls));
        TRY(ring_peer_ptr(r, &r->left, atomic_load(&r->left.slot->recv_off), bytes, &lr));
        a->lrecv = lr;
        a->lsend = a->update ? a->lrecv : ls;
        a->lout = a->update ? ls : a->lrecv;
    }
    for (uint64_t k = 0; k < rounds; k++) {
        const uint64_t lo = k * round;
        const uint64_t len = count - lo < round ? count - lo : round;
        const uint64_t rb = base + 1 + k * steps; // progress before this round's first step
        struct pipe_ pp;
        pipe_start_(r, &pp);
        TRY(reduce_scatter_(r, a, &pp, lo, len, base, rb));
        TRY(all_gather_(r, a, &pp, lo, len, rb));
    }
    // The right reads my buffers until its last step: only then may the
    // caller touch them again.
    if (r->right.local)
        TRY(ring_wait_link(r, &r->right, base + 1 + rounds * steps));
    return 0;
}

static int ring_all_reduce_(struct ring_core *r, const char *send, char *recv, uint64_t count,
                            enum comm_dtype t, enum comm_reduce_op op)
{
    struct call_ a = {.send = send, .recv = recv, .out = recv, .t = t, .op = op,
                      .es = comm_dtype_size(t), .avg_div = op == COMM_AVG ? r->size : 0};
    return all_reduce_(r, &a, count);
}

// Any ring, any size: what the others leave (never forced beyond that).
const struct ring_algo_desc ring_ring_algo = {.all_reduce = ring_all_reduce_};

int ring_core_all_reduce_update(struct ring_core *r, float *grads, float *params, uint64_t count,
                                ring_update_fn update, void *ctx)
{
    struct call_ a = {.send = (const char *)grads, .recv = (char *)grads, .out = (char *)params,
                      .t = COMM_FLOAT32, .op = COMM_SUM, .es = comm_dtype_size(COMM_FLOAT32),
                      .update = update, .ctx = ctx};
    return all_reduce_(r, &a, count);
}
