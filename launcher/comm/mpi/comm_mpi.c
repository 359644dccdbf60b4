// comm_mpi.c: the reference collective backend: MPI_Allreduce and friends on
// the host view of device buffers (CPU devices) or on host copies (CUDA);
// the half types through user operations (kernels.h's reductions).
//
// These calls are blocking MPI collectives, so their waits are bounded by the
// MPI library (Open MPI ends the job when a rank dies), not by comm.timeout_s:
// this backend is the yardstick the ring is measured and tested against.
// (Point-to-point, mpi_p2p.c, and the all-to-all are bounded by it.)
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "device_internal.h"
#include "env.h"
#include "kernels.h"
#include "log.h"

// Largest piece handed to one MPI call: counts are ints. Also the size of the
// host staging buffer for CUDA devices.
#define MPI_PIECE_BYTES (64ull << 20)

// The half types' user operations: [0] float16, [1] bfloat16, by comm.h's
// operation (avg is a sum, then divided: no operation of its own).
#define HALF_TYPES 2

struct mpi_comm {
    MPI_Comm comm;   // duplicate of the communicator
    int staged;      // device memory is not host-addressable (CUDA)
    char *host;      // staging buffer for CUDA devices, MPI_PIECE_BYTES
    int pinned;      // host is page-locked (device_pin_host)
    device_t *dev;   // the device host is pinned for
    MPI_Op half_op[HALF_TYPES][COMM_OP_COUNT]; // over MPI_UINT16_T; MPI_OP_NULL for avg
};

static int check_(int mpi_rc, const char *call) { return comm_mpi_check(mpi_rc, "mpi", call); }

// ---- half precision: MPI has no such types ----
//
// Each is MPI_UINT16_T reduced by a user operation that is kernels.h's
// reduction (the ring's, the same bits): inout[i] = in[i] op inout[i].
#define HALF_USER_FN_(NAME, REDUCE, OP)                                                   \
    static void NAME(void *in, void *inout, int *len, MPI_Datatype *type)                 \
    {                                                                                     \
        (void)type;                                                                       \
        for (int i = 0; i < *len; i++)                                                    \
            REDUCE((size_t)i, (uint16_t *)inout, (const uint16_t *)in,                    \
                   (const uint16_t *)inout, OP, 0);                                       \
    }
HALF_USER_FN_(f16_sum_, kernel_reduce_f16, KERNEL_OP_SUM)
HALF_USER_FN_(f16_prod_, kernel_reduce_f16, KERNEL_OP_PROD)
HALF_USER_FN_(f16_min_, kernel_reduce_f16, KERNEL_OP_MIN)
HALF_USER_FN_(f16_max_, kernel_reduce_f16, KERNEL_OP_MAX)
HALF_USER_FN_(bf16_sum_, kernel_reduce_bf16, KERNEL_OP_SUM)
HALF_USER_FN_(bf16_prod_, kernel_reduce_bf16, KERNEL_OP_PROD)
HALF_USER_FN_(bf16_min_, kernel_reduce_bf16, KERNEL_OP_MIN)
HALF_USER_FN_(bf16_max_, kernel_reduce_bf16, KERNEL_OP_MAX)

static MPI_User_function *const half_fn_[HALF_TYPES][COMM_OP_COUNT] = {
    [0] = {[COMM_SUM] = f16_sum_, [COMM_PROD] = f16_prod_, [COMM_MIN] = f16_min_,
           [COMM_MAX] = f16_max_},
    [1] = {[COMM_SUM] = bf16_sum_, [COMM_PROD] = bf16_prod_, [COMM_MIN] = bf16_min_,
           [COMM_MAX] = bf16_max_},
};

// All commutative: MPI may combine the ranks in any order, as it does for
// MPI_SUM on floats.
static int half_ops_create_(struct mpi_comm *m)
{
    for (int k = 0; k < HALF_TYPES; k++)
        for (int op = 0; op < COMM_OP_COUNT; op++)
            if (half_fn_[k][op])
                TRY(check_(MPI_Op_create(half_fn_[k][op], 1, &m->half_op[k][op]), "MPI_Op_create"));
    return 0;
}

