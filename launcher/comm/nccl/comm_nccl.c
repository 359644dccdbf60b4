// comm_nccl.c: the NCCL collective backend, for jobs where every rank has a
// GPU of its own. Built only when NCCL is found; never run in CI (no GPU).
//
// NCCL refuses two ranks of a communicator on one GPU, so create checks that
// first (all-gather of host + GPU UUID) and says what to do instead. Calls run
// on a stream of this backend ordered after the device's own stream by an
// event (no host round trip), and every wait polls the stream and NCCL's
// asynchronous error with the comm's timeout; on a timeout or an error the
// communicator is aborted so that no rank stays inside NCCL.
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_internal.h"
#include "device_internal.h"
#include "env.h"
#include "log.h"
#include "util.h"

struct nccl_comm {
    ncclComm_t comm;     // NULL until ncclCommInitRank has finished
    cudaStream_t stream; // collectives run here (NULL while only NCCL's own work is waited for)
    cudaStream_t own_stream; // the same stream, kept for its destruction
    MPI_Comm mpi;        // duplicate of the communicator (bootstrap)
    float *scratch;      // one device float for the barrier
    cudaEvent_t ready;   // recorded on the device's stream: the buffers are written
    int broken;          // timed out or failed: abort instead of destroy
};

#define NCCL_SPIN_POLLS 2000 // polls before the wait starts sleeping 50 us between them

struct nccl_peer {
    char host[64];
    char uuid[48];
};

int comm_nccl_runtime_version(void)
{
    int v = 0;
    return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

// Aborts the communicator: its kernels stop and its resources go, so no rank
// stays inside NCCL (ncclCommAbort; the handle is invalid afterwards).
static void abort_(struct nccl_comm *m)
{
    m->broken = 1;
    if (m->comm) {
        ncclCommAbort(m->comm);
        m->comm = NULL;
    }
}

// Waits for NCCL's work on the stream (and, with the stream NULL, for the
// non-blocking init), bounded by the timeout; polls briefly before sleeping
// (a collective usually finishes within microseconds of its last peer).
// On a timeout or an error the communicator is aborted here.
static int nccl_wait_(comm_t *c, struct nccl_comm *m, const char *what)
{
    struct util_wait_clock clock;
    util_wait_clock_start(&clock);
    int warned = 0;
    unsigned polls = 0;
    for (;;) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(m->comm, &async) != ncclSuccess ||
            (async != ncclSuccess && async != ncclInProgress)) {
            log_error("nccl: %s failed: %s; aborting the NCCL communicator", what,
                      ncclGetErrorString(async));
            abort_(m);
            return VGPU_ECOMM;
        }
        if (async == ncclSuccess) {
            cudaError_t q = m->stream ? cudaStreamQuery(m->stream) : cudaSuccess;
            if (q == cudaSuccess)
                return 0;
            if (q != cudaErrorNotReady) {
                log_error("nccl: %s: CUDA error %s; aborting the NCCL communicator", what,
                          cudaGetErrorString(q));
                abort_(m);
                return VGPU_ECOMM;
            }
        }
        double waited_s = util_wait_clock_waited(&clock);
        if (waited_s >= c->timeout_s) {
            log_error("collective timed out after %.1f s in NCCL %s (a peer did not arrive); "
                      "aborting the NCCL communicator",
                      waited_s, what);
            abort_(m);
            return VGPU_ETIMEOUT;
        }
        if (!warned && waited_s >= c->timeout_s / 2) {
            warned = 1;
            log_warn("NCCL %s still running after %.1f s (timeout %.1f s)", what, waited_s,
                     c->timeout_s);
        }
        if (++polls > NCCL_SPIN_POLLS) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

static int nccl_check_(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess || r == ncclInProgress)
        return 0;
    log_error("nccl: %s failed: %s", what, ncclGetErrorString(r));
    return VGPU_ECOMM;
}

