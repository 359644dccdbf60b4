// vnccl_devcoll.c: vgpu's NCCL on the device collectives (comm/devcoll/).
// Where every rank of a communicator shares one GPU whose contexts run at
// once (MPS), a collective is one kernel on the caller's stream that
// returns at once, as NCCL's does; what the device collectives do not carry
// (8-bit, unsigned and fp8 types in reductions, float averages and
// premultiplied sums, all-to-all, gather, scatter, point-to-point) stays
// on the staged engine (vnccl_coll.c). On a GPU the program's runtime
// gives the memory and the IPC handles and the driver loads and launches
// the kernel (an embedded PTX image: this library links no CUDA); on the
// simulated runtime or host memory the same protocol runs on the calling
// thread (devcoll_sim_exec) where VGPU_DEVCOLL=1 asks, which is how the CPU
// tests run it.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "devcoll.h"
#include "status.h"
#include "vnccl.h"

extern const unsigned char vnccl_devcoll_ptx[]; // vnccl_devcoll_ptx.c (generated)

// ---- the exec on a GPU ----

typedef int cu_result_; // CUresult: 0 = CUDA_SUCCESS
static struct {
    cudaError_t (*malloc_)(void **, size_t);
    cudaError_t (*free_)(void *);
    cudaError_t (*memset_)(void *, int, size_t);
    cudaError_t (*device_sync)(void);
    cudaError_t (*set_device)(int);
    cudaError_t (*ipc_get)(cudaIpcMemHandle_t *, void *);
    cudaError_t (*ipc_open)(void **, cudaIpcMemHandle_t, unsigned);
    cudaError_t (*ipc_close)(void *);
    cudaError_t (*host_alloc)(void **, size_t, unsigned);
    cudaError_t (*host_device_ptr)(void **, void *, unsigned);
    cudaError_t (*free_host)(void *);
    cudaError_t (*attribute)(int *, enum cudaDeviceAttr, int);
    cu_result_ (*module_load)(void **, const void *);
    cu_result_ (*get_function)(void **, void *, const char *);
    cu_result_ (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);
    cu_result_ (*occupancy)(int *, void *, int, size_t);
    void *kernel; // vgpu_devcoll_kernel, loaded into the context current at set-up
} gpu_;

// Binds the runtime's and the driver's calls and loads the kernel, once a
// process. 0, or -1 with why in err.
static int gpu_load_(char *err, size_t err_bytes)
{
    static int done, ok;
    static char why[160];
    if (done) {
        snprintf(err, err_bytes, "%s", why);
        return ok ? 0 : -1;
    }
    done = 1;
    void *rt = vnccl_runtime_handle(), *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    struct {
        void *lib;
        const char *name;
        void **slot;
    } syms[] = {
        {rt, "cudaMalloc", (void **)&gpu_.malloc_},
        {rt, "cudaFree", (void **)&gpu_.free_},
        {rt, "cudaMemset", (void **)&gpu_.memset_},
        {rt, "cudaDeviceSynchronize", (void **)&gpu_.device_sync},
        {rt, "cudaSetDevice", (void **)&gpu_.set_device},
        {rt, "cudaIpcGetMemHandle", (void **)&gpu_.ipc_get},
        {rt, "cudaIpcOpenMemHandle", (void **)&gpu_.ipc_open},
        {rt, "cudaIpcCloseMemHandle", (void **)&gpu_.ipc_close},
        {rt, "cudaHostAlloc", (void **)&gpu_.host_alloc},
        {rt, "cudaHostGetDevicePointer", (void **)&gpu_.host_device_ptr},
        {rt, "cudaFreeHost", (void **)&gpu_.free_host},
        {rt, "cudaDeviceGetAttribute", (void **)&gpu_.attribute},
        {drv, "cuModuleLoadData", (void **)&gpu_.module_load},
        {drv, "cuModuleGetFunction", (void **)&gpu_.get_function},
        {drv, "cuLaunchKernel", (void **)&gpu_.launch},
        {drv, "cuOccupancyMaxActiveBlocksPerMultiprocessor", (void **)&gpu_.occupancy},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!syms[i].lib || !(*syms[i].slot = dlsym(syms[i].lib, syms[i].name))) {
            snprintf(why, sizeof why, "%s not found (%s)", syms[i].name,
                     syms[i].lib == drv ? "libcuda.so.1" : "the CUDA runtime");
            snprintf(err, err_bytes, "%s", why);
            return -1;
        }
    void *module = NULL;
    cu_result_ e = gpu_.module_load(&module, vnccl_devcoll_ptx);
    if (e == 0)
        e = gpu_.get_function(&gpu_.kernel, module, "vgpu_devcoll_kernel");
    if (e != 0) {
        snprintf(why, sizeof why, "loading the kernel (PTX) failed: CUDA driver error %d", e);
        snprintf(err, err_bytes, "%s", why);
        return -1;
    }
    ok = 1;
    return 0;
}

