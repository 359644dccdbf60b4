// ring_calls.c: the ring backend's per-call path: device buffers to the
// engine's windows (a CPU device's arena as it is, a GPU arena through CUDA
// IPC, or copied through a host staging segment), in pieces that a window
// holds; the all-reduce across hosts and the small one on device windows
// handed to their sub-rings (ring_sub.c). (Its reduce is comm.c's, on the
// all-reduce; point-to-point is MPI's.)
#include <stdint.h>

#include "devcoll.h"
#include "device_internal.h"
#include "log.h"
#include "ring_comm.h"
#include "ring_sub.h"
#include "status.h"

// ---- the device collectives (devcoll.h): every rank on one device ----

// A call launched on the device returns at once; what the device found
// (a peer that died, timed out or called differently) surfaces at the
// next call, as NCCL's asynchronous errors do, and breaks the ring so that
// nothing waits on the peers again. Said once.
static int devcoll_status_(struct ring_comm *rc, int launched)
{
    if (launched != 0)
        return launched;
    char what[200];
    const int status = devcoll_error(rc->dc, NULL, what, sizeof what);
    if (status != 0 && !rc->core.broken) {
        log_error("%s", what);
        rc->core.broken = 1;
    }
    return status;
}

// ---- collectives: device buffers to host windows ----

// Where the engine reaches a device buffer: a CPU device's host view, or on
// device windows the device pointer itself.
static char *view_(struct ring_comm *rc, const void *dev_ptr)
{
    if (!dev_ptr)
        return NULL;
    return rc->kind == RING_WINDOW_DEVICE ? (char *)dev_ptr : device_host_view(rc->dev, dev_ptr);
}

int ring_comm_all_reduce(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                         enum comm_reduce_op op)
{
    struct ring_comm *rc = c->impl;
    if (rc->dc) {
        const int launched = devcoll_all_reduce(rc->dc, send, recv, count, (int)t, (int)op, NULL);
        return devcoll_status_(rc, launched);
    }
    if (ring_hier_applies(rc->hier, op))
        return ring_hier_all_reduce(rc->hier, send, recv, count, t, op);
    if (rc->small && count * comm_dtype_size(t) <= rc->small_bytes)
        return rc->small->ops->all_reduce(rc->small, send, recv, count, t, op);
    const uint64_t es = comm_dtype_size(t), piece = rc->piece_bytes / es;
    const uint64_t pieces = count ? (count + piece - 1) / piece : 1;
    for (uint64_t i = 0; i < pieces; i++) {
        const uint64_t lo = i * piece;
        const uint64_t len = count - lo < piece ? count - lo : piece;
        const size_t bytes = len * es, at = lo * es;
        if (rc->staging) {
            char *s = rc->stage;
            if (bytes)
                TRY(device_copy_to_host(rc->dev, s, (const char *)send + at, bytes));
            TRY(ring_core_all_reduce(&rc->core, s, s, len, t, op));
            if (bytes)
                TRY(device_copy_to_device(rc->dev, (char *)recv + at, s, bytes));
        } else {
            char *s = view_(rc, send), *d = view_(rc, recv);
            TRY(ring_core_all_reduce(&rc->core, bytes ? s + at : NULL, bytes ? d + at : NULL, len,
                                     t, op));
        }
    }
    return 0;
}

// The engine reports ranges from the start of one piece; the caller's are
// from the start of the whole buffer.
struct piece_update {
    comm_update_fn update;
    void *ctx;
    uint64_t piece_lo;
};

static int piece_update_(void *arg, uint64_t lo, uint64_t n)
{
    struct piece_update *pu = arg;
    return pu->update(pu->ctx, (size_t)(pu->piece_lo + lo), (size_t)n);
}