static void half_ops_free_(struct mpi_comm *m)
{
    for (int k = 0; k < HALF_TYPES; k++)
        for (int op = 0; op < COMM_OP_COUNT; op++)
            if (m->half_op[k][op] != MPI_OP_NULL)
                MPI_Op_free(&m->half_op[k][op]); // sets it to MPI_OP_NULL
}

static void mpi_destroy_(comm_t *c)
{
    struct mpi_comm *m = c->impl;
    if (!m)
        return;
    half_ops_free_(m);
    if (m->comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->comm);
    if (m->pinned)
        device_unpin_host(m->dev, m->host);
    free(m->host);
    free(m);
    c->impl = NULL;
}

static int mpi_create_(comm_t *c, const struct comm_args *args)
{
    struct mpi_comm *m = calloc(1, sizeof *m);
    if (!m)
        return VGPU_ENOMEM;
    c->impl = m;
    m->comm = MPI_COMM_NULL;
    for (int k = 0; k < HALF_TYPES; k++)
        for (int op = 0; op < COMM_OP_COUNT; op++)
            m->half_op[k][op] = MPI_OP_NULL; // a handle, not necessarily 0
    // VGPU_MPI_STAGING=1 takes the GPU's data path (copies through host
    // staging) on CPU devices too, so that tests run it without a GPU.
    m->staged = !device_host_addressable(args->dev) || env_get()->mpi_staging;
    int rc = comm_mpi_dup_bounded(c, args->mpi_comm, &m->comm, "mpi backend set-up (MPI_Comm_idup)");
    if (rc == 0)
        rc = half_ops_create_(m);
    if (rc == 0 && m->staged && !(m->host = malloc(MPI_PIECE_BYTES)))
        rc = VGPU_ENOMEM;
    // Every collective copies through it to and from the GPU: page-locked,
    // those copies run at the link's rate (a failed pin leaves it pageable).
    if (rc == 0 && m->staged)
        m->pinned = device_pin_host(args->dev, m->host, MPI_PIECE_BYTES) == 0;
    m->dev = args->dev;
    rc = comm_agree(c, args->mpi_comm, rc, "mpi backend set-up");
    if (rc < 0)
        mpi_destroy_(c);
    return rc;
}

static MPI_Datatype mpi_type_(enum comm_dtype t)
{
    switch (t) {
    case COMM_FLOAT64: return MPI_DOUBLE;
    case COMM_INT32: return MPI_INT32_T;
    case COMM_INT64: return MPI_INT64_T;
    case COMM_FLOAT16:
    case COMM_BFLOAT16: return MPI_UINT16_T; // reduced by half_op
    default: return MPI_FLOAT;
    }
}

static MPI_Op mpi_op_(const struct mpi_comm *m, enum comm_dtype t, enum comm_reduce_op op)
{
    if (op == COMM_AVG)
        op = COMM_SUM; // avg's sum, divided afterwards
    if (t == COMM_FLOAT16 || t == COMM_BFLOAT16)
        return m->half_op[t == COMM_BFLOAT16][op];
    switch (op) {
    case COMM_PROD: return MPI_PROD;
    case COMM_MIN: return MPI_MIN;
    case COMM_MAX: return MPI_MAX;
    default: return MPI_SUM;
    }
}

static int mpi_all_reduce_(comm_t *c, const void *send, void *recv, size_t count,
                           enum comm_dtype t, enum comm_reduce_op op)
{
    struct mpi_comm *m = c->impl;
    const size_t es = comm_dtype_size(t), piece = MPI_PIECE_BYTES / es;
    size_t done = 0;
    do { // at least once: count 0 is still a (trivial) collective
        const size_t len = count - done < piece ? count - done : piece;
        const size_t bytes = len * es, at = done * es;
        char *r;
        const void *s;
        if (m->staged) {
            r = m->host;
            if (bytes)
                TRY(device_copy_to_host(c->dev, r, (const char *)send + at, bytes));
            s = MPI_IN_PLACE;
        } else {
            r = bytes ? (char *)device_host_view(c->dev, recv) + at : NULL;
            s = send == recv ? MPI_IN_PLACE
                             : bytes ? (const char *)device_host_view(c->dev, send) + at : NULL;
        }
        TRY(check_(MPI_Allreduce(s, r, (int)len, mpi_type_(t), mpi_op_(m, t, op), m->comm),
                   "MPI_Allreduce"));
        if (op == COMM_AVG)
            comm_divide_host(r, len, t, c->size);
        if (m->staged && bytes)
            TRY(device_copy_to_device(c->dev, (char *)recv + at, r, bytes));
        done += len;
    } while (done < count);
    return 0;
}

