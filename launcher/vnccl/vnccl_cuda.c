// vnccl_cuda.c: user buffers through the process's own CUDA runtime.
//
// The library does not link CUDA: it opens libcudart.so.<major> when first
// needed. A process that uses CUDA has it loaded already (PyTorch, a program
// linked with -lcudart), and dlopen by that name finds that very copy, so the
// streams and the current device are the program's. On a machine without a
// GPU the simulated runtime (launcher/cudart_sim/, put first on the loader's
// path) answers the same calls, so the tests here run this file's code. A
// process with no CUDA runtime, or one that finds no device, hands the
// library host memory: copies are memcpy and the stream is not used.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lazy_lib.h"
#include "vnccl.h"

static struct lazy_lib cudart_ = {.soname = VNCCL_CUDART_SONAME, .once = PTHREAD_ONCE_INIT};
static struct {
    cudaError_t (*memcpy_async)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
    cudaError_t (*stream_sync)(cudaStream_t);
    cudaError_t (*get_device)(int *);
    cudaError_t (*set_device)(int);
    cudaError_t (*bus_id)(char *, int, int);
    cudaError_t (*malloc_)(void **, size_t);
    cudaError_t (*free_)(void *);
    const char *(*error_string)(cudaError_t);
} cuda_;
static int cuda_usable_; // a runtime with a device: copies go through it

static void cuda_load_(void)
{
    static const char *const names[] = {"cudaMemcpyAsync", "cudaStreamSynchronize",
                                        "cudaGetDevice",   "cudaSetDevice",
                                        "cudaDeviceGetPCIBusId", "cudaMalloc",
                                        "cudaFree",        "cudaGetErrorString"};
    enum { N = sizeof names / sizeof *names };
    void *slots[N] = {0};
    lazy_lib_load(&cudart_, names, slots, N);
    if (!cudart_.handle)
        return;
    void **dst[N] = {(void **)&cuda_.memcpy_async, (void **)&cuda_.stream_sync,
                     (void **)&cuda_.get_device,   (void **)&cuda_.set_device,
                     (void **)&cuda_.bus_id,       (void **)&cuda_.malloc_,
                     (void **)&cuda_.free_,        (void **)&cuda_.error_string};
    for (int i = 0; i < N; i++)
        *dst[i] = slots[i];
    int dev;
    cuda_usable_ = cuda_.get_device(&dev) == cudaSuccess;
}

static int cuda_ready_(void)
{
    pthread_once(&cudart_.once, cuda_load_);
    return cuda_usable_;
}

ncclResult_t vnccl_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream,
                        char *err, size_t err_bytes)
{
    if (bytes == 0 || dst == src)
        return ncclSuccess;
    if (!cuda_ready_()) {
        memcpy(dst, src, bytes);
        return ncclSuccess;
    }
    cudaError_t e = cuda_.memcpy_async(dst, src, bytes, cudaMemcpyDefault, stream);
    if (e == cudaSuccess)
        e = cuda_.stream_sync(stream);
    if (e == cudaSuccess)
        return ncclSuccess;
    snprintf(err, err_bytes, "a copy of %zu bytes on the stream failed: %s", bytes,
             cuda_.error_string(e));
    return ncclUnhandledCudaError;
}

int vnccl_current_device(char *bus_id, size_t bus_bytes)
{
    int dev = -1;
    if (bus_bytes)
        bus_id[0] = 0;
    if (!cuda_ready_() || cuda_.get_device(&dev) != cudaSuccess)
        return -1;
    if (bus_bytes && cuda_.bus_id(bus_id, (int)bus_bytes, dev) != cudaSuccess)
        bus_id[0] = 0;
    return dev;
}

void vnccl_set_device(int device)
{
    if (device >= 0 && cuda_ready_())
        cuda_.set_device(device);
}

ncclResult_t vnccl_device_alloc(void **ptr, size_t bytes)
{
    if (!cuda_ready_()) {
        *ptr = NULL;
        if (posix_memalign(ptr, 4096, bytes ? bytes : 1))
            return ncclSystemError;
        return ncclSuccess;
    }
    return cuda_.malloc_(ptr, bytes) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

ncclResult_t vnccl_device_free(void *ptr)
{
    if (!cuda_ready_()) {
        free(ptr);
        return ncclSuccess;
    }
    return cuda_.free_(ptr) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