int ring_comm_all_reduce_update(comm_t *c, float *grads, float *params, size_t count,
                                comm_update_fn update, void *ctx)
{
    struct ring_comm *rc = c->impl;
    if (rc->staging || rc->dc) { // through staging windows or on the device: the plain form
        TRY(ring_comm_all_reduce(c, grads, grads, count, COMM_FLOAT32, COMM_SUM));
        return count ? update(ctx, 0, count) : 0;
    }
    const uint64_t piece = rc->piece_bytes / sizeof(float);
    const uint64_t pieces = count ? (count + piece - 1) / piece : 1;
    float *g = (float *)view_(rc, grads), *p = (float *)view_(rc, params);
    for (uint64_t i = 0; i < pieces; i++) {
        const uint64_t lo = i * piece;
        const uint64_t len = count - lo < piece ? count - lo : piece;
        struct piece_update pu = {update, ctx, lo};
        TRY(ring_core_all_reduce_update(&rc->core, len ? g + lo : NULL, len ? p + lo : NULL, len,
                                        piece_update_, &pu));
    }
    return 0;
}

int ring_comm_broadcast(comm_t *c, void *buf, size_t bytes, int root)
{
    struct ring_comm *rc = c->impl;
    if (rc->dc)
        return devcoll_status_(rc,
                               devcoll_broadcast(rc->dc, buf, buf, bytes, DC_BYTE, root, NULL));
    const uint64_t piece = rc->piece_bytes;
    const uint64_t pieces = bytes ? (bytes + piece - 1) / piece : 1;
    const int root_pos = rc->pos_of[root];
    for (uint64_t i = 0; i < pieces; i++) {
        const uint64_t lo = i * piece;
        const uint64_t len = bytes - lo < piece ? bytes - lo : piece;
        char *dbuf = len ? (char *)buf + lo : NULL;
        if (rc->staging) {
            if (len && c->rank == root)
                TRY(device_copy_to_host(rc->dev, rc->stage, dbuf, len));
            TRY(ring_core_broadcast(&rc->core, rc->stage, len, root_pos));
            if (len && c->rank != root)
                TRY(device_copy_to_device(rc->dev, dbuf, rc->stage, len));
        } else {
            TRY(ring_core_broadcast(&rc->core, len ? view_(rc, dbuf) : NULL, len, root_pos));
        }
    }
    return 0;
}

int ring_comm_all_gather(comm_t *c, const void *send, void *recv, size_t bytes)
{
    struct ring_comm *rc = c->impl;
    if (rc->dc)
        return devcoll_status_(rc, devcoll_all_gather(rc->dc, send, recv, bytes, DC_BYTE, NULL));
    const int n = c->size, me = c->rank;
    uint64_t piece = rc->piece_bytes / (uint64_t)n & ~(uint64_t)63;
    const uint64_t pieces = bytes ? (bytes + piece - 1) / piece : 1;
    for (uint64_t i = 0; i < pieces; i++) {
        const uint64_t lo = i * piece;
        const uint64_t len = bytes - lo < piece ? bytes - lo : piece;
        if (rc->staging) {
            char *s = rc->stage;
            if (len)
                TRY(device_copy_to_host(rc->dev, s + (uint64_t)me * len, (const char *)send + lo,
                                        len));
            TRY(ring_core_all_gather(&rc->core, s + (uint64_t)me * len, s, len, len));
            for (int q = 0; len && q < n; q++)
                TRY(device_copy_to_device(rc->dev, (char *)recv + (uint64_t)q * bytes + lo,
                                          s + (uint64_t)q * len, len));
        } else {
            const char *s = len ? view_(rc, send) + lo : NULL;
            char *d = len ? view_(rc, recv) + lo : NULL;
            TRY(ring_core_all_gather(&rc->core, s, d, len, bytes));
        }
    }
    return 0;
}

// The deterministic all-reduce's exchange. Every block goes to a different
// rank, so there is nothing to pipeline around a ring: MPI's all-to-all on
// the host windows (shared memory between same-host ranks, TCP between hosts),
// waited for with the bound comm.timeout_s.
int ring_comm_all_to_all(comm_t *c, const void *send, void *recv, size_t bytes)
{
    struct ring_comm *rc = c->impl;
    if (rc->kind != RING_WINDOW_HOST) {
        log_error("ring backend: all-to-all needs host-addressable device memory (CPU devices); "
                  "use comm.backend = mpi");
        return VGPU_EUNSUPPORTED;
    }
    const size_t piece = 1ull << 30; // MPI counts are ints
    for (size_t done = 0; done < bytes || done == 0; done += piece) {
        const size_t len = bytes - done < piece ? bytes - done : piece;
        MPI_Datatype strided;
        TRY(comm_mpi_strided_type("ring", len, bytes, &strided));
        const char *s = len ? view_(rc, send) + done : NULL;
        char *r = len ? view_(rc, recv) + done : NULL;
        MPI_Request req;
        int status = comm_mpi_check(MPI_Ialltoall(s, len ? 1 : 0, strided, r, len ? 1 : 0,
                                                  strided, rc->mpi, &req),
                                    "ring", "MPI_Ialltoall");
        if (status == 0)
            status = comm_mpi_wait_bounded(c, &req, "all-to-all");
        MPI_Type_free(&strided);
        TRY(status);
        if (bytes == 0)
            break;
    }
    return 0;
}

