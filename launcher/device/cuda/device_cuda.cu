// device_cuda.cu: the CUDA virtual GPU: one cudaMalloc of the whole cap (the
// arena sub-allocates it), a stream, copies, IPC, the ring's reduction
// kernels (kernels.h), and the GPU discovery of the driver layer. The
// model's math on it is math/cuda/math_cuda.cu's. Compiled and linked in CI;
// it runs only on the GPU machines a session is lent (docs/gpu-runs/).
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_check.h"

extern "C" {
#include "device_internal.h"
#include "device_cuda.h"
#include "ring_mem.h"
#include "devcoll.h"
#include "gpu_driver.h"
#include "util.h"
#include "kernels.h"
#include "log.h"
}

struct cuda_impl {
    void *region;          // the whole cap, from one cudaMalloc
    cudaStream_t stream;
    struct ring_mem_ops ring; // the ring's operations on this device's stream
};

static struct cuda_impl *impl_(device_t *dev) { return (struct cuda_impl *)dev->impl; }

// ---- the driver layer (gpu_driver.h) ----
//
// Discovery creates no context: on an EXCLUSIVE_PROCESS GPU a context made
// by one rank's discovery would keep its host-mates out, and in a program
// that uses CUDA itself a context (or a reset) would touch the program's
// own. Properties and the compute mode come from the runtime (no context
// needed); memory from NVML, loaded with dlopen (it ships with the driver,
// not the toolkit), which also reports physical free memory where
// cudaMemGetInfo under MPS reports the client's limit less its usage.
// Without NVML free memory is unknown: the GPU's total stands in, said once,
// and a cap that does not fit fails when the device is opened.

typedef int nvml_return_;          // nvmlReturn_t: 0 = NVML_SUCCESS
typedef struct nvml_device_st_ *nvml_device_;
struct nvml_memory_ {              // nvmlMemory_t (v1)
    unsigned long long total, free, used;
};
static struct {
    int tried, ok;
    nvml_return_ (*init)(void);
    nvml_return_ (*by_uuid)(const char *, nvml_device_ *);
    nvml_return_ (*memory)(nvml_device_, struct nvml_memory_ *);
} nvml_;

