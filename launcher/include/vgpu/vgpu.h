// vgpu/vgpu.h: libvgpu, your program as one rank on a virtual GPU.
//
// Each MPI process of a job (mpirun, srun, vgpurun) calls vgpu_init: it joins
// the job, binds a memory-capped slice of a GPU (or a GPU of its own, or a
// CPU-simulated device), and connects the collectives between the ranks
// (NCCL where every rank has its own GPU, else the ring; vgpu_train's
// [devices] and [comm] settings, VGPU_* variables). Then it allocates device
// memory within its cap, copies, computes on its device memory (its own
// kernels on vgpu_stream() on a GPU; a function run by vgpu_launch_host_func
// on a CPU-simulated device), and calls collectives whose arguments are
// NCCL's, one to one (docs/LIBRARY.md: "From NCCL to vgpu").
//
// This header is the NCCL/CUDA-shaped core, all most programs need.
// vgpu/vgpu_ext.h adds libvgpu's extensions (start-up in two steps, the
// job's facts, control-plane collectives, the fused optimizer all-reduce,
// the deterministic all-reduce, the flight recorder and the timeline).
//
// Every function returns 0 or a negative status (vgpu/status.h), and
// vgpu_status_string says what it means; none calls exit. Collectives are
// blocking: when one returns, its result is in the receive buffer. Every
// rank calls the same collectives in the same order with the same counts,
// types and operations; on the ring and nccl backends a rank that does not
// arrive within comm.timeout_s makes the others return VGPU_ETIMEOUT, naming
// it (mpi waits as the MPI library does). vgpu_init's waits are bounded too
// (VGPU_COMM_TIMEOUT_S, else 300 s, until the config is read).
// Threads: a collective (or a vgpu_ctrl_* call) may be called from any
// thread, one at a time: a program that overlaps its all-reduces with
// compute calls them from a thread of its own while its main thread only
// computes and copies on other buffers (no other collective, no allocation
// or free meanwhile). vgpu_init asks MPI for MPI_THREAD_SERIALIZED; where the
// program started MPI with less, a collective off MPI's main thread returns
// VGPU_EINVAL, said. Off that thread a collective's waits sleep rather than
// spin (the core is the compute's). On a GPU such a collective is ordered
// after all the work queued on the rank's stream when it is called.
#ifndef VGPU_VGPU_H
#define VGPU_VGPU_H

#include <stddef.h>
#include <stdint.h>

#include <vgpu/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_VERSION_MAJOR 0
#define VGPU_VERSION_MINOR 1
#define VGPU_VERSION_PATCH 0

// The library's version at run time ("0.1.0"), and the message of a status.
const char *vgpu_version(void);
const char *vgpu_status_string(int status);

typedef struct vgpu vgpu_t; // one rank: its place in the job, its device, its collectives

// Element types and reductions, as NCCL's (ncclFloat32 ... ncclInt64,
// ncclFloat16, ncclBfloat16; ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg).
// Average of integers: the sum divided by the rank count, toward zero;
// integer sums and products wrap around. vgpu_float16 (IEEE binary16) and
// vgpu_bfloat16 are 16-bit words (__half, __nv_bfloat16): each reduction
// step computes in float and rounds back to nearest even.
typedef enum {
    vgpu_float32,
    vgpu_float64,
    vgpu_int32,
    vgpu_int64,
    vgpu_float16,
    vgpu_bfloat16
} vgpu_datatype_t;
typedef enum { vgpu_sum, vgpu_avg, vgpu_prod, vgpu_min, vgpu_max } vgpu_op_t;

// Options of vgpu_init; all zero is the defaults.
struct vgpu_options {
    const char *config_path;        // an INI file ([devices], [comm]: configs/reference.ini);
                                    // NULL: defaults and the VGPU_* environment
    const char *const *overrides;   // "section.key=value" (as vgpu_train --set), n_overrides
    int n_overrides;
    int quiet;                      // rank 0 does not print the job table
    size_t largest_collective_bytes; // the largest single collective the program makes
                                    // (sizes the ring's host staging; 0 = up to 64 MiB)
    const void *mpi_comm;           // the job's ranks: a pointer to an MPI_Comm of the
                                    // program's (it initialised MPI); NULL: MPI_COMM_WORLD.
                                    // vgpu duplicates it: its traffic never meets yours
    int end_job_on_failure;         // vgpu_train's way, for programs that want it: start-up
                                    // is watched (a stage past comm.timeout_s ends the
                                    // process, naming who is behind) and a rank lost in a
                                    // host collective ends the job (MPI_Abort) with the
                                    // message naming it, instead of statuses returned
};

