// vnccl_api.c: NCCL's communicator functions (nccl.h): ids, creation
// (blocking, non-blocking, in groups, single-process), split and shrink,
// finalize, destroy, abort, revoke, errors and queries. Every entry is also
// exported under NCCL's profiling name (pnccl...), as NCCL's own library does.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"
#include "devcoll.h"
#include "vnccl.h"
#include "vnccl_api.h"

#define CONFIG_MAGIC 0xcafebeefu

static ncclResult_t check_comm_(struct ncclComm *c, const char *what, int revoked_ok)
{
    if (!c || c->magic != VNCCL_COMM_MAGIC)
        return vnccl_error(NULL, ncclInvalidArgument, "%s: comm is NULL or not a communicator",
                           what);
    vnccl_finish_init(c); // a non-blocking initialisation: its end first
    ncclResult_t st = (ncclResult_t)atomic_load(&c->async_error);
    if (st != ncclSuccess)
        return vnccl_error(c, st, "%s: the communicator has failed: %s", what,
                           c->last_error[0] ? c->last_error : ncclGetErrorString(st));
    if ((c->revoked && !revoked_ok) || c->finalized)
        return vnccl_error(c, ncclInvalidUsage, "%s: the communicator was %s", what,
                           c->finalized ? "finalized" : "revoked");
    if (c->head && atomic_load(&c->head->failed)) {
        st = (ncclResult_t)atomic_load(&c->head->fail_status);
        atomic_store(&c->async_error, (int)st);
        return vnccl_error(c, st, "%s: %s", what, c->head->why);
    }
    return ncclSuccess;
}

ncclResult_t vnccl_check_comm(struct ncclComm *c, const char *what)
{
    return check_comm_(c, what, 0);
}

void vnccl_finish_init(struct ncclComm *c)
{
    pthread_mutex_lock(&c->lock);
    if (c->init_thread_live) {
        pthread_join(c->init_thread, NULL);
        c->init_thread_live = 0;
    }
    pthread_mutex_unlock(&c->lock);
}

ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    if (!uniqueId)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    struct vnccl_id id;
    ncclResult_t st = vnccl_make_id(&id);
    memcpy(uniqueId->internal, &id, sizeof id);
    return st;
}

struct init_args {
    struct ncclComm *c;
    int nranks, rank;
    struct vnccl_id id;
};

static void *init_thread_(void *arg)
{
    struct init_args *a = arg;
    ncclResult_t st = vnccl_join(a->c, a->nranks, &a->id, a->rank);
    atomic_store(&a->c->async_error, (int)st);
    free(a);
    return NULL;
}

static ncclResult_t read_config_(const ncclConfig_t *config, int *blocking, char *label,
                                 size_t label_bytes)
{
    *blocking = 1;
    label[0] = 0;
    if (!config)
        return ncclSuccess;
    if (config->magic != CONFIG_MAGIC || config->size < offsetof(ncclConfig_t, cgaClusterSize))
        return vnccl_error(NULL, ncclInvalidArgument,
                           "the ncclConfig_t was not set from NCCL_CONFIG_INITIALIZER");
    if (config->blocking != NCCL_CONFIG_UNDEF_INT)
        *blocking = config->blocking != 0;
    if (config->size >= offsetof(ncclConfig_t, collnetEnable) && config->commName)
        snprintf(label, label_bytes, "%s", config->commName);
    return ncclSuccess;
}

