// cases_fault.c: nccl_api_test's errors: bad arguments (ncclInvalidArgument
// at the call, the communicator still sound), misuse between ranks
// (ncclInvalidUsage on every rank, output untouched, nobody hangs), a peer
// killed in a collective (ncclRemoteError / ncclSystemError within 2 s, the
// dead rank named, ncclCommAbort succeeds) and a peer that never arrives
// (ncclSystemError after VGPU_COMM_TIMEOUT_S, the missing rank named).
#include "nccl_test.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KILL_AFTER_US 300000  // the victim dies this long after the others enter
#define DEAD_PEER_LIMIT_S 2.0 // the contract's bound on noticing a dead peer
#define COMM_TIMEOUT_S 2      // VGPU_COMM_TIMEOUT_S of peer_missing
#define ABORT_AFTER_US 300000 // abort_watchdog's watchdog aborts this long after the call

// An all-reduce of (rank + 1) over comm, checked: the ranks are in step.
static int sound_(struct nt_ctx *ctx, ncclComm_t comm, const char *what)
{
    float mine[4], got[4], want = (float)(ctx->nranks * (ctx->nranks + 1) / 2);
    for (int i = 0; i < 4; i++)
        mine[i] = (float)(ctx->rank + 1);
    void *send = nt_dev_alloc(ctx, sizeof mine, mine), *recv = nt_dev_alloc(ctx, sizeof got, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    ncclResult_t rc = ncclAllReduce(send, recv, 4, ncclFloat32, ncclSum, comm, ctx->stream);
    if (rc != ncclSuccess)
        return nt_fail(ctx, __FILE__, __LINE__, "all-reduce %s: %s; last error: %s", what,
                       ncclGetErrorString(rc), ncclGetLastError(comm));
    if (nt_sync(ctx) != 0 || nt_dev_read(ctx, got, recv, sizeof got) != 0)
        return -1;
    NT_EXPECT(ctx, got[0] == want && got[3] == want, "all-reduce %s gave %g, want %g", what, got[0],
              want);
    cudaFree(send);
    cudaFree(recv);
    return 0;
}

// ---- bad arguments ----

// The collectives with one bad argument each, on every rank alike.
static void bad_collectives_(struct nt_ctx *ctx, ncclComm_t comm, void *send, void *recv)
{
    int n = ctx->nranks;
    cudaStream_t s = ctx->stream;
    const ncclDataType_t f32 = ncclFloat32;
    NT_EXPECT_RC(ctx, ncclAllReduce(send, recv, 16, f32, ncclSum, NULL, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclAllReduce(send, recv, 16, (ncclDataType_t)ncclNumTypes, ncclSum, comm, s),
                 ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclAllReduce(send, recv, 16, (ncclDataType_t)-1, ncclSum, comm, s),
                 ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclAllReduce(send, recv, 16, f32, (ncclRedOp_t)ncclNumOps, comm, s),
                 ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclAllReduce(send, recv, 16, f32, (ncclRedOp_t)-1, comm, s),
                 ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclReduce(send, recv, 16, f32, ncclSum, n, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclReduce(send, recv, 16, f32, ncclSum, -1, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclReduceScatter(send, recv, 4, f32, ncclSum, NULL, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclAllGather(send, recv, 4, (ncclDataType_t)ncclNumTypes, comm, s),
                 ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclBroadcast(send, recv, 16, f32, n, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclBcast(recv, 16, f32, -1, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclGather(send, recv, 4, f32, n, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclScatter(send, recv, 4, f32, n, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclAlltoAll(send, recv, 4, f32, NULL, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclSend(send, 16, f32, n, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclSend(send, 16, f32, -1, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclRecv(recv, 16, f32, n, comm, s), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclRecv(recv, 16, (ncclDataType_t)ncclNumTypes, 0, comm, s),
                 ncclInvalidArgument);
}

static int case_badargs_(struct nt_ctx *ctx)
{
    int n = ctx->nranks, x = 0;
    ncclComm_t comm, other = NULL;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    size_t bytes = 16 * sizeof(float) * (size_t)n;
    void *send = nt_dev_alloc(ctx, bytes, NULL), *recv = nt_dev_alloc(ctx, bytes, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    bad_collectives_(ctx, comm, send, recv);
    float scalar = 2;
    ncclRedOp_t op;
    NT_EXPECT_RC(ctx,
                 ncclRedOpCreatePreMulSum(&op, &scalar, (ncclDataType_t)ncclNumTypes,
                                          ncclScalarHostImmediate, comm),
                 ncclInvalidArgument);
    NT_EXPECT_RC(ctx,
                 ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, NULL),
                 ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclCommCount(NULL, &x), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclCommUserRank(comm, NULL), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclCommCuDevice(NULL, &x), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclGetUniqueId(NULL), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclCommInitRank(&other, n, ctx->ids[1], n), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclCommInitRank(&other, n, ctx->ids[1], -1), ncclInvalidArgument);
    NT_EXPECT_RC(ctx, ncclCommInitRank(&other, 0, ctx->ids[1], 0), ncclInvalidArgument);
    if (nt_sync(ctx) != 0)
        return -1;
    (void)nt_untouched(ctx, recv, bytes, "the output of calls with bad arguments");
    if (sound_(ctx, comm, "after the bad calls") != 0)
        return -1;
    cudaFree(send);
    cudaFree(recv);
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// ---- misuse between ranks ----

// An init whose every rank must fail with ncclInvalidUsage, not hang.
static int expect_init_usage_(struct nt_ctx *ctx, int nranks, int rank, const char *what)
{
    ncclComm_t comm = NULL;
    double t0 = nt_now_s();
    ncclResult_t rc = ncclCommInitRank(&comm, nranks, ctx->ids[0], rank);
    double secs = nt_now_s() - t0;
    NT_EXPECT(ctx, rc == ncclInvalidUsage,
              "%s: ncclCommInitRank(nranks %d, rank %d) returned %s after %.1f s, want "
              "ncclInvalidUsage; last error: %s",
              what, nranks, rank, ncclGetErrorString(rc), secs, ncclGetLastError(comm));
    if (rc == ncclSuccess && comm)
        ncclCommAbort(comm);
    return 0;
}

// Rank 0 says nranks + 1, the others nranks.
static int case_mismatch_nranks_(struct nt_ctx *ctx)
{
    int n = ctx->nranks + (ctx->rank == 0);
    return expect_init_usage_(ctx, n, ctx->rank, "rank 0 passes nranks + 1");
}

// Process 1 claims rank 0 too (and rank 1 is nobody's).
static int case_duplicate_rank_(struct nt_ctx *ctx)
{
    return expect_init_usage_(ctx, ctx->nranks, ctx->rank == 1 ? 0 : ctx->rank,
                              "processes 0 and 1 both claim rank 0");
}

// Collective k with one argument different on the last rank: ncclInvalidUsage
// on every rank, the output untouched, ncclCommAbort fine.
static int mismatch_one_(struct nt_ctx *ctx, int k)
{
    static const char *const what[] = {
        "all-reduce, count + 1 on the last rank", "all-reduce, int32 on the last rank (float32)",
        "all-reduce, max on the last rank (sum)", "broadcast, root 1 on the last rank (0)",
        "reduce, root 1 on the last rank (0)"};
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, k) != 0)
        return -1;
    int odd = ctx->rank == ctx->nranks - 1;
    size_t count = 64, bytes = (count + 1) * sizeof(float);
    float ones[65];
    for (int i = 0; i < 65; i++)
        ones[i] = 1;
    void *send = nt_dev_alloc(ctx, bytes, ones), *recv = nt_dev_alloc(ctx, bytes, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    cudaStream_t s = ctx->stream;
    ncclResult_t rc;
    if (k == 0)
        rc = ncclAllReduce(send, recv, count + (size_t)odd, ncclFloat32, ncclSum, comm, s);
    else if (k == 1)
        rc = ncclAllReduce(send, recv, count, odd ? ncclInt32 : ncclFloat32, ncclSum, comm, s);
    else if (k == 2)
        rc = ncclAllReduce(send, recv, count, ncclFloat32, odd ? ncclMax : ncclSum, comm, s);
    else if (k == 3)
        rc = ncclBroadcast(send, recv, count, ncclFloat32, odd, comm, s);
    else
        rc = ncclReduce(send, recv, count, ncclFloat32, ncclSum, odd, comm, s);
    NT_EXPECT(ctx, rc == ncclInvalidUsage, "%s: returned %s, want ncclInvalidUsage; last error: %s",
              what[k], ncclGetErrorString(rc), ncclGetLastError(comm));
    if (nt_sync(ctx) != 0)
        return -1;
    char out[128];
    snprintf(out, sizeof out, "the output of a mismatched %s", what[k]);
    (void)nt_untouched(ctx, recv, bytes, out);
    NT_EXPECT_RC(ctx, ncclCommAbort(comm), ncclSuccess);
    cudaFree(send);
    cudaFree(recv);
    return 0;
}

static int case_mismatch_coll_(struct nt_ctx *ctx)
{
    for (int k = 0; k < 5; k++)
        if (mismatch_one_(ctx, k) != 0)
            return -1;
    return 0;
}

// ---- dead and missing peers ----

// A sound communicator whose last rank then SIGKILLs itself (after
// KILL_AFTER_US: the others are in their call by then); returns that rank
// to the others, -1 when the communicator could not be made.
static int victim_dies_(struct nt_ctx *ctx, ncclComm_t *comm)
{
    int victim = ctx->nranks - 1;
    if (nt_comm_init(ctx, comm, 0) != 0 || sound_(ctx, *comm, "before the kill") != 0)
        return -1;
    if (ctx->rank == victim) {
        ctx->shared->slot[ctx->rank].expect_killed = 1;
        usleep(KILL_AFTER_US);
        kill(getpid(), SIGKILL);
        pause();
    }
    return victim;
}

// The call `what`, begun at t0, saw the victim's death: a remote or system
// error, within the bound after the kill, and the last error names it.
static void death_seen_(struct nt_ctx *ctx, ncclComm_t comm, ncclResult_t rc, double t0,
                        int victim, const char *what)
{
    double secs = nt_now_s() - t0 - KILL_AFTER_US * 1e-6;
    NT_EXPECT(ctx, rc == ncclRemoteError || rc == ncclSystemError,
              "%s with rank %d killed returned %s, want ncclRemoteError or ncclSystemError", what,
              victim, ncclGetErrorString(rc));
    NT_EXPECT(ctx, secs <= DEAD_PEER_LIMIT_S + 0.2,
              "%s returned %.2f s after rank %d was killed (bound %.0f s)", what, secs, victim,
              DEAD_PEER_LIMIT_S);
    const char *msg = ncclGetLastError(comm);
    NT_EXPECT(ctx, nt_names_rank(msg, victim), "ncclGetLastError does not name 'rank %d': '%s'",
              victim, msg ? msg : "(NULL)");
}

// The last rank SIGKILLs itself while the others are in an all-reduce.
static int case_peer_killed_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    int victim = victim_dies_(ctx, &comm);
    if (victim < 0)
        return -1;
    size_t bytes = 1024 * sizeof(float);
    void *send = nt_dev_alloc(ctx, bytes, NULL), *recv = nt_dev_alloc(ctx, bytes, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    double t0 = nt_now_s();
    ncclResult_t rc = ncclAllReduce(send, recv, 1024, ncclFloat32, ncclSum, comm, ctx->stream);
    death_seen_(ctx, comm, rc, t0, victim, "all-reduce");
    ncclResult_t async = ncclSuccess;
    NT_EXPECT_RC(ctx, ncclCommGetAsyncError(comm, &async), ncclSuccess);
    NT_EXPECT(ctx, async == ncclRemoteError || async == ncclSystemError,
              "ncclCommGetAsyncError after the peer's death: %s", ncclGetErrorString(async));
    NT_EXPECT_RC(ctx, ncclCommAbort(comm), ncclSuccess);
    cudaFree(send);
    cudaFree(recv);
    return 0;
}

// The last rank SIGKILLs itself instead of sending to rank 0, which waits in
// ncclRecv: it fails within the same bound, naming the dead rank.
static int case_peer_killed_p2p_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    int victim = victim_dies_(ctx, &comm);
    if (victim < 0)
        return -1;
    if (ctx->rank != 0) { // bystanders leave quietly (an abort would fail rank 0 first)
        NT_EXPECT_RC(ctx, ncclCommDestroy(comm), ncclSuccess);
        return 0;
    }
    void *recv = nt_dev_alloc(ctx, 1024 * sizeof(float), NULL);
    NT_REQUIRE(ctx, recv, "buffer");
    double t0 = nt_now_s();
    ncclResult_t rc = ncclRecv(recv, 1024, ncclFloat32, victim, comm, ctx->stream);
    death_seen_(ctx, comm, rc, t0, victim, "ncclRecv");
    NT_EXPECT_RC(ctx, ncclCommAbort(comm), ncclSuccess);
    cudaFree(recv);
    return 0;
}

// ---- an abort from another thread (PyTorch's watchdog) ----

struct watchdog_ {
    ncclComm_t comm;
    ncclResult_t rc;
};

static void *watchdog_abort_(void *arg)
{
    struct watchdog_ *w = arg;
    usleep(ABORT_AFTER_US);
    w->rc = ncclCommAbort(w->comm);
    return NULL;
}

// The last rank never enters the all-reduce; on the others a second thread
// aborts the communicator while the main one waits in it, alone or inside
// ncclGroupStart/End: the call fails within the dead-peer bound, the abort
// succeeds, nothing touches the freed communicator (the main thread reads
// its error through ncclGetLastError(NULL), the comm being gone).
static int abort_in_call_(struct nt_ctx *ctx, int id_index, int grouped)
{
    const char *what = grouped ? "grouped all-reduce" : "all-reduce";
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, id_index) != 0 || sound_(ctx, comm, "before the abort") != 0)
        return -1;
    if (ctx->rank == ctx->nranks - 1) {
        usleep(3 * ABORT_AFTER_US);
        NT_EXPECT_RC(ctx, ncclCommDestroy(comm), ncclSuccess);
        return 0;
    }
    size_t bytes = 1024 * sizeof(float);
    void *send = nt_dev_alloc(ctx, bytes, NULL), *recv = nt_dev_alloc(ctx, bytes, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    struct watchdog_ w = {comm, ncclInternalError};
    pthread_t thread;
    NT_REQUIRE(ctx, pthread_create(&thread, NULL, watchdog_abort_, &w) == 0, "pthread_create");
    double t0 = nt_now_s();
    ncclResult_t rc;
    if (grouped) {
        ncclGroupStart();
        rc = ncclAllReduce(send, recv, 1024, ncclFloat32, ncclSum, comm, ctx->stream);
        ncclResult_t end = ncclGroupEnd();
        rc = rc != ncclSuccess ? rc : end;
    } else {
        rc = ncclAllReduce(send, recv, 1024, ncclFloat32, ncclSum, comm, ctx->stream);
    }
    double secs = nt_now_s() - t0 - ABORT_AFTER_US * 1e-6;
    pthread_join(thread, NULL);
    NT_EXPECT(ctx, rc == ncclRemoteError || rc == ncclSystemError,
              "%s aborted by another thread returned %s, want ncclRemoteError or "
              "ncclSystemError; last error: %s",
              what, ncclGetErrorString(rc), ncclGetLastError(NULL));
    NT_EXPECT(ctx, secs <= DEAD_PEER_LIMIT_S + 0.2,
              "%s returned %.2f s after another thread aborted (bound %.0f s)", what, secs,
              DEAD_PEER_LIMIT_S);
    NT_EXPECT(ctx, w.rc == ncclSuccess, "ncclCommAbort during the %s returned %s", what,
              ncclGetErrorString(w.rc));
    cudaFree(send);
    cudaFree(recv);
    return 0;
}

static int case_abort_watchdog_(struct nt_ctx *ctx)
{
    if (abort_in_call_(ctx, 0, 0) != 0)
        return -1;
    return abort_in_call_(ctx, 1, 1);
}

// msg names rank r as "rank r" or in a list after "missing" ("missing: 1, 3").
static int names_missing_(const char *msg, int r)
{
    if (nt_names_rank(msg, r))
        return 1;
    const char *p = msg ? strstr(msg, "missing") : NULL;
    for (; p && *p; p++) {
        if (*p < '0' || *p > '9' || (p[-1] >= '0' && p[-1] <= '9'))
            continue;
        if (atoi(p) == r)
            return 1;
    }
    return 0;
}

// The last rank never calls ncclCommInitRank (it exits at once); the others
// fail with ncclSystemError after VGPU_COMM_TIMEOUT_S (set to 2 by the case).
static int case_peer_missing_(struct nt_ctx *ctx)
{
    int missing = ctx->nranks - 1;
    if (ctx->rank == missing)
        return 0;
    ncclComm_t comm = NULL;
    double t0 = nt_now_s();
    ncclResult_t rc = ncclCommInitRank(&comm, ctx->nranks, ctx->ids[0], ctx->rank);
    double secs = nt_now_s() - t0;
    const char *msg = ncclGetLastError(comm);
    NT_EXPECT(ctx, rc == ncclSystemError,
              "init without rank %d returned %s after %.1f s, want ncclSystemError", missing,
              ncclGetErrorString(rc), secs);
    NT_EXPECT(ctx, secs >= COMM_TIMEOUT_S * 0.9 && secs <= COMM_TIMEOUT_S + 2.0,
              "init without rank %d gave up after %.2f s, VGPU_COMM_TIMEOUT_S=%d", missing, secs,
              COMM_TIMEOUT_S);
    NT_EXPECT(ctx, names_missing_(msg, missing),
              "ncclGetLastError names neither 'rank %d' nor 'missing: ... %d': '%s'", missing,
              missing, msg ? msg : "(NULL)");
    if (rc == ncclSuccess && comm)
        ncclCommAbort(comm);
    return 0;
}

const struct nt_case nt_cases_fault[] = {
    {"badargs", case_badargs_, 1, 2, 0, NULL,
     "NULL comm, type/op/root/peer/rank out of range: ncclInvalidArgument, comm still sound"},
    {"mismatch_nranks", case_mismatch_nranks_, 2, 1, 0, "VGPU_COMM_TIMEOUT_S=10",
     "rank 0 passes nranks + 1: ncclInvalidUsage everywhere"},
    {"duplicate_rank", case_duplicate_rank_, 2, 1, 0, "VGPU_COMM_TIMEOUT_S=10",
     "two processes claim rank 0: ncclInvalidUsage everywhere"},
    {"mismatch_coll", case_mismatch_coll_, 2, 5, 0, NULL,
     "count/type/op/root differ on one rank: ncclInvalidUsage everywhere, output untouched"},
    {"peer_killed", case_peer_killed_, 2, 1, 0, NULL,
     "a rank SIGKILLed in an all-reduce: the others fail within 2 s, naming it"},
    {"peer_killed_p2p", case_peer_killed_p2p_, 2, 1, 0, NULL,
     "a rank SIGKILLed instead of sending: ncclRecv fails within 2 s, naming it"},
    {"abort_watchdog", case_abort_watchdog_, 2, 2, 0, NULL,
     "another thread aborts while the main one waits in a call (grouped too): it fails, no crash"},
    {"peer_missing", case_peer_missing_, 2, 1, 0, "VGPU_COMM_TIMEOUT_S=2",
     "a rank never arrives: ncclSystemError after VGPU_COMM_TIMEOUT_S, naming it"},
    {NULL, NULL, 0, 0, 0, NULL, NULL},
};
