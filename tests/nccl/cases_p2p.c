// cases_p2p.c: nccl_api_test's send/recv (in a group: a ring shift, every
// peer at once, two messages to one peer in order; outside a group: ordered
// pairs), every collective with count 0, and every kind of collective with a
// few MiB (3 MiB + 7 float32s, past the library's internal chunk).
#include "nccl_test.h"
#include "ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LARGE_COUNT ((size_t)(3u << 20) / sizeof(float) + 7) // 3 MiB + 7 float32s

// ---- send / recv ----

// A group: rank r sends two messages (tags 10, 11) to r+1 and receives two
// from r-1 (a ring shift; with 1 rank, to itself), in the order posted.
static int ring_group_(struct nt_ctx *ctx, ncclComm_t comm, size_t count)
{
    int n = ctx->nranks, next = (ctx->rank + 1) % n, prev = (ctx->rank + n - 1) % n;
    size_t bytes = count * sizeof(int32_t);
    unsigned char *mine[2], *want[2];
    void *send[2], *recv[2];
    for (int m = 0; m < 2; m++) {
        mine[m] = nt_pattern_new(ctx, bytes, ctx->rank, 10u + (unsigned)m);
        want[m] = nt_pattern_new(ctx, bytes, prev, 10u + (unsigned)m);
        NT_REQUIRE(ctx, mine[m] && want[m], "patterns");
        send[m] = nt_dev_alloc(ctx, bytes, mine[m]);
        recv[m] = nt_dev_alloc(ctx, bytes, NULL);
        NT_REQUIRE(ctx, send[m] && recv[m], "buffers");
    }
    NT_NCCL(ctx, comm, ncclGroupStart());
    for (int m = 0; m < 2; m++) {
        NT_NCCL(ctx, comm, ncclSend(send[m], count, ncclInt32, next, comm, ctx->stream));
        NT_NCCL(ctx, comm, ncclRecv(recv[m], count, ncclInt32, prev, comm, ctx->stream));
    }
    NT_NCCL(ctx, comm, ncclGroupEnd());
    if (nt_sync(ctx) != 0)
        return -1;
    for (int m = 0; m < 2; m++) {
        char what[96];
        snprintf(what, sizeof what, "grouped ring shift, message %d of 2 from rank %d, count %zu",
                 m + 1, prev, count);
        if (nt_expect_bytes(ctx, recv[m], want[m], bytes, what) != 0)
            return -1;
        cudaFree(send[m]);
        cudaFree(recv[m]);
        free(mine[m]);
        free(want[m]);
    }
    return 0;
}