// Creates the communicator of id for rank of nranks: queued inside a group,
// on a thread of its own when non-blocking (ncclInProgress until it is done).
static ncclResult_t init_rank_(ncclComm_t *out, int nranks, const struct vnccl_id *id, int rank,
                               const ncclConfig_t *config, const char *what)
{
    if (!out)
        return vnccl_error(NULL, ncclInvalidArgument, "%s: comm is NULL", what);
    *out = NULL;
    if (nranks < 1 || nranks > VNCCL_MAX_RANKS || rank < 0 || rank >= nranks)
        return vnccl_error(NULL, ncclInvalidArgument, "%s: rank %d of nranks %d is out of range",
                           what, rank, nranks);
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return vnccl_error(NULL, ncclSystemError, "%s: out of host memory", what);
    ncclResult_t st = read_config_(config, &c->blocking, c->label, sizeof c->label);
    if (st != ncclSuccess) {
        free(c);
        return st;
    }
    c->magic = VNCCL_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    pthread_mutex_init(&c->lock, NULL);
    atomic_store(&c->async_error, (int)ncclInProgress);
    if (vnccl_group_queue_init(c, nranks, id, rank)) {
        *out = c;
        return ncclSuccess;
    }
    if (!c->blocking) {
        struct init_args *a = malloc(sizeof *a);
        if (a)
            *a = (struct init_args){.c = c, .nranks = nranks, .rank = rank, .id = *id};
        if (a && pthread_create(&c->init_thread, NULL, init_thread_, a) == 0) {
            c->init_thread_live = 1;
            *out = c;
            return ncclInProgress;
        }
        free(a);
    }
    st = vnccl_join(c, nranks, id, rank);
    if (st != ncclSuccess) {
        vnccl_leave(c);
        free(c);
        return st;
    }
    atomic_store(&c->async_error, (int)ncclSuccess);
    *out = c;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    struct vnccl_id id;
    memcpy(&id, commId.internal, sizeof id);
    return init_rank_(comm, nranks, &id, rank, config, "ncclCommInitRankConfig");
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    struct vnccl_id id;
    memcpy(&id, commId.internal, sizeof id);
    return init_rank_(comm, nranks, &id, rank, NULL, "ncclCommInitRank");
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config)
{
    if (nId < 1 || !commIds)
        return vnccl_error(NULL, ncclInvalidArgument,
                           "ncclCommInitRankScalable: nId %d ids at %p", nId, (void *)commIds);
    struct vnccl_id id; // every id names the same ranks: the first is enough
    memcpy(&id, commIds[0].internal, sizeof id);
    return init_rank_(newcomm, nranks, &id, myrank, config, "ncclCommInitRankScalable");
}

ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
    if (!comm || ndev < 1)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclCommInitAll: %d devices into %p",
                           ndev, (void *)comm);
    struct vnccl_id id;
    ncclResult_t st = vnccl_make_id(&id);
    if (st != ncclSuccess)
        return st;
    const int before = vnccl_current_device(NULL, 0);
    vnccl_group_start();
    for (int i = 0; i < ndev && st == ncclSuccess; i++) {
        vnccl_set_device(devlist ? devlist[i] : i);
        st = init_rank_(&comm[i], ndev, &id, i, NULL, "ncclCommInitAll");
    }
    float unused;
    ncclResult_t end = vnccl_group_end(0, &unused);
    vnccl_set_device(before);
    return st != ncclSuccess ? st : end;
}

