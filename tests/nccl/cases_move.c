// cases_move.c: the collectives that move data of nccl_api_test: all-gather,
// broadcast (and ncclBcast), all-to-all, gather, scatter and send/recv, in
// and out of place (NCCL's in-place forms), with count 0, and with a few MiB
// (past any internal chunk of the library).
#include "nccl_test.h"
#include "ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOVE_COUNT 129 // elements per rank or block

static const ncclDataType_t move_types[] = {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64};
#define MOVE_TYPES 4

// ---- all-gather, broadcast, all-to-all ----

int nt_check_allgather(struct nt_ctx *ctx, ncclComm_t comm, ncclDataType_t type, size_t count,
                       int inplace)
{
    int n = ctx->nranks;
    size_t chunk = count * ref_type_size(type);
    unsigned char *want = malloc((size_t)n * chunk + 1);
    NT_REQUIRE(ctx, want, "out of host memory");
    for (int r = 0; r < n; r++)
        nt_pattern(want + (size_t)r * chunk, chunk, r, 1);
    unsigned char *recv = nt_dev_alloc(ctx, (size_t)n * chunk, NULL), *send;
    if (inplace) { // sendbuff == recvbuff + rank * sendcount
        send = recv + (size_t)ctx->rank * chunk;
        NT_CUDA(ctx,
                cudaMemcpy(send, want + (size_t)ctx->rank * chunk, chunk, cudaMemcpyHostToDevice));
    } else {
        send = nt_dev_alloc(ctx, chunk, want + (size_t)ctx->rank * chunk);
    }
    NT_REQUIRE(ctx, recv && send, "buffers");
    NT_NCCL(ctx, comm, ncclAllGather(send, recv, count, type, comm, ctx->stream));
    if (nt_sync(ctx) != 0)
        return -1;
    char what[96];
    snprintf(what, sizeof what, "allgather %s count %zu %s", ref_type_name(type), count,
             inplace ? "in-place" : "out-of-place");
    int rc = nt_expect_bytes(ctx, recv, want, (size_t)n * chunk, what);
    if (!inplace)
        cudaFree(send);
    cudaFree(recv);
    free(want);
    return rc;
}

static int case_allgather_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    for (int t = 0; t < MOVE_TYPES; t++)
        for (int inplace = 0; inplace < 2; inplace++)
            if (nt_check_allgather(ctx, comm, move_types[t], MOVE_COUNT, inplace) != 0)
                return -1;
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// form 0: ncclBroadcast out of place; 1: ncclBroadcast in place; 2: ncclBcast.
int nt_check_broadcast(struct nt_ctx *ctx, ncclComm_t comm, ncclDataType_t type, size_t count,
                       int root, int form)
{
    size_t bytes = count * ref_type_size(type);
    unsigned char *want = nt_pattern_new(ctx, bytes, root, 2);
    NT_REQUIRE(ctx, want, "pattern");
    int is_root = ctx->rank == root;
    unsigned char *send = NULL, *recv;
    if (form == 0) {
        send = nt_dev_alloc(ctx, bytes, is_root ? want : NULL);
        recv = nt_dev_alloc(ctx, bytes, NULL);
    } else {
        recv = nt_dev_alloc(ctx, bytes, is_root ? want : NULL);
    }
    NT_REQUIRE(ctx, recv && (form != 0 || send), "buffers");
    if (form == 2)
        NT_NCCL(ctx, comm, ncclBcast(recv, count, type, root, comm, ctx->stream));
    else
        NT_NCCL(ctx, comm,
                ncclBroadcast(form == 0 ? send : recv, recv, count, type, root, comm, ctx->stream));
    if (nt_sync(ctx) != 0)
        return -1;
    static const char *const forms[] = {"ncclBroadcast out-of-place", "ncclBroadcast in-place",
                                        "ncclBcast"};
    char what[128];
    snprintf(what, sizeof what, "%s %s count %zu root %d", forms[form], ref_type_name(type), count,
             root);
    int rc = nt_expect_bytes(ctx, recv, want, bytes, what);
    cudaFree(send);
    cudaFree(recv);
    free(want);
    return rc;
}

