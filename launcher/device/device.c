// device.c: the backend-independent half of a virtual GPU: the registry of
// backends (what each kind is: name, caps, discovery), the capped arena,
// pointer checks, copy counters, and dispatch to the backend's ops.
#include <stdio.h>
#include <string.h>

#include "device_internal.h"
#include "env.h"
#include "log.h"
#include "util.h"

// ---- the registry ----
//
// Every backend of this binary: one line a backend, in the order
// devices.kind = auto and device_kind_with look (the first GPU kind wins).
// Its folder (device/<name>/, every sub-folder of device/ is added to the
// build) defines device_<name>_backend(), answering its table, or NULL
// from the folder's absent.c where it is not built. CUDA's absent.c answers
// a table that still describes the kind (name, caps, discovery through the
// driver layer, which simulates GPUs) without memory operations.
#define DEVICE_BACKENDS(X) X(cpu) X(cuda) X(testmem)

#define DECLARE_(name) const struct device_ops *device_##name##_backend(void);
#define ENTRY_(name) device_##name##_backend,
DEVICE_BACKENDS(DECLARE_)
static const struct device_ops *(*const registry_[])(void) = {DEVICE_BACKENDS(ENTRY_)};
#define REGISTRY_SIZE (sizeof registry_ / sizeof registry_[0])

// The table that describes `kind`, built or not: the first of the kind in
// registry order, except that a test-only backend answers only, and first,
// where VGPU_TEST_DEVICE names it.
static const struct device_ops *describe_(enum device_kind kind)
{
    const char *test = env_read("VGPU_TEST_DEVICE");
    const struct device_ops *found = NULL;
    for (size_t i = 0; i < REGISTRY_SIZE; i++) {
        const struct device_ops *t = registry_[i]();
        if (!t || t->kind != kind)
            continue;
        if (t->caps & DEVICE_CAP_TEST) {
            if (test && !strcmp(test, t->name))
                return t;
        } else if (!found) {
            found = t;
        }
    }
    return found;
}

const struct device_ops *device_backend(enum device_kind kind)
{
    const struct device_ops *t = describe_(kind);
    return t && t->reserve ? t : NULL; // no memory operations: not built
}

const char *device_kind_name(enum device_kind kind)
{
    const struct device_ops *t = describe_(kind);
    return t ? t->name : kind == DEVICE_KIND_AUTO ? "auto" : "?";
}

const char *device_kind_label(enum device_kind kind)
{
    const struct device_ops *t = describe_(kind);
    return t && t->label ? t->label : "?";
}

unsigned device_kind_caps(enum device_kind kind)
{
    const struct device_ops *t = describe_(kind);
    return t ? t->caps : 0;
}

int device_kind_host_addressable(enum device_kind kind)
{
    const struct device_ops *t = describe_(kind);
    return t && t->host_view;
}

enum device_kind device_kind_with(unsigned caps)
{
    for (size_t i = 0; i < REGISTRY_SIZE; i++) {
        const struct device_ops *t = registry_[i]();
        if (t && (t->caps & caps) == caps && describe_(t->kind) == t)
            return t->kind;
    }
    return DEVICE_KIND_AUTO;
}

// A simulated GPU does its math on the backend that stands for the CPU.
static const struct device_ops *ops_for_(const struct device_info *info)
{
    return device_backend(info->simulated ? DEVICE_KIND_CPU : info->kind);
}

int device_discover(enum device_kind kind, struct device_info *out, int max, int *count, char *err,
                    size_t err_bytes)
{
    *count = 0;
    const struct device_ops *t = describe_(kind);
    if (!t || !t->discover)
        return VGPU_EINVAL;
    return t->discover(out, max, count, err, err_bytes);
}

unsigned device_caps(const device_t *dev) { return dev && dev->ops ? dev->ops->caps : 0; }

void *device_host_view(const device_t *dev, const void *ptr)
{
    return dev && dev->ops && dev->ops->host_view ? dev->ops->host_view(dev, ptr) : NULL;
}

int device_share(const device_t *dev, struct shm_handle *out)
{
    return dev && dev->ops && dev->ops->share ? dev->ops->share(dev, out) : VGPU_EINVAL;
}

int device_host_addressable(const device_t *dev) { return dev && dev->ops && dev->ops->host_view; }