// Outside a group: ranks 2k and 2k+1 exchange, the even one sending first.
static int pairs_(struct nt_ctx *ctx, ncclComm_t comm, size_t count)
{
    int partner = ctx->rank ^ 1;
    if (partner >= ctx->nranks)
        return 0; // (the last of an odd count sits out)
    size_t bytes = count * sizeof(float);
    unsigned char *mine = nt_pattern_new(ctx, bytes, ctx->rank, 12);
    unsigned char *want = nt_pattern_new(ctx, bytes, partner, 12);
    NT_REQUIRE(ctx, mine && want, "patterns");
    void *send = nt_dev_alloc(ctx, bytes, mine), *recv = nt_dev_alloc(ctx, bytes, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    if (ctx->rank % 2 == 0) {
        NT_NCCL(ctx, comm, ncclSend(send, count, ncclFloat32, partner, comm, ctx->stream));
        NT_NCCL(ctx, comm, ncclRecv(recv, count, ncclFloat32, partner, comm, ctx->stream));
    } else {
        NT_NCCL(ctx, comm, ncclRecv(recv, count, ncclFloat32, partner, comm, ctx->stream));
        NT_NCCL(ctx, comm, ncclSend(send, count, ncclFloat32, partner, comm, ctx->stream));
    }
    if (nt_sync(ctx) != 0)
        return -1;
    char what[96];
    snprintf(what, sizeof what, "ungrouped send/recv with rank %d", partner);
    int rc = nt_expect_bytes(ctx, recv, want, bytes, what);
    cudaFree(send);
    cudaFree(recv);
    free(mine);
    free(want);
    return rc;
}

// One group: a send to and a receive from every rank, itself included.
static int all_peers_(struct nt_ctx *ctx, ncclComm_t comm, size_t count)
{
    int n = ctx->nranks;
    size_t block = count * sizeof(double);
    unsigned char *mine = malloc((size_t)n * block), *want = malloc((size_t)n * block);
    NT_REQUIRE(ctx, mine && want, "out of host memory");
    for (int j = 0; j < n; j++) {
        nt_pattern(mine + (size_t)j * block, block, ctx->rank, 300u + (unsigned)j);
        nt_pattern(want + (size_t)j * block, block, j, 300u + (unsigned)ctx->rank);
    }
    unsigned char *send = nt_dev_alloc(ctx, (size_t)n * block, mine);
    unsigned char *recv = nt_dev_alloc(ctx, (size_t)n * block, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    NT_NCCL(ctx, comm, ncclGroupStart());
    for (int j = 0; j < n; j++) {
        NT_NCCL(ctx, comm,
                ncclSend(send + (size_t)j * block, count, ncclFloat64, j, comm, ctx->stream));
        NT_NCCL(ctx, comm,
                ncclRecv(recv + (size_t)j * block, count, ncclFloat64, j, comm, ctx->stream));
    }
    NT_NCCL(ctx, comm, ncclGroupEnd());
    if (nt_sync(ctx) != 0)
        return -1;
    int rc = nt_expect_bytes(ctx, recv, want, (size_t)n * block,
                             "a group of send/recv with every rank (itself too)");
    cudaFree(send);
    cudaFree(recv);
    free(mine);
    free(want);
    return rc;
}

static int case_sendrecv_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    if (ring_group_(ctx, comm, 1000) != 0 || pairs_(ctx, comm, 999) != 0 ||
        all_peers_(ctx, comm, 33) != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// ---- count 0 ----

// Every collective with count 0 succeeds and writes nothing; the ranks are
// still in step after (an all-reduce of 5 elements).
static int case_count0_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    int n = ctx->nranks, next = (ctx->rank + 1) % n, prev = (ctx->rank + n - 1) % n;
    size_t bytes = 64 * (size_t)n;
    unsigned char *src = nt_pattern_new(ctx, bytes, ctx->rank, 20);
    NT_REQUIRE(ctx, src, "pattern");
    void *a = nt_dev_alloc(ctx, bytes, src), *b = nt_dev_alloc(ctx, bytes, NULL);
    NT_REQUIRE(ctx, a && b, "buffers");
    cudaStream_t s = ctx->stream;
    NT_NCCL(ctx, comm, ncclAllReduce(a, b, 0, ncclFloat32, ncclSum, comm, s));
    NT_NCCL(ctx, comm, ncclReduce(a, b, 0, ncclFloat32, ncclSum, 0, comm, s));
    NT_NCCL(ctx, comm, ncclReduceScatter(a, b, 0, ncclFloat32, ncclMax, comm, s));
    NT_NCCL(ctx, comm, ncclAllGather(a, b, 0, ncclFloat32, comm, s));
    NT_NCCL(ctx, comm, ncclBroadcast(a, b, 0, ncclFloat32, 0, comm, s));
    NT_NCCL(ctx, comm, ncclBcast(b, 0, ncclFloat32, n - 1, comm, s));
    NT_NCCL(ctx, comm, ncclAlltoAll(a, b, 0, ncclFloat32, comm, s));
    NT_NCCL(ctx, comm, ncclGather(a, b, 0, ncclFloat32, 0, comm, s));
    NT_NCCL(ctx, comm, ncclScatter(a, b, 0, ncclFloat32, n - 1, comm, s));
    NT_NCCL(ctx, comm, ncclGroupStart());
    NT_NCCL(ctx, comm, ncclSend(a, 0, ncclFloat32, next, comm, s));
    NT_NCCL(ctx, comm, ncclRecv(b, 0, ncclFloat32, prev, comm, s));
    NT_NCCL(ctx, comm, ncclGroupEnd());
    if (nt_sync(ctx) != 0)
        return -1;
    (void)nt_untouched(ctx, b, bytes, "the output of count-0 collectives");
    float ones[5] = {1, 1, 1, 1, 1}, got[5], want = (float)n;
    NT_CUDA(ctx, cudaMemcpy(a, ones, sizeof ones, cudaMemcpyHostToDevice));
    NT_NCCL(ctx, comm, ncclAllReduce(a, b, 5, ncclFloat32, ncclSum, comm, s));
    if (nt_sync(ctx) != 0 || nt_dev_read(ctx, got, b, sizeof got) != 0)
        return -1;
    for (int i = 0; i < 5; i++)
        NT_EXPECT(ctx, got[i] == want, "all-reduce after count 0: element %d is %g, want %g", i,
                  got[i], want);
    cudaFree(a);
    cudaFree(b);
    free(src);
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// ---- a few MiB ----

// Rank r's element i of the large reductions: a small integer, so any sum
// is exact.
static float large_val_(int r, size_t i)
{
    return (float)((r * 7 + (int)(i % 11) * 3) % 11 - 5);
}

// The large reductions: all-reduce out of place, reduce in place to the last
// rank, reduce-scatter (recvcount half of it) out of place.
static int large_reduce_(struct nt_ctx *ctx, ncclComm_t comm, int coll)
{
    static const char *const names[] = {"allreduce", "reduce in place, root last", "reducescatter"};
    int n = ctx->nranks, root = n - 1;
    size_t count = coll == 2 ? LARGE_COUNT / 2 : LARGE_COUNT;
    size_t send_elems = coll == 2 ? (size_t)n * count : count;
    float *host = malloc(send_elems * sizeof *host);
    NT_REQUIRE(ctx, host, "out of host memory");
    for (size_t i = 0; i < send_elems; i++)
        host[i] = large_val_(ctx->rank, i);
    float *send = nt_dev_alloc(ctx, send_elems * sizeof *host, host), *recv = send;
    if (coll != 1)
        recv = nt_dev_alloc(ctx, count * sizeof *host, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    if (coll == 0)
        NT_NCCL(ctx, comm,
                ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, ctx->stream));
    else if (coll == 1)
        NT_NCCL(ctx, comm,
                ncclReduce(send, recv, count, ncclFloat32, ncclSum, root, comm, ctx->stream));
    else
        NT_NCCL(ctx, comm,
                ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm, ctx->stream));
    if (nt_sync(ctx) != 0 || nt_dev_read(ctx, host, recv, count * sizeof *host) != 0)
        return -1;
    size_t wrong = 0, first = 0, base = coll == 2 ? (size_t)ctx->rank * count : 0;
    float first_want = 0;
    for (size_t i = 0; (coll != 1 || ctx->rank == root) && i < count; i++) {
        float want = 0;
        for (int r = 0; r < n; r++)
            want += large_val_(r, base + i);
        if (host[i] != want && wrong++ == 0)
            first = i, first_want = want;
    }
    NT_EXPECT(ctx, wrong == 0,
              "large %s float32 sum, count %zu: %zu wrong, first element %zu = %g, want %g",
              names[coll], count, wrong, first, host[first], first_want);
    free(host);
    if (recv != send)
        cudaFree(recv);
    cudaFree(send);
    return 0;
}

static int case_large_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    for (int coll = 0; coll < 3; coll++)
        if (large_reduce_(ctx, comm, coll) != 0)
            return -1;
    if (nt_check_allgather(ctx, comm, ncclFloat32, LARGE_COUNT / 2, 0) != 0 ||
        nt_check_broadcast(ctx, comm, ncclFloat32, LARGE_COUNT, 0, 0) != 0 ||
        nt_check_alltoall(ctx, comm, ncclFloat32, LARGE_COUNT / (size_t)ctx->nranks + 7) != 0 ||
        ring_group_(ctx, comm, LARGE_COUNT) != 0)
        return -1;
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

const struct nt_case nt_cases_p2p[] = {
    {"sendrecv", case_sendrecv_, 1, 1, 0, NULL,
     "grouped ring shift (2 messages in order), every peer in a group, ungrouped pairs"},
    {"count0", case_count0_, 1, 1, 0, NULL, "every collective with count 0 writes nothing"},
    {"large", case_large_, 1, 1, 0, NULL,
     "3 MiB + 7 float32s: reductions, all-gather, broadcast, all-to-all, send/recv"},
    {NULL, NULL, 0, 0, 0, NULL, NULL},
};
