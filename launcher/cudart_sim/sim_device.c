// sim_device.c: the simulated runtime's devices: VGPU_SIM_GPUS's topology
// (gpu_sim.c's parser and CUDA_VISIBLE_DEVICES) read once, each device's
// properties and attributes, the current device of each thread, versions.
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "sim_internal.h"

#define SIM_DEFAULT_GPUS "1x80G" // VGPU_SIM_GPUS unset: one simulated GPU

static struct sim_device devices_[GPU_MAX];
static int count_;
static cudaError_t init_error_; // what every device call answers when not cudaSuccess
static int driver_version_;     // cudaDriverGetVersion: 0 = no driver
static pthread_once_t once_ = PTHREAD_ONCE_INIT;
static __thread int current_; // this thread's current device

// gpu_sim.c's two links to the CUDA device backend, which this library is not.
int gpu_runtime_version(void) { return CUDART_VERSION; }
const struct gpu_driver *gpu_cuda_driver(void) { return NULL; }

// The UUID's 32 hex digits ("GPU-5117a000-...": dashes skipped) as 16 bytes.
static void uuid_bytes_(cudaUUID_t *out, const char *uuid)
{
    memset(out, 0, sizeof *out);
    const char *p = strchr(uuid, '-');
    size_t nibble = 0;
    for (p = p ? p + 1 : uuid; *p && nibble < 2 * sizeof out->bytes; p++) {
        const char c = *p;
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (c >= 'A' && c <= 'F')
            v = c - 'A' + 10;
        if (v < 0)
            continue;
        out->bytes[nibble / 2] |= (char)(nibble % 2 ? v : v << 4);
        nibble++;
    }
}

// An H100-like device (compute capability 9.0) around the simulated one's
// name, UUID, bus id and memory.
static void fill_props_(struct sim_device *d, int ordinal, int mps)
{
    struct cudaDeviceProp *p = &d->cuda;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", d->props.name);
    uuid_bytes_(&p->uuid, d->props.uuid);
    unsigned domain = 0, bus = 0, slot = 0, function = 0;
    sscanf(d->props.pci_bus_id, "%x:%x:%x.%x", &domain, &bus, &slot, &function);
    p->pciDomainID = (int)domain;
    p->pciBusID = (int)bus;
    p->pciDeviceID = (int)slot;
    p->totalGlobalMem = (size_t)d->props.total_bytes;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = INT_MAX;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->reservedSharedMemPerBlock = 1 << 10;
    p->regsPerBlock = p->regsPerMultiprocessor = 65536;
    p->maxThreadsPerMultiProcessor = 2048;
    p->maxBlocksPerMultiProcessor = 32;
    p->totalConstMem = 64 << 10;
    p->memPitch = INT_MAX;
    p->textureAlignment = 512;
    p->texturePitchAlignment = 32;
    p->surfaceAlignment = 512;
    p->l2CacheSize = 50 << 20;
    p->persistingL2CacheMaxSize = 30 << 20;
    p->memoryBusWidth = 5120;
    p->asyncEngineCount = 5;
    p->canMapHostMemory = p->unifiedAddressing = p->concurrentKernels = p->ECCEnabled = 1;
    p->managedMemory = p->concurrentManagedAccess = p->computePreemptionSupported = 1;
    p->cooperativeLaunch = p->clusterLaunch = p->streamPrioritiesSupported = 1;
    p->globalL1CacheSupported = p->localL1CacheSupported = p->hostRegisterSupported = 1;
    p->multiGpuBoardGroupID = ordinal;
    p->deviceNumaId = p->hostNumaId = -1;
    p->mpsEnabled = mps;
    p->gpuPciDeviceID = 0x233010de; // H100 SXM5's device id, NVIDIA's vendor id
}

static void init_(void)
{
    static struct gpu_sim_gpu gpus[GPU_MAX];
    const char *spec = env_read("VGPU_SIM_GPUS");
    if (!spec || !*spec)
        spec = SIM_DEFAULT_GPUS;
    struct gpu_sim_host host;
    char err[256];
    int n = 0;
    driver_version_ = CUDART_VERSION;
    if (gpu_sim_parse(spec, gpus, GPU_MAX, &n, &host, err, sizeof err) < 0) {
        fprintf(stderr, "libcudart (vgpu simulation): %s\n", err);
        init_error_ = cudaErrorInitializationError;
        return;
    }
    if (host.no_driver) {
        driver_version_ = 0;
        init_error_ = cudaErrorInsufficientDriver;
        return;
    }
    if (host.driver_version)
        driver_version_ = host.driver_version;
    if (driver_version_ / 1000 < CUDART_VERSION / 1000) { // CUDA's minor-version compatibility
        init_error_ = cudaErrorInsufficientDriver;
        return;
    }
    int order[GPU_MAX];
    count_ = gpu_sim_visible(gpus, n, getenv("CUDA_VISIBLE_DEVICES"), order, GPU_MAX);
    if (count_ == 0) {
        init_error_ = cudaErrorNoDevice;
        return;
    }
    const int mps = gpu_sim_driver.mps_active();
    const char *mps_limits = getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    for (int i = 0; i < count_; i++) {
        struct sim_device *d = &devices_[i];
        d->props = gpus[order[i]].props;
        d->props.ordinal = i;
        d->failing = gpus[order[i]].failing;
        d->props.mps = mps;
        // As gpu_sim's scan: the MPS client limit applies to an MPS client.
        d->props.client_limit_bytes = mps ? gpu_mps_client_limit(mps_limits, i) : 0;
        d->capacity_bytes = d->props.free_bytes;
        if (d->props.client_limit_bytes && d->props.client_limit_bytes < d->capacity_bytes)
            d->capacity_bytes = d->props.client_limit_bytes;
        fill_props_(d, i, mps);
    }
}