#define GPU_OK_(call) ((call) == cudaSuccess ? 0 : VGPU_EIO)

static int gpu_win_create_(void *ctx, uint64_t bytes, void **win,
                           unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES])
{
    const struct ncclComm *c = ctx;
    cudaIpcMemHandle_t h;
    if (GPU_OK_(gpu_.set_device(c->device)) || GPU_OK_(gpu_.malloc_(win, bytes)))
        return VGPU_EDEVMEM;
    if (GPU_OK_(gpu_.memset_(*win, 0, bytes)) || GPU_OK_(gpu_.device_sync()) ||
        GPU_OK_(gpu_.ipc_get(&h, *win))) {
        gpu_.free_(*win);
        return VGPU_EIO;
    }
    memset(handle, 0, DEVCOLL_WIN_HANDLE_BYTES);
    memcpy(handle, &h, sizeof h);
    return 0;
}

static int gpu_win_open_(void *ctx, const unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES],
                         uint64_t bytes, void **win)
{
    (void)bytes;
    const struct ncclComm *c = ctx;
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    if (GPU_OK_(gpu_.set_device(c->device)))
        return VGPU_EIO;
    return GPU_OK_(gpu_.ipc_open(win, h, cudaIpcMemLazyEnablePeerAccess));
}

static void gpu_win_close_(void *ctx, void *win, uint64_t bytes)
{
    (void)ctx, (void)bytes;
    gpu_.ipc_close(win);
}

static void gpu_win_free_(void *ctx, void *win, uint64_t bytes,
                          const unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES])
{
    (void)ctx, (void)bytes, (void)handle;
    gpu_.free_(win);
}

static int gpu_status_alloc_(void *ctx, struct dc_status **host, struct dc_status **dev)
{
    const struct ncclComm *c = ctx;
    if (GPU_OK_(gpu_.set_device(c->device)) ||
        GPU_OK_(gpu_.host_alloc((void **)host, sizeof **host, cudaHostAllocMapped)))
        return VGPU_ENOMEM;
    memset(*host, 0, sizeof **host);
    if (GPU_OK_(gpu_.host_device_ptr((void **)dev, *host, 0))) {
        gpu_.free_host(*host);
        return VGPU_EIO;
    }
    return 0;
}

static void gpu_status_free_(void *ctx, struct dc_status *host)
{
    (void)ctx;
    gpu_.free_host(host);
}

static int gpu_launch_(void *ctx, void *stream, const struct dc_args *a, int blocks, int lanes)
{
    (void)ctx;
    void *params[] = {(void *)a};
    return gpu_.launch(gpu_.kernel, (unsigned)blocks, 1, 1, (unsigned)lanes, 1, 1, 0, stream,
                       params, NULL) == 0
               ? 0
               : VGPU_EIO;
}

static int gpu_sync_(void *ctx)
{
    (void)ctx;
    return GPU_OK_(gpu_.device_sync());
}

// As devcoll_cuda.cu's: every rank's blocks resident at once.
static int gpu_max_blocks_(void *ctx, int n)
{
    const struct ncclComm *c = ctx;
    int per_sm = 0, sms = 0;
    if (gpu_.occupancy(&per_sm, gpu_.kernel, 512, 0) != 0 ||
        gpu_.attribute(&sms, cudaDevAttrMultiProcessorCount, c->device) != cudaSuccess)
        return 0;
    return per_sm * sms / (n > 0 ? n : 1);
}

static const struct devcoll_exec gpu_exec_ = {
    .name = "cuda (driver)",
    .win_create = gpu_win_create_,
    .win_open = gpu_win_open_,
    .win_close = gpu_win_close_,
    .win_free = gpu_win_free_,
    .status_alloc = gpu_status_alloc_,
    .status_free = gpu_status_free_,
    .launch = gpu_launch_,
    .sync = gpu_sync_,
    .max_blocks = gpu_max_blocks_,
    .blocks = 32,
    .lanes = 512,
    .on_host = 0,
};

// Whether contexts on the device run at once: the driver says so (CUDA
// 12.x's cudaDevAttrMpsEnabled, 133), or an MPS pipe is there to use.
static int gpu_mps_(int device)
{
    int on = 0;
    if (gpu_.attribute(&on, (enum cudaDeviceAttr)133, device) == cudaSuccess && on)
        return 1;
    const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
    return (pipe && *pipe) || access("/tmp/nvidia-mps/control", F_OK) == 0;
}

// ---- set-up and teardown, collective over the communicator ----

