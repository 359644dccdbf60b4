// cases_reduce.c: the reductions of nccl_api_test: all-reduce, reduce (every
// root) and reduce-scatter for every type and op, in and out of place,
// against ref.c's rank-order reference; inexact float32 values that only
// the rank order reproduces; the pre-multiplied sum's scalar in device memory.
#include "nccl_test.h"
#include "ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum red_coll { RED_ALLREDUCE, RED_REDUCE, RED_REDUCESCATTER };
static const char *const red_coll_names[] = {"allreduce", "reduce", "reducescatter"};

#define RED_COUNT 257 // elements of a result: odd, more than the ranks

struct red_job {
    enum red_coll coll;
    ncclDataType_t type;
    int op;                // ncclSum..ncclAvg or REF_PREMUL
    int root;              // reduce only
    int inplace;           // NCCL's in-place form of the collective
    size_t count;          // reduce / all-reduce: elements; reduce-scatter: recvcount
    unsigned seed;         // of the inputs
    int inexact;           // float32 inputs of many magnitudes (fill_inexact_)
    const double *scalars; // REF_PREMUL: each rank's scalar (a value of the type)
};

// float32 values of 24 significant bits between 2^-20 and 2^20, either sign:
// their sums round, so only the rank order gives the reference's bits.
static void fill_inexact_(float *buf, int rank, size_t count, unsigned seed)
{
    for (size_t i = 0; i < count; i++) {
        uint32_t h = ref_hash((uint32_t)rank, (uint32_t)i, seed);
        float m = 1.0f + (float)(h & 0xFFFFFF) / 16777216.0f;
        int e = (int)(h >> 24) % 41 - 20;
        float v = m * (float)(e >= 0 ? (double)(1u << e) : 1.0 / (double)(1u << -e));
        buf[i] = h & 0x80000000u ? -v : v;
    }
}

static void job_describe_(const struct red_job *j, char *out, size_t bytes)
{
    int n = snprintf(out, bytes, "%s %s %s %s count %zu", red_coll_names[j->coll],
                     ref_type_name(j->type), ref_op_name(j->op),
                     j->inplace ? "in-place" : "out-of-place", j->count);
    if (j->coll == RED_REDUCE)
        snprintf(out + n, bytes - (size_t)n, " root %d", j->root);
}

// Every rank's inputs (each rank makes all of them, for the reference).
static void **job_inputs_(const struct red_job *j, int nranks, size_t elems)
{
    size_t size = ref_type_size(j->type);
    void **in = calloc((size_t)nranks, sizeof *in);
    for (int r = 0; in && r < nranks; r++) {
        in[r] = malloc(elems * size + 1);
        if (!in[r])
            return NULL; // (a test: the leak on failure does not matter)
        if (j->inexact)
            fill_inexact_(in[r], r, elems, j->seed);
        else
            ref_fill(in[r], j->type, j->op, r, elems, j->seed);
    }
    return in;
}

static ncclResult_t job_call_(const struct red_job *j, const void *send, void *recv, ncclRedOp_t op,
                              ncclComm_t comm, cudaStream_t stream)
{
    switch (j->coll) {
    case RED_ALLREDUCE: return ncclAllReduce(send, recv, j->count, j->type, op, comm, stream);
    case RED_REDUCE: return ncclReduce(send, recv, j->count, j->type, op, j->root, comm, stream);
    default: return ncclReduceScatter(send, recv, j->count, j->type, op, comm, stream);
    }
}

// The result on this rank against the reference (want: all send elements).
static void job_compare_(struct nt_ctx *ctx, const struct red_job *j, const void *recv,
                         const unsigned char *want, const char *what)
{
    if (j->coll == RED_REDUCE && ctx->rank != j->root)
        return; // (NCCL leaves a non-root's recvbuff alone; nothing to compare)
    size_t size = ref_type_size(j->type);
    const unsigned char *mine = want;
    if (j->coll == RED_REDUCESCATTER)
        mine += (size_t)ctx->rank * j->count * size;
    unsigned char *got = malloc(j->count * size + 1);
    char why[256];
    if (!got || nt_dev_read(ctx, got, recv, j->count * size) != 0) {
        free(got);
        return;
    }
    size_t wrong = ref_compare(got, mine, j->count, j->type, why, sizeof why);
    NT_EXPECT(ctx, wrong == 0, "%s: %zu of %zu elements wrong; first: %s", what, wrong, j->count,
              why);
    free(got);
}