cudaError_t sim_init(void)
{
    pthread_once(&once_, init_);
    return init_error_;
}

int sim_device_count(void) { return sim_init() == cudaSuccess ? count_ : 0; }

struct sim_device *sim_device_at(int ordinal)
{
    return ordinal >= 0 && ordinal < sim_device_count() ? &devices_[ordinal] : NULL;
}

int sim_current_device(void) { return current_; }

cudaError_t sim_device_usable(int ordinal)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return err;
    const struct sim_device *d = sim_device_at(ordinal);
    if (!d)
        return cudaErrorInvalidDevice;
    if (d->failing)
        return cudaErrorLaunchFailure;
    if (d->props.compute_mode == GPU_MODE_PROHIBITED)
        return cudaErrorDevicesUnavailable;
    return cudaSuccess;
}

// ---- devices ----

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return sim_return(cudaErrorInvalidValue);
    const cudaError_t err = sim_init();
    *count = err == cudaSuccess ? count_ : 0;
    return sim_return(err);
}

cudaError_t cudaSetDevice(int device)
{
    // CUDA 12 and later make the device's context here: a device that cannot
    // run work is refused now, and stays not current.
    const cudaError_t err = sim_device_usable(device);
    if (err == cudaSuccess)
        current_ = device;
    return sim_return(err);
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return sim_return(cudaErrorInvalidValue);
    const cudaError_t err = sim_init();
    if (err == cudaSuccess)
        *device = current_;
    return sim_return(err);
}

// The simulated device of a runtime call's ordinal: the runtime started
// (sim_init's error otherwise), and cudaErrorInvalidDevice past the count.
static cudaError_t device_of_(int device, const struct sim_device **out)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return err;
    *out = sim_device_at(device);
    return *out ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return sim_return(cudaErrorInvalidValue);
    const struct sim_device *d;
    const cudaError_t err = device_of_(device, &d);
    if (err != cudaSuccess)
        return sim_return(err);
    if (d->failing)
        return sim_return(cudaErrorLaunchFailure);
    *prop = d->cuda;
    return cudaSuccess;
}

// An attribute that is a field of struct cudaDeviceProp (int or size_t).
struct attr_field {
    enum cudaDeviceAttr attr;
    size_t offset; // in struct cudaDeviceProp
    size_t bytes;  // the field's size: sizeof(int) or sizeof(size_t)
};

#define SIM_FIELD_(attr, field)                                   \
    {attr, offsetof(struct cudaDeviceProp, field),                \
     sizeof(((const struct cudaDeviceProp *)0)->field)}

