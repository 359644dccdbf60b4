// nccl_perf.c: vgpu_nccl_perf, nccl-tests' all_reduce_perf in miniature: a
// program on MPI, nccl.h and CUDA's runtime alone (nothing of vgpu), so the
// same binary times NCCL's own library where every rank has a GPU, vgpu's
// NCCL where ranks share one (vgpurun puts it first), and on simulated GPUs
// vgpu's NCCL over the simulated CUDA runtime. Rank 0 makes the unique id
// and MPI_Bcast carries it; an MPI_Barrier fences each size. Every result is
// checked (inputs are small integers, so float sums are exact in any order).
// Usage: vgpurun -np N -- vgpu_nccl_perf [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CUDA_OK(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "vgpu_nccl_perf: rank %d: %s: %s\n", rank, #call,                  \
                    cudaGetErrorString(e_));                                                   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)
#define NCCL_OK(call)                                                                          \
    do {                                                                                       \
        ncclResult_t r_ = (call);                                                              \
        if (r_ != ncclSuccess) {                                                               \
            fprintf(stderr, "vgpu_nccl_perf: rank %d: %s: %s (%s)\n", rank, #call,             \
                    ncclGetErrorString(r_), ncclGetLastError(NULL));                           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)

struct opts {
    size_t min_bytes, max_bytes;
    double factor;
    int iters, warmup;
};

static size_t parse_size_(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return v > 0 ? (size_t)v : 0;
}

static int parse_(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.min_bytes = 8, .max_bytes = 64u << 20, .factor = 2, .iters = 20,
                       .warmup = 5};
    int c;
    while ((c = getopt(argc, argv, "b:e:f:n:w:h")) != -1) {
        switch (c) {
        case 'b': o->min_bytes = parse_size_(optarg); break;
        case 'e': o->max_bytes = parse_size_(optarg); break;
        case 'f': o->factor = atof(optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        default: return -1;
        }
    }
    if (o->min_bytes < 4 || o->max_bytes < o->min_bytes || o->factor <= 1 || o->iters < 1 ||
        o->warmup < 0)
        return -1;
    return 0;
}

// The input of rank r at element i: a small integer, so every sum is exact.
static float input_(int r, size_t i) { return (float)((r + 1) * (int)(i % 7 + 1)); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks, local;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm host;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
    MPI_Comm_rank(host, &local);
    struct opts o;
    if (parse_(argc, argv, &o) < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: vgpu_nccl_perf [-b MINBYTES] [-e MAXBYTES] [-f FACTOR] "
                            "[-n ITERS] [-w WARMUP]   (float sums; under mpirun or vgpurun)\n");
        MPI_Finalize();
        return 2;
    }
    int devices = 0;
    CUDA_OK(cudaGetDeviceCount(&devices));
    CUDA_OK(cudaSetDevice(local % devices));
    ncclUniqueId id;
    if (rank == 0)
        NCCL_OK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreate(&stream));
    const size_t max_count = o.max_bytes / sizeof(float);
    float *host_in = malloc(max_count * sizeof(float)), *host_out = malloc(max_count * sizeof(float));
    float *dev_in, *dev_out;
    CUDA_OK(cudaMalloc((void **)&dev_in, max_count * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&dev_out, max_count * sizeof(float)));
    if (!host_in || !host_out)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < max_count; i++)
        host_in[i] = input_(rank, i);
    CUDA_OK(cudaMemcpy(dev_in, host_in, max_count * sizeof(float), cudaMemcpyHostToDevice));
    if (rank == 0)
        printf("# vgpu_nccl_perf: %d ranks, float sum, %d iterations (%d warm-up)\n"
               "# %12s %12s %10s %9s %9s %7s\n",
               nranks, o.iters, o.warmup, "size(B)", "count", "time(us)", "algbw", "busbw",
               "#wrong");
    long wrong_total = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
        const size_t count = bytes / sizeof(float);
        for (int i = 0; i < o.warmup; i++)
            NCCL_OK(ncclAllReduce(dev_in, dev_out, count, ncclFloat, ncclSum, comm, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < o.iters; i++)
            NCCL_OK(ncclAllReduce(dev_in, dev_out, count, ncclFloat, ncclSum, comm, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        double secs = (MPI_Wtime() - t0) / o.iters, slowest;
        MPI_Allreduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        CUDA_OK(cudaMemcpy(host_out, dev_out, count * sizeof(float), cudaMemcpyDeviceToHost));
        long wrong = 0, all_wrong;
        const float ranks_sum = (float)(nranks * (nranks + 1) / 2);
        for (size_t i = 0; i < count; i++)
            wrong += host_out[i] != ranks_sum * (float)(int)(i % 7 + 1);
        MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        wrong_total += all_wrong;
        const double algbw = (double)bytes / slowest / 1e9;
        if (rank == 0)
            printf("  %12zu %12zu %10.1f %9.3f %9.3f %7ld\n", bytes, count, slowest * 1e6, algbw,
                   algbw * 2.0 * (nranks - 1) / nranks, all_wrong);
        size_t next = (size_t)((double)bytes * o.factor);
        bytes = next > bytes ? next : bytes + 1;
    }
    if (rank == 0)
        printf("# %s\n", wrong_total ? "WRONG RESULTS" : "every result checked: ok");
    NCCL_OK(ncclCommDestroy(comm));
    cudaFree(dev_in);
    cudaFree(dev_out);
    free(host_in);
    free(host_out);
    MPI_Finalize();
    return wrong_total ? 1 : 0;
}
