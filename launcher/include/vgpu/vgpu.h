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
// This header is the NCCL/CUDA-shaped core. vgpu/vgpu_ops.h adds operations
// on device memory beyond CUDA and NCCL (GEMM, elementwise, optimizer steps,
// the deterministic all-reduce), on every device kind.
//
// Every function returns 0 or a negative status (vgpu/status.h), and
// vgpu_status_string says what it means; none calls exit. Collectives are
// blocking: when one returns, its result is in the receive buffer. Every
// rank calls the same collectives in the same order with the same counts,
// types and operations; on the ring and nccl backends a rank that does not
// arrive within comm.timeout_s makes the others return VGPU_ETIMEOUT, naming
// it (mpi waits as the MPI library does). vgpu_init's waits are bounded too
// (VGPU_COMM_TIMEOUT_S, else 300 s, until the config is read).
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
// when one rank has no room for it).
int vgpu_reduce_scatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                        vgpu_datatype_t datatype, vgpu_op_t op, vgpu_t *v);
int vgpu_barrier(vgpu_t *v);

// ---- start-up in two steps (vgpu_init = vgpu_join + vgpu_open) ----
// For a program with work between the two (loading its data, sizing its
// model to check the caps against): vgpu_join joins the job and reads the
// configuration (the host collectives work from here on); vgpu_open binds
// and opens the virtual GPU and connects the collectives. Both collective,
// with vgpu_init's verdicts. Between the two, device calls are refused
// (VGPU_EINVAL); the job facts, the host collectives, vgpu_startup_stage
// and vgpu_finalize work. vgpu_open is called once a handle: after it
// fails, vgpu_finalize.
int vgpu_join(vgpu_t **out, int *argc, char ***argv, const struct vgpu_options *options);

struct vgpu_open_options {
    size_t min_device_bytes;        // the least device memory a rank needs: a smaller cap
                                    // is refused at binding, said (0 = no check)
    size_t largest_collective_bytes; // as in vgpu_options (0: vgpu_options' value)
    int deterministic;              // bitwise-reproducible results: GEMMs not split over
                                    // threads (one BLAS thread on CPU devices), and a
                                    // backend with the all-to-all that vgpu_ops.h's
                                    // vgpu_all_reduce_tree needs on these devices (auto
                                    // takes mpi on GPUs; ring or nccl there is refused, said)
    int plan_only;                  // discover, bind, choose the backend, print the job
                                    // table (rank 0), open nothing (vgpu_planned says so)
    int quiet;                      // no job table
};
int vgpu_open(vgpu_t *v, const struct vgpu_open_options *options);
// 1 when vgpu_open only planned (plan_only, or VGPU_PLAN=1 in the
// environment): no device, no collectives; the program may say what it
// would have done, then vgpu_finalize. 0 otherwise (and for NULL).
int vgpu_planned(const vgpu_t *v);

// Name your own start-up stages, so that a hang names them. After vgpu_join,
// announce each part of the program's start-up (loading data, sizing a
// model, a warm-up step) as a stage: `what` (a string that lives until
// vgpu_started) goes on this host's arrival board beside vgpu's own stages,
// and with end_job_on_failure each stage must finish within comm.timeout_s:
// past it the rank says which stage it is stuck in and which host-mates are
// behind or stopped (in which stage), and the job ends. vgpu_started:
// start-up is over, the watch ends (vgpu_init calls it itself; after
// vgpu_join + vgpu_open call it once the program's start-up is done). Both
// return 0, or VGPU_EINVAL for NULL.
int vgpu_startup_stage(vgpu_t *v, const char *what);
int vgpu_started(vgpu_t *v);