// Point-to-point: the device collectives' where they run (queued on the
// device's stream as their collectives are), else MPI on the ring's
// communicator (mpi_p2p.c), through host memory of the comm's unless
// buffers are host views (the staging window is the engine's, which a
// neighbour may read at any time). A timeout or an MPI failure breaks the
// ring as its own would: no later collective or teardown waits for peers.
static int p2p_(comm_t *c, void *buf, size_t bytes, int peer, int send)
{
    struct ring_comm *rc = c->impl;
    if (rc->dc)
        return devcoll_status_(rc, send ? devcoll_send(rc->dc, buf, bytes, peer, NULL)
                                        : devcoll_recv(rc->dc, buf, bytes, peer, NULL));
    const int status = comm_mpi_p2p(c, rc->mpi, buf, bytes, peer, send,
                                    rc->kind != RING_WINDOW_HOST);
    if (status == VGPU_ETIMEOUT || status == VGPU_ECOMM)
        rc->core.broken = 1;
    return status;
}

int ring_comm_send(comm_t *c, const void *buf, size_t bytes, int peer)
{
    return p2p_(c, (void *)buf, bytes, peer, 1);
}

int ring_comm_recv(comm_t *c, void *buf, size_t bytes, int peer) { return p2p_(c, buf, bytes, peer, 0); }

int ring_comm_barrier(comm_t *c)
{
    struct ring_comm *rc = c->impl;
    return ring_core_barrier(&rc->core);
}

double ring_comm_waited(const comm_t *c)
{
    const struct ring_comm *rc = c->impl;
    return rc->core.waited_s + ring_hier_waited(rc->hier) +
           (rc->small ? rc->small->ops->waited(rc->small) : 0);
}

// Reduce-scatter and reduce: the device collectives' own where they run
// (no scratch; the all-reduce's bits), else the all-reduce's forms.
int ring_comm_reduce_scatter(comm_t *c, const void *send, void *recv, size_t recv_count,
                             enum comm_dtype t, enum comm_reduce_op op)
{
    struct ring_comm *rc = c->impl;
    if (!rc->dc)
        return comm_reduce_scatter_by_all_reduce(c, send, recv, recv_count, t, op);
    return devcoll_status_(rc, devcoll_reduce_scatter(rc->dc, send, recv, recv_count, (int)t,
                                                      (int)op, NULL));
}

int ring_comm_reduce(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                     enum comm_reduce_op op, int root)
{
    struct ring_comm *rc = c->impl;
    if (!rc->dc)
        return comm_reduce_by_all_reduce(c, send, recv, count, t, op, root);
    return devcoll_status_(rc,
                           devcoll_reduce(rc->dc, send, recv, count, (int)t, (int)op, root, NULL));
}

int ring_comm_async_error(comm_t *c)
{
    struct ring_comm *rc = c->impl;
    return rc->dc ? devcoll_status_(rc, 0) : 0;
}

const char *ring_comm_algo(const comm_t *c, size_t bytes)
{
    const struct ring_comm *rc = c->impl;
    if (rc->dc)
        return devcoll_algo_for(rc->dc, bytes) == DEVCOLL_TWOSHOT ? "device two-shot"
                                                                  : "device one-shot";
    if (rc->hier) // (a sum's; an average takes the flat ring)
        return "hierarchical";
    if (rc->small && bytes <= rc->small_bytes)
        return rc->small->ops->algo(rc->small, bytes);
    const uint64_t piece = rc->piece_bytes; // the engine runs a piece at a time
    return ring_algo_name(ring_algo_for(&rc->core, bytes < piece ? bytes : piece));
}