// Joins the job: MPI (MPI_Init_thread, unless the program initialised MPI
// itself; then MPI is left to it), the job's ranks (MPI_COMM_WORLD or
// options->mpi_comm) and hosts, the configuration (the same on every rank),
// device discovery and binding, this rank's virtual GPU, the collectives;
// rank 0 prints the job table. Collective: every rank of the communicator
// calls it, and every rank returns the same verdict (messages are printed by
// the ranks that saw the problem). On success *out is the rank's handle; on
// failure *out is NULL and everything is released. A rank that never calls
// it, or stops in its exchanges (the config, device discovery, the job
// table, the agreements), makes the others return VGPU_ETIMEOUT, said;
// after that MPI has requests that cannot finish, so vgpu neither finalises
// it nor joins again: end the program (nonzero, so its launcher ends the
// job). (A rank stopped, not ended, inside one of the few blocking MPI
// set-up calls, communicator splits and duplicates, is waited for as MPI
// waits.) Under VGPU_PLAN=1 it prints the job table, opens nothing and
// returns VGPU_EPLANNED. Once per process: after vgpu_finalize (or a failed
// vgpu_init) has finalised MPI, another vgpu_init returns VGPU_EINVAL.
// MPI errors on vgpu's communicators are returned (MPI_ERRORS_RETURN), not
// fatal; a device collective's VGPU_ETIMEOUT or VGPU_ECOMM leaves MPI as a
// failed vgpu_init does (vgpu_finalize then frees only what is local).
int vgpu_init(vgpu_t **out, int *argc, char ***argv, const struct vgpu_options *options);
// Releases the collectives, the device and (if vgpu_init started it) MPI.
// Collective. Returns 0 or a status; v is gone either way.
int vgpu_finalize(vgpu_t *v);

int vgpu_rank(const vgpu_t *v);       // 0 .. vgpu_size - 1
int vgpu_size(const vgpu_t *v);       // ranks in the job
int vgpu_local_rank(const vgpu_t *v); // on this host
int vgpu_local_size(const vgpu_t *v);
const char *vgpu_device_kind(const vgpu_t *v); // "cpu" (simulated) or "cuda"
// This rank's GPU as a CUDA ordinal of this process (for the program's own
// cudaSetDevice before its own CUDA work: vgpu makes it current only on the
// thread that called vgpu_open, and a vgpu program under vgpurun sees every
// GPU the launcher was given, not only its own); -1 on a CPU-simulated device.
int vgpu_cuda_device(const vgpu_t *v);
const char *vgpu_backend(const vgpu_t *v);     // "ring", "mpi" or "nccl"

// ---- device memory ----
// Within the rank's cap: VGPU_EDEVMEM past it (the cap is never exceeded).
// Device memory is not host memory, on a GPU or a CPU-simulated one: the
// host reaches it through the copies below, and computes on it with
// vgpu_launch_host_func (CPU-simulated devices) or its own kernels on
// vgpu_stream (GPUs). A host read or write of a CPU-simulated device's
// memory outside vgpu_launch_host_func faults, as on a GPU: the rank dies of
// SIGSEGV after a line naming the rank, the address and the virtual GPU.
// Every allocation starts at, and takes a multiple of, VGPU_MALLOC_ALIGN bytes.
#define VGPU_MALLOC_ALIGN 256
int vgpu_malloc(vgpu_t *v, void **ptr, size_t bytes);
int vgpu_free(vgpu_t *v, void *ptr);
int vgpu_memcpy_htod(vgpu_t *v, void *device_dst, const void *host_src, size_t bytes);
int vgpu_memcpy_dtoh(vgpu_t *v, void *host_dst, const void *device_src, size_t bytes);
int vgpu_memcpy_dtod(vgpu_t *v, void *device_dst, const void *device_src, size_t bytes);
int vgpu_memzero(vgpu_t *v, void *device_ptr, size_t bytes);
// The copy queued without waiting (a CPU device copies at once): host_src
// must not change until vgpu_synchronize or a copy to the host has returned
// (or vgpu_ext.h's vgpu_wait_host_reads). Registered sources copy truly asynchronously.
int vgpu_memcpy_htod_async(vgpu_t *v, void *device_dst, const void *host_src, size_t bytes);
// Page-locks a host buffer used often for copies (cudaHostRegister; nothing
// on CPU devices). A failure leaves the buffer usable, only slower.
// vgpu_host_unregister before freeing it.
int vgpu_host_register(vgpu_t *v, void *host_ptr, size_t bytes);
void vgpu_host_unregister(vgpu_t *v, void *host_ptr);

// Waits for everything issued on the rank's stream. Returns 0, or VGPU_EIO
// when the device failed (said; a GPU's errors are sticky: the rank cannot
// go on).
int vgpu_synchronize(vgpu_t *v);
// The cudaStream_t the library works on (CUDA devices; cast it), for the
// program's own kernels; NULL on CPU devices, which have no stream (a call
// has done its work when it returns; their memory is still not the host's,
// outside vgpu_launch_host_func).
void *vgpu_stream(vgpu_t *v);

