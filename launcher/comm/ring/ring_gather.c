// ring_gather.c: the ring's all-gather and broadcast: each block passed
// along the ring, a slice a step, over same-host links (read straight out of
// the left neighbour's mapped window) and MPI links.
#include "ring_internal.h"

#include "log.h"
#include "status.h"

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
        return ring_settle(r);
    const uint64_t base = r->progress;
    const uint64_t slice = r->slice_bytes;
    const uint64_t rounds = bytes ? (bytes + slice - 1) / slice : 1;
    const uint64_t steps = (uint64_t)(n - 1);
    TRY(ring_arrive(r, RING_KIND_ALL_GATHER, NULL, recv, stride));

    const char *lrecv = NULL;
    uint64_t lstride = 0;
    if (r->left.local) {
        TRY(ring_wait_link(r, &r->left, base + 1));
        lstride = atomic_load(&r->left.slot->stride);
        uint64_t need = bytes ? (uint64_t)(n - 1) * lstride + bytes : 0;
        if (lstride < bytes)
            need = UINT64_MAX;
        TRY(ring_peer_ptr(r, &r->left, atomic_load(&r->left.slot->recv_off), need, &lrecv));
    }
    for (uint64_t k = 0; k < rounds; k++) {
        const uint64_t lo = k * slice;
        const uint64_t len = bytes - lo < slice ? bytes - lo : slice;
        const uint64_t rb = base + 1 + k * steps;
        // Step t: the block of position (p-1-t) comes from the left, which
        // received it at its step t-1 (its own block is there since arrival).
        for (int t = 0; t < n - 1; t++) {
            struct ring_xfer sreq = ring_xfer_slot(r, RING_XFER_SEND_EVEN);
            if (!r->right.local) {
                const int q = r->order[ring_mod(p - t, n)];
                TRY(ring_xfer_send(r, &sreq, len ? recv + (uint64_t)q * stride + lo : NULL, len));
            }
            const int q = r->order[ring_mod(p - 1 - t, n)];
            char *dst = len ? recv + (uint64_t)q * stride + lo : NULL;
            if (r->left.local) {
                TRY(ring_wait_link(r, &r->left, t == 0 ? base + 1 : rb + (uint64_t)t));
                if (len)
                    TRY(ring_copy(r, dst, lrecv + (uint64_t)q * lstride + lo, len));
            } else {
                TRY(ring_recv_left(r, dst, len));
            }
            TRY(ring_publish(r, rb + (uint64_t)t + 1));
            if (!r->right.local)
                TRY(ring_xfer_wait(r, &sreq, r->right.rank));
        }
    }
    if (r->right.local)
        TRY(ring_wait_link(r, &r->right, base + 1 + rounds * steps));
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
    const int d = ring_mod(r->pos - root_pos, n); // hops from the root
    const uint64_t base = r->progress;
    const uint64_t slice = r->slice_bytes;
    const uint64_t rounds = bytes ? (bytes + slice - 1) / slice : 1;
    const uint64_t final = base + 1 + rounds;
    TRY(ring_arrive(r, RING_KIND_BROADCAST, NULL, buf, 0));
    if (d == 0)
        TRY(ring_publish(r, final)); // the root holds every slice already
    const char *lbuf = NULL;
    if (d != 0 && r->left.local) {
        TRY(ring_wait_link(r, &r->left, base + 1));
        TRY(ring_peer_ptr(r, &r->left, atomic_load(&r->left.slot->recv_off), bytes, &lbuf));
    }
    const int forwards = d != n - 1; // the last of the chain feeds no one
    for (uint64_t k = 0; k < rounds; k++) {
        const uint64_t lo = k * slice;
        const uint64_t len = bytes - lo < slice ? bytes - lo : slice;
        char *dst = len ? buf + lo : NULL;
        if (d != 0) {
            if (r->left.local) {
                TRY(ring_wait_link(r, &r->left, base + 2 + k));
                if (len)
                    TRY(ring_copy(r, dst, lbuf + lo, len));
            } else {
                TRY(ring_recv_left(r, dst, len));
            }
            TRY(ring_publish(r, base + 2 + k));
        }
        if (forwards && !r->right.local) {
            struct ring_xfer sreq = ring_xfer_slot(r, RING_XFER_SEND_EVEN);
            TRY(ring_xfer_send(r, &sreq, dst, len));
            TRY(ring_xfer_wait(r, &sreq, r->right.rank));
        }
    }
    if (forwards && r->right.local)
        TRY(ring_wait_link(r, &r->right, final));
    return 0;
}
