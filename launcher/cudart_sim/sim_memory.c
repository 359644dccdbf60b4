// sim_memory.c: the simulated runtime's memory: device and pinned host
// allocations in one table (so frees, copies and pointer queries are
// checked), each device's memory counted against what this process may hold,
// and copies and memsets that run at the call.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define SIM_ALIGN 256 // cudaMalloc's alignment, bytes

// One allocation: device memory or pinned host memory.
struct sim_alloc {
    uintptr_t base; // its address
    size_t bytes;   // its size as asked, bytes (> 0)
    int device;     // the device it is on (host memory: the one current when it was made)
    int host;       // cudaMallocHost / cudaHostAlloc memory
};

// The table, sorted by base; allocations never overlap.
static pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER;
static struct sim_alloc *allocs_;
static size_t count_, cap_;

// The index of the allocation holding addr, or -1. Under lock_.
static long find_(uintptr_t addr)
{
    size_t lo = 0, hi = count_; // the first allocation with base > addr is in [lo, hi]
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (allocs_[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const struct sim_alloc *a = &allocs_[lo - 1];
    return addr - a->base < a->bytes ? (long)(lo - 1) : -1;
}

// Adds a; returns 0, or -1 when the table cannot grow. Under lock_.
static int insert_(const struct sim_alloc *a)
{
    if (count_ == cap_) {
        const size_t cap = cap_ ? 2 * cap_ : 64;
        struct sim_alloc *grown = realloc(allocs_, cap * sizeof *grown);
        if (!grown)
            return -1;
        allocs_ = grown;
        cap_ = cap;
    }
    size_t at = 0;
    while (at < count_ && allocs_[at].base < a->base) // a new block's place: rare enough to scan
        at++;
    memmove(&allocs_[at + 1], &allocs_[at], (count_ - at) * sizeof *allocs_);
    allocs_[at] = *a;
    count_++;
    return 0;
}

static void remove_(size_t index)
{
    memmove(&allocs_[index], &allocs_[index + 1], (count_ - index - 1) * sizeof *allocs_);
    count_--;
}

// Whether [ptr, ptr + bytes) lies inside one allocation the device can reach
// (device memory or pinned host memory).
static int reachable_(const void *ptr, size_t bytes)
{
    pthread_mutex_lock(&lock_);
    const long k = find_((uintptr_t)ptr);
    const int ok = k >= 0 && bytes <= allocs_[k].bytes - ((uintptr_t)ptr - allocs_[k].base);
    pthread_mutex_unlock(&lock_);
    return ok;
}

// ---- allocation ----

cudaError_t cudaMalloc(void **devPtr, size_t size)
{
    if (!devPtr)
        return sim_return(cudaErrorInvalidValue);
    const int device = sim_current_device();
    const cudaError_t err = sim_device_usable(device);
    if (err != cudaSuccess)
        return sim_return(err);
    *devPtr = NULL;
    if (size == 0)
        return cudaSuccess; // as CUDA: success, and a NULL pointer
    struct sim_device *d = sim_device_at(device);
    void *p = NULL;
    pthread_mutex_lock(&lock_);
    if (size > d->capacity_bytes - d->allocated_bytes ||
        posix_memalign(&p, SIM_ALIGN, size) != 0) {
        pthread_mutex_unlock(&lock_);
        return sim_return(cudaErrorMemoryAllocation);
    }
    const struct sim_alloc a = {.base = (uintptr_t)p, .bytes = size, .device = device};
    if (insert_(&a) < 0) {
        pthread_mutex_unlock(&lock_);
        free(p);
        return sim_return(cudaErrorMemoryAllocation);
    }
    d->allocated_bytes += size;
    pthread_mutex_unlock(&lock_);
    *devPtr = p;
    return cudaSuccess;
}

// Frees the allocation based at ptr if it is of the kind asked (host or
// device memory): cudaSuccess, or cudaErrorInvalidValue for anything else.
static cudaError_t free_(void *ptr, int host)
{
    pthread_mutex_lock(&lock_);
    const long k = find_((uintptr_t)ptr);
    if (k < 0 || allocs_[k].base != (uintptr_t)ptr || allocs_[k].host != host) {
        pthread_mutex_unlock(&lock_);
        return cudaErrorInvalidValue;
    }
    if (!host)
        sim_device_at(allocs_[k].device)->allocated_bytes -= allocs_[k].bytes;
    remove_((size_t)k);
    pthread_mutex_unlock(&lock_);
    free(ptr);
    return cudaSuccess;
}

cudaError_t cudaFree(void *devPtr)
{
    const cudaError_t err = sim_init(); // cudaFree(NULL) starts CUDA, as it does on a GPU
    if (err != cudaSuccess || !devPtr)
        return sim_return(err);
    return sim_return(free_(devPtr, 0));
}

cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    const unsigned known = cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined;
    if (!pHost || (flags & ~known))
        return sim_return(cudaErrorInvalidValue);
    const int device = sim_current_device();
    const cudaError_t err = sim_device_usable(device);
    if (err != cudaSuccess)
        return sim_return(err);
    *pHost = NULL;
    if (size == 0)
        return cudaSuccess;
    void *p = NULL;
    if (posix_memalign(&p, SIM_ALIGN, size) != 0)
        return sim_return(cudaErrorMemoryAllocation);
    const struct sim_alloc a = {.base = (uintptr_t)p, .bytes = size, .device = device, .host = 1};
    pthread_mutex_lock(&lock_);
    const int rc = insert_(&a);
    pthread_mutex_unlock(&lock_);
    if (rc < 0) {
        free(p);
        return sim_return(cudaErrorMemoryAllocation);
    }
    *pHost = p;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    return cudaHostAlloc(ptr, size, cudaHostAllocDefault);
}

cudaError_t cudaFreeHost(void *ptr)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess || !ptr)
        return sim_return(err);
    return sim_return(free_(ptr, 1));
}