static void nccl_destroy_(comm_t *c)
{
    struct nccl_comm *m = c->impl;
    if (!m)
        return;
    // A healthy communicator is finalised first: its outstanding work
    // flushed and its connections closed in order (bounded like every wait;
    // a failure or timeout aborts it instead), then destroyed. After a
    // failed collective it is aborted at once: a peer may be gone.
    if (m->comm && !m->broken && comm_failed(c))
        abort_(m);
    if (m->comm && !m->broken) {
        m->stream = NULL; // only NCCL's own work is waited for
        if (nccl_check_(ncclCommFinalize(m->comm), "ncclCommFinalize") < 0 ||
            nccl_wait_(c, m, "ncclCommFinalize") < 0)
            abort_(m);
    }
    if (m->comm) {
        if (m->broken)
            ncclCommAbort(m->comm);
        else
            ncclCommDestroy(m->comm);
    }
    if (m->ready)
        cudaEventDestroy(m->ready);
    if (m->own_stream)
        cudaStreamDestroy(m->own_stream);
    if (m->scratch)
        device_free(c->dev, m->scratch);
    if (m->mpi != MPI_COMM_NULL)
        MPI_Comm_free(&m->mpi);
    free(m);
    c->impl = NULL;
}

static int check_(int mpi_rc, const char *call) { return comm_mpi_check(mpi_rc, "nccl", call); }

static int nccl_create_(comm_t *c, const struct comm_args *args)
{
    if (!(device_caps(args->dev) & DEVICE_CAP_CUDA)) {
        log_error("nccl: rank %d has a %s device; NCCL needs a GPU (use comm.backend = ring)",
                  c->rank, device_kind_name(args->dev->info.kind));
        return VGPU_EUNSUPPORTED;
    }
    struct nccl_comm *m = calloc(1, sizeof *m);
    if (!m)
        return VGPU_ENOMEM;
    c->impl = m;
    int rc = comm_mpi_dup_bounded(c, args->mpi_comm, &m->mpi, "nccl set-up (MPI_Comm_idup)");
    struct nccl_peer *all = calloc((size_t)c->size, sizeof *all);
    if (rc == 0 && !all)
        rc = VGPU_ENOMEM;
    // On the parent communicator: a rank whose duplicate failed has none.
    TRY_GOTO(comm_agree(c, args->mpi_comm, rc, "nccl set-up"), rc, fail);

    // NCCL's own check would end in "Duplicate GPU detected" deep inside
    // init: refuse here, on every rank alike, with the reason and the fix.
    struct nccl_peer mine;
    memset(&mine, 0, sizeof mine);
    snprintf(mine.host, sizeof mine.host, "%s", args->host ? args->host : "?");
    snprintf(mine.uuid, sizeof mine.uuid, "%s", args->dev->info.uuid);
    // Set-up exchanges are bounded like every wait: a rank that never
    // arrives costs comm.timeout_s, named, not a hang.
    MPI_Request req;
    TRY_GOTO(check_(MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                                   MPI_BYTE, m->mpi, &req),
                    "MPI_Iallgather"),
             rc, fail);
    TRY_GOTO(comm_mpi_wait_bounded(c, &req, "nccl set-up (GPU list)"), rc, fail);
    int share = 0, other = -1;
    for (int q = 0; q < c->size && !share; q++)
        for (int q2 = q + 1; q2 < c->size; q2++)
            if (!strcmp(all[q].host, all[q2].host) && !strcmp(all[q].uuid, all[q2].uuid)) {
                share = 1;
                other = q2;
                break;
            }
    const char *chosen = NULL;
    char why[512];
    const struct comm_choice_facts facts = {
        .nccl_built = 1,
        .nccl_version = comm_nccl_runtime_version(),
        .all_cuda = 1,
        .max_ranks_per_gpu = share ? 2 : 1, // the runtime checked the limits; this backs NCCL's own check
        .multi_rank_env = env_get()->nccl_multi_rank_gpu,
    };
    rc = comm_choose_backend("nccl", &facts, &chosen, why, sizeof why);
    if (rc < 0) {
        if (c->rank == 0)
            log_error("nccl: %s (e.g. rank %d shares GPU %s on %s)", why, other,
                      all[other].uuid, all[other].host);
        goto fail;
    }
    free(all);
    all = NULL;

    rc = cudaSetDevice(args->dev->info.index) == cudaSuccess &&
                 cudaStreamCreateWithFlags(&m->own_stream, cudaStreamNonBlocking) == cudaSuccess &&
                 cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming) == cudaSuccess
             ? 0
             : VGPU_ECOMM;
    m->stream = m->own_stream;
    if (rc == 0)
        rc = device_alloc(c->dev, sizeof(float), (void **)&m->scratch);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0 && rc == 0)
        rc = nccl_check_(ncclGetUniqueId(&id), "ncclGetUniqueId");
    TRY_GOTO(comm_agree(c, m->mpi, rc, "NCCL unique id"), rc, fail);
    TRY_GOTO(check_(MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, m->mpi, &req), "MPI_Ibcast"), rc,
             fail);
    TRY_GOTO(comm_mpi_wait_bounded(c, &req, "nccl set-up (unique id)"), rc, fail);

    // Non-blocking init, so that a rank that never joins costs a timeout,
    // not a hang.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    rc = nccl_check_(ncclCommInitRankConfig(&m->comm, c->size, id, c->rank, &config),
                     "ncclCommInitRank");
    if (rc == 0) {
        m->stream = NULL; // only the init is pending
        rc = nccl_wait_(c, m, "ncclCommInitRank");
        m->stream = m->own_stream;
    }
    if ((rc = comm_agree(c, m->mpi, rc, "ncclCommInitRank")) < 0) {
        m->broken = 1;
        goto fail;
    }
    return 0;