// ---- the job ----
const char *vgpu_host(const vgpu_t *v);      // this rank's host name
int vgpu_host_count(const vgpu_t *v);        // hosts in the job
int vgpu_physical_devices(const vgpu_t *v);  // distinct physical devices behind the ranks
int vgpu_simulated(const vgpu_t *v);         // the GPUs are VGPU_SIM_GPUS's (CPU math)
// The job's config file (vgpu_options.config_path) as rank 0 read it, once,
// the same text on every rank; NULL when there is none. vgpu reads its own
// sections ([devices], [comm]) and leaves every other section, and --set
// overrides of its keys, to the program: parse yours from this text.
const char *vgpu_config_text(const vgpu_t *v);
// This process's rank as its launcher (mpirun, srun, PMIx) exported it,
// readable before vgpu_join (no MPI, no handle): so that a program prints its
// --help and usage errors once, not once a rank. 0 when no launcher started it.
int vgpu_launcher_rank(void);

// ---- host collectives: small values in host memory ----
// Statistics, verdicts, a configuration: over MPI, bounded and rank-naming
// like the device collectives (VGPU_ETIMEOUT, said; with end_job_on_failure
// the job ends instead). Every rank calls the same ones in the same order.
// Types float32, float64, int32, int64; sendbuff == recvbuff in place.
int vgpu_host_all_reduce(const void *sendbuff, void *recvbuff, size_t count,
                         vgpu_datatype_t datatype, vgpu_op_t op, vgpu_t *v);
int vgpu_host_broadcast(void *buff, size_t bytes, int root, vgpu_t *v);
// recvbuff = every rank's `bytes` of sendbuff, in rank order (at most INT_MAX a rank).
int vgpu_host_all_gather(const void *sendbuff, void *recvbuff, size_t bytes, vgpu_t *v);

// ---- device memory, continued ----
int vgpu_memzero(vgpu_t *v, void *device_ptr, size_t bytes);
// The copy queued without waiting (a CPU device copies at once): host_src
// must not change until vgpu_wait_host_reads, a copy to the host or
// vgpu_synchronize has returned. Registered sources copy truly asynchronously.
int vgpu_memcpy_htod_async(vgpu_t *v, void *device_dst, const void *host_src, size_t bytes);
// Returns once the host sources of every asynchronous copy have been read.
int vgpu_wait_host_reads(vgpu_t *v);
// Page-locks a host buffer used often for copies (cudaHostRegister; nothing
// on CPU devices). A failure leaves the buffer usable, only slower.
// vgpu_host_unregister before freeing it.
int vgpu_host_register(vgpu_t *v, void *host_ptr, size_t bytes);
void vgpu_host_unregister(vgpu_t *v, void *host_ptr);

// ---- collectives beyond NCCL's ----
// The optimizer step fused into the gradient all-reduce (ZeRO stage 1 in
// spirit): grads (float32, in place) are summed over the ranks, every range
// [first, first + count) of the sum is handed to update(ctx, first, count)
// on exactly one rank, which updates params there (and the optimizer state
// it keeps for the range), then the updated ranges are all-gathered. params
// end identical on every rank, each element updated once from the summed
// gradient; grads hold the sum, and optimizer state is current, only in this
// rank's ranges. A backend without a sharded form (mpi, nccl) all-reduces
// and updates [0, count) on every rank.
typedef int (*vgpu_update_fn)(void *ctx, size_t first, size_t count);
// update runs on the host, inside the collective: it queues device work
// (vgpu_ops.h's optimizer steps, the program's kernels on vgpu_stream, or
// vgpu_launch_host_func) and returns 0 or a negative status; a failure ends
// the call on this rank with it and leaves the collectives broken (the peers
// fail too, within comm.timeout_s): end the program.
int vgpu_all_reduce_update(float *grads, float *params, size_t count, vgpu_update_fn update,
                           void *ctx, vgpu_t *v);