// Whether the communicator has failed (any rank's vnccl_fail): a rank that
// met it at the start of a call returns without entering the device
// collective its peers may be waiting in.
static int failed_(void *arg)
{
    const struct ncclComm *c = arg;
    return c->head && atomic_load(&c->head->failed);
}

// The smallest of every rank's value (the ranks agree on the outcome).
static ncclResult_t agree_min_(struct ncclComm *c, int *value)
{
    int *all = malloc((size_t)c->nranks * sizeof *all);
    if (!all)
        return ncclSystemError;
    ncclResult_t st = vnccl_host_all_gather(c, value, all, sizeof *value);
    for (int r = 0; st == ncclSuccess && r < c->nranks; r++)
        *value = all[r] < *value ? all[r] : *value;
    free(all);
    return st;
}

ncclResult_t vnccl_devcoll_setup(struct ncclComm *c)
{
    // This rank's view: the exec its memory takes, and whether it applies.
    const struct devcoll_exec *ex = NULL;
    void *ctx = NULL;
    int gpu = 0, mps = 0;
    char why[160] = "";
    // A runtime with IPC over a loaded driver is a GPU's (the simulated
    // runtime has neither, and its memory is host memory).
    void *rt = vnccl_runtime_handle();
    if (rt && dlsym(rt, "cudaIpcOpenMemHandle") && dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
        if (gpu_load_(why, sizeof why) == 0) {
            ex = &gpu_exec_, ctx = c, gpu = 1, mps = gpu_mps_(c->device);
        }
    } else {
        ex = &devcoll_sim_exec; // host memory, or the simulated runtime's (host memory too)
    }
    int want = devcoll_applies(devcoll_mode(), ex != NULL, gpu, mps, c->nranks);
    for (int r = 0; r < c->nranks && want; r++) // every rank on this very device
        want = strcmp(c->slots[r].bus_id, c->slots[c->rank].bus_id) == 0;
    if (!want && gpu && why[0] && devcoll_mode() == 1)
        fprintf(stderr, "vgpu-nccl: rank %d: no device collectives: %s\n", c->rank, why);
    ncclResult_t st = agree_min_(c, &want);
    if (st != ncclSuccess || !want)
        return st;
    int made = devcoll_create(ex, ctx, c->rank, c->nranks, 0, c->timeout_s, &c->dc) == 0;
    if (made)
        devcoll_watch_also(c->dc, failed_, c);
    st = agree_min_(c, &made);
    struct devcoll_handle mine = {0}, *all = NULL;
    if (st == ncclSuccess && made) {
        all = calloc((size_t)c->nranks, sizeof *all);
        devcoll_handle(c->dc, &mine);
        st = all ? vnccl_host_all_gather(c, &mine, all, sizeof mine) : ncclSystemError;
    }
    int connected = st == ncclSuccess && made && devcoll_connect(c->dc, all) == 0;
    free(all);
    if (st == ncclSuccess)
        st = agree_min_(c, &connected);
    if (st != ncclSuccess || !connected) { // the staged engine carries everything
        devcoll_destroy(c->dc);
        c->dc = NULL;
    }
    const char *debug = getenv("NCCL_DEBUG");
    if (c->dc && c->rank == 0 && debug && !strcasecmp(debug, "INFO"))
        fprintf(stderr, "vgpu-nccl: INFO %d ranks share one device: collectives on it (%s)\n",
                c->nranks, ex->name);
    return st;
}

void vnccl_devcoll_teardown(struct ncclComm *c)
{
    if (!c->dc)
        return;
    devcoll_sync(c->dc);
    devcoll_close_peers(c->dc);
    // A GPU window is freed only once every rank has closed it (freeing an
    // exported allocation still open elsewhere is undefined), and ranks
    // destroy their communicators when they please (in one process, one
    // after another): no rank waits here. The last to close frees its own;
    // the others' go with their processes (devcoll_abandon).
    const uint32_t closed = atomic_fetch_add(&c->head->dc_closed, 1) + 1;
    if (closed >= (uint32_t)c->nranks)
        devcoll_destroy(c->dc);
    else
        devcoll_abandon(c->dc);
    c->dc = NULL;
}

// ---- the calls ----

// The device collectives' type for an NCCL type in a reduction, or -1.
static int reduce_type_(ncclDataType_t t)
{
    switch (t) {
    case ncclInt32: return COMM_INT32;
    case ncclInt64: return COMM_INT64;
    case ncclFloat16: return COMM_FLOAT16;
    case ncclFloat32: return COMM_FLOAT32;
    case ncclFloat64: return COMM_FLOAT64;
    case ncclBfloat16: return COMM_BFLOAT16;
    default: return -1;
    }
}