static int nvml_load_(void)
{
    if (nvml_.tried)
        return nvml_.ok;
    nvml_.tried = 1;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
    nvml_.init = (nvml_return_(*)(void))dlsym(h, "nvmlInit_v2");
    nvml_.by_uuid = (nvml_return_(*)(const char *, nvml_device_ *))dlsym(h, "nvmlDeviceGetHandleByUUID");
    nvml_.memory = (nvml_return_(*)(nvml_device_, struct nvml_memory_ *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    nvml_.ok = nvml_.init && nvml_.by_uuid && nvml_.memory && nvml_.init() == 0;
    return nvml_.ok;
}

// Fills total/free and mig for the device whose UUID bytes are hex (32
// hex digits); tries "GPU-" then "MIG-" (a MIG instance has a MIG UUID).
static int nvml_memory_(const char *hex, struct gpu_props *p)
{
    if (!nvml_load_())
        return -1;
    static const char *const prefixes[] = {"GPU-", "MIG-"};
    for (int k = 0; k < 2; k++) {
        char uuid[48];
        nvml_device_ d;
        struct nvml_memory_ m;
        snprintf(uuid, sizeof uuid, "%s%s", prefixes[k], hex);
        if (nvml_.by_uuid(uuid, &d) == 0 && nvml_.memory(d, &m) == 0) {
            snprintf(p->uuid, sizeof p->uuid, "%s", uuid);
            p->mig = k == 1;
            p->total_bytes = m.total;
            p->free_bytes = m.free;
            return 0;
        }
    }
    return -1;
}

// CUDA_VISIBLE_DEVICES names MIG instances by "MIG-<uuid>": without NVML,
// that is how a MIG instance is recognised.
static int visible_as_mig_(const char *hex)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    char want[48];
    snprintf(want, sizeof want, "MIG-%.8s", hex);
    return v && strstr(v, want) != NULL;
}

static int cuda_mps_active_(void);

static int cuda_scan_(struct gpu_props *out, int max, int *count, char *err, size_t err_bytes)
{
    int n = 0;
    *count = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc == cudaErrorInsufficientDriver) {
        // No driver at all (version 0) is a host without a GPU: the CPU
        // stands in, with the notice. A driver older than this build's
        // runtime is an error that says so, never a silent CPU run.
        cudaGetLastError();
        int driver = 0;
        const cudaError_t q = cudaDriverGetVersion(&driver);
        cudaGetLastError();
        if (q != cudaSuccess) // a driver that cannot even say its version: not "no GPU"
            return util_errorf(err, err_bytes, VGPU_ENODEV,
                               "cudaGetDeviceCount: %s, and cudaDriverGetVersion: %s; nvidia-smi "
                               "says more (devices.kind = cpu runs without the GPU)",
                               cudaGetErrorString(rc), cudaGetErrorString(q));
        if (driver <= 0) // cudaDriverGetVersion's answer when no driver is installed
            return 0;
        int found = gpu_driver_check_version(driver, CUDART_VERSION, err, err_bytes);
        return found < 0 ? found
                         : util_errorf(err, err_bytes, VGPU_ENODEV,
                                       "cudaGetDeviceCount: the driver (CUDA %d.%d) is too old "
                                       "for this build's CUDA %d.%d runtime: update the driver, "
                                       "or run with devices.kind = cpu",
                                       driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000,
                                       CUDART_VERSION % 1000 / 10);
    }
    if (rc == cudaErrorNoDevice) {
        cudaGetLastError(); // a driver and no GPU: the CPU stands in, with the notice
        return 0;
    }
    if (rc != cudaSuccess) { // a driver and a device that do not work: say so
        cudaGetLastError();
        return util_errorf(err, err_bytes, VGPU_EIO,
                           "cudaGetDeviceCount: %s (%s): a GPU driver is installed but does not "
                           "work; nvidia-smi says more (devices.kind = cpu runs without it)",
                           cudaGetErrorName(rc), cudaGetErrorString(rc));
    }
    for (int i = 0; i < n && i < max; i++) {
        cudaDeviceProp prop;
        int mode = 0;
        struct gpu_props *p = &out[i];
        memset(p, 0, sizeof *p);
        p->ordinal = i;
        cudaDeviceGetPCIBusId(p->pci_bus_id, sizeof p->pci_bus_id, i);
        if ((rc = cudaGetDeviceProperties(&prop, i)) != cudaSuccess ||
            (rc = cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, i)) != cudaSuccess) {
            cudaGetLastError();
            return util_errorf(err, err_bytes, VGPU_EIO,
                               "GPU %d (PCI %s) is present but failing: %s (%s); nvidia-smi says "
                               "more, or hide it with CUDA_VISIBLE_DEVICES",
                               i, p->pci_bus_id[0] ? p->pci_bus_id : "?", cudaGetErrorName(rc),
                               cudaGetErrorString(rc));
        }
        snprintf(p->name, sizeof p->name, "%.95s", prop.name);
        // The driver's own word (cudaDevAttrMpsEnabled); the pipe directory
        // only says a daemon may run.
        p->mps = prop.mpsEnabled != 0;
        if (cuda_mps_active_())
            p->client_limit_bytes =
                gpu_mps_client_limit(getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), i);
        p->compute_mode = mode == cudaComputeModeProhibited       ? GPU_MODE_PROHIBITED
                          : mode == cudaComputeModeExclusiveProcess ? GPU_MODE_EXCLUSIVE_PROCESS
                                                                   : GPU_MODE_DEFAULT;
        const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
        char hex[40];
        snprintf(hex, sizeof hex, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                 u[13], u[14], u[15]);
        if (nvml_memory_(hex, p) != 0) { // the runtime says so, once a host
            p->free_unknown = 1;
            p->mig = visible_as_mig_(hex);
            snprintf(p->uuid, sizeof p->uuid, "%s%s", p->mig ? "MIG-" : "GPU-", hex);
            p->total_bytes = prop.totalGlobalMem;
            p->free_bytes = prop.totalGlobalMem;
        }
    }
    *count = n < max ? n : max;
    return 0;
}

