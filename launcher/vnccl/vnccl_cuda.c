// vnccl_cuda.c: user buffers through the process's own CUDA.
//
// The library links no CUDA. When first needed it finds the CUDA runtime the
// process already has loaded (libcudart.so.13, .12 or .11.0: PyTorch's, a
// program's -lcudart), so the streams and the current device are the
// program's; with none loaded it opens the build's (a CUDA program whose
// runtime is static still shares the driver's primary context with it, and
// a cudaStream_t is the driver's CUstream). On a machine without a GPU the
// simulated runtime (launcher/cudart_sim/, first on the loader's path)
// answers the same calls, so the CPU tests run this code. A runtime that
// finds no device, where the driver is not loaded either, means host
// memory: copies are memcpy. The driver's own copy stands in where a driver
// is loaded but no runtime answers, so device memory is never memcpy'd.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vnccl.h"

// The runtime's calls used here, unchanged in ABI from CUDA 11 to 13.
static struct {
    cudaError_t (*memcpy_async)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
    cudaError_t (*stream_sync)(cudaStream_t);
    cudaError_t (*get_device)(int *);
    cudaError_t (*set_device)(int);
    cudaError_t (*bus_id)(char *, int, int);
    cudaError_t (*malloc_)(void **, size_t);
    cudaError_t (*free_)(void *);
    const char *(*error_string)(cudaError_t);
    cudaError_t (*is_capturing)(cudaStream_t, enum cudaStreamCaptureStatus *); // may be absent
} rt_;
// The driver's, where no runtime answers (CUdeviceptr and CUstream as integers and pointers).
static struct {
    int (*memcpy_async)(unsigned long long, unsigned long long, size_t, void *);
    int (*stream_sync)(void *);
} drv_;
enum { MEM_HOST, MEM_RUNTIME, MEM_DRIVER };
static int mem_ = MEM_HOST;
static void *runtime_; // the runtime's dlopen handle (MEM_RUNTIME)
static char runtime_name_[64] = "none"; // which CUDA the copies go through, for messages
static pthread_once_t once_ = PTHREAD_ONCE_INIT;

static int bind_runtime_(void *h)
{
    void **slots[] = {(void **)&rt_.memcpy_async, (void **)&rt_.stream_sync,
                      (void **)&rt_.get_device,   (void **)&rt_.set_device,
                      (void **)&rt_.bus_id,       (void **)&rt_.malloc_,
                      (void **)&rt_.free_,        (void **)&rt_.error_string};
    static const char *const names[] = {"cudaMemcpyAsync", "cudaStreamSynchronize",
                                        "cudaGetDevice",   "cudaSetDevice",
                                        "cudaDeviceGetPCIBusId", "cudaMalloc",
                                        "cudaFree",        "cudaGetErrorString"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!(*slots[i] = dlsym(h, names[i])))
            return 0;
    *(void **)&rt_.is_capturing = dlsym(h, "cudaStreamIsCapturing");
    int dev;
    return rt_.get_device(&dev) == cudaSuccess;
}

static void load_(void)
{
    static const char *const loaded[] = {"libcudart.so.13", "libcudart.so.12",
                                         "libcudart.so.11.0"};
    for (size_t i = 0; i < sizeof loaded / sizeof *loaded; i++) {
        void *h = dlopen(loaded[i], RTLD_NOW | RTLD_NOLOAD);
        if (h && bind_runtime_(h)) {
            mem_ = MEM_RUNTIME;
            runtime_ = h;
            snprintf(runtime_name_, sizeof runtime_name_, "%s (the program's)", loaded[i]);
            return;
        }
    }
    void *h = dlopen(VNCCL_CUDART_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h && bind_runtime_(h)) {
        mem_ = MEM_RUNTIME;
        runtime_ = h;
        snprintf(runtime_name_, sizeof runtime_name_, "%s", VNCCL_CUDART_SONAME);
        return;
    }
    void *d = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (d && (*(void **)&drv_.memcpy_async = dlsym(d, "cuMemcpyAsync")) &&
        (*(void **)&drv_.stream_sync = dlsym(d, "cuStreamSynchronize"))) {
        mem_ = MEM_DRIVER;
        snprintf(runtime_name_, sizeof runtime_name_, "libcuda.so.1 (no runtime answered)");
    }
}