// MPI_Reduce, in pieces as the all-reduce: root's result in place in its
// (host view or staging) receive buffer; the other ranks only send.
static int mpi_reduce_(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                       enum comm_reduce_op op, int root)
{
    struct mpi_comm *m = c->impl;
    const int is_root = c->rank == root;
    const size_t es = comm_dtype_size(t), piece = MPI_PIECE_BYTES / es;
    size_t done = 0;
    do { // at least once: count 0 is still a (trivial) collective
        const size_t len = count - done < piece ? count - done : piece;
        const size_t bytes = len * es, at = done * es;
        char *r = NULL;
        const void *s;
        if (m->staged) {
            if (bytes)
                TRY(device_copy_to_host(c->dev, m->host, (const char *)send + at, bytes));
            r = is_root ? m->host : NULL;
            s = is_root ? MPI_IN_PLACE : m->host;
        } else {
            const char *sv = bytes ? (const char *)device_host_view(c->dev, send) + at : NULL;
            r = is_root && bytes ? (char *)device_host_view(c->dev, recv) + at : NULL;
            s = is_root && send == recv ? MPI_IN_PLACE : sv;
        }
        TRY(check_(MPI_Reduce(s, r, (int)len, mpi_type_(t), mpi_op_(m, t, op), root, m->comm),
                   "MPI_Reduce"));
        if (is_root && op == COMM_AVG)
            comm_divide_host(r, len, t, c->size);
        if (is_root && m->staged && bytes)
            TRY(device_copy_to_device(c->dev, (char *)recv + at, r, bytes));
        done += len;
    } while (done < count);
    return 0;
}

static int mpi_send_(comm_t *c, const void *buf, size_t bytes, int peer)
{
    struct mpi_comm *m = c->impl;
    return comm_mpi_p2p(c, m->comm, (void *)buf, bytes, peer, 1, m->staged);
}

static int mpi_recv_(comm_t *c, void *buf, size_t bytes, int peer)
{
    struct mpi_comm *m = c->impl;
    return comm_mpi_p2p(c, m->comm, buf, bytes, peer, 0, m->staged);
}

static int mpi_broadcast_(comm_t *c, void *buf, size_t bytes, int root)
{
    struct mpi_comm *m = c->impl;
    size_t done = 0;
    do {
        const size_t len = bytes - done < MPI_PIECE_BYTES ? bytes - done : MPI_PIECE_BYTES;
        char *dev_ptr = (char *)buf + done;
        char *h = m->staged ? m->host : len ? device_host_view(c->dev, dev_ptr) : NULL;
        if (m->staged && len && c->rank == root)
            TRY(device_copy_to_host(c->dev, h, dev_ptr, len));
        TRY(check_(MPI_Bcast(h, (int)len, MPI_BYTE, root, m->comm), "MPI_Bcast"));
        if (m->staged && len && c->rank != root)
            TRY(device_copy_to_device(c->dev, dev_ptr, h, len));
        done += len;
    } while (done < bytes);
    return 0;
}

