// device.c: the backend-independent half of a virtual GPU: the capped arena,
// pointer checks, copy counters, and dispatch to the backend's ops.
#include <stdio.h>
#include <string.h>

#include "device_internal.h"
#include "gpu_driver.h"
#include "log.h"
#include "util.h"

// The registry: every backend of this binary, one a kind. A backend that is
// not built answers NULL (its folder's absent.c).
static const struct device_ops *registry_(int i)
{
    switch (i) {
    case 0: return &device_cpu_ops;
    case 1: return device_cuda_backend();
    default: return NULL;
    }
}
#define REGISTRY_SIZE 2

const struct device_ops *device_backend(enum device_kind kind)
{
    for (int i = 0; i < REGISTRY_SIZE; i++)
        if (registry_(i) && registry_(i)->kind == kind)
            return registry_(i);
    return NULL;
}

const char *device_kind_name(enum device_kind kind)
{
    switch (kind) {
    case DEVICE_KIND_AUTO: return "auto";
    case DEVICE_KIND_CPU: return "cpu";
    case DEVICE_KIND_CUDA: return "cuda";
    }
    return "?";
}

// A simulated GPU does its math on the CPU backend.
static const struct device_ops *ops_for_(const struct device_info *info)
{
    return info->simulated ? &device_cpu_ops : device_backend(info->kind);
}

int device_discover(enum device_kind kind, struct device_info *out, int max, int *count, char *err,
                    size_t err_bytes)
{
    *count = 0;
    if (kind == DEVICE_KIND_CPU) {
        if (max < 1)
            return VGPU_EINVAL;
        TRY(device_cpu_discover_(out));
        *count = 1;
        return 0;
    }
    if (kind == DEVICE_KIND_CUDA) {
        const struct gpu_driver *drv = gpu_driver();
        if (!drv)
            return VGPU_EUNSUPPORTED;
        struct gpu_props props[GPU_MAX];
        int n = 0;
        int rc = drv->scan(props, GPU_MAX < max ? GPU_MAX : max, &n, err, err_bytes);
        if (rc < 0)
            return rc; // err says which device and why
        for (int i = 0; i < n; i++) {
            struct device_info *d = &out[i];
            memset(d, 0, sizeof *d);
            d->kind = DEVICE_KIND_CUDA;
            d->index = props[i].ordinal;
            snprintf(d->name, sizeof d->name, "%s", props[i].name);
            snprintf(d->uuid, sizeof d->uuid, "%s", props[i].uuid);
            snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s", props[i].pci_bus_id);
            d->total_bytes = props[i].total_bytes;
            d->free_bytes = props[i].free_bytes;
            d->compute_mode = props[i].compute_mode;
            d->mig = props[i].mig;
            d->free_unknown = props[i].free_unknown;
            d->client_limit_bytes = props[i].client_limit_bytes;
            d->mps = props[i].mps;
            d->simulated = drv->simulated;
        }
        *count = n;
        return 0;
    }
    return VGPU_EINVAL;
}

int device_is_cuda(const device_t *dev) { return dev && dev->ops && dev->ops->kind == DEVICE_KIND_CUDA; }

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

