// devcoll_cuda.cu: the device collectives on a CUDA GPU: the protocol
// (devcoll_proto.h) as one kernel a call on the device's stream, windows of
// their own cudaMalloc opened by the peers over CUDA IPC (not the arenas:
// under an MPS pinned memory limit a mapped neighbour counts against it),
// and the status in mapped page-locked memory, which the kernel writes and
// the host's watchdog writes `abort` into while the kernel waits. Compiled
// in every CUDA build; it runs only on the GPU machines a session is lent.
//
// The kernel's blocks wait for the peers' kernels' blocks, so the peers'
// kernels must run at the same time: under MPS (or one context), never
// time-sliced (the caller decides: devcoll.h).
#include <cuda_runtime.h>
#include <string.h>

#include "devcoll_kernel.cuh"

extern "C" {
#include "devcoll.h"
#include "device_internal.h"
#include "log.h"
#include "status.h"
}

// A failing CUDA call said with its place, as VGPU_EIO (as the device
// backend's cuda_check.h, which this folder does not include: the backend
// includes the ring's and the ring this folder's).
static int dc_cuda_check_(cudaError_t rc, const char *what, int line)
{
    if (rc == cudaSuccess)
        return 0;
    log_error("devcoll_cuda.cu:%d: %s failed: %s (%s)", line, what, cudaGetErrorName(rc),
              cudaGetErrorString(rc));
    return VGPU_EIO;
}
#define DC_CUDA_(call) TRY(dc_cuda_check_((call), #call, __LINE__))
#define USE_DEVICE(dev) DC_CUDA_(cudaSetDevice((dev)->info.index))

static_assert(sizeof(cudaIpcMemHandle_t) <= DEVCOLL_WIN_HANDLE_BYTES, "an IPC handle fits");

__global__ void __launch_bounds__(DEVCOLL_LANES) devcoll_kernel_(struct dc_args a)
{
    DEVCOLL_KERNEL_BODY_(a);
}

static int cuda_win_create_(void *ctx, uint64_t bytes, void **win,
                            unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES])
{
    device_t *dev = (device_t *)ctx;
    USE_DEVICE(dev);
    DC_CUDA_(cudaMalloc(win, bytes));
    DC_CUDA_(cudaMemset(*win, 0, bytes));
    DC_CUDA_(cudaDeviceSynchronize());
    cudaIpcMemHandle_t h;
    DC_CUDA_(cudaIpcGetMemHandle(&h, *win));
    memset(handle, 0, DEVCOLL_WIN_HANDLE_BYTES);
    memcpy(handle, &h, sizeof h);
    return 0;
}

static int cuda_win_open_(void *ctx, const unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES],
                          uint64_t bytes, void **win)
{
    (void)bytes;
    device_t *dev = (device_t *)ctx;
    USE_DEVICE(dev);
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    DC_CUDA_(cudaIpcOpenMemHandle(win, h, cudaIpcMemLazyEnablePeerAccess));
    return 0;
}

static void cuda_win_close_(void *ctx, void *win, uint64_t bytes)
{
    (void)bytes;
    device_t *dev = (device_t *)ctx;
    if (dc_cuda_check_(cudaSetDevice(dev->info.index), "cudaSetDevice", __LINE__) == 0)
        (void)dc_cuda_check_(cudaIpcCloseMemHandle(win), "cudaIpcCloseMemHandle", __LINE__);
}

static void cuda_win_free_(void *ctx, void *win, uint64_t bytes,
                           const unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES])
{
    (void)bytes, (void)handle;
    device_t *dev = (device_t *)ctx;
    if (dc_cuda_check_(cudaSetDevice(dev->info.index), "cudaSetDevice", __LINE__) == 0)
        (void)dc_cuda_check_(cudaFree(win), "cudaFree", __LINE__);
}

// Every rank's blocks resident at once: the blocks of this kernel an SM
// holds, times the SMs this process may use (under MPS with a thread share,
// the client's), shared among the n ranks. 0 (the exec's 32) when the
// runtime cannot tell.
static int cuda_max_blocks_(void *ctx, int n)
{
    device_t *dev = (device_t *)ctx;
    int per_sm = 0, sms = 0;
    if (cudaSetDevice(dev->info.index) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, devcoll_kernel_, DEVCOLL_LANES, 0) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev->info.index) !=
            cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return per_sm * sms / (n > 0 ? n : 1);
}

static int cuda_status_alloc_(void *ctx, struct dc_status **host, struct dc_status **dev_ptr)
{
    device_t *dev = (device_t *)ctx;
    USE_DEVICE(dev);
    DC_CUDA_(cudaHostAlloc((void **)host, sizeof **host, cudaHostAllocMapped));
    memset(*host, 0, sizeof **host);
    DC_CUDA_(cudaHostGetDevicePointer((void **)dev_ptr, *host, 0));
    return 0;
}

static void cuda_status_free_(void *ctx, struct dc_status *host)
{
    (void)ctx;
    (void)dc_cuda_check_(cudaFreeHost(host), "cudaFreeHost", __LINE__);
}

static int cuda_launch_(void *ctx, void *stream, const struct dc_args *a, int blocks, int lanes)
{
    device_t *dev = (device_t *)ctx;
    USE_DEVICE(dev);
    cudaStream_t s = stream ? (cudaStream_t)stream : (cudaStream_t)dev->ops->stream(dev);
    devcoll_kernel_<<<blocks, lanes, 0, s>>>(*a);
    DC_CUDA_(cudaGetLastError());
    return 0;
}

static int cuda_sync_(void *ctx)
{
    device_t *dev = (device_t *)ctx;
    USE_DEVICE(dev);
    DC_CUDA_(cudaStreamSynchronize((cudaStream_t)dev->ops->stream(dev)));
    return 0;
}

// At most 32 blocks of 512 threads (on paper: vLLM's custom all-reduce runs
// 36 x 512; the GPU check measures), fewer where the ranks' blocks would not
// all be resident (cuda_max_blocks_).
extern "C" const struct devcoll_exec devcoll_cuda_exec = {
    "cuda",           cuda_win_create_, cuda_win_open_, cuda_win_close_,  cuda_win_free_,
    cuda_status_alloc_, cuda_status_free_, cuda_launch_,  cuda_sync_,       cuda_max_blocks_,
    32,               DEVCOLL_LANES,    0,
};