int device_can_ipc(const device_t *dev) { return dev && dev->ops && dev->ops->ipc_export; }

const struct devcoll_exec *device_devcoll(const device_t *dev)
{
    return dev && dev->ops ? dev->ops->devcoll : NULL;
}

void *device_stream(const device_t *dev)
{
    return dev && dev->ops && dev->ops->stream ? dev->ops->stream(dev) : NULL;
}

const struct ring_mem_ops *device_ring_mem(device_t *dev)
{
    return dev->ops->ring_mem ? dev->ops->ring_mem(dev) : NULL;
}

int device_ipc_export(const device_t *dev, unsigned char handle[DEVICE_IPC_HANDLE_BYTES])
{
    return dev->ops->ipc_export ? dev->ops->ipc_export(dev, handle) : VGPU_EUNSUPPORTED;
}

int device_ipc_open(device_t *dev, const unsigned char handle[DEVICE_IPC_HANDLE_BYTES], void **base)
{
    return dev->ops->ipc_open ? dev->ops->ipc_open(dev, handle, base) : VGPU_EUNSUPPORTED;
}

void device_ipc_close(device_t *dev, void *base)
{
    if (dev->ops->ipc_close)
        dev->ops->ipc_close(dev, base);
}

int device_open(device_t *dev, const struct device_info *info, int rank, const char *host,
                uint64_t cap_bytes, int blas_threads)
{
    memset(dev, 0, sizeof *dev);
    dev->ops = ops_for_(info);
    if (!dev->ops) {
        log_error("device backend '%s' is not built into this binary", device_kind_name(info->kind));
        return VGPU_EUNSUPPORTED;
    }
    dev->info = *info;
    dev->rank = dev->virtual_id = rank;
    snprintf(dev->host, sizeof dev->host, "%s", host ? host : "?");
    dev->cap_bytes = cap_bytes / ARENA_ALIGN * ARENA_ALIGN;
    dev->blas_threads = blas_threads > 0 ? blas_threads : 1;
    int rc = dev->ops->reserve(dev, dev->cap_bytes);
    if (rc < 0) {
        char cap[32];
        log_error("cannot reserve %s of device memory for virtual GPU %d on %s%d (%s): %s",
                  util_format_bytes(dev->cap_bytes, cap, sizeof cap), rank, device_kind_name(info->kind), info->index,
                  info->name, status_str(rc));
        dev->ops->release(dev); // backends release what a failed reserve left
        dev->ops = NULL;
        return rc;
    }
    return 0;
}

void device_close(device_t *dev)
{
    if (!dev || !dev->ops)
        return;
    if (dev->math_release)
        dev->math_release(dev);
    dev->math = NULL;
    dev->math_release = NULL;
    arena_destroy(&dev->arena);
    dev->ops->release(dev);
    dev->ops = NULL;
}

const char *device_kind(const device_t *dev)
{
    return device_kind_name(dev->info.kind);
}

int device_alloc(device_t *dev, size_t bytes, void **ptr)
{
    int rc = arena_alloc(&dev->arena, bytes, ptr);
    if (rc == VGPU_EDEVMEM) {
        char req[32], used[32], cap[32];
        log_error("device memory cap exceeded: requested %s, in use %s of %s (virtual GPU %d on "
                  "physical device %s%d)",
                  util_format_bytes(bytes, req, sizeof req),
                  util_format_bytes(dev->arena.stats.in_use_bytes, used, sizeof used),
                  util_format_bytes(dev->cap_bytes, cap, sizeof cap), dev->virtual_id,
                  device_kind_name(dev->info.kind), dev->info.index);
    }
    return rc;
}

int device_alloc_floats(device_t *dev, size_t count, float **ptr)
{
    void *p;
    if (count > SIZE_MAX / sizeof(float))
        return VGPU_EDEVMEM;
    TRY(device_alloc(dev, count * sizeof(float), &p));
    int rc = device_zero(dev, p, count * sizeof(float));
    if (rc < 0) {
        arena_free(&dev->arena, p);
        return rc;
    }
    *ptr = p;
    return 0;
}

int device_free(device_t *dev, void *ptr)
{
    int rc = arena_free(&dev->arena, ptr);
    if (rc < 0)
        log_error("device_free: %p is not a live allocation of virtual GPU %d", ptr, dev->virtual_id);
    return rc;
}