static int cuda_mps_active_(void)
{
    // vgpurun --mps exports the pipe directory; a site-wide daemon uses the
    // default one.
    const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
    return (pipe && *pipe) || access("/tmp/nvidia-mps/control", F_OK) == 0;
}

static const struct gpu_driver cuda_driver_ = {
    "cuda", 0, cuda_scan_, cuda_mps_active_,
};

extern "C" const struct gpu_driver *gpu_cuda_driver(void) { return &cuda_driver_; }

extern "C" int gpu_runtime_version(void) { return CUDART_VERSION; }

static void *cuda_stream_(const device_t *dev)
{
    return dev && dev->impl ? (void *)((const struct cuda_impl *)dev->impl)->stream : NULL;
}

// ---- memory ----

static int cuda_reserve_(device_t *dev, uint64_t cap_bytes)
{
    struct cuda_impl *im = (struct cuda_impl *)calloc(1, sizeof *im);
    if (!im)
        return VGPU_ENOMEM;
    dev->impl = im;
    CUDA_CHECK(cudaSetDevice(dev->info.index));
    CUDA_CHECK(cudaStreamCreateWithFlags(&im->stream, cudaStreamNonBlocking));
    cudaError_t rc = cudaMalloc(&im->region, cap_bytes);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        im->region = NULL;
        size_t free_b = 0, total_b = 0; // this rank's context exists now: ask CUDA
        if (rc == cudaErrorMemoryAllocation && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
            char cap[32], fr[32];
            log_error("the GPU has %s free now, less than the cap of %s%s: lower "
                      "devices.memory_limit, or run fewer ranks on it",
                      util_format_bytes(free_b, fr, sizeof fr),
                      util_format_bytes(cap_bytes, cap, sizeof cap),
                      dev->info.free_unknown ? " (without NVML the automatic cap assumed the whole "
                                               "GPU free)"
                                             : "");
        }
        cudaGetLastError();
        return rc == cudaErrorMemoryAllocation ? VGPU_EDEVMEM : VGPU_EIO;
    }
    return arena_init(&dev->arena, im->region, cap_bytes);
}

static void cuda_release_(device_t *dev)
{
    struct cuda_impl *im = impl_(dev);
    if (!im)
        return;
    if (im->region)
        cudaFree(im->region);
    if (im->stream)
        cudaStreamDestroy(im->stream);
    free(im);
    dev->impl = NULL;
}

static int stream_wait_(device_t *dev)
{
    USE_DEVICE(dev);
    CUDA_CHECK(cudaStreamSynchronize(impl_(dev)->stream));
    return 0;
}

static int copy_(device_t *dev, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    // Synchronous from the caller's view: the host buffer may be reused or
    // read as soon as this returns.
    USE_DEVICE(dev);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, impl_(dev)->stream));
    return stream_wait_(dev);
}

static int cuda_copy_h2d_async_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    USE_DEVICE(dev);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, impl_(dev)->stream));
    return 0;
}

static int cuda_copy_h2d_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    return copy_(dev, dst, src, bytes, cudaMemcpyHostToDevice);
}

static int cuda_copy_d2h_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    return copy_(dev, dst, src, bytes, cudaMemcpyDeviceToHost);
}

static int cuda_copy_d2d_(device_t *dev, void *dst, const void *src, size_t bytes)
{
    USE_DEVICE(dev);
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_(dev)->stream));
    return 0;
}

static int cuda_memset_zero_(device_t *dev, void *dst, size_t bytes)
{
    USE_DEVICE(dev);
    CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, impl_(dev)->stream));
    return 0;
}

static int cuda_sync_(device_t *dev)
{
    return stream_wait_(dev);
}