static int check_range_(const device_t *dev, const void *p, size_t bytes, const char *what,
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

#define DEV_(p, bytes, what, op) TRY(check_range_(dev, (p), (bytes), (what), (op)))

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

// ---- math ----

#define F_ sizeof(float)

int device_gemm(device_t *dev, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float *a, const float *b, float beta, float *c)
{
    if (m < 0 || n < 0 || k < 0)
        return VGPU_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    DEV_(a, (size_t)m * k * F_, "A", "gemm");
    DEV_(b, (size_t)k * n * F_, "B", "gemm");
    DEV_(c, (size_t)m * n * F_, "C", "gemm");
    if (k == 0) // an empty product: BLAS libraries disagree on the leading dimensions
        return beta == 0.0f ? device_zero(dev, c, (size_t)m * n * F_)
                            : device_axpby(dev, c, 0.0f, c, beta, (size_t)m * n);
    return dev->ops->gemm(dev, trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
}

int device_decode_u8(device_t *dev, float *out, const uint8_t *codes, const float *table, size_t n)
{
    if (!n)
        return 0;
    DEV_(out, n * F_, "out", "decode_u8");
    DEV_(codes, n, "codes", "decode_u8");
    DEV_(table, 256 * F_, "table", "decode_u8");
    return dev->ops->decode_u8(dev, out, codes, table, n);
}

int device_bias_add(device_t *dev, float *out, const float *bias, int rows, int cols, int relu)
{
    if (rows <= 0 || cols <= 0)
        return rows < 0 || cols < 0 ? VGPU_EINVAL : 0;
    DEV_(out, (size_t)rows * cols * F_, "out", "bias_add");
    DEV_(bias, (size_t)cols * F_, "bias", "bias_add");
    return dev->ops->bias_add(dev, out, bias, rows, cols, relu != 0);
}

int device_bias_grad(device_t *dev, float *dbias, const float *dout, int rows, int cols)
{
    if (rows < 0 || cols < 0)
        return VGPU_EINVAL;
    if (cols == 0)
        return 0;
    DEV_(dbias, (size_t)cols * F_, "dbias", "bias_grad");
    if (rows == 0) // the sum of no rows
        return device_zero(dev, dbias, (size_t)cols * F_);
    DEV_(dout, (size_t)rows * cols * F_, "dout", "bias_grad");
    return dev->ops->bias_grad(dev, dbias, dout, rows, cols);
}

int device_relu_backward(device_t *dev, float *din, const float *dout, const float *out, size_t n)
{
    if (!n)
        return 0;
    DEV_(din, n * F_, "din", "relu_backward");
    DEV_(dout, n * F_, "dout", "relu_backward");
    DEV_(out, n * F_, "out", "relu_backward");
    return dev->ops->relu_backward(dev, din, dout, out, n);
}

int device_softmax_xent(device_t *dev, float *dlogits, float *stats, const float *logits,
                        const int32_t *labels, int rows, int classes, float grad_scale)
{
    if (rows < 0 || classes <= 0)
        return VGPU_EINVAL;
    if (rows == 0)
        return 0;
    size_t n = (size_t)rows * classes * F_;
    if (dlogits)
        DEV_(dlogits, n, "dlogits", "softmax_xent");
    DEV_(stats, (size_t)rows * XENT_STATS * F_, "stats", "softmax_xent");
    DEV_(logits, n, "logits", "softmax_xent");
    DEV_(labels, (size_t)rows * sizeof(int32_t), "labels", "softmax_xent");
    return dev->ops->softmax_xent(dev, dlogits, stats, logits, labels, rows, classes, grad_scale);
}

int device_axpby(device_t *dev, float *y, float a, const float *x, float b, size_t n)
{
    if (!n)
        return 0;
    DEV_(y, n * F_, "y", "axpby");
    DEV_(x, n * F_, "x", "axpby");
    return dev->ops->axpby(dev, y, a, x, b, n);
}

int device_sgd_step(device_t *dev, float *param, const float *grad, float *velocity, size_t n,
                    float lr, float momentum, float weight_decay)
{
    if (!n)
        return 0;
    DEV_(param, n * F_, "param", "sgd_step");
    DEV_(grad, n * F_, "grad", "sgd_step");
    DEV_(velocity, n * F_, "velocity", "sgd_step");
    return dev->ops->sgd_step(dev, param, grad, velocity, n, lr, momentum, weight_decay);
}

int device_adam_step(device_t *dev, float *param, const float *grad, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, float weight_decay,
                     float bias_corr1, float bias_corr2, int decoupled)
{
    if (!n)
        return 0;
    DEV_(param, n * F_, "param", "adam_step");
    DEV_(grad, n * F_, "grad", "adam_step");
    DEV_(m, n * F_, "m", "adam_step");
    DEV_(v, n * F_, "v", "adam_step");
    return dev->ops->adam_step(dev, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay,
                               bias_corr1, bias_corr2, decoupled);
}