static int mpi_all_gather_(comm_t *c, const void *send, void *recv, size_t bytes)
{
    struct mpi_comm *m = c->impl;
    const int n = c->size;
    // Each rank's part goes in pieces; a resized type places piece i of every
    // rank at its block (stride `bytes`), so recv needs no reshuffling.
    const size_t piece = (MPI_PIECE_BYTES / (size_t)n) & ~(size_t)63;
    size_t done = 0;
    do {
        const size_t len = bytes - done < piece ? bytes - done : piece;
        MPI_Datatype strided;
        TRY(comm_mpi_strided_type("mpi", len, m->staged ? len : bytes, &strided));
        int rc = 0;
        if (m->staged) {
            char *h = m->host;
            if (len)
                rc = device_copy_to_host(c->dev, h + (size_t)c->rank * len,
                                         (const char *)send + done, len);
            if (rc == 0)
                rc = check_(MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, h, 1, strided, m->comm),
                            "MPI_Allgather");
            for (int q = 0; rc == 0 && len && q < n; q++)
                rc = device_copy_to_device(c->dev, (char *)recv + (size_t)q * bytes + done,
                                           h + (size_t)q * len, len);
        } else {
            char *r = len ? (char *)device_host_view(c->dev, recv) + done : NULL;
            const char *s = len ? (const char *)device_host_view(c->dev, send) + done : NULL;
            const void *sarg = len && s == r + (size_t)c->rank * bytes ? MPI_IN_PLACE : s;
            rc = check_(MPI_Allgather(sarg, (int)len, MPI_BYTE, r, 1, strided, m->comm),
                        "MPI_Allgather");
        }
        MPI_Type_free(&strided);
        TRY(rc);
        done += len;
    } while (done < bytes);
    return 0;
}

// The deterministic all-reduce's exchange is bounded by comm.timeout_s like
// the ring's waits (unlike this backend's other calls): a stopped rank must
// not hang a deterministic run.
static int all_to_all_bounded_(comm_t *c, const void *send, void *recv, MPI_Datatype type)
{
    struct mpi_comm *m = c->impl;
    MPI_Request req;
    TRY(check_(MPI_Ialltoall(send, 1, type, recv, 1, type, m->comm, &req), "MPI_Ialltoall"));
    return comm_mpi_wait_bounded(c, &req, "all-to-all");
}

static int mpi_all_to_all_(comm_t *c, const void *send, void *recv, size_t bytes)
{
    struct mpi_comm *m = c->impl;
    const int n = c->size;
    // Pieces of each block, with strided types as in all_gather.
    const size_t piece = (MPI_PIECE_BYTES / 2 / (size_t)n) & ~(size_t)63;
    if (bytes == 0)
        return check_(MPI_Barrier(m->comm), "MPI_Barrier");
    for (size_t done = 0; done < bytes;) {
        const size_t len = bytes - done < piece ? bytes - done : piece;
        MPI_Datatype strided;
        TRY(comm_mpi_strided_type("mpi", len, m->staged ? len : bytes, &strided));
        int rc = 0;
        if (m->staged) {
            char *hs = m->host, *hr = m->host + (size_t)n * len;
            for (int q = 0; rc == 0 && q < n; q++)
                rc = device_copy_to_host(c->dev, hs + (size_t)q * len,
                                         (const char *)send + (size_t)q * bytes + done, len);
            if (rc == 0)
                rc = all_to_all_bounded_(c, hs, hr, strided);
            for (int q = 0; rc == 0 && q < n; q++)
                rc = device_copy_to_device(c->dev, (char *)recv + (size_t)q * bytes + done,
                                           hr + (size_t)q * len, len);
        } else {
            const char *s = (const char *)device_host_view(c->dev, send) + done;
            char *r = (char *)device_host_view(c->dev, recv) + done;
            rc = all_to_all_bounded_(c, s, r, strided);
        }
        MPI_Type_free(&strided);
        TRY(rc);
        done += len;
    }
    return 0;
}

static int mpi_barrier_(comm_t *c)
{
    struct mpi_comm *m = c->impl;
    return check_(MPI_Barrier(m->comm), "MPI_Barrier");
}

const struct comm_ops comm_mpi_ops = {
    .name = "mpi",
    .create = mpi_create_,
    .all_reduce = mpi_all_reduce_,
    .reduce = mpi_reduce_,
    .send = mpi_send_,
    .recv = mpi_recv_,
    .broadcast = mpi_broadcast_,
    .all_gather = mpi_all_gather_,
    .all_to_all = mpi_all_to_all_,
    .barrier = mpi_barrier_,
    .destroy = mpi_destroy_,
};