// ---- pointer checks: what a GPU would fault on, the simulation refuses ----

int device_check_range(const device_t *dev, const void *p, size_t bytes, const char *what,
                       const char *op)
{
    if (bytes == 0)
        return 0;
    const char *c = p;
    if (!arena_contains(&dev->arena, c) || !arena_contains(&dev->arena, c + bytes - 1)) {
        log_error("%s: %s %p (+%zu bytes) is not device memory of virtual GPU %d "
                  "(a host pointer passed to the device?)",
                  op, what, p, bytes, dev->virtual_id);
        return VGPU_EINVAL;
    }
    return 0;
}

static int check_host_(const device_t *dev, const void *p, size_t bytes, const char *op)
{
    if (bytes && (arena_contains(&dev->arena, p) || !p)) {
        log_error("%s: host pointer %p is device memory or NULL", op, p);
        return VGPU_EINVAL;
    }
    return 0;
}

#define DEV_(p, bytes, what, op) TRY(device_check_range(dev, (p), (bytes), (what), (op)))

int device_copy_to_device(device_t *dev, void *dst, const void *host_src, size_t bytes)
{
    DEV_(dst, bytes, "destination", "copy_to_device");
    TRY(check_host_(dev, host_src, bytes, "copy_to_device"));
    dev->counters.h2d_calls++;
    dev->counters.h2d_bytes += bytes;
    return bytes ? dev->ops->copy_h2d(dev, dst, host_src, bytes) : 0;
}

int device_copy_to_device_async(device_t *dev, void *dst, const void *host_src, size_t bytes)
{
    if (!dev->ops->copy_h2d_async)
        return device_copy_to_device(dev, dst, host_src, bytes);
    DEV_(dst, bytes, "destination", "copy_to_device");
    TRY(check_host_(dev, host_src, bytes, "copy_to_device"));
    dev->counters.h2d_calls++;
    dev->counters.h2d_bytes += bytes;
    if (!bytes)
        return 0;
    TRY(dev->ops->copy_h2d_async(dev, dst, host_src, bytes));
    dev->host_reads_pending = 1;
    return 0;
}

int device_wait_host_reads(device_t *dev)
{
    return dev->host_reads_pending ? device_sync(dev) : 0;
}

int device_copy_to_host(device_t *dev, void *host_dst, const void *src, size_t bytes)
{
    DEV_(src, bytes, "source", "copy_to_host");
    TRY(check_host_(dev, host_dst, bytes, "copy_to_host"));
    dev->counters.d2h_calls++;
    dev->counters.d2h_bytes += bytes;
    if (!bytes)
        return 0;
    TRY(dev->ops->copy_d2h(dev, host_dst, src, bytes)); // waits for the stream
    dev->host_reads_pending = 0;
    return 0;
}

int device_copy(device_t *dev, void *dst, const void *src, size_t bytes)
{
    DEV_(dst, bytes, "destination", "copy");
    DEV_(src, bytes, "source", "copy");
    dev->counters.d2d_calls++;
    dev->counters.d2d_bytes += bytes;
    return bytes && dst != src ? dev->ops->copy_d2d(dev, dst, src, bytes) : 0;
}

int device_zero(device_t *dev, void *dst, size_t bytes)
{
    DEV_(dst, bytes, "buffer", "zero");
    return bytes ? dev->ops->memset_zero(dev, dst, bytes) : 0;
}

int device_sync(device_t *dev)
{
    TRY(dev->ops->sync(dev));
    dev->host_reads_pending = 0;
    return 0;
}

int device_host_func(device_t *dev, void (*fn)(void *arg), void *arg)
{
    if (!fn)
        return VGPU_EINVAL;
    if (!dev->ops->host_func)
        return VGPU_EUNSUPPORTED;
    return dev->ops->host_func(dev, fn, arg);
}

int device_pin_host(device_t *dev, void *ptr, size_t bytes)
{
    if (!ptr || !bytes || !dev->ops->pin_host)
        return 0;
    return dev->ops->pin_host(dev, ptr, bytes);
}

void device_unpin_host(device_t *dev, void *ptr)
{
    if (ptr && dev && dev->ops && dev->ops->unpin_host)
        dev->ops->unpin_host(dev, ptr);
}