void sim_memory_reset(int ordinal)
{
    pthread_mutex_lock(&lock_);
    for (size_t k = count_; k-- > 0;) {
        if (allocs_[k].host || allocs_[k].device != ordinal)
            continue;
        free((void *)allocs_[k].base);
        remove_(k);
    }
    struct sim_device *d = sim_device_at(ordinal);
    if (d)
        d->allocated_bytes = 0;
    pthread_mutex_unlock(&lock_);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return sim_return(cudaErrorInvalidValue);
    const int device = sim_current_device();
    const cudaError_t err = sim_device_usable(device);
    if (err != cudaSuccess)
        return sim_return(err);
    const struct sim_device *d = sim_device_at(device);
    const uint64_t limit = d->props.client_limit_bytes; // an MPS client sees its limit as the total
    pthread_mutex_lock(&lock_);
    *free_bytes = (size_t)(d->capacity_bytes - d->allocated_bytes);
    pthread_mutex_unlock(&lock_);
    *total_bytes = (size_t)(limit && limit < d->props.total_bytes ? limit : d->props.total_bytes);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    if (!attributes)
        return sim_return(cudaErrorInvalidValue);
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return sim_return(err);
    memset(attributes, 0, sizeof *attributes);
    void *p = (void *)(uintptr_t)ptr;
    pthread_mutex_lock(&lock_);
    const long k = find_((uintptr_t)ptr);
    const struct sim_alloc a = k >= 0 ? allocs_[k] : (struct sim_alloc){.device = -2};
    pthread_mutex_unlock(&lock_);
    attributes->device = a.device; // -2 for memory CUDA does not know, as CUDA 11+
    if (k < 0) {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->hostPointer = p;
    } else if (a.host) {
        attributes->type = cudaMemoryTypeHost;
        attributes->hostPointer = attributes->devicePointer = p; // mapped at the same address
    } else {
        attributes->type = cudaMemoryTypeDevice;
        attributes->devicePointer = p;
    }
    return cudaSuccess;
}

// ---- copies and memsets (at the call: the stream is then in order) ----

// Checks a copy's direction against its pointers: what the device side
// names must lie inside memory the device reaches.
static cudaError_t copy_check_(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return err;
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return cudaErrorInvalidMemcpyDirection;
    if (count == 0)
        return cudaSuccess;
    if (!dst || !src)
        return cudaErrorInvalidValue;
    const int dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const int src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((dst_device && !reachable_(dst, count)) || (src_device && !reachable_(src, count)))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    const cudaError_t err = copy_check_(dst, src, count, kind);
    if (err == cudaSuccess && count)
        memmove(dst, src, count);
    return sim_return(err);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    cudaError_t err = sim_stream_check(stream);
    if (err == cudaSuccess)
        err = copy_check_(dst, src, count, kind);
    if (err == cudaSuccess && count)
        memmove(dst, src, count);
    return sim_return(err);
}

static cudaError_t memset_check_(void *devPtr, size_t count)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return err;
    return count == 0 || reachable_(devPtr, count) ? cudaSuccess : cudaErrorInvalidValue;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
    const cudaError_t err = memset_check_(devPtr, count);
    if (err == cudaSuccess && count)
        memset(devPtr, value, count);
    return sim_return(err);
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    cudaError_t err = sim_stream_check(stream);
    if (err == cudaSuccess)
        err = memset_check_(devPtr, count);
    if (err == cudaSuccess && count)
        memset(devPtr, value, count);
    return sim_return(err);
}

SIM_ALIAS(cudaMemcpy, _ptds);
SIM_ALIAS(cudaMemset, _ptds);
SIM_ALIAS(cudaMemcpyAsync, _ptsz);
SIM_ALIAS(cudaMemsetAsync, _ptsz);