// ---- computing on device memory ----
// Runs fn(arg) in stream order, as cudaLaunchHostFunc: after the work issued
// before it, before the work issued after it.
// - A CPU-simulated device (vgpu_cuda_device(v) == -1, VGPU_SIM_GPUS's GPUs
//   included): fn runs before the call returns, on the calling thread, and
//   for its duration the device's memory is host memory: fn reads and writes
//   device pointers of this rank directly, as a kernel would (so would any
//   other thread of the process meanwhile). Outside fn a host access faults
//   again, explained.
// - A CUDA device: fn is queued on vgpu_stream and runs on a thread of
//   CUDA's; as in CUDA it must not touch device memory or call CUDA: a CUDA
//   program computes on device memory with its own kernels on vgpu_stream.
// On every device fn must not call vgpu functions. Returns 0 (fn has run, or
// is queued), VGPU_EINVAL (no device, or fn NULL), VGPU_EIO (CUDA: the
// launch failed, or an earlier operation on the stream did; fn does not run,
// and vgpu_synchronize returns VGPU_EIO too), or -errno (CPU: the memory
// could not be opened to the host, said; fn did not run).
int vgpu_launch_host_func(vgpu_t *v, void (*fn)(void *arg), void *arg);
// Bytes in use now, the most ever in use, and the cap.
int vgpu_memory(const vgpu_t *v, size_t *in_use, size_t *peak, size_t *cap);

// ---- collectives (NCCL's arguments, without the stream) ----
// Stream-ordered, as NCCL's: on a GPU a call may return once its work is
// queued on vgpu_stream (ranks sharing one GPU under MPS: one kernel a
// call), so what it meets later (a peer that died) is returned by the next
// collective, vgpu_synchronize or vgpu_memcpy_dtoh, as VGPU_ECOMM or
// VGPU_ETIMEOUT.
// recvbuff[i] = op over ranks of sendbuff[i]; sendbuff == recvbuff in place.
int vgpu_all_reduce(const void *sendbuff, void *recvbuff, size_t count, vgpu_datatype_t datatype,
                    vgpu_op_t op, vgpu_t *v);
// Root's sendbuff into every rank's recvbuff (count elements).
int vgpu_broadcast(const void *sendbuff, void *recvbuff, size_t count, vgpu_datatype_t datatype,
                   int root, vgpu_t *v);
// recvbuff = every rank's sendcount elements, in rank order.
int vgpu_all_gather(const void *sendbuff, void *recvbuff, size_t sendcount,
                    vgpu_datatype_t datatype, vgpu_t *v);
// Rank r gets block r (recvcount elements) of the reduction of everyone's
// size x recvcount elements. On the ring and mpi backends it takes device
// scratch as large as sendbuff for the call (every rank returns VGPU_EDEVMEM
// when one rank has no room for it), except where ranks sharing one GPU
// keep their collectives on it (no scratch; the same bits).
int vgpu_reduce_scatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                        vgpu_datatype_t datatype, vgpu_op_t op, vgpu_t *v);
// recvbuff on root = op over ranks of sendbuff (count elements); recvbuff is
// not used on the other ranks (it may be NULL there); sendbuff == recvbuff
// in place on root. The ring's is its all-reduce (the same bits; device
// scratch of sendbuff's size on the ranks but root, VGPU_EDEVMEM on every
// rank when one has no room; none where ranks sharing one GPU keep their
// collectives on it); mpi and nccl take MPI_Reduce and ncclReduce,
// whose float sums may round differently from their all-reduce's.
int vgpu_reduce(const void *sendbuff, void *recvbuff, size_t count, vgpu_datatype_t datatype,
                vgpu_op_t op, int root, vgpu_t *v);
// Point-to-point, as ncclSend/ncclRecv outside a group: count elements of
// sendbuff go to rank peer, which receives them with vgpu_recv of the same
// count and type from this rank. Only the two ranks take part; between one
// pair messages arrive in the order sent. Both block until the buffer may
// be reused (send) or holds the message (recv), and a send may wait for
// its recv, so ranks that exchange order their calls (even ranks send
// first, say). Bounded by comm.timeout_s (VGPU_ETIMEOUT, naming the peer).
// peer out of range or this rank: VGPU_EINVAL.
int vgpu_send(const void *sendbuff, size_t count, vgpu_datatype_t datatype, int peer, vgpu_t *v);
int vgpu_recv(void *recvbuff, size_t count, vgpu_datatype_t datatype, int peer, vgpu_t *v);
int vgpu_barrier(vgpu_t *v);

#ifdef __cplusplus
}
#endif

#endif