// The new communicator of a split or a shrink: rank `rank` of `nranks`.
static ncclResult_t make_child_(struct ncclComm *parent, int64_t color, int rank, int nranks,
                                ncclComm_t *newcomm, ncclConfig_t *config, const char *what)
{
    struct vnccl_id id;
    vnccl_derive_id(&parent->id, parent->splits++, color, &id);
    ncclConfig_t inherit = NCCL_CONFIG_INITIALIZER;
    inherit.blocking = parent->blocking;
    return init_rank_(newcomm, nranks, &id, rank, config ? config : &inherit, what);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    // nccl.h: split (and shrink) may follow ncclCommRevoke, once nothing is in flight
    ncclResult_t st = check_comm_(comm, "ncclCommSplit", 1);
    if (st != ncclSuccess)
        return st;
    if (!newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR))
        return vnccl_error(comm, ncclInvalidArgument, "ncclCommSplit: color %d (>= 0 or "
                           "NCCL_SPLIT_NOCOLOR), newcomm %p", color, (void *)newcomm);
    *newcomm = NULL;
    int mine[2] = {color, key}, *all = malloc((size_t)comm->nranks * sizeof mine);
    if (!all)
        return vnccl_error(comm, ncclSystemError, "ncclCommSplit: out of host memory");
    st = vnccl_host_all_gather(comm, mine, all, sizeof mine);
    int rank = 0, nranks = 0;
    for (int r = 0; r < comm->nranks && st == ncclSuccess; r++) {
        if (all[2 * r] != color)
            continue;
        nranks++;
        if (all[2 * r + 1] < key || (all[2 * r + 1] == key && r < comm->rank))
            rank++;
    }
    free(all);
    if (st != ncclSuccess)
        return st;
    if (color == NCCL_SPLIT_NOCOLOR) {
        comm->splits++; // as every member does
        return ncclSuccess;
    }
    return make_child_(comm, color, rank, nranks, newcomm, config, "ncclCommSplit");
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    if (!comm || comm->magic != VNCCL_COMM_MAGIC || !newcomm || excludeRanksCount < 0 ||
        (excludeRanksCount > 0 && !excludeRanksList) ||
        (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT))
        return vnccl_error(NULL, ncclInvalidArgument, "ncclCommShrink: invalid arguments");
    *newcomm = NULL;
    // A failed parent is what NCCL_SHRINK_ABORT is for, and a revoked one may
    // be shrunk (nccl.h): only a finalized one, or one never made, stops it.
    vnccl_finish_init(comm);
    if (comm->finalized || !comm->head)
        return vnccl_check_comm(comm, "ncclCommShrink");
    unsigned char *gone = calloc((size_t)comm->nranks, 1);
    if (!gone)
        return vnccl_error(comm, ncclSystemError, "ncclCommShrink: out of host memory");
    uint64_t set_hash = 0;
    for (int i = 0; i < excludeRanksCount; i++) {
        int r = excludeRanksList[i];
        if (r < 0 || r >= comm->nranks) {
            free(gone);
            return vnccl_error(comm, ncclInvalidArgument,
                               "ncclCommShrink: rank %d to exclude is out of range", r);
        }
        gone[r] = 1;
    }
    int rank = 0, nranks = 0;
    for (int r = 0; r < comm->nranks; r++) {
        if (gone[r])
            set_hash = set_hash * 1000003u + (uint64_t)r + 1;
        else
            rank += r < comm->rank, nranks++;
    }
    const int excluded = gone[comm->rank];
    free(gone);
    if (excluded || nranks == 0) {
        comm->splits++;
        return ncclSuccess;
    }
    // Every survivor names the same segment: the parent's, this shrink, the set left out.
    return make_child_(comm, -2 - (int64_t)(set_hash & 0x3fffffffffffffffull), rank, nranks,
                       newcomm, config, "ncclCommShrink");
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (!comm || comm->magic != VNCCL_COMM_MAGIC)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclCommFinalize: not a communicator");
    if (comm->revoked || comm->finalized)
        return vnccl_error(comm, ncclInvalidUsage, "ncclCommFinalize: the communicator was %s",
                           comm->revoked ? "revoked" : "finalized already");
    comm->finalized = 1; // every call has ended already: nothing to flush
    return ncclSuccess;
}

