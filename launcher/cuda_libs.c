// cuda_libs.c: cuBLAS and NCCL loaded when first used (dlopen), not when the
// program starts. A CUDA build of vgpu then starts on a host that has neither
// (CPU devices, the ring), and names the missing library only when a GPU path
// needs it. The CUDA runtime itself is linked statically and loads the driver
// (libcuda.so.1) at the first CUDA call; without one, CUDA reports no device.
//
// The functions below carry the libraries' own names and prototypes (their
// headers are included, so the compiler checks every signature); each loads
// its library once (pthread_once) and calls through the resolved pointer.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "log.h"

struct lib_ {
    const char *soname;
    void *handle;
    char why[256]; // dlerror() of a failed load
    int said;      // why was said (once per library)
    pthread_once_t once;
};

// Opens lib and resolves each of names[i] into slots[i]; any missing symbol
// leaves the library unusable (an older library than the build's headers).
static void load_(struct lib_ *lib, const char *const *names, void **slots, int count)
{
    lib->handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        snprintf(lib->why, sizeof lib->why, "%s", dlerror());
        return;
    }
    for (int i = 0; i < count; i++) {
        slots[i] = dlsym(lib->handle, names[i]);
        if (!slots[i]) {
            snprintf(lib->why, sizeof lib->why, "%s has no %s (older than this build's headers?)",
                     lib->soname, names[i]);
            dlclose(lib->handle);
            lib->handle = NULL;
            return;
        }
    }
}

// Says once why the library is not there; returns 1.
static int missing_(struct lib_ *lib, const char *what)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (!lib->said) {
        lib->said = 1;
        log_warn("cannot load %s (%s): %s", lib->soname, what, lib->why);
    }
    pthread_mutex_unlock(&lock);
    return 1;
}

#ifdef VGPU_HAVE_CUDA
#include <cublas_v2.h>

static struct lib_ cublas_ = {.soname = VGPU_CUBLAS_SONAME, .once = PTHREAD_ONCE_INIT};
static struct {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*destroy)(cublasHandle_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const float *, const float *, int, const float *, int, const float *,
                            float *, int);
} cublas_fn_;

static void cublas_load_(void)
{
    static const char *const names[] = {"cublasCreate_v2", "cublasDestroy_v2",
                                        "cublasSetStream_v2", "cublasSgemm_v2"};
    void *slots[4] = {0};
    load_(&cublas_, names, slots, 4);
    if (cublas_.handle) {
        *(void **)&cublas_fn_.create = slots[0];
        *(void **)&cublas_fn_.destroy = slots[1];
        *(void **)&cublas_fn_.set_stream = slots[2];
        *(void **)&cublas_fn_.sgemm = slots[3];
    }
}

static int cublas_missing_(void)
{
    pthread_once(&cublas_.once, cublas_load_);
    return cublas_.handle ? 0 : missing_(&cublas_, "cuBLAS, for GEMM on CUDA devices");
}

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle)
{
    return cublas_missing_() ? CUBLAS_STATUS_NOT_INITIALIZED : cublas_fn_.create(handle);
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle)
{
    return cublas_missing_() ? CUBLAS_STATUS_NOT_INITIALIZED : cublas_fn_.destroy(handle);
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream)
{
    return cublas_missing_() ? CUBLAS_STATUS_NOT_INITIALIZED
                             : cublas_fn_.set_stream(handle, stream);
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc)
{
    if (cublas_missing_())
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return cublas_fn_.sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
#endif // VGPU_HAVE_CUDA

#ifdef VGPU_HAVE_NCCL
#include <nccl.h>

static struct lib_ nccl_ = {.soname = VGPU_NCCL_SONAME, .once = PTHREAD_ONCE_INIT};
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
} nccl_fn_;

static void nccl_load_(void)
{
    static const char *const names[] = {
        "ncclGetVersion",      "ncclGetUniqueId",       "ncclCommInitRankConfig",
        "ncclCommDestroy",     "ncclCommAbort",         "ncclGetErrorString",
        "ncclCommGetAsyncError", "ncclAllReduce",       "ncclBroadcast",
        "ncclAllGather",       "ncclReduceScatter",     "ncclCommFinalize"};
    enum { N = sizeof names / sizeof *names };
    void *slots[N] = {0};
    load_(&nccl_, names, slots, N);
    if (!nccl_.handle)
        return;
    void **dst[N] = {(void **)&nccl_fn_.get_version,  (void **)&nccl_fn_.get_unique_id,
                     (void **)&nccl_fn_.init_rank_config, (void **)&nccl_fn_.destroy,
                     (void **)&nccl_fn_.abort,        (void **)&nccl_fn_.error_string,
                     (void **)&nccl_fn_.async_error,  (void **)&nccl_fn_.all_reduce,
                     (void **)&nccl_fn_.broadcast,    (void **)&nccl_fn_.all_gather,
                     (void **)&nccl_fn_.reduce_scatter, (void **)&nccl_fn_.finalize};
    for (int i = 0; i < N; i++)
        *dst[i] = slots[i];
}

static int nccl_missing_(void)
{
    pthread_once(&nccl_.once, nccl_load_);
    return nccl_.handle ? 0 : missing_(&nccl_, "NCCL");
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
#endif // VGPU_HAVE_NCCL