static const struct attr_field attr_fields_[] = {
    SIM_FIELD_(cudaDevAttrMaxThreadsPerBlock, maxThreadsPerBlock),
    SIM_FIELD_(cudaDevAttrMaxBlockDimX, maxThreadsDim[0]),
    SIM_FIELD_(cudaDevAttrMaxBlockDimY, maxThreadsDim[1]),
    SIM_FIELD_(cudaDevAttrMaxBlockDimZ, maxThreadsDim[2]),
    SIM_FIELD_(cudaDevAttrMaxGridDimX, maxGridSize[0]),
    SIM_FIELD_(cudaDevAttrMaxGridDimY, maxGridSize[1]),
    SIM_FIELD_(cudaDevAttrMaxGridDimZ, maxGridSize[2]),
    SIM_FIELD_(cudaDevAttrMaxSharedMemoryPerBlock, sharedMemPerBlock),
    SIM_FIELD_(cudaDevAttrTotalConstantMemory, totalConstMem),
    SIM_FIELD_(cudaDevAttrWarpSize, warpSize),
    SIM_FIELD_(cudaDevAttrMaxRegistersPerBlock, regsPerBlock),
    SIM_FIELD_(cudaDevAttrMultiProcessorCount, multiProcessorCount),
    SIM_FIELD_(cudaDevAttrIntegrated, integrated),
    SIM_FIELD_(cudaDevAttrCanMapHostMemory, canMapHostMemory),
    SIM_FIELD_(cudaDevAttrConcurrentKernels, concurrentKernels),
    SIM_FIELD_(cudaDevAttrEccEnabled, ECCEnabled),
    SIM_FIELD_(cudaDevAttrPciBusId, pciBusID),
    SIM_FIELD_(cudaDevAttrPciDeviceId, pciDeviceID),
    SIM_FIELD_(cudaDevAttrPciDomainId, pciDomainID),
    SIM_FIELD_(cudaDevAttrGlobalMemoryBusWidth, memoryBusWidth),
    SIM_FIELD_(cudaDevAttrL2CacheSize, l2CacheSize),
    SIM_FIELD_(cudaDevAttrMaxThreadsPerMultiProcessor, maxThreadsPerMultiProcessor),
    SIM_FIELD_(cudaDevAttrAsyncEngineCount, asyncEngineCount),
    SIM_FIELD_(cudaDevAttrUnifiedAddressing, unifiedAddressing),
    SIM_FIELD_(cudaDevAttrComputeCapabilityMajor, major),
    SIM_FIELD_(cudaDevAttrComputeCapabilityMinor, minor),
    SIM_FIELD_(cudaDevAttrMaxSharedMemoryPerMultiprocessor, sharedMemPerMultiprocessor),
    SIM_FIELD_(cudaDevAttrMaxRegistersPerMultiprocessor, regsPerMultiprocessor),
    SIM_FIELD_(cudaDevAttrManagedMemory, managedMemory),
    SIM_FIELD_(cudaDevAttrConcurrentManagedAccess, concurrentManagedAccess),
    SIM_FIELD_(cudaDevAttrCooperativeLaunch, cooperativeLaunch),
    SIM_FIELD_(cudaDevAttrMaxSharedMemoryPerBlockOptin, sharedMemPerBlockOptin),
    SIM_FIELD_(cudaDevAttrMaxBlocksPerMultiprocessor, maxBlocksPerMultiProcessor),
    SIM_FIELD_(cudaDevAttrMemoryPoolsSupported, memoryPoolsSupported),
    SIM_FIELD_(cudaDevAttrGPUDirectRDMASupported, gpuDirectRDMASupported),
    SIM_FIELD_(cudaDevAttrIpcEventSupport, ipcEventSupported),
    SIM_FIELD_(cudaDevAttrMpsEnabled, mpsEnabled),
};

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value)
        return sim_return(cudaErrorInvalidValue);
    const struct sim_device *d;
    const cudaError_t err = device_of_(device, &d);
    if (err != cudaSuccess)
        return sim_return(err);
    if (attr == cudaDevAttrComputeMode) { // not a field since CUDA 13
        const int mode = d->props.compute_mode;
        *value = mode == GPU_MODE_EXCLUSIVE_PROCESS ? cudaComputeModeExclusiveProcess
                 : mode == GPU_MODE_PROHIBITED      ? cudaComputeModeProhibited
                                                    : cudaComputeModeDefault;
        return cudaSuccess;
    }
    for (size_t k = 0; k < sizeof attr_fields_ / sizeof attr_fields_[0]; k++) {
        const struct attr_field *f = &attr_fields_[k];
        if (f->attr != attr)
            continue;
        const char *field = (const char *)&d->cuda + f->offset;
        if (f->bytes == sizeof(size_t)) {
            size_t v;
            memcpy(&v, field, sizeof v);
            *value = v > INT_MAX ? INT_MAX : (int)v;
        } else {
            memcpy(value, field, sizeof *value);
        }
        return cudaSuccess;
    }
    return sim_return(cudaErrorInvalidValue); // an attribute the simulation does not know
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    if (!pciBusId || len <= 0)
        return sim_return(cudaErrorInvalidValue);
    const struct sim_device *d;
    const cudaError_t err = device_of_(device, &d);
    if (err != cudaSuccess)
        return sim_return(err);
    // CUDA's form: a 4-digit domain, "0000:10:00.0" (NVML's has 8 digits).
    snprintf(pciBusId, (size_t)len, "%04x:%02x:%02x.0", (unsigned)d->cuda.pciDomainID,
             (unsigned)d->cuda.pciBusID, (unsigned)d->cuda.pciDeviceID);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    return sim_return(sim_device_usable(current_)); // the work ran at each call
}

cudaError_t cudaDeviceReset(void)
{
    const cudaError_t err = sim_init();
    if (err != cudaSuccess)
        return sim_return(err);
    sim_memory_reset(current_);
    sim_stream_reset(current_);
    return cudaSuccess;
}

// ---- versions ----

cudaError_t cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return sim_return(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return sim_return(cudaErrorInvalidValue);
    sim_init(); // the driver's version is known even where there is no device
    *driverVersion = driver_version_;
    return cudaSuccess;
}
