// vnccl_api_coll.c: NCCL's collectives, point-to-point calls, groups,
// reduction operators, buffer and window registration, and ncclMemAlloc.
// Each call is checked here (ncclInvalidArgument at the call, nothing sent
// to the peers), then queued in a group or run (vnccl_coll.c).
#include <stdlib.h>
#include <string.h>

#include "vnccl.h"
#include "vnccl_api.h"

static int op_ok_(const struct ncclComm *c, ncclRedOp_t op, ncclDataType_t t)
{
    if ((int)op >= 0 && (int)op < ncclNumOps)
        return 1;
    const int i = (int)op - ncclNumOps;
    return i >= 0 && i < VNCCL_MAX_PREMUL && c->premul[i].used && c->premul[i].dtype == t;
}

// Whether the call's buffers may be NULL: only where count is 0, or where the
// rank neither reads nor writes them.
static int buffers_ok_(const struct ncclComm *c, const struct vnccl_call *k)
{
    if (k->count == 0)
        return 1;
    const int root = c->rank == k->root;
    switch (k->kind) {
    case VNCCL_REDUCE: case VNCCL_GATHER: return k->send && (!root || k->recv);
    case VNCCL_SCATTER: return k->recv && (!root || k->send);
    case VNCCL_BROADCAST: return k->recv && (!root || k->send);
    case VNCCL_SEND: return k->send != NULL;
    case VNCCL_RECV: return k->recv != NULL;
    default: return k->send && k->recv;
    }
}

static ncclResult_t check_and_run_(struct ncclComm *c, struct vnccl_call k)
{
    const char *what = vnccl_kind_name(k.kind);
    ncclResult_t st = vnccl_check_comm(c, what);
    if (st != ncclSuccess)
        return st;
    const int rooted = k.kind == VNCCL_REDUCE || k.kind == VNCCL_BROADCAST ||
                       k.kind == VNCCL_GATHER || k.kind == VNCCL_SCATTER ||
                       k.kind == VNCCL_SEND || k.kind == VNCCL_RECV;
    const int reduces = k.kind == VNCCL_ALL_REDUCE || k.kind == VNCCL_REDUCE ||
                        k.kind == VNCCL_REDUCE_SCATTER;
    if (!rooted)
        k.root = -1;
    if (vnccl_type_size(k.dtype) == 0)
        return vnccl_error(c, ncclInvalidArgument, "%s: datatype %d is not one of nccl.h's",
                           what, (int)k.dtype);
    if (reduces && !op_ok_(c, k.op, k.dtype))
        return vnccl_error(c, ncclInvalidArgument,
                           "%s: op %d is neither a built-in reduction nor a premultiplied sum of "
                           "this communicator for %s", what, (int)k.op, vnccl_type_name(k.dtype));
    if (!reduces)
        k.op = ncclSum;
    if (rooted && (k.root < 0 || k.root >= c->nranks))
        return vnccl_error(c, ncclInvalidArgument, "%s: %s %d is out of range (%d ranks)", what,
                           k.kind == VNCCL_SEND || k.kind == VNCCL_RECV ? "peer" : "root",
                           k.root, c->nranks);
    if (!buffers_ok_(c, &k))
        return vnccl_error(c, ncclInvalidArgument, "%s: a buffer is NULL", what);
    char why[256];
    if (vnccl_stream_usable(k.stream, why, sizeof why) != ncclSuccess)
        return vnccl_error(c, ncclInvalidUsage, "%s: %s", what, why);
    if (vnccl_group_queue(c, &k))
        return ncclSuccess;
    if (k.kind == VNCCL_SEND || k.kind == VNCCL_RECV) {
        if (k.root == c->rank && k.count > 0)
            return vnccl_error(c, ncclInvalidUsage,
                               "%s to this rank itself outside a group: its pair would never "
                               "come (put both in ncclGroupStart/End)", what);
        return vnccl_p2p(c, &k, 1);
    }
    return vnccl_collective(c, &k);
}

static ncclResult_t issue_(struct ncclComm *c, struct vnccl_call k)
{
    if (!c || c->magic != VNCCL_COMM_MAGIC)
        return vnccl_check_comm(c, vnccl_kind_name(k.kind));
    atomic_fetch_add(&c->busy, 1);
    ncclResult_t st = check_and_run_(c, k);
    atomic_fetch_sub(&c->busy, 1);
    if (st != ncclSuccess)
        vnccl_group_fail(st);
    return st;
}

#define CALL_(...) ((struct vnccl_call){__VA_ARGS__})

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, -1, stream));
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_REDUCE, sendbuff, recvbuff, count, datatype, op, root, stream));
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op,
                              -1, stream));
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum,
                              -1, stream));
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root,
                              stream));
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream)
{
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_ALL_TO_ALL, sendbuff, recvbuff, count, datatype, ncclSum, -1,
                              stream));
}

ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root,
                              stream));
}

ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root,
                              stream));
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, stream));
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return issue_(comm, CALL_(VNCCL_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, stream));
}