static void free_comm_(struct ncclComm *c)
{
    vnccl_finish_init(c);
    vnccl_leave(c);
    c->magic = 0;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    if (comm->magic != VNCCL_COMM_MAGIC)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclCommDestroy: not a communicator");
    free_comm_(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    if (comm->magic != VNCCL_COMM_MAGIC)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclCommAbort: not a communicator");
    atomic_store(&comm->aborted, 1); // a creation still meeting its peers stops now
    vnccl_finish_init(comm);
    if (comm->dc) // kernels waiting for peers give up (this rank named)
        devcoll_abort(comm->dc, comm->rank);
    if (comm->head) // the peers' waits end now, not at their timeout (and this rank's own)
        vnccl_fail(comm, ncclRemoteError, "rank %d aborted the communicator", comm->rank);
    // A call of another thread (PyTorch's watchdog aborts while the main
    // thread waits in a collective) ends at its next look at the failure.
    const double start_s = util_now_s();
    while (atomic_load(&comm->busy) > 0 && util_now_s() - start_s < 10.0)
        usleep(1000);
    if (atomic_load(&comm->busy) > 0) { // still inside: its memory must stay
        vnccl_error(comm, ncclSuccess, "ncclCommAbort: a call on another thread did not end "
                    "within 10 s; the communicator's memory is left to it");
        return ncclSuccess;
    }
    free_comm_(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
    if (!comm || comm->magic != VNCCL_COMM_MAGIC || revokeFlags != NCCL_REVOKE_DEFAULT)
        return vnccl_error(NULL, ncclInvalidArgument,
                           "ncclCommRevoke: a communicator and NCCL_REVOKE_DEFAULT");
    comm->revoked = 1; // nothing is in flight: every call has ended
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (a CUDA call failed)";
    case ncclSystemError: return "unhandled system error (a system call failed or timed out)";
    case ncclInternalError: return "internal error (a bug in vgpu's NCCL)";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage (the ranks' calls do not match)";
    case ncclRemoteError: return "remote process exited or aborted the communicator";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    if (comm && comm->magic == VNCCL_COMM_MAGIC)
        return comm->last_error;
    return vnccl_thread_error();
}

void ncclResetDebugInit(void) {} // vgpu's NCCL reads no logging settings

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm || comm->magic != VNCCL_COMM_MAGIC || !asyncError)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclCommGetAsyncError: invalid arguments");
    ncclResult_t st = (ncclResult_t)atomic_load(&comm->async_error);
    if (st == ncclSuccess && comm->head)
        vnccl_devcoll_error(comm); // what a queued kernel met fails the communicator
    if (st == ncclSuccess && comm->head && atomic_load(&comm->head->failed)) {
        st = (ncclResult_t)atomic_load(&comm->head->fail_status);
        atomic_store(&comm->async_error, (int)st);
        vnccl_error(comm, st, "%s", comm->head->why);
    }
    if (st != ncclInProgress)
        vnccl_finish_init(comm);
    *asyncError = st;
    return ncclSuccess;
}

#define QUERY_(NAME, FIELD)                                                              \
    ncclResult_t NAME(const ncclComm_t comm, int *out)                                   \
    {                                                                                    \
        if (!comm || comm->magic != VNCCL_COMM_MAGIC || !out)                            \
            return vnccl_error(NULL, ncclInvalidArgument, #NAME ": invalid arguments");  \
        *out = comm->FIELD;                                                              \
        return ncclSuccess;                                                              \
    }
QUERY_(ncclCommCount, nranks)
QUERY_(ncclCommUserRank, rank)
QUERY_(ncclCommCuDevice, device)

VNCCL_PROFILING_NAME(ncclGetVersion)
VNCCL_PROFILING_NAME(ncclGetUniqueId)
VNCCL_PROFILING_NAME(ncclCommInitRankConfig)
VNCCL_PROFILING_NAME(ncclCommInitRank)
VNCCL_PROFILING_NAME(ncclCommInitRankScalable)
VNCCL_PROFILING_NAME(ncclCommInitAll)
VNCCL_PROFILING_NAME(ncclCommSplit)
VNCCL_PROFILING_NAME(ncclCommShrink)
VNCCL_PROFILING_NAME(ncclCommFinalize)
VNCCL_PROFILING_NAME(ncclCommDestroy)
VNCCL_PROFILING_NAME(ncclCommAbort)
VNCCL_PROFILING_NAME(ncclCommRevoke)
VNCCL_PROFILING_NAME(ncclGetErrorString)
VNCCL_PROFILING_NAME(ncclGetLastError)
// (nccl.h marks it deprecated: naming it for its alias would warn)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
VNCCL_PROFILING_NAME(ncclResetDebugInit)
#pragma GCC diagnostic pop
VNCCL_PROFILING_NAME(ncclCommGetAsyncError)
VNCCL_PROFILING_NAME(ncclCommCount)
VNCCL_PROFILING_NAME(ncclCommUserRank)
VNCCL_PROFILING_NAME(ncclCommCuDevice)
