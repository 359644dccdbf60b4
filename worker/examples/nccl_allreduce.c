// nccl_allreduce.c: a plain MPI + NCCL + CUDA runtime program that knows
// nothing of vgpu, set up the way llm.c's train_gpt2.cu sets up its GPUs:
// the local rank (MPI_Comm_split_type SHARED) picks the device, rank 0's
// ncclGetUniqueId goes to every rank with MPI_Bcast, ncclCommInitRank, then
// one ncclAllReduce (sum, float) on a stream, checked element by element.
// Built against the real NCCL; under vgpu it runs N ranks on one GPU (or
// none) when LD_LIBRARY_PATH puts vgpu's libnccl.so.2 (and its simulated
// libcudart.so.13 on a machine without a GPU) first:
//
//   mpirun -np 4 ./vgpu_example_nccl_allreduce [count]
//
// Rank 0 prints "nccl_allreduce: 4 ranks, 1048576 floats: ok". Exit status:
// 0 when every element on every rank is exact, 1 otherwise; a failing MPI,
// CUDA or NCCL call ends the job through MPI_Abort with the library's message.
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#define DEFAULT_COUNT (1 << 20)

static int world_rank = -1;
static char host_name[MPI_MAX_PROCESSOR_NAME] = "?";

// [rank R@host] file:line: what failed: why, then the whole job ends.
static void die_(const char *file, int line, const char *what, const char *why)
{
    fprintf(stderr, "[rank %d@%s] %s:%d: %s failed: %s\n", world_rank, host_name, file, line,
            what, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); // (MPI_Abort does not return)
}

static void mpi_check_(int rc, const char *file, int line, const char *what)
{
    if (rc == MPI_SUCCESS)
        return;
    char why[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, why, &len);
    die_(file, line, what, why);
}

static void cuda_check_(cudaError_t rc, const char *file, int line, const char *what)
{
    if (rc != cudaSuccess)
        die_(file, line, what, cudaGetErrorString(rc));
}

static void nccl_check_(ncclResult_t rc, const char *file, int line, const char *what)
{
    if (rc == ncclSuccess)
        return;
    char why[512];
    const char *last = ncclGetLastError(NULL);
    snprintf(why, sizeof why, "%s%s%s", ncclGetErrorString(rc), last && *last ? ": " : "",
             last ? last : "");
    die_(file, line, what, why);
}

#define MPI_CHECK(call) mpi_check_((call), __FILE__, __LINE__, #call)
#define CUDA_CHECK(call) cuda_check_((call), __FILE__, __LINE__, #call)
#define NCCL_CHECK(call) nccl_check_((call), __FILE__, __LINE__, #call)

// Rank r's element i: a small integer, so the sum over ranks is exact in
// any order: (r + 1) * (i % 7 + 1), summing to (i % 7 + 1) * N (N + 1) / 2.
static float value_(int rank, size_t i)
{
    return (float)((rank + 1) * (int)(i % 7 + 1));
}

// The element's sum over nranks ranks.
static float expected_(int nranks, size_t i)
{
    return (float)((int)(i % 7 + 1) * nranks * (nranks + 1) / 2);
}

int main(int argc, char **argv)
{
    MPI_CHECK(MPI_Init(&argc, &argv));
    int nranks = 0, len = 0;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    MPI_CHECK(MPI_Get_processor_name(host_name, &len));
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : DEFAULT_COUNT;

    // One device per local rank, as multi-GPU training programs choose it.
    MPI_Comm local;
    int local_rank = 0, devices = 0;
    MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local));
    MPI_CHECK(MPI_Comm_rank(local, &local_rank));
    CUDA_CHECK(cudaGetDeviceCount(&devices));
    CUDA_CHECK(cudaSetDevice(local_rank % devices));

    ncclUniqueId id;
    if (world_rank == 0)
        NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
    ncclComm_t comm;
    NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, world_rank));

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    float *host = malloc(count * sizeof *host + 1), *send = NULL, *recv = NULL;
    if (!host)
        die_(__FILE__, __LINE__, "malloc", "out of memory");
    for (size_t i = 0; i < count; i++)
        host[i] = value_(world_rank, i);
    CUDA_CHECK(cudaMalloc((void **)&send, count * sizeof *host + 1));
    CUDA_CHECK(cudaMalloc((void **)&recv, count * sizeof *host + 1));
    CUDA_CHECK(cudaMemcpy(send, host, count * sizeof *host, cudaMemcpyHostToDevice));
    NCCL_CHECK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaMemcpy(host, recv, count * sizeof *host, cudaMemcpyDeviceToHost));

    long wrong = 0;
    size_t first = 0;
    for (size_t i = 0; i < count; i++)
        if (host[i] != expected_(nranks, i) && wrong++ == 0)
            first = i;
    if (wrong)
        fprintf(stderr, "[rank %d@%s] %ld of %zu elements wrong; element %zu is %g, want %g\n",
                world_rank, host_name, wrong, count, first, host[first],
                expected_(nranks, first));
    long wrong_all = 0;
    MPI_CHECK(MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    if (world_rank == 0)
        printf("nccl_allreduce: %d ranks, %zu floats: %s\n", nranks, count,
               wrong_all ? "FAILED" : "ok");

    NCCL_CHECK(ncclCommDestroy(comm));
    CUDA_CHECK(cudaFree(send));
    CUDA_CHECK(cudaFree(recv));
    CUDA_CHECK(cudaStreamDestroy(stream));
    free(host);
    MPI_CHECK(MPI_Comm_free(&local));
    MPI_CHECK(MPI_Finalize());
    return wrong_all ? 1 : 0;
}
