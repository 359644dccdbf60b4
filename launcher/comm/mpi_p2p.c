// mpi_p2p.c: point-to-point over MPI (comm_send / comm_recv) for the
// backends that move data with MPI (ring, mpi): pieces of a bounded size
// on the backend's own communicator under a tag no collective uses, device
// memory copied through a host buffer of the comm's where the backend
// stages (CUDA, the test-only device, VGPU_*_STAGING=1), and every piece's
// wait bounded by comm.timeout_s with the peer named.
#include "comm_internal.h"

#include <stdlib.h>

#include "device_internal.h"
#include "log.h"

// A piece: MPI counts are ints, and a staged piece passes through the host
// buffer, which is this large (allocated at the first staged message, kept
// until comm_destroy).
#define P2P_PIECE_BYTES (4ull << 20)

struct p2p_what {
    comm_t *c;
    const char *call;
    int peer;
};

static void p2p_half_(void *arg, double waited_s)
{
    const struct p2p_what *w = arg;
    log_warn("%s still waiting for rank %d after %.1f s (timeout %.1f s)", w->call,
             comm_rank_name(w->c, w->peer), waited_s, w->c->timeout_s);
}

// The bounded wait of one piece. A receive that timed out is cancelled (its
// buffer may then be reused); a send cannot be, and its request is let go.
static int p2p_wait_(comm_t *c, MPI_Request *req, const char *call, int peer, int send)
{
    struct p2p_what w = {c, call, peer};
    const struct comm_wait_hooks hooks = {.on_half = p2p_half_, .arg = &w};
    double waited_s = 0;
    const int rc = comm_mpi_wait(req, c->timeout_s, &hooks, &waited_s);
    if (rc == 0)
        return 0;
    if (rc == VGPU_ETIMEOUT)
        log_error("%s timed out after %.1f s: rank %d never %s (comm.timeout_s = %.1f; it "
                  "stopped, died, or does not make the matching %s)",
                  call, waited_s, comm_rank_name(c, peer), send ? "received" : "sent",
                  c->timeout_s, send ? "comm_recv" : "comm_send");
    else
        log_error("%s with rank %d: MPI failed", call, comm_rank_name(c, peer));
    if (!send && MPI_Cancel(req) == MPI_SUCCESS && comm_mpi_wait(req, 1.0, NULL, NULL) == 0)
        return rc;
    if (*req != MPI_REQUEST_NULL)
        MPI_Request_free(req);
    return rc;
}

// The host buffer of staged pieces, allocated once (page-locked where the
// device can: the copies to and from it then run at the link's rate).
static int p2p_host_(comm_t *c, char **host)
{
    if (!c->p2p_host) {
        c->p2p_host = malloc(P2P_PIECE_BYTES);
        if (!c->p2p_host)
            return VGPU_ENOMEM;
        c->p2p_pinned = device_pin_host(c->dev, c->p2p_host, P2P_PIECE_BYTES) == 0;
    }
    *host = c->p2p_host;
    return 0;
}

int comm_mpi_p2p(comm_t *c, MPI_Comm mpi, void *buf, size_t bytes, int peer, int send,
                 int staged)
{
    const char *call = send ? "comm_send" : "comm_recv";
    staged = staged || (bytes && !device_host_view(c->dev, buf));
    char *host = NULL;
    if (staged && bytes)
        TRY(p2p_host_(c, &host));
    size_t done = 0;
    do { // at least once: a message of 0 bytes is still one message
        const size_t len = bytes - done < P2P_PIECE_BYTES ? bytes - done : P2P_PIECE_BYTES;
        char *dev_ptr = (char *)buf + done;
        char *h = !len ? NULL : staged ? host : (char *)device_host_view(c->dev, dev_ptr);
        if (send && staged && len)
            TRY(device_copy_to_host(c->dev, h, dev_ptr, len));
        MPI_Request req;
        TRY(comm_mpi_check(send ? MPI_Isend(h, (int)len, MPI_BYTE, peer, COMM_P2P_TAG, mpi, &req)
                                : MPI_Irecv(h, (int)len, MPI_BYTE, peer, COMM_P2P_TAG, mpi, &req),
                           c->ops->name, send ? "MPI_Isend" : "MPI_Irecv"));
        TRY(p2p_wait_(c, &req, call, peer, send));
        if (!send && staged && len)
            TRY(device_copy_to_device(c->dev, dev_ptr, h, len));
        done += len;
    } while (done < bytes);
    return 0;
}

void comm_p2p_release(comm_t *c)
{
    // After a failure a send may still read it (MPI cannot cancel one): it
    // stays, and the job is ending anyway.
    if (!c->p2p_host || c->failed)
        return;
    if (c->p2p_pinned)
        device_unpin_host(c->dev, c->p2p_host);
    free(c->p2p_host);
    c->p2p_host = NULL;
}