// fn runs on a thread of CUDA's when the stream reaches it; as in CUDA it
// must not touch device memory nor call CUDA (a program launches its own
// kernels on the stream for device work).
static int cuda_host_func_(device_t *dev, void (*fn)(void *arg), void *arg)
{
    USE_DEVICE(dev);
    CUDA_CHECK(cudaLaunchHostFunc(impl_(dev)->stream, fn, arg));
    return 0;
}

// ---- the ring over device memory (ring_mem.h, comm_ring.c) ----
//
// Ranks that share one GPU map each other's arena (CUDA IPC of the one
// cudaMalloc) and run the ring's steps as a kernel and device-to-device
// copies on their own stream; settle is the stream's synchronisation, after
// which the host hand-shake (the progress counters) tells the neighbour.

// One kernel a type (comm.h's enum comm_dtype: float32, float64, int32,
// int64, float16, bfloat16; the half types as their 16-bit words, converted
// by kernels.h exactly as the host loops do); the operation is a uniform
// branch inside.
#define RING_REDUCE_KERNEL(NAME, T, FN)                                                    \
    __global__ void NAME(T *dst, const T *mine, const T *theirs, size_t n, int op,         \
                         int avg_div)                                                      \
    {                                                                                      \
        GRID_STRIDE(i, n) FN(i, dst, mine, theirs, op, avg_div);                           \
    }
RING_REDUCE_KERNEL(ring_reduce_f32_kernel, float, kernel_reduce_f32)
RING_REDUCE_KERNEL(ring_reduce_f64_kernel, double, kernel_reduce_f64)
RING_REDUCE_KERNEL(ring_reduce_i32_kernel, int32_t, kernel_reduce_i32)
RING_REDUCE_KERNEL(ring_reduce_i64_kernel, int64_t, kernel_reduce_i64)
RING_REDUCE_KERNEL(ring_reduce_f16_kernel, uint16_t, kernel_reduce_f16)
RING_REDUCE_KERNEL(ring_reduce_bf16_kernel, uint16_t, kernel_reduce_bf16)

static int ring_reduce_(void *ctx, void *dst, const void *mine, const void *theirs, uint64_t n,
                        int dtype, int op, int avg_div)
{
    device_t *dev = (device_t *)ctx;
    if (!n)
        return 0;
    const size_t len = (size_t)n;
    const cudaStream_t st = impl_(dev)->stream;
    USE_DEVICE(dev);
    switch (dtype) { // comm.h's numbers: float32, float64, int32, int64, float16, bfloat16
    case 0:
        CUDA_LAUNCH(st, ring_reduce_f32_kernel, len, (float *)dst, (const float *)mine,
                    (const float *)theirs, len, op, avg_div);
        break;
    case 1:
        CUDA_LAUNCH(st, ring_reduce_f64_kernel, len, (double *)dst, (const double *)mine,
                    (const double *)theirs, len, op, avg_div);
        break;
    case 2:
        CUDA_LAUNCH(st, ring_reduce_i32_kernel, len, (int32_t *)dst, (const int32_t *)mine,
                    (const int32_t *)theirs, len, op, avg_div);
        break;
    case 3:
        CUDA_LAUNCH(st, ring_reduce_i64_kernel, len, (int64_t *)dst, (const int64_t *)mine,
                    (const int64_t *)theirs, len, op, avg_div);
        break;
    case 4:
        CUDA_LAUNCH(st, ring_reduce_f16_kernel, len, (uint16_t *)dst, (const uint16_t *)mine,
                    (const uint16_t *)theirs, len, op, avg_div);
        break;
    case 5:
        CUDA_LAUNCH(st, ring_reduce_bf16_kernel, len, (uint16_t *)dst, (const uint16_t *)mine,
                    (const uint16_t *)theirs, len, op, avg_div);
        break;
    default:
        return VGPU_EINVAL;
    }
    return 0;
}

static int ring_copy_(void *ctx, void *dst, const void *src, uint64_t bytes)
{
    device_t *dev = (device_t *)ctx;
    USE_DEVICE(dev);
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_(dev)->stream));
    return 0;
}

