// sim_stream.c: the simulated runtime's streams and events: small heap
// objects, known to the library while they live (a destroyed or made-up
// handle is cudaErrorInvalidResourceHandle). Work completes at its call, so
// a stream is always idle and an event complete once recorded; an event
// keeps the time of its record.
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "sim_internal.h"

// The runtime's opaque handles, defined here.
struct CUstream_st {
    int device;     // the device current when it was made
    unsigned flags; // cudaStreamDefault | cudaStreamNonBlocking
};

struct CUevent_st {
    int device;              // the device current when it was made
    unsigned flags;          // cudaEvent* flags
    int recorded;            // cudaEventRecord was called
    struct timespec at;      // CLOCK_MONOTONIC of the last record
};

// The live handles of one kind (a handful: searched in turn).
struct handle_set {
    void **items;
    size_t count, cap;
};

static pthread_mutex_t lock_ = PTHREAD_MUTEX_INITIALIZER; // both sets and events' records
static struct handle_set streams_, events_;

static int set_find_(const struct handle_set *s, const void *h)
{
    for (size_t k = 0; k < s->count; k++)
        if (s->items[k] == h)
            return 1;
    return 0;
}

// Adds h; returns 0 or -1 (no memory). Under lock_.
static int set_add_(struct handle_set *s, void *h)
{
    if (s->count == s->cap) {
        const size_t cap = s->cap ? 2 * s->cap : 16;
        void **grown = realloc(s->items, cap * sizeof *grown);
        if (!grown)
            return -1;
        s->items = grown;
        s->cap = cap;
    }
    s->items[s->count++] = h;
    return 0;
}

// Removes h; returns whether it was there. Under lock_.
static int set_remove_(struct handle_set *s, const void *h)
{
    for (size_t k = 0; k < s->count; k++)
        if (s->items[k] == h) {
            s->items[k] = s->items[--s->count];
            return 1;
        }
    return 0;
}

// Makes *out (size bytes, zeroed) a live handle of s on the current device.
static cudaError_t handle_create_(struct handle_set *s, void **out, size_t bytes, int *device)
{
    if (!out)
        return cudaErrorInvalidValue;
    *device = sim_current_device();
    const cudaError_t err = sim_device_usable(*device);
    if (err != cudaSuccess)
        return err;
    void *h = calloc(1, bytes);
    if (!h)
        return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&lock_);
    const int rc = set_add_(s, h);
    pthread_mutex_unlock(&lock_);
    if (rc < 0) {
        free(h);
        return cudaErrorMemoryAllocation;
    }
    *out = h;
    return cudaSuccess;
}

static cudaError_t handle_destroy_(struct handle_set *s, void *h)
{
    pthread_mutex_lock(&lock_);
    const int found = h && set_remove_(s, h);
    pthread_mutex_unlock(&lock_);
    if (!found)
        return cudaErrorInvalidResourceHandle;
    free(h);
    return cudaSuccess;
}

// Frees every handle of s made on device `ordinal`. Under lock_.
static void set_reset_(struct handle_set *s, int ordinal, int (*device_of)(const void *))
{
    for (size_t k = s->count; k-- > 0;)
        if (device_of(s->items[k]) == ordinal) {
            free(s->items[k]);
            s->items[k] = s->items[--s->count];
        }
}

static int stream_device_(const void *h) { return ((const struct CUstream_st *)h)->device; }
static int event_device_(const void *h) { return ((const struct CUevent_st *)h)->device; }

void sim_stream_reset(int ordinal)
{
    pthread_mutex_lock(&lock_);
    set_reset_(&streams_, ordinal, stream_device_);
    set_reset_(&events_, ordinal, event_device_);
    pthread_mutex_unlock(&lock_);
}

cudaError_t sim_stream_check(cudaStream_t stream)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return err;
    if (stream == NULL || stream == cudaStreamLegacy || stream == cudaStreamPerThread)
        return cudaSuccess;
    pthread_mutex_lock(&lock_);
    const int found = set_find_(&streams_, stream);
    pthread_mutex_unlock(&lock_);
    return found ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

static cudaError_t event_check_(cudaEvent_t event)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return err;
    pthread_mutex_lock(&lock_);
    const int found = event && set_find_(&events_, event);
    pthread_mutex_unlock(&lock_);
    return found ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

// ---- streams ----

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    if (flags & ~(unsigned)cudaStreamNonBlocking)
        return sim_return(cudaErrorInvalidValue);
    int device;
    const cudaError_t err =
        handle_create_(&streams_, (void **)pStream, sizeof(struct CUstream_st), &device);
    if (err == cudaSuccess) {
        (*pStream)->device = device;
        (*pStream)->flags = flags;
    }
    return sim_return(err);
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return sim_return(err);
    return sim_return(handle_destroy_(&streams_, stream));
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    return sim_return(sim_stream_check(stream));
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    return sim_return(sim_stream_check(stream)); // idle: its work ran at each call
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    if (flags & ~(unsigned)cudaEventWaitExternal)
        return sim_return(cudaErrorInvalidValue);
    cudaError_t err = sim_stream_check(stream);
    if (err == cudaSuccess)
        err = event_check_(event);
    return sim_return(err);
}

// ---- events ----

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    const unsigned known = cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess;
    if ((flags & ~known) ||
        ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)))
        return sim_return(cudaErrorInvalidValue);
    int device;
    const cudaError_t err =
        handle_create_(&events_, (void **)event, sizeof(struct CUevent_st), &device);
    if (err == cudaSuccess) {
        (*event)->device = device;
        (*event)->flags = flags;
    }
    return sim_return(err);
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return sim_return(err);
    return sim_return(handle_destroy_(&events_, event));
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    cudaError_t err = event_check_(event);
    if (err == cudaSuccess)
        err = sim_stream_check(stream);
    if (err != cudaSuccess)
        return sim_return(err);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&lock_);
    event->at = now;
    event->recorded = 1;
    pthread_mutex_unlock(&lock_);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    return sim_return(event_check_(event)); // complete: what it waits for ran at the call
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    return sim_return(event_check_(event));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms)
        return sim_return(cudaErrorInvalidValue);
    cudaError_t err = event_check_(start);
    if (err == cudaSuccess)
        err = event_check_(end);
    if (err != cudaSuccess)
        return sim_return(err);
    pthread_mutex_lock(&lock_);
    const struct CUevent_st a = *start, b = *end;
    pthread_mutex_unlock(&lock_);
    // As CUDA: an event without timing, or never recorded, has no time.
    if ((a.flags | b.flags) & cudaEventDisableTiming || !a.recorded || !b.recorded)
        return sim_return(cudaErrorInvalidResourceHandle);
    const double s = (double)(b.at.tv_sec - a.at.tv_sec) * 1e3 + (b.at.tv_nsec - a.at.tv_nsec) / 1e6;
    *ms = (float)s;
    return cudaSuccess;
}

SIM_ALIAS(cudaStreamSynchronize, _ptsz);
SIM_ALIAS(cudaStreamQuery, _ptsz);
SIM_ALIAS(cudaStreamWaitEvent, _ptsz);
SIM_ALIAS(cudaEventRecord, _ptsz);
