// cases_comm.c: nccl_api_test's communicators: split (and NCCL_SPLIT_NOCOLOR),
// shrink, non-blocking and scalable initialization, ncclCommInitAll and a
// group of ncclCommInitRank in one process, the queries, version and error
// strings, buffer and window registration, ncclMemAlloc, ncclGroupSimulateEnd,
// finalize + destroy and abort.
#include "nccl_test.h"
#include "ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POLL_LIMIT_S 20.0 // a non-blocking call still in progress after this fails

// Each member's int tag gathered over comm, in comm's rank order, into
// tags (count members); -1 when the ranks cannot go on.
static int gather_tags_(struct nt_ctx *ctx, ncclComm_t comm, int tag, int *tags, int count)
{
    int *send = nt_dev_alloc(ctx, sizeof tag, &tag);
    int *recv = nt_dev_alloc(ctx, (size_t)count * sizeof tag, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    NT_NCCL(ctx, comm, ncclAllGather(send, recv, 1, ncclInt32, comm, ctx->stream));
    if (nt_sync(ctx) != 0 || nt_dev_read(ctx, tags, recv, (size_t)count * sizeof tag) != 0)
        return -1;
    cudaFree(send);
    cudaFree(recv);
    return 0;
}

// comm has count members and this process is its rank rank (soft checks).
static void expect_shape_(struct nt_ctx *ctx, ncclComm_t comm, int count, int rank,
                          const char *what)
{
    int got_count = -1, got_rank = -1;
    NT_EXPECT_RC(ctx, ncclCommCount(comm, &got_count), ncclSuccess);
    NT_EXPECT_RC(ctx, ncclCommUserRank(comm, &got_rank), ncclSuccess);
    NT_EXPECT(ctx, got_count == count && got_rank == rank,
              "%s: ncclCommCount %d, ncclCommUserRank %d; want %d and %d", what, got_count,
              got_rank, count, rank);
}

// The members' tags over comm are want[0..count) (membership and order).
static int expect_members_(struct nt_ctx *ctx, ncclComm_t comm, int tag, const int *want, int count,
                           const char *what)
{
    int got[NT_MAX_RANKS];
    if (gather_tags_(ctx, comm, tag, got, count) != 0)
        return -1;
    for (int i = 0; i < count; i++)
        NT_EXPECT(ctx, got[i] == want[i], "%s: member %d is parent rank %d, want %d", what, i,
                  got[i], want[i]);
    return 0;
}

// Polls a non-blocking communicator until it is no longer in progress.
static ncclResult_t wait_ready_(ncclComm_t comm)
{
    ncclResult_t state = ncclInProgress;
    double t0 = nt_now_s();
    while (nt_now_s() - t0 < POLL_LIMIT_S) {
        ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
        if (rc != ncclSuccess)
            return rc;
        if (state != ncclInProgress)
            return state;
        usleep(1000);
    }
    return ncclInProgress;
}

// ---- split, shrink ----

// color = rank % 2, key = -rank: members of a color in descending parent
// rank; then NCCL_SPLIT_NOCOLOR on rank 0 gives it NULL and the others a
// communicator of nranks - 1 (key = rank: the parent's order).
static int case_split_(struct nt_ctx *ctx)
{
    int n = ctx->nranks, r = ctx->rank;
    ncclComm_t comm, half, rest = NULL;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommSplit(comm, r % 2, -r, &half, NULL));
    NT_REQUIRE(ctx, half, "ncclCommSplit(color %d) gave NULL", r % 2);
    int want[NT_MAX_RANKS], members = 0, my_index = -1;
    for (int p = n - 1; p >= 0; p--) {
        if (p % 2 != r % 2)
            continue;
        if (p == r)
            my_index = members;
        want[members++] = p;
    }
    expect_shape_(ctx, half, members, my_index, "split color rank%2, key -rank");
    if (expect_members_(ctx, half, r, want, members, "split color rank%2, key -rank") != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommSplit(comm, r == 0 ? NCCL_SPLIT_NOCOLOR : 7, r, &rest, NULL));
    if (r == 0) {
        NT_EXPECT(ctx, rest == NULL, "NCCL_SPLIT_NOCOLOR gave a communicator, not NULL");
    } else {
        NT_REQUIRE(ctx, rest, "ncclCommSplit(color 7) gave NULL");
        for (int i = 0; i < n - 1; i++)
            want[i] = i + 1;
        expect_shape_(ctx, rest, n - 1, r - 1, "split without rank 0 (NOCOLOR)");
        if (expect_members_(ctx, rest, r, want, n - 1, "split without rank 0 (NOCOLOR)") != 0)
            return -1;
        NT_NCCL(ctx, rest, ncclCommDestroy(rest));
    }
    NT_NCCL(ctx, half, ncclCommDestroy(half));
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// Rank 0 excluded: the others call ncclCommShrink and are renumbered r - 1.
static int case_shrink_(struct nt_ctx *ctx)
{
    int n = ctx->nranks, r = ctx->rank;
    ncclComm_t comm, small = NULL;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    if (r != 0) {
        int exclude[1] = {0};
        NT_NCCL(ctx, comm, ncclCommShrink(comm, exclude, 1, &small, NULL, NCCL_SHRINK_DEFAULT));
        NT_REQUIRE(ctx, small, "ncclCommShrink gave NULL");
        int want[NT_MAX_RANKS];
        for (int i = 0; i < n - 1; i++)
            want[i] = i + 1;
        expect_shape_(ctx, small, n - 1, r - 1, "shrink without rank 0");
        if (expect_members_(ctx, small, r, want, n - 1, "shrink without rank 0") != 0)
            return -1;
        NT_NCCL(ctx, small, ncclCommDestroy(small));
    }
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// ---- initialization variants ----

// Sums 1 + rank over comm (nranks members) with an all-reduce; for a
// non-blocking communicator the call may say ncclInProgress first.
static int expect_sum_(struct nt_ctx *ctx, ncclComm_t comm, int nranks, int nonblocking,
                       const char *what)
{
    float mine[3], got[3], want = (float)(nranks * (nranks + 1) / 2);
    for (int i = 0; i < 3; i++)
        mine[i] = (float)(ctx->rank + 1);
    float *send = nt_dev_alloc(ctx, sizeof mine, mine), *recv = nt_dev_alloc(ctx, sizeof got, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    ncclResult_t rc = ncclAllReduce(send, recv, 3, ncclFloat32, ncclSum, comm, ctx->stream);
    if (nonblocking && rc == ncclInProgress)
        rc = wait_ready_(comm);
    if (rc != ncclSuccess)
        return nt_fail(ctx, __FILE__, __LINE__, "%s: all-reduce: %s; last error: %s", what,
                       ncclGetErrorString(rc), ncclGetLastError(comm));
    if (nt_sync(ctx) != 0 || nt_dev_read(ctx, got, recv, sizeof got) != 0)
        return -1;
    for (int i = 0; i < 3; i++)
        NT_EXPECT(ctx, got[i] == want, "%s: all-reduce element %d is %g, want %g", what, i, got[i],
                  want);
    cudaFree(send);
    cudaFree(recv);
    return 0;
}

static int case_nonblocking_(struct nt_ctx *ctx)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = NULL;
    ncclResult_t rc = ncclCommInitRankConfig(&comm, ctx->nranks, ctx->ids[0], ctx->rank, &config);
    NT_REQUIRE(ctx, rc == ncclSuccess || rc == ncclInProgress,
               "ncclCommInitRankConfig(blocking = 0): %s", ncclGetErrorString(rc));
    NT_REQUIRE(ctx, comm, "ncclCommInitRankConfig(blocking = 0) gave no communicator");
    rc = wait_ready_(comm);
    NT_REQUIRE(ctx, rc == ncclSuccess,
               "non-blocking init: ncclCommGetAsyncError settled on %s, want ncclSuccess",
               ncclGetErrorString(rc));
    expect_shape_(ctx, comm, ctx->nranks, ctx->rank, "non-blocking init");
    if (expect_sum_(ctx, comm, ctx->nranks, 1, "non-blocking communicator") != 0)
        return -1;
    rc = ncclCommFinalize(comm);
    if (rc == ncclInProgress)
        rc = wait_ready_(comm);
    NT_REQUIRE(ctx, rc == ncclSuccess, "ncclCommFinalize (non-blocking): %s",
               ncclGetErrorString(rc));
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// Every rank revokes the communicator: its collectives and ncclCommFinalize
// are refused, and, as nccl.h says, split and shrink proceed from it.
static int case_revoke_(struct nt_ctx *ctx)
{
    int n = ctx->nranks, r = ctx->rank;
    ncclComm_t comm, child = NULL, same = NULL;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
    float x = 1;
    NT_EXPECT_RC(ctx, ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, ctx->stream),
                 ncclInvalidUsage);
    NT_EXPECT_RC(ctx, ncclCommFinalize(comm), ncclInvalidUsage);
    NT_NCCL(ctx, comm, ncclCommSplit(comm, 0, n - r, &child, NULL));
    NT_REQUIRE(ctx, child, "ncclCommSplit of a revoked communicator gave NULL");
    expect_shape_(ctx, child, n, n - 1 - r, "split of a revoked communicator");
    NT_NCCL(ctx, comm, ncclCommShrink(comm, NULL, 0, &same, NULL, NCCL_SHRINK_DEFAULT));
    NT_REQUIRE(ctx, same, "ncclCommShrink of a revoked communicator gave NULL");
    expect_shape_(ctx, same, n, r, "shrink of a revoked communicator");
    if (expect_sum_(ctx, child, n, 0, "split of a revoked communicator") != 0 ||
        expect_sum_(ctx, same, n, 0, "shrink of a revoked communicator") != 0)
        return -1;
    NT_NCCL(ctx, child, ncclCommDestroy(child));
    NT_NCCL(ctx, same, ncclCommDestroy(same));
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// Two ids, the same on every rank (NCCL: the same number and order).
static int case_scalable_(struct nt_ctx *ctx)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclComm_t comm = NULL;
    NT_NCCL(ctx, NULL,
            ncclCommInitRankScalable(&comm, ctx->nranks, ctx->rank, 2, ctx->ids, &config));
    NT_REQUIRE(ctx, comm, "ncclCommInitRankScalable gave no communicator");
    expect_shape_(ctx, comm, ctx->nranks, ctx->rank, "ncclCommInitRankScalable");
    if (expect_sum_(ctx, comm, ctx->nranks, 0, "scalable communicator") != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// ---- one process, nranks communicators ----

// A group of all-reduces over the communicators, then a group of send/recv
// in a ring; comms[i] is rank i.
static int group_over_(struct nt_ctx *ctx, ncclComm_t *comms, int n, const char *what)
{
    cudaStream_t streams[NT_MAX_RANKS];
    float *send[NT_MAX_RANKS], *recv[NT_MAX_RANKS], got[4];
    for (int i = 0; i < n; i++) {
        float mine[4] = {(float)(i + 1), (float)(i + 1), (float)(i + 1), (float)(i + 1)};
        NT_CUDA(ctx, cudaStreamCreate(&streams[i]));
        send[i] = nt_dev_alloc(ctx, sizeof mine, mine);
        recv[i] = nt_dev_alloc(ctx, sizeof mine, NULL);
        NT_REQUIRE(ctx, send[i] && recv[i], "buffers");
    }
    NT_NCCL(ctx, NULL, ncclGroupStart());
    for (int i = 0; i < n; i++)
        NT_NCCL(ctx, comms[i],
                ncclAllReduce(send[i], recv[i], 4, ncclFloat32, ncclSum, comms[i], streams[i]));
    NT_NCCL(ctx, NULL, ncclGroupEnd());
    for (int i = 0; i < n; i++) {
        NT_CUDA(ctx, cudaStreamSynchronize(streams[i]));
        if (nt_dev_read(ctx, got, recv[i], sizeof got) != 0)
            return -1;
        NT_EXPECT(ctx, got[0] == (float)(n * (n + 1) / 2) && got[3] == got[0],
                  "%s: grouped all-reduce on communicator %d gave %g, want %d", what, i, got[0],
                  n * (n + 1) / 2);
    }
    NT_NCCL(ctx, NULL, ncclGroupStart());
    for (int i = 0; i < n; i++) {
        NT_NCCL(ctx, comms[i],
                ncclSend(send[i], 4, ncclFloat32, (i + 1) % n, comms[i], streams[i]));
        NT_NCCL(ctx, comms[i],
                ncclRecv(recv[i], 4, ncclFloat32, (i + n - 1) % n, comms[i], streams[i]));
    }
    NT_NCCL(ctx, NULL, ncclGroupEnd());
    for (int i = 0; i < n; i++) {
        NT_CUDA(ctx, cudaStreamSynchronize(streams[i]));
        if (nt_dev_read(ctx, got, recv[i], sizeof got) != 0)
            return -1;
        NT_EXPECT(ctx, got[0] == (float)((i + n - 1) % n + 1),
                  "%s: grouped ring shift to communicator %d gave %g, want %d", what, i, got[0],
                  (i + n - 1) % n + 1);
        cudaFree(send[i]);
        cudaFree(recv[i]);
        cudaStreamDestroy(streams[i]);
    }
    return 0;
}

// ncclCommInitAll (every rank on the current device: N virtual GPUs of one),
// then ncclCommInitRank for each rank inside one group, both from this one
// thread; a group of collectives over each set.
static int case_initall_(struct nt_ctx *ctx)
{
    int n = ctx->nranks, devlist[NT_MAX_RANKS] = {0};
    ncclComm_t comms[NT_MAX_RANKS];
    for (int i = 0; i < n; i++)
        devlist[i] = ctx->device;
    NT_NCCL(ctx, NULL, ncclCommInitAll(comms, n, devlist));
    for (int i = 0; i < n; i++) {
        int device = -1;
        char what[64];
        snprintf(what, sizeof what, "ncclCommInitAll's communicator %d", i);
        expect_shape_(ctx, comms[i], n, i, what);
        NT_EXPECT_RC(ctx, ncclCommCuDevice(comms[i], &device), ncclSuccess);
        NT_EXPECT(ctx, device == ctx->device, "%s: ncclCommCuDevice %d, want %d", what, device,
                  ctx->device);
    }
    if (group_over_(ctx, comms, n, "ncclCommInitAll") != 0)
        return -1;
    for (int i = 0; i < n; i++)
        NT_NCCL(ctx, comms[i], ncclCommDestroy(comms[i]));
    NT_NCCL(ctx, NULL, ncclGroupStart());
    for (int i = 0; i < n; i++)
        NT_NCCL(ctx, NULL, ncclCommInitRank(&comms[i], n, ctx->ids[0], i));
    NT_NCCL(ctx, NULL, ncclGroupEnd());
    for (int i = 0; i < n; i++)
        expect_shape_(ctx, comms[i], n, i, "ncclCommInitRank in a group");
    if (group_over_(ctx, comms, n, "ncclCommInitRank in a group") != 0)
        return -1;
    for (int i = 0; i < n; i++)
        NT_NCCL(ctx, comms[i], ncclCommDestroy(comms[i]));
    return 0;
}

// ---- queries, registration, simulation, ends ----

static int case_queries_(struct nt_ctx *ctx)
{
    int device = -1, version = -1;
    NT_CUDA(ctx, cudaGetDevice(&device));
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    expect_shape_(ctx, comm, ctx->nranks, ctx->rank, "queries");
    int cu = -1;
    NT_EXPECT_RC(ctx, ncclCommCuDevice(comm, &cu), ncclSuccess);
    NT_EXPECT(ctx, cu == device, "ncclCommCuDevice %d, want %d (current at init)", cu, device);
    NT_EXPECT_RC(ctx, ncclGetVersion(&version), ncclSuccess);
    NT_EXPECT(ctx, version == NCCL_VERSION_CODE, "ncclGetVersion %d, header's code %d", version,
              NCCL_VERSION_CODE);
    const char *strs[ncclNumResults];
    for (int r = 0; r < ncclNumResults; r++) {
        strs[r] = ncclGetErrorString((ncclResult_t)r);
        NT_EXPECT(ctx, strs[r] && strs[r][0], "ncclGetErrorString(%d) is NULL or empty", r);
        for (int q = 0; strs[r] && q < r; q++)
            NT_EXPECT(ctx, !strs[q] || strcmp(strs[q], strs[r]) != 0,
                      "ncclGetErrorString(%d) and (%d) are both '%s'", q, r, strs[r]);
    }
    ncclResult_t async = ncclInternalError;
    NT_EXPECT_RC(ctx, ncclCommGetAsyncError(comm, &async), ncclSuccess);
    NT_EXPECT(ctx, async == ncclSuccess, "ncclCommGetAsyncError of a sound communicator: %s",
              ncclGetErrorString(async));
    NT_EXPECT(ctx, ncclGetLastError(comm) != NULL, "ncclGetLastError gave NULL");
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// buf (count floats) := rank + 1, summed in place over comm, checked.
static int sum_in_place_(struct nt_ctx *ctx, ncclComm_t comm, float *buf, size_t count,
                         const char *what)
{
    float *host = malloc(count * sizeof *host);
    NT_REQUIRE(ctx, host, "out of host memory");
    for (size_t i = 0; i < count; i++)
        host[i] = (float)(ctx->rank + 1);
    NT_CUDA(ctx, cudaMemcpy(buf, host, count * sizeof *host, cudaMemcpyHostToDevice));
    NT_NCCL(ctx, comm, ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, ctx->stream));
    if (nt_sync(ctx) != 0 || nt_dev_read(ctx, host, buf, count * sizeof *host) != 0)
        return -1;
    float want = (float)(ctx->nranks * (ctx->nranks + 1) / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++)
        wrong += host[i] != want;
    NT_EXPECT(ctx, wrong == 0, "%s: %zu of %zu elements differ from %g (first %g)", what, wrong,
              count, want, host[0]);
    free(host);
    return 0;
}

static int case_register_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    size_t count = 4096, bytes = count * sizeof(float);
    float *buf = nt_dev_alloc(ctx, bytes, NULL);
    NT_REQUIRE(ctx, buf, "buffer");
    void *handle = NULL;
    NT_NCCL(ctx, comm, ncclCommRegister(comm, buf, bytes, &handle));
    NT_EXPECT(ctx, handle != NULL, "ncclCommRegister gave a NULL handle");
    if (sum_in_place_(ctx, comm, buf, count, "all-reduce on a registered buffer") != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommDeregister(comm, handle));
    cudaFree(buf);
    void *mem = NULL;
    NT_NCCL(ctx, comm, ncclMemAlloc(&mem, bytes));
    NT_REQUIRE(ctx, mem, "ncclMemAlloc gave NULL");
    unsigned char *pat = nt_pattern_new(ctx, bytes, ctx->rank, 40);
    NT_REQUIRE(ctx, pat, "pattern");
    NT_CUDA(ctx, cudaMemcpy(mem, pat, bytes, cudaMemcpyHostToDevice));
    (void)nt_expect_bytes(ctx, mem, pat, bytes, "ncclMemAlloc's memory through cudaMemcpy");
    ncclWindow_t win = NULL;
    NT_NCCL(ctx, comm, ncclCommWindowRegister(comm, mem, bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    if (sum_in_place_(ctx, comm, mem, count, "all-reduce on a symmetric window") != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommWindowDeregister(comm, win));
    NT_NCCL(ctx, comm, ncclMemFree(mem));
    free(pat);
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// A group that must run nothing: it queues an all-reduce of ones, then
// simulate != 0 ends it with ncclGroupSimulateEnd (success, an estimate >=
// 0), else queues a call with a bad type (refused, ncclInvalidArgument) and
// ends it with ncclGroupEnd, which fails the whole group with it (NCCL runs
// nothing of a failed group). Either way the all-reduce's output stays
// untouched, and a real all-reduce works after.
static int group_runs_nothing_(struct nt_ctx *ctx, int simulate, const char *which)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    float ones[64];
    for (int i = 0; i < 64; i++)
        ones[i] = 1;
    void *send = nt_dev_alloc(ctx, sizeof ones, ones), *recv = nt_dev_alloc(ctx, sizeof ones, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    NT_NCCL(ctx, NULL, ncclGroupStart());
    NT_NCCL(ctx, comm, ncclAllReduce(send, recv, 64, ncclFloat32, ncclSum, comm, ctx->stream));
    if (simulate) {
        ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
        NT_NCCL(ctx, comm, ncclGroupSimulateEnd(&sim));
        NT_EXPECT(ctx, sim.estimatedTime >= 0, "ncclGroupSimulateEnd: estimatedTime %g < 0",
                  (double)sim.estimatedTime);
    } else {
        NT_EXPECT_RC(ctx, ncclAllReduce(send, recv, 64, (ncclDataType_t)ncclNumTypes, ncclSum,
                                        comm, ctx->stream), ncclInvalidArgument);
        NT_EXPECT_RC(ctx, ncclGroupEnd(), ncclInvalidArgument);
    }
    if (nt_sync(ctx) != 0)
        return -1;
    char what[96];
    snprintf(what, sizeof what, "the output of a %s group's all-reduce", which);
    (void)nt_untouched(ctx, recv, sizeof ones, what);
    snprintf(what, sizeof what, "all-reduce after a %s group", which);
    if (expect_sum_(ctx, comm, ctx->nranks, 0, what) != 0)
        return -1;
    cudaFree(send);
    cudaFree(recv);
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

static int case_simulate_(struct nt_ctx *ctx) { return group_runs_nothing_(ctx, 1, "simulated"); }
static int case_group_error_(struct nt_ctx *ctx) { return group_runs_nothing_(ctx, 0, "failed"); }

// ncclCommFinalize + ncclCommDestroy on one communicator, ncclCommAbort on
// another (both after an all-reduce).
static int case_finalize_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0 || expect_sum_(ctx, comm, ctx->nranks, 0, "first") != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommFinalize(comm));
    ncclResult_t async = ncclInternalError;
    NT_EXPECT_RC(ctx, ncclCommGetAsyncError(comm, &async), ncclSuccess);
    NT_EXPECT(ctx, async == ncclSuccess, "ncclCommGetAsyncError after ncclCommFinalize: %s",
              ncclGetErrorString(async));
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    if (nt_comm_init(ctx, &comm, 1) != 0 || expect_sum_(ctx, comm, ctx->nranks, 0, "second") != 0)
        return -1;
    // Every rank's all-reduce has returned before any aborts: an abort while
    // a peer is still in a collective is the fault cases' business.
    nt_barrier(ctx);
    NT_NCCL(ctx, comm, ncclCommAbort(comm));
    return 0;
}

const struct nt_case nt_cases_comm[] = {
    {"split", case_split_, 1, 1, 0, NULL, "color rank%2, key -rank; NCCL_SPLIT_NOCOLOR gives NULL"},
    {"shrink", case_shrink_, 2, 1, 0, NULL, "rank 0 excluded, the others renumbered"},
    {"revoke", case_revoke_, 1, 1, 0, NULL,
     "ncclCommRevoke: calls refused, split and shrink proceed (nccl.h)"},
    {"nonblocking", case_nonblocking_, 1, 1, 0, NULL,
     "ncclCommInitRankConfig blocking = 0, polled with ncclCommGetAsyncError"},
    {"scalable", case_scalable_, 1, 2, 0, NULL, "ncclCommInitRankScalable with 2 ids"},
    {"initall", case_initall_, 1, 1, NT_ONE_PROCESS, NULL,
     "one process: ncclCommInitAll, ncclCommInitRank in a group; grouped collectives"},
    {"queries", case_queries_, 1, 1, 0, "VGPU_SIM_GPUS=2x80G",
     "count, user rank, CUDA device, version, error strings, async error"},
    {"register", case_register_, 1, 1, 0, NULL,
     "ncclCommRegister, ncclMemAlloc, ncclCommWindowRegister (symmetric)"},
    {"simulate", case_simulate_, 1, 1, 0, NULL, "ncclGroupSimulateEnd runs nothing"},
    {"group_error", case_group_error_, 1, 1, 0, NULL,
     "a bad argument in a group fails ncclGroupEnd and runs none of it"},
    {"finalize", case_finalize_, 1, 2, 0, NULL, "ncclCommFinalize + Destroy; ncclCommAbort"},
    {NULL, NULL, 0, 0, 0, NULL, NULL},
};