fail:
    free(all);
    nccl_destroy_(c);
    return rc;
}

// Buffers were written on the device's stream: NCCL's stream waits for that
// work on the GPU (an event), not the host for the device. The rank's GPU
// is made current first: a collective may come from a thread of the
// program's own (vgpu.h: Threads), whose current device is CUDA's default.
static int after_device_(comm_t *c, struct nccl_comm *m)
{
    cudaStream_t dev_stream = (cudaStream_t)device_stream(c->dev);
    if (cudaSetDevice(c->dev->info.index) != cudaSuccess ||
        cudaEventRecord(m->ready, dev_stream) != cudaSuccess ||
        cudaStreamWaitEvent(m->stream, m->ready, 0) != cudaSuccess) {
        log_error("nccl: cannot order NCCL's stream after the device's: %s",
                  cudaGetErrorString(cudaGetLastError()));
        return VGPU_ECOMM;
    }
    return 0;
}

// The host waits (bounded) for the collective, so work the device enqueues
// after it reads the result.
#define NCCL_RUN_(c, m, call, what)                      \
    do {                                                 \
        if ((m)->broken)                                 \
            return VGPU_ECOMM;                           \
        TRY(after_device_((c), (m)));                    \
        TRY(nccl_check_((call), what));                  \
        return nccl_wait_((c), (m), what);               \
    } while (0)

// comm.h's types and operations are NCCL's, one to one (half types: the
// 16-bit words NCCL reduces as __half and __nv_bfloat16).
static ncclDataType_t nccl_type_(enum comm_dtype t)
{
    switch (t) {
    case COMM_FLOAT64: return ncclFloat64;
    case COMM_INT32: return ncclInt32;
    case COMM_INT64: return ncclInt64;
    case COMM_FLOAT16: return ncclFloat16;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0) || defined(__CUDA_BF16_TYPES_EXIST__)
    case COMM_BFLOAT16: return ncclBfloat16;
#else
    // nccl.h of 2.10-2.23 declares ncclBfloat16 for C++ only (inside
    // __CUDA_BF16_TYPES_EXIST__); the library has taken it as 9 since 2.10.
    case COMM_BFLOAT16: return (ncclDataType_t)9;
#endif
    default: return ncclFloat32;
    }
}