static int mem_kind_(void)
{
    pthread_once(&once_, load_);
    return mem_;
}

ncclResult_t vnccl_stream_usable(cudaStream_t stream, char *err, size_t err_bytes)
{
    enum cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (mem_kind_() != MEM_RUNTIME || !rt_.is_capturing ||
        rt_.is_capturing(stream, &capture) != cudaSuccess || capture == cudaStreamCaptureStatusNone)
        return ncclSuccess;
    snprintf(err, err_bytes, "the stream is being captured into a CUDA graph: vgpu's NCCL waits "
                             "for the stream at each call, which a capture forbids (run the "
                             "collectives outside the graph)");
    return ncclInvalidUsage;
}

ncclResult_t vnccl_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream,
                        char *err, size_t err_bytes)
{
    if (bytes == 0 || dst == src)
        return ncclSuccess;
    switch (mem_kind_()) {
    case MEM_RUNTIME: {
        cudaError_t e = rt_.memcpy_async(dst, src, bytes, cudaMemcpyDefault, stream);
        if (e == cudaSuccess)
            e = rt_.stream_sync(stream);
        if (e == cudaSuccess)
            return ncclSuccess;
        snprintf(err, err_bytes, "a copy of %zu bytes on the stream failed: %s (through %s)",
                 bytes, rt_.error_string(e), runtime_name_);
        return ncclUnhandledCudaError;
    }
    case MEM_DRIVER: {
        int e = drv_.memcpy_async((unsigned long long)(uintptr_t)dst,
                                  (unsigned long long)(uintptr_t)src, bytes, (void *)stream);
        if (e == 0)
            e = drv_.stream_sync((void *)stream);
        if (e == 0)
            return ncclSuccess;
        snprintf(err, err_bytes, "a copy of %zu bytes on the stream failed: CUDA driver error %d "
                 "(through %s)", bytes, e, runtime_name_);
        return ncclUnhandledCudaError;
    }
    default:
        memcpy(dst, src, bytes);
        return ncclSuccess;
    }
}

int vnccl_current_device(char *bus_id, size_t bus_bytes)
{
    int dev = -1;
    if (bus_bytes)
        bus_id[0] = 0;
    if (mem_kind_() != MEM_RUNTIME || rt_.get_device(&dev) != cudaSuccess)
        return -1;
    if (bus_bytes && rt_.bus_id(bus_id, (int)bus_bytes, dev) != cudaSuccess)
        bus_id[0] = 0;
    return dev;
}

void vnccl_set_device(int device)
{
    if (device >= 0 && mem_kind_() == MEM_RUNTIME)
        rt_.set_device(device);
}

ncclResult_t vnccl_device_alloc(void **ptr, size_t bytes)
{
    *ptr = NULL;
    switch (mem_kind_()) {
    case MEM_RUNTIME:
        return rt_.malloc_(ptr, bytes) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
    case MEM_DRIVER:
        return ncclUnhandledCudaError; // no runtime to allocate with: said by the caller
    default:
        return posix_memalign(ptr, 4096, bytes ? bytes : 1) ? ncclSystemError : ncclSuccess;
    }
}

ncclResult_t vnccl_device_free(void *ptr)
{
    switch (mem_kind_()) {
    case MEM_RUNTIME:
        return rt_.free_(ptr) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
    case MEM_DRIVER:
        return ncclUnhandledCudaError;
    default:
        free(ptr);
        return ncclSuccess;
    }
}

ncclResult_t vnccl_stream_wait(cudaStream_t stream)
{
    switch (mem_kind_()) {
    case MEM_RUNTIME: return rt_.stream_sync(stream) == cudaSuccess ? ncclSuccess
                                                                    : ncclUnhandledCudaError;
    case MEM_DRIVER: return drv_.stream_sync((void *)stream) == 0 ? ncclSuccess
                                                                  : ncclUnhandledCudaError;
    default: return ncclSuccess;
    }
}

void *vnccl_runtime_handle(void) { return mem_kind_() == MEM_RUNTIME ? runtime_ : NULL; }