ncclResult_t ncclGroupStart(void)
{
    vnccl_group_start();
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (vnccl_group_depth() == 0)
        return vnccl_error(NULL, ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    float unused;
    return vnccl_group_end(0, &unused);
}

#define SIM_INFO_MAGIC 0x74685283u

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    if (!simInfo || simInfo->magic != SIM_INFO_MAGIC)
        return vnccl_error(NULL, ncclInvalidArgument,
                           "ncclGroupSimulateEnd: simInfo not set from NCCL_SIM_INFO_INITIALIZER");
    if (vnccl_group_depth() == 0)
        return vnccl_error(NULL, ncclInvalidUsage,
                           "ncclGroupSimulateEnd without ncclGroupStart");
    float estimate = 0;
    ncclResult_t st = vnccl_group_end(1, &estimate);
    simInfo->estimatedTime = estimate * 1e6f; // NCCL's unit: microseconds
    return st;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm)
{
    ncclResult_t st = vnccl_check_comm(comm, "ncclRedOpCreatePreMulSum");
    if (st != ncclSuccess)
        return st;
    if (!op || !scalar || vnccl_type_size(datatype) == 0 ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate))
        return vnccl_error(comm, ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid arguments");
    for (int i = 0; i < VNCCL_MAX_PREMUL; i++) {
        struct vnccl_premul *p = &comm->premul[i];
        if (p->used)
            continue;
        *p = (struct vnccl_premul){.used = 1, .dtype = datatype, .residence = residence,
                                   .device_ptr = scalar};
        if (residence == ncclScalarHostImmediate)
            memcpy(p->value, scalar, vnccl_type_size(datatype));
        *op = (ncclRedOp_t)(ncclNumOps + i);
        return ncclSuccess;
    }
    return vnccl_error(comm, ncclInvalidUsage,
                       "ncclRedOpCreatePreMulSum: %d operators live already (ncclRedOpDestroy "
                       "frees them)", VNCCL_MAX_PREMUL);
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    if (!comm || comm->magic != VNCCL_COMM_MAGIC)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclRedOpDestroy: not a communicator");
    const int i = (int)op - ncclNumOps;
    if (i < 0 || i >= VNCCL_MAX_PREMUL || !comm->premul[i].used)
        return vnccl_error(comm, ncclInvalidArgument,
                           "ncclRedOpDestroy: op %d was not made by ncclRedOpCreatePreMulSum",
                           (int)op);
    comm->premul[i].used = 0;
    return ncclSuccess;
}

// ---- registration: the staged path copies through its own memory, so a
// registration is only remembered (and checked when it is undone) ----

#define REG_MAGIC 0x5245474953544552ull
struct registration {
    uint64_t magic;
    struct ncclComm *comm;
    void *buff;
    size_t size;
};

static ncclResult_t register_(struct ncclComm *comm, void *buff, size_t size, void **out,
                              const char *what)
{
    if (!comm || comm->magic != VNCCL_COMM_MAGIC || !out || (!buff && size))
        return vnccl_error(NULL, ncclInvalidArgument, "%s: invalid arguments", what);
    struct registration *r = malloc(sizeof *r);
    if (!r)
        return vnccl_error(comm, ncclSystemError, "%s: out of host memory", what);
    *r = (struct registration){REG_MAGIC, comm, buff, size};
    *out = r;
    return ncclSuccess;
}

static ncclResult_t deregister_(struct ncclComm *comm, void *handle, const char *what)
{
    struct registration *r = handle;
    if (!comm || !r || r->magic != REG_MAGIC || r->comm != comm)
        return vnccl_error(NULL, ncclInvalidArgument,
                           "%s: not a registration of this communicator", what);
    r->magic = 0;
    free(r);
    return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
    return register_(comm, buff, size, handle, "ncclCommRegister");
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
    return deregister_(comm, handle, "ncclCommDeregister");
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags)
{
    if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC)
        return vnccl_error(comm, ncclInvalidArgument, "ncclCommWindowRegister: flags %d",
                           winFlags);
    return register_(comm, buff, size, (void **)win, "ncclCommWindowRegister");
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
    return deregister_(comm, win, "ncclCommWindowDeregister");
}

ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
    if (!ptr)
        return vnccl_error(NULL, ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
    ncclResult_t st = vnccl_device_alloc(ptr, size);
    if (st != ncclSuccess)
        return vnccl_error(NULL, st, "ncclMemAlloc: %zu bytes could not be allocated", size);
    return ncclSuccess;
}

ncclResult_t ncclMemFree(void *ptr)
{
    if (!ptr)
        return ncclSuccess;
    ncclResult_t st = vnccl_device_free(ptr);
    if (st != ncclSuccess)
        return vnccl_error(NULL, st, "ncclMemFree: %p was not allocated by ncclMemAlloc", ptr);
    return ncclSuccess;
}

VNCCL_PROFILING_NAME(ncclAllReduce)
VNCCL_PROFILING_NAME(ncclReduce)
VNCCL_PROFILING_NAME(ncclReduceScatter)
VNCCL_PROFILING_NAME(ncclAllGather)
VNCCL_PROFILING_NAME(ncclBroadcast)
VNCCL_PROFILING_NAME(ncclBcast)
VNCCL_PROFILING_NAME(ncclAlltoAll)
VNCCL_PROFILING_NAME(ncclGather)
VNCCL_PROFILING_NAME(ncclScatter)
VNCCL_PROFILING_NAME(ncclSend)
VNCCL_PROFILING_NAME(ncclRecv)
VNCCL_PROFILING_NAME(ncclGroupStart)
VNCCL_PROFILING_NAME(ncclGroupEnd)
VNCCL_PROFILING_NAME(ncclGroupSimulateEnd)
VNCCL_PROFILING_NAME(ncclRedOpCreatePreMulSum)
VNCCL_PROFILING_NAME(ncclRedOpDestroy)
VNCCL_PROFILING_NAME(ncclCommRegister)
VNCCL_PROFILING_NAME(ncclCommDeregister)
VNCCL_PROFILING_NAME(ncclCommWindowRegister)
VNCCL_PROFILING_NAME(ncclCommWindowDeregister)
VNCCL_PROFILING_NAME(ncclMemAlloc)
VNCCL_PROFILING_NAME(ncclMemFree)