static ncclRedOp_t nccl_op_(enum comm_reduce_op op)
{
    switch (op) {
    case COMM_AVG: return ncclAvg;
    case COMM_PROD: return ncclProd;
    case COMM_MIN: return ncclMin;
    case COMM_MAX: return ncclMax;
    default: return ncclSum;
    }
}

static int nccl_all_reduce_(comm_t *c, const void *send, void *recv, size_t count,
                            enum comm_dtype t, enum comm_reduce_op op)
{
    struct nccl_comm *m = c->impl;
    NCCL_RUN_(c, m, ncclAllReduce(send, recv, count, nccl_type_(t), nccl_op_(op), m->comm, m->stream),
              "ncclAllReduce");
}

static int nccl_reduce_scatter_(comm_t *c, const void *send, void *recv, size_t recv_count,
                                enum comm_dtype t, enum comm_reduce_op op)
{
    struct nccl_comm *m = c->impl;
    NCCL_RUN_(c, m,
              ncclReduceScatter(send, recv, recv_count, nccl_type_(t), nccl_op_(op), m->comm,
                                m->stream),
              "ncclReduceScatter");
}

// recv is NULL on the ranks but root: NCCL reads it only there.
static int nccl_reduce_(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                        enum comm_reduce_op op, int root)
{
    struct nccl_comm *m = c->impl;
    NCCL_RUN_(c, m,
              ncclReduce(send, recv, count, nccl_type_(t), nccl_op_(op), root, m->comm, m->stream),
              "ncclReduce");
}

// Outside a group, as comm.h's send and recv: one transfer each.
static int nccl_send_(comm_t *c, const void *buf, size_t bytes, int peer)
{
    struct nccl_comm *m = c->impl;
    NCCL_RUN_(c, m, ncclSend(buf, bytes, ncclChar, peer, m->comm, m->stream), "ncclSend");
}

static int nccl_recv_(comm_t *c, void *buf, size_t bytes, int peer)
{
    struct nccl_comm *m = c->impl;
    NCCL_RUN_(c, m, ncclRecv(buf, bytes, ncclChar, peer, m->comm, m->stream), "ncclRecv");
}

static int nccl_broadcast_(comm_t *c, void *buf, size_t bytes, int root)
{
    struct nccl_comm *m = c->impl;
    NCCL_RUN_(c, m, ncclBroadcast(buf, buf, bytes, ncclChar, root, m->comm, m->stream),
              "ncclBroadcast");
}

static int nccl_all_gather_(comm_t *c, const void *send, void *recv, size_t bytes)
{
    struct nccl_comm *m = c->impl;
    NCCL_RUN_(c, m, ncclAllGather(send, recv, bytes, ncclChar, m->comm, m->stream),
              "ncclAllGather");
}

static int nccl_barrier_(comm_t *c)
{
    struct nccl_comm *m = c->impl;
    NCCL_RUN_(c, m, ncclAllReduce(m->scratch, m->scratch, 1, ncclFloat, ncclSum, m->comm, m->stream),
              "barrier (ncclAllReduce)");
}

static const struct comm_ops comm_nccl_ops = {
    .name = "nccl",
    .create = nccl_create_,
    .all_reduce = nccl_all_reduce_,
    .reduce_scatter = nccl_reduce_scatter_,
    .reduce = nccl_reduce_,
    .send = nccl_send_,
    .recv = nccl_recv_,
    .broadcast = nccl_broadcast_,
    .all_gather = nccl_all_gather_,
    .barrier = nccl_barrier_,
    .destroy = nccl_destroy_,
};

const struct comm_ops *comm_nccl_backend(void) { return &comm_nccl_ops; }
