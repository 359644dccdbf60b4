// nccl_lib.c: NCCL loaded when first used (common/lazy_lib.h): a build with
// NCCL starts on a host without it and says so only when the nccl backend is
// chosen. The functions below carry NCCL's own names and prototypes (its
// header is included, so the compiler checks every signature) and call
// through the resolved pointers.
#include <stdio.h>

#include "lazy_lib.h"
#include <nccl.h>

static struct lazy_lib nccl_ = {.soname = VGPU_NCCL_SONAME, .once = PTHREAD_ONCE_INIT};
static struct {
    ncclResult_t (*get_version)(int *);
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank_config)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*finalize)(ncclComm_t);
    ncclResult_t (*abort)(ncclComm_t);
    const char *(*error_string)(ncclResult_t);
    ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                   ncclComm_t, cudaStream_t);
    ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int,
                           ncclComm_t, cudaStream_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
} nccl_fn_;

static void nccl_load_(void)
{
    static const char *const names[] = {
        "ncclGetVersion",      "ncclGetUniqueId",       "ncclCommInitRankConfig",
        "ncclCommDestroy",     "ncclCommAbort",         "ncclGetErrorString",
        "ncclCommGetAsyncError", "ncclAllReduce",       "ncclBroadcast",
        "ncclAllGather",       "ncclReduceScatter",     "ncclCommFinalize",
        "ncclReduce",          "ncclSend",              "ncclRecv"};
    enum { N = sizeof names / sizeof *names };
    void *slots[N] = {0};
    lazy_lib_load(&nccl_, names, slots, N);
    if (!nccl_.handle)
        return;
    void **dst[N] = {(void **)&nccl_fn_.get_version,  (void **)&nccl_fn_.get_unique_id,
                     (void **)&nccl_fn_.init_rank_config, (void **)&nccl_fn_.destroy,
                     (void **)&nccl_fn_.abort,        (void **)&nccl_fn_.error_string,
                     (void **)&nccl_fn_.async_error,  (void **)&nccl_fn_.all_reduce,
                     (void **)&nccl_fn_.broadcast,    (void **)&nccl_fn_.all_gather,
                     (void **)&nccl_fn_.reduce_scatter, (void **)&nccl_fn_.finalize,
                     (void **)&nccl_fn_.reduce,       (void **)&nccl_fn_.send,
                     (void **)&nccl_fn_.recv};
    for (int i = 0; i < N; i++)
        *dst[i] = slots[i];
}

static int nccl_missing_(void)
{
    pthread_once(&nccl_.once, nccl_load_);
    return nccl_.handle ? 0 : lazy_lib_missing(&nccl_, "NCCL");
}

// The probe of the backend choice, which says itself what a missing NCCL
// means (the ring is used): quiet.
ncclResult_t ncclGetVersion(int *version)
{
    pthread_once(&nccl_.once, nccl_load_);
    return nccl_.handle ? nccl_fn_.get_version(version) : ncclSystemError;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    return nccl_missing_() ? ncclSystemError : nccl_fn_.get_unique_id(id);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    return nccl_missing_() ? ncclSystemError
                           : nccl_fn_.init_rank_config(comm, nranks, id, rank, config);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    return nccl_missing_() ? ncclSystemError : nccl_fn_.destroy(comm);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    return nccl_missing_() ? ncclSystemError : nccl_fn_.finalize(comm);
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    return nccl_missing_() ? ncclSystemError : nccl_fn_.abort(comm);
}

const char *ncclGetErrorString(ncclResult_t result)
{
    return nccl_missing_() ? "NCCL is not loaded" : nccl_fn_.error_string(result);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *error)
{
    return nccl_missing_() ? ncclSystemError : nccl_fn_.async_error(comm, error);
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return nccl_missing_() ? ncclSystemError
                           : nccl_fn_.all_reduce(send, recv, count, type, op, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recv_count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return nccl_missing_() ? ncclSystemError
                           : nccl_fn_.reduce_scatter(send, recv, recv_count, type, op, comm, stream);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream)
{
    return nccl_missing_() ? ncclSystemError
                           : nccl_fn_.broadcast(send, recv, count, type, root, comm, stream);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream)
{
    return nccl_missing_() ? ncclSystemError
                           : nccl_fn_.all_gather(send, recv, count, type, comm, stream);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    return nccl_missing_() ? ncclSystemError
                           : nccl_fn_.reduce(send, recv, count, type, op, root, comm, stream);
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return nccl_missing_() ? ncclSystemError : nccl_fn_.send(buf, count, type, peer, comm, stream);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return nccl_missing_() ? ncclSystemError : nccl_fn_.recv(buf, count, type, peer, comm, stream);
}