// One reduction collective, checked; -1 when the ranks cannot go on.
static int red_run_(struct nt_ctx *ctx, ncclComm_t comm, const struct red_job *j)
{
    int n = ctx->nranks;
    size_t size = ref_type_size(j->type);
    size_t elems = j->coll == RED_REDUCESCATTER ? (size_t)n * j->count : j->count;
    char what[160];
    job_describe_(j, what, sizeof what);
    void **in = job_inputs_(j, n, elems);
    unsigned char *want = malloc(elems * size + 1);
    NT_REQUIRE(ctx, in && want, "%s: out of host memory", what);
    ref_reduce(want, (const void *const *)in, n, elems, j->type, j->op, j->scalars);
    unsigned char *send = nt_dev_alloc(ctx, elems * size, in[ctx->rank]), *recv = send;
    if (!j->inplace)
        recv = nt_dev_alloc(ctx, j->count * size, NULL);
    else if (j->coll == RED_REDUCESCATTER && send)
        recv = send + (size_t)ctx->rank * j->count * size;
    NT_REQUIRE(ctx, send && recv, "%s: buffers", what);
    ncclRedOp_t op = (ncclRedOp_t)j->op;
    if (j->op == REF_PREMUL) {
        unsigned char scalar[8];
        ref_store(scalar, j->type, 0, j->scalars[ctx->rank]);
        NT_NCCL(ctx, comm,
                ncclRedOpCreatePreMulSum(&op, scalar, j->type, ncclScalarHostImmediate, comm));
    }
    ncclResult_t rc = job_call_(j, send, recv, op, comm, ctx->stream);
    if (rc != ncclSuccess)
        return nt_fail(ctx, __FILE__, __LINE__, "%s: %s; last error: %s", what,
                       ncclGetErrorString(rc), ncclGetLastError(comm));
    if (nt_sync(ctx) != 0)
        return -1;
    job_compare_(ctx, j, recv, want, what);
    if (j->op == REF_PREMUL)
        NT_NCCL(ctx, comm, ncclRedOpDestroy(op, comm));
    cudaFree(send);
    if (!j->inplace)
        cudaFree(recv);
    for (int r = 0; r < n; r++)
        free(in[r]);
    free(in);
    free(want);
    return 0;
}

// Every type x op x {out of place, in place} of one collective (reduce:
// every root), one communicator.
static int red_sweep_(struct nt_ctx *ctx, enum red_coll coll)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    double scalars[NT_MAX_RANKS];
    for (int r = 0; r < ctx->nranks; r++)
        scalars[r] = 2; // the same everywhere; per-rank scalars: case float_order
    int roots = coll == RED_REDUCE ? ctx->nranks : 1;
    for (int t = 0; t < ncclNumTypes; t++) {
        for (int op = 0; op < REF_NUM_OPS; op++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                for (int root = 0; root < roots; root++) {
                    struct red_job j = {.coll = coll,
                                        .type = (ncclDataType_t)t,
                                        .op = op,
                                        .root = root,
                                        .inplace = inplace,
                                        .count = RED_COUNT,
                                        .seed = (unsigned)(t * 100 + op * 10 + root),
                                        .scalars = scalars};
                    if (red_run_(ctx, comm, &j) != 0)
                        return -1;
                }
            }
        }
    }
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

static int case_allreduce_(struct nt_ctx *ctx)
{
    return red_sweep_(ctx, RED_ALLREDUCE);
}
static int case_reduce_(struct nt_ctx *ctx)
{
    return red_sweep_(ctx, RED_REDUCE);
}
static int case_reducescatter_(struct nt_ctx *ctx)
{
    return red_sweep_(ctx, RED_REDUCESCATTER);
}