static int case_broadcast_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    for (int root = 0; root < ctx->nranks; root++)
        for (int form = 0; form < 3; form++)
            for (int t = 0; t < MOVE_TYPES; t += 2)
                if (nt_check_broadcast(ctx, comm, move_types[t], 1001, root, form) != 0)
                    return -1;
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// Block j of rank r's send buffer goes to rank j: pattern (r, tag 100 + j).
int nt_check_alltoall(struct nt_ctx *ctx, ncclComm_t comm, ncclDataType_t type, size_t count)
{
    int n = ctx->nranks;
    size_t block = count * ref_type_size(type);
    unsigned char *mine = malloc((size_t)n * block + 1), *want = malloc((size_t)n * block + 1);
    NT_REQUIRE(ctx, mine && want, "out of host memory");
    for (int j = 0; j < n; j++) {
        nt_pattern(mine + (size_t)j * block, block, ctx->rank, 100u + (unsigned)j);
        nt_pattern(want + (size_t)j * block, block, j, 100u + (unsigned)ctx->rank);
    }
    void *send = nt_dev_alloc(ctx, (size_t)n * block, mine);
    void *recv = nt_dev_alloc(ctx, (size_t)n * block, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    NT_NCCL(ctx, comm, ncclAlltoAll(send, recv, count, type, comm, ctx->stream));
    if (nt_sync(ctx) != 0)
        return -1;
    char what[96];
    snprintf(what, sizeof what, "alltoall %s count %zu", ref_type_name(type), count);
    int rc = nt_expect_bytes(ctx, recv, want, (size_t)n * block, what);
    cudaFree(send);
    cudaFree(recv);
    free(mine);
    free(want);
    return rc;
}

static int case_alltoall_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    for (int t = 0; t < MOVE_TYPES; t++)
        if (nt_check_alltoall(ctx, comm, move_types[t], 67) != 0)
            return -1;
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// ---- gather, scatter ----

// Gather: block r of the root's recvbuff is rank r's pattern (r, tag 3). In
// place on the root: sendbuff == recvbuff + root * count. A non-root's
// recvbuff is not used (so not written).
static int gather_one_(struct nt_ctx *ctx, ncclComm_t comm, size_t count, int root, int inplace)
{
    int n = ctx->nranks, is_root = ctx->rank == root;
    size_t block = count * sizeof(float);
    unsigned char *want = malloc((size_t)n * block + 1);
    NT_REQUIRE(ctx, want, "out of host memory");
    for (int r = 0; r < n; r++)
        nt_pattern(want + (size_t)r * block, block, r, 3);
    unsigned char *recv = nt_dev_alloc(ctx, (size_t)n * block, NULL), *send;
    if (inplace && is_root) {
        send = recv + (size_t)root * block;
        NT_CUDA(ctx, cudaMemcpy(send, want + (size_t)root * block, block, cudaMemcpyHostToDevice));
    } else {
        send = nt_dev_alloc(ctx, block, want + (size_t)ctx->rank * block);
    }
    NT_REQUIRE(ctx, recv && send, "buffers");
    NT_NCCL(ctx, comm, ncclGather(send, recv, count, ncclFloat32, root, comm, ctx->stream));
    if (nt_sync(ctx) != 0)
        return -1;
    char what[96];
    snprintf(what, sizeof what, "gather float32 count %zu root %d %s", count, root,
             inplace ? "in-place" : "out-of-place");
    int rc = 0;
    if (is_root)
        rc = nt_expect_bytes(ctx, recv, want, (size_t)n * block, what);
    else
        (void)nt_untouched(ctx, recv, (size_t)n * block, "a non-root's recvbuff"); // (soft)
    if (!(inplace && is_root))
        cudaFree(send);
    cudaFree(recv);
    free(want);
    return rc;
}

// Scatter: block j of the root's sendbuff (root, tag 200 + j) goes to rank
// j. In place on the root: recvbuff == sendbuff + root * count.
static int scatter_one_(struct nt_ctx *ctx, ncclComm_t comm, size_t count, int root, int inplace)
{
    int n = ctx->nranks, is_root = ctx->rank == root;
    size_t block = count * sizeof(float);
    unsigned char *blocks = malloc((size_t)n * block + 1);
    NT_REQUIRE(ctx, blocks, "out of host memory");
    for (int j = 0; j < n; j++)
        nt_pattern(blocks + (size_t)j * block, block, root, 200u + (unsigned)j);
    unsigned char *send = nt_dev_alloc(ctx, (size_t)n * block, is_root ? blocks : NULL), *recv;
    if (inplace && is_root)
        recv = send + (size_t)root * block;
    else
        recv = nt_dev_alloc(ctx, block, NULL);
    NT_REQUIRE(ctx, recv && send, "buffers");
    NT_NCCL(ctx, comm, ncclScatter(send, recv, count, ncclFloat32, root, comm, ctx->stream));
    if (nt_sync(ctx) != 0)
        return -1;
    char what[96];
    snprintf(what, sizeof what, "scatter float32 count %zu root %d %s", count, root,
             inplace ? "in-place" : "out-of-place");
    int rc = nt_expect_bytes(ctx, recv, blocks + (size_t)ctx->rank * block, block, what);
    if (!(inplace && is_root))
        cudaFree(recv);
    cudaFree(send);
    free(blocks);
    return rc;
}

static int case_gather_scatter_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    for (int root = 0; root < ctx->nranks; root++) {
        for (int inplace = 0; inplace < 2; inplace++) {
            if (gather_one_(ctx, comm, 67, root, inplace) != 0 ||
                scatter_one_(ctx, comm, 67, root, inplace) != 0)
                return -1;
        }
    }
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

const struct nt_case nt_cases_move[] = {
    {"allgather", case_allgather_, 1, 1, 0, NULL,
     "4 element sizes, in place (sendbuff = recvbuff + rank*sendcount) and out"},
    {"broadcast", case_broadcast_, 1, 1, 0, NULL,
     "every root: ncclBroadcast in and out of place, ncclBcast"},
    {"alltoall", case_alltoall_, 1, 1, 0, NULL, "4 element sizes"},
    {"gather_scatter", case_gather_scatter_, 1, 1, 0, NULL,
     "every root, in place and out; a non-root's unused buffer untouched"},
    {NULL, NULL, 0, 0, 0, NULL, NULL},
};