// Their operation, or -1: a float average is NCCL's premultiplied sum
// (vnccl_types.c), which they do not compute; an integer one divides the sum.
static int reduce_op_(ncclRedOp_t op, int type)
{
    switch (op) {
    case ncclSum: return COMM_SUM;
    case ncclProd: return COMM_PROD;
    case ncclMin: return COMM_MIN;
    case ncclMax: return COMM_MAX;
    case ncclAvg: return type == COMM_INT32 || type == COMM_INT64 ? COMM_AVG : -1;
    default: return -1;
    }
}

ncclResult_t vnccl_devcoll_error(struct ncclComm *c)
{
    char what[200];
    int peer;
    const int status = c->dc ? devcoll_error(c->dc, &peer, what, sizeof what) : 0;
    if (status == 0)
        return ncclSuccess;
    // As the staged engine's: calls that differ are the program's misuse.
    const int fault = devcoll_fault(c->dc);
    ncclResult_t st = fault == DC_ERR_MISMATCH ? ncclInvalidUsage
                      : fault == DC_ERR_TIMEOUT ? ncclSystemError
                                                : ncclRemoteError;
    // The communicator's first failure is every rank's answer (a rank
    // aborted by it would otherwise say only that).
    // (A rank whose claim lost may find it not published yet: its own then.)
    vnccl_fail(c, st, "%s", what);
    const int first = atomic_load(&c->head->failed) != 0;
    if (first)
        st = (ncclResult_t)atomic_load(&c->head->fail_status);
    if (!c->dc_said) { // said once on this rank
        c->dc_said = 1;
        vnccl_error(c, st, "%s", first ? c->head->why : what);
    }
    return st;
}

// A collective the staged engine carries: its mark passed on every rank
// (returns 0: go on), or the mismatch or failure it met (1, in *st).
static int mark_(struct ncclComm *c, const struct vnccl_call *k, ncclResult_t *st)
{
    const uint64_t fields[] = {(uint64_t)k->kind, (uint64_t)k->dtype, (uint64_t)k->op,
                               (uint64_t)(int64_t)k->root, (uint64_t)k->count};
    uint64_t tag = 1469598103934665603ull; // FNV-1a over the call's fields
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
        for (int b = 0; b < 64; b += 8)
            tag = (tag ^ (fields[i] >> b & 0xff)) * 1099511628211ull;
    const int launched = devcoll_mark(c->dc, tag, (void *)k->stream);
    if (launched != 0) {
        *st = vnccl_error(c, ncclUnhandledCudaError, "%s: the device collectives' mark failed (%s)",
                          vnccl_kind_name(k->kind), status_str(launched));
        return 1;
    }
    *st = vnccl_stream_wait(k->stream);
    if (*st == ncclSuccess)
        *st = vnccl_devcoll_error(c);
    return *st != ncclSuccess;
}

int vnccl_devcoll_call(struct ncclComm *c, const struct vnccl_call *k, ncclResult_t *st)
{
    if (!c->dc)
        return 0;
    const size_t esz = vnccl_type_size(k->dtype);
    const int moves = k->kind == VNCCL_ALL_GATHER || k->kind == VNCCL_BROADCAST;
    const int type = reduce_type_(k->dtype), op = reduce_op_(k->op, type);
    const int reduces = k->kind == VNCCL_ALL_REDUCE || k->kind == VNCCL_REDUCE ||
                        k->kind == VNCCL_REDUCE_SCATTER;
    *st = vnccl_devcoll_error(c);
    if (*st != ncclSuccess)
        return 1;
    if (!esz || (!moves && !(reduces && type >= 0 && op >= 0)))
        return mark_(c, k, st);
    void *s = (void *)k->stream;
    int launched;
    switch (k->kind) {
    case VNCCL_ALL_REDUCE:
        launched = devcoll_all_reduce(c->dc, k->send, k->recv, k->count, type, op, s);
        break;
    case VNCCL_REDUCE:
        launched = devcoll_reduce(c->dc, k->send, k->recv, k->count, type, op, k->root, s);
        break;
    case VNCCL_REDUCE_SCATTER:
        launched = devcoll_reduce_scatter(c->dc, k->send, k->recv, k->count, type, op, s);
        break;
    case VNCCL_ALL_GATHER:
        launched = devcoll_all_gather(c->dc, k->send, k->recv, k->count * esz, DC_BYTE, s);
        break;
    default: // VNCCL_BROADCAST
        launched = devcoll_broadcast(c->dc, k->send, k->recv, k->count * esz, DC_BYTE, k->root, s);
        break;
    }
    *st = launched == 0 ? vnccl_devcoll_error(c)
                        : vnccl_error(c, ncclUnhandledCudaError,
                                      "%s: launching the device collective failed (%s)",
                                      vnccl_kind_name(k->kind), status_str(launched));
    return 1;
}