// The test's own power: for inexact inputs, summing in reverse rank order
// must differ somewhere from the rank order (else the case proves nothing).
static int order_matters_(struct nt_ctx *ctx, size_t count, unsigned seed)
{
    int n = ctx->nranks;
    if (n < 3)
        return 0; // two addends commute exactly: the order shows from 3 ranks on
    float *x = malloc((size_t)n * count * sizeof *x);
    NT_REQUIRE(ctx, x, "out of host memory");
    for (int r = 0; r < n; r++)
        fill_inexact_(x + (size_t)r * count, r, count, seed);
    size_t differ = 0;
    for (size_t i = 0; i < count; i++) {
        float fwd = x[i], rev = x[(size_t)(n - 1) * count + i];
        for (int r = 1; r < n; r++) {
            fwd += x[(size_t)r * count + i];
            rev += x[(size_t)(n - 1 - r) * count + i];
        }
        differ += fwd != rev;
    }
    free(x);
    NT_EXPECT(ctx, differ > 0, "test data: the reverse order gives the same sums");
    return 0;
}

// Inexact float32: sum, average and a pre-multiplied sum with a scalar of
// each rank's own, by every reduction, bitwise equal to the rank order.
static int case_float_order_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (order_matters_(ctx, RED_COUNT, 77) != 0 || nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    double scalars[NT_MAX_RANKS];
    for (int r = 0; r < ctx->nranks; r++)
        scalars[r] = (float)(1.0 + 0.1 * r);
    static const int ops[] = {ncclSum, ncclAvg, REF_PREMUL};
    for (int k = 0; k < 3; k++) {
        for (int coll = 0; coll < 3; coll++) {
            int roots = coll == RED_REDUCE ? ctx->nranks : 1;
            for (int root = 0; root < roots; root++) {
                for (int inplace = 0; inplace < 2; inplace++) {
                    struct red_job j = {.coll = (enum red_coll)coll,
                                        .type = ncclFloat32,
                                        .op = ops[k],
                                        .root = root,
                                        .inplace = inplace,
                                        .count = RED_COUNT,
                                        .seed = 77,
                                        .inexact = 1,
                                        .scalars = scalars};
                    if (red_run_(ctx, comm, &j) != 0)
                        return -1;
                }
            }
        }
    }
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// A pre-multiplied sum whose scalar lives in device memory: read when the
// collective runs (NCCL: "dereferenced while the collective is running"),
// so a value written after ncclRedOpCreatePreMulSum is the one used.
static int premul_device_one_(struct nt_ctx *ctx, ncclComm_t comm, ncclDataType_t type)
{
    size_t size = ref_type_size(type), count = RED_COUNT;
    unsigned char scalar3[8], scalar5[8];
    ref_store(scalar3, type, 0, 3);
    ref_store(scalar5, type, 0, 5);
    void *dscalar = nt_dev_alloc(ctx, size, scalar3);
    NT_REQUIRE(ctx, dscalar, "device scalar");
    ncclRedOp_t op;
    NT_NCCL(ctx, comm, ncclRedOpCreatePreMulSum(&op, dscalar, type, ncclScalarDevice, comm));
    NT_CUDA(ctx, cudaMemcpy(dscalar, scalar5, size, cudaMemcpyHostToDevice));
    double scalars[NT_MAX_RANKS];
    void *in[NT_MAX_RANKS];
    for (int r = 0; r < ctx->nranks; r++) {
        scalars[r] = 5;
        in[r] = malloc(count * size);
        NT_REQUIRE(ctx, in[r], "out of host memory");
        ref_fill(in[r], type, ncclSum, r, count, 5);
    }
    unsigned char *want = malloc(count * size), *got = malloc(count * size);
    NT_REQUIRE(ctx, want && got, "out of host memory");
    ref_reduce(want, (const void *const *)in, ctx->nranks, count, type, REF_PREMUL, scalars);
    void *send = nt_dev_alloc(ctx, count * size, in[ctx->rank]);
    void *recv = nt_dev_alloc(ctx, count * size, NULL);
    NT_REQUIRE(ctx, send && recv, "buffers");
    NT_NCCL(ctx, comm, ncclAllReduce(send, recv, count, type, op, comm, ctx->stream));
    if (nt_sync(ctx) != 0 || nt_dev_read(ctx, got, recv, count * size) != 0)
        return -1;
    char why[256];
    size_t wrong = ref_compare(got, want, count, type, why, sizeof why);
    NT_EXPECT(ctx, wrong == 0,
              "allreduce %s premulsum, scalar in device memory (3 at creation, 5 at the call): "
              "%zu wrong; first: %s",
              ref_type_name(type), wrong, why);
    NT_NCCL(ctx, comm, ncclRedOpDestroy(op, comm));
    for (int r = 0; r < ctx->nranks; r++)
        free(in[r]);
    free(want);
    free(got);
    cudaFree(send);
    cudaFree(recv);
    cudaFree(dscalar);
    return 0;
}

static int case_premul_device_(struct nt_ctx *ctx)
{
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    static const ncclDataType_t types[] = {ncclFloat32, ncclInt32, ncclFloat16, ncclFloat64};
    for (int k = 0; k < 4; k++)
        if (premul_device_one_(ctx, comm, types[k]) != 0)
            return -1;
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

// ncclAvg of values near the top of each floating type's range (the same on
// every rank): NCCL scales each rank's value by 1/N before the sum, so the
// average is the value itself where a sum first would overflow (float16 to
// inf) or saturate (fp8 at its largest finite value: 4 x 256 in e4m3 gave 112).
static int case_avg_range_(struct nt_ctx *ctx)
{
    static const struct {
        ncclDataType_t type;
        double value;
    } big[] = {{ncclFloat16, 40000},       {ncclBfloat16, 2e38}, {ncclFloat32, 2e38},
               {ncclFloat64, 1e308},       {ncclFloat8e4m3, 256}, {ncclFloat8e5m2, 49152}};
    ncclComm_t comm;
    if (nt_comm_init(ctx, &comm, 0) != 0)
        return -1;
    for (size_t k = 0; k < sizeof big / sizeof *big; k++) {
        const ncclDataType_t t = big[k].type;
        const size_t count = 33, size = ref_type_size(t);
        unsigned char host[33 * 8], want[33 * 8], got[33 * 8];
        for (size_t i = 0; i < count; i++)
            ref_store(host, t, i, i % 2 ? -big[k].value : big[k].value);
        const void *in[NT_MAX_RANKS];
        for (int r = 0; r < ctx->nranks; r++)
            in[r] = host;
        ref_reduce(want, in, ctx->nranks, count, t, ncclAvg, NULL);
        void *buf = nt_dev_alloc(ctx, count * size, host);
        NT_REQUIRE(ctx, buf, "buffer");
        NT_NCCL(ctx, comm, ncclAllReduce(buf, buf, count, t, ncclAvg, comm, ctx->stream));
        if (nt_sync(ctx) != 0 || nt_dev_read(ctx, got, buf, count * size) != 0)
            return -1;
        char why[256];
        size_t wrong = ref_compare(got, want, count, t, why, sizeof why);
        NT_EXPECT(ctx, wrong == 0, "avg of %g on every rank, %s: %zu of %zu wrong; first: %s",
                  big[k].value, ref_type_name(t), wrong, count, why);
        // (fp8's rank-order sums round at each step: 8 x 6144 in e5m2 is 57344, the reference's bits too)
        const double mean = ref_load(got, t, 0);
        const int fp8 = t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
        NT_EXPECT(ctx, fp8 || (mean > 0.85 * big[k].value && mean < 1.15 * big[k].value),
                  "avg of %g on every rank, %s: %g", big[k].value, ref_type_name(t), mean);
        cudaFree(buf);
    }
    NT_NCCL(ctx, comm, ncclCommDestroy(comm));
    return 0;
}

const struct nt_case nt_cases_reduce[] = {
    {"allreduce", case_allreduce_, 1, 1, 0, NULL,
     "every type x op (premulsum: host scalar), in and out of place"},
    {"reduce", case_reduce_, 1, 1, 0, NULL, "every type x op x root, in and out of place"},
    {"reducescatter", case_reducescatter_, 1, 1, 0, NULL,
     "every type x op, in place (recvbuff = sendbuff + rank*recvcount) and out"},
    {"float_order", case_float_order_, 1, 1, 0, NULL,
     "inexact float32 sum/avg/premulsum (scalar per rank): bitwise rank order, every reduction"},
    {"avg_range", case_avg_range_, 1, 1, 0, NULL,
     "ncclAvg of values near each float type's top: scaled by 1/N first, no overflow"},
    {"premul_device", case_premul_device_, 1, 1, 0, NULL,
     "premulsum with the scalar in device memory, read at the call"},
    {NULL, NULL, 0, 0, 0, NULL, NULL},
};