static int ring_settle_(void *ctx)
{
    device_t *dev = (device_t *)ctx;
    USE_DEVICE(dev);
    CUDA_CHECK(cudaStreamSynchronize(impl_(dev)->stream));
    return 0;
}

static const struct ring_mem_ops *cuda_ring_mem_(device_t *dev)
{
    struct cuda_impl *im = impl_(dev);
    im->ring.reduce = ring_reduce_;
    im->ring.copy = ring_copy_;
    im->ring.settle = ring_settle_;
    im->ring.ctx = dev;
    return &im->ring;
}

static int cuda_ipc_export_(const device_t *dev, unsigned char handle[DEVICE_IPC_HANDLE_BYTES])
{
    static_assert(sizeof(cudaIpcMemHandle_t) <= DEVICE_IPC_HANDLE_BYTES, "IPC handle size");
    cudaIpcMemHandle_t h;
    cudaError_t rc = cudaIpcGetMemHandle(&h, ((const struct cuda_impl *)dev->impl)->region);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        log_error("cudaIpcGetMemHandle of the device arena: %s", cudaGetErrorString(rc));
        return VGPU_EUNSUPPORTED;
    }
    memcpy(handle, &h, sizeof h);
    return 0;
}

static int cuda_ipc_open_(device_t *dev, const unsigned char handle[DEVICE_IPC_HANDLE_BYTES],
                                    void **base)
{
    (void)dev;
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    cudaError_t rc = cudaIpcOpenMemHandle(base, h, cudaIpcMemLazyEnablePeerAccess);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        *base = NULL;
        log_error("cudaIpcOpenMemHandle of a neighbour's arena: %s", cudaGetErrorString(rc));
        return VGPU_EUNSUPPORTED;
    }
    return 0;
}

static void cuda_ipc_close_(device_t *dev, void *base)
{
    (void)dev;
    if (base && cudaIpcCloseMemHandle(base) != cudaSuccess)
        cudaGetLastError();
}

static int cuda_pin_host_(device_t *dev, void *ptr, size_t bytes)
{
    (void)dev;
    cudaError_t rc = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
    if (rc == cudaSuccess)
        return 0;
    cudaGetLastError(); // not sticky: the buffer works unpinned
    log_warn("cudaHostRegister of %zu bytes: %s; copies through it stay pageable", bytes,
             cudaGetErrorString(rc));
    return VGPU_EIO;
}

static void cuda_unpin_host_(device_t *dev, void *ptr)
{
    (void)dev;
    if (cudaHostUnregister(ptr) != cudaSuccess)
        cudaGetLastError(); // it was never pinned (a failed pin)
}

static const struct device_ops device_cuda_ops = {
    /* .kind = */ DEVICE_KIND_CUDA,
    /* .name = */ "cuda",
    /* .reserve = */ cuda_reserve_,
    /* .release = */ cuda_release_,
    /* .copy_h2d = */ cuda_copy_h2d_,
    /* .copy_h2d_async = */ cuda_copy_h2d_async_,
    /* .copy_d2h = */ cuda_copy_d2h_,
    /* .copy_d2d = */ cuda_copy_d2d_,
    /* .memset_zero = */ cuda_memset_zero_,
    /* .sync = */ cuda_sync_,
    /* .host_func = */ cuda_host_func_,
    /* .pin_host = */ cuda_pin_host_,
    /* .unpin_host = */ cuda_unpin_host_,
    /* .stream = */ cuda_stream_,
    /* .ring_mem = */ cuda_ring_mem_,
    /* .ipc_export = */ cuda_ipc_export_,
    /* .ipc_open = */ cuda_ipc_open_,
    /* .ipc_close = */ cuda_ipc_close_,
    /* .caps = */ DEVICE_CUDA_CAPS,
    /* .label = */ DEVICE_CUDA_LABEL,
    /* .discover = */ device_cuda_discover,
    /* .host_view = */ NULL, // device memory is not host-addressable
    /* .share = */ NULL,
    /* .devcoll = */ &devcoll_cuda_exec,
};

extern "C" const struct device_ops *device_cuda_backend(void) { return &device_cuda_ops; }