// Collectives issued, their payload bytes, the time inside them and, of
// that, waiting for peers (wait_known = 0 where the backend cannot tell).
struct vgpu_comm_stats {
    uint64_t calls, bytes;
    double seconds, wait_seconds;
    int wait_known;
};
int vgpu_get_comm_stats(const vgpu_t *v, struct vgpu_comm_stats *out);
// The algorithm an all-reduce of `bytes` takes on this rank's backend, as a
// benchmark's table names it (NCCL says so only in NCCL_DEBUG's tuning
// lines): the ring backend's "one-shot", "two-shot", "direct", "ring" or
// "hierarchical"; "mpi" and "nccl" for theirs. A static string; "none" when
// v has no collectives (NULL, before vgpu_open, after a plan).
const char *vgpu_all_reduce_algorithm(const vgpu_t *v, size_t bytes);

// ---- what the rank is doing: the flight recorder and the timeline ----
// The program's phases and steps, shown by the flight recorder (vgpu-flight,
// SIGUSR2, a failure) beside the collectives, and as spans in the timeline.
typedef enum {
    vgpu_phase_setup = 1, vgpu_phase_data, vgpu_phase_forward, vgpu_phase_backward,
    vgpu_phase_optimizer, vgpu_phase_eval, vgpu_phase_checkpoint
} vgpu_phase_t;
void vgpu_mark_phase(vgpu_t *v, vgpu_phase_t phase);
void vgpu_mark_step(vgpu_t *v, int64_t step); // the step under way (1-based)
// Timeline spans: t0 = vgpu_span_begin() (0 when no timeline is recorded),
// then vgpu_span_end(v, what, t0, arg, arg2) records [t0, now] as `what`
// (args: numbers of the program's, shown with the span: a step, rows). For
// data, forward and backward, arg is the samples and arg2 the FLOPs the
// program counts for the pass (0: not counted); for the optimizer, the
// first parameter and the count it updated (0: all). vgpu-project scales
// compute by them (docs/PROJECTION.md).
// The timeline names them step, data, forward, backward, optimizer,
// evaluation, checkpoint, and "injected slowness": time a rank is slowed on
// purpose, to rehearse a straggler (vgpu_train's VGPU_INJECT_SLOW). An
// unknown `what` is ignored.
typedef enum {
    vgpu_span_step = 1, vgpu_span_data, vgpu_span_forward, vgpu_span_backward,
    vgpu_span_optimizer, vgpu_span_eval, vgpu_span_checkpoint, vgpu_span_injected_slowness
} vgpu_span_t;
uint64_t vgpu_span_begin(void);
void vgpu_span_end(vgpu_t *v, vgpu_span_t what, uint64_t t0, int64_t arg, int64_t arg2);
// The timeline of every rank (Chrome trace-event JSON): collective; rank 0
// opens path (an error there: every rank returns VGPU_ECONFIG, said) and
// recording starts; vgpu_timeline_write gathers the ranks' spans to rank 0,
// which writes the file and says where (VGPU_EIO if it could not).
int vgpu_timeline_begin(vgpu_t *v, const char *path, const char *label);
int vgpu_timeline_write(vgpu_t *v);
// A number about the job for the file's otherData "notes" (rank 0's notes
// are written), e.g. "device_bytes@4": what a rank needs with 4 ranks, which
// vgpu-project reads. A key again replaces its value. Returns 0,
// VGPU_EINVAL (no timeline; a key empty, of 48 bytes or more, or with '"',
// '\\' or a control character; a value not finite) or -ENOSPC (64 notes).
int vgpu_timeline_note(vgpu_t *v, const char *key, double value);
// For a program's signal-handling thread (not a handler): SIGUSR2 writes
// this rank's flight record and prints its last collectives; a stop signal
// (SIGTERM, SIGINT, SIGUSR1) the records of this rank and of any stopped or
// dead host-mate, then the verdict.
void vgpu_on_signal(int sig);
// Ends the whole job now (MPI_Abort) with exit_code, after the flight
// records: for a program that cannot go on (never returns).
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void vgpu_abort(vgpu_t *v, int exit_code);

#ifdef __cplusplus
}
#endif

#endif
