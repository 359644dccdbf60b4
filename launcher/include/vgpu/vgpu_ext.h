// vgpu/vgpu_ext.h: libvgpu beyond CUDA and NCCL, for a program that runs
// its job the way vgpu_train does: start-up in two steps with stages of its
// own that a hang names, the job's facts, small control-plane collectives on
// host memory, the optimizer step fused into the gradient all-reduce, the
// deterministic all-reduce, counters, and what the rank is doing (the flight
// recorder's phases, the timeline's spans). vgpu/vgpu.h, the NCCL/CUDA-shaped
// core, is all most programs need; everything here is optional on top of it,
// with the same conventions (statuses, collectives called by every rank in
// the same order).
#ifndef VGPU_VGPU_EXT_H
#define VGPU_VGPU_EXT_H

#include <stddef.h>
#include <stdint.h>

#include <vgpu/vgpu.h>

#ifdef __cplusplus
extern "C" {
#endif

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
                                    // backend with the all-to-all that
                                    // vgpu_all_reduce_tree (below) needs on these devices (auto
                                    // takes mpi on GPUs; ring or nccl there is refused, said)
    int plan_only;                  // discover, bind, choose the backend, print the job
                                    // table (rank 0), open nothing (vgpu_is_planned says so)
    int quiet;                      // no job table
};
int vgpu_open(vgpu_t *v, const struct vgpu_open_options *options);
// 1 when vgpu_open only planned (plan_only, or VGPU_PLAN=1 in the
// environment): no device, no collectives; the program may say what it
// would have done, then vgpu_finalize. 0 otherwise (and for NULL).
int vgpu_is_planned(const vgpu_t *v);

// Name your own start-up stages, so that a hang names them. After vgpu_join,
// announce each part of the program's start-up (loading data, sizing a
// model, a warm-up step) as a stage: `what` (a string that lives until
// vgpu_startup_done) goes on this host's arrival board beside vgpu's own stages,
// and with end_job_on_failure each stage must finish within comm.timeout_s:
// past it the rank says which stage it is stuck in and which host-mates are
// behind or stopped (in which stage), and the job ends. vgpu_startup_done:
// start-up is over, the watch ends (vgpu_init calls it itself; after
// vgpu_join + vgpu_open call it once the program's start-up is done). Both
// return 0, or VGPU_EINVAL for NULL.
int vgpu_startup_stage(vgpu_t *v, const char *what);
int vgpu_startup_done(vgpu_t *v);

// ---- the job ----
const char *vgpu_host_name(const vgpu_t *v);      // this rank's host name
int vgpu_host_count(const vgpu_t *v);        // hosts in the job
int vgpu_physical_device_count(const vgpu_t *v);  // distinct physical devices behind the ranks
int vgpu_is_simulated(const vgpu_t *v);         // the GPUs are VGPU_SIM_GPUS's (CPU math)
// The job's config file (vgpu_options.config_path) as rank 0 read it, once,
// the same text on every rank; NULL when there is none. vgpu reads its own
// sections ([devices], [comm]) and leaves every other section, and --set
// overrides of its keys, to the program: parse yours from this text.
const char *vgpu_config_text(const vgpu_t *v);
// This process's rank as its launcher (mpirun, srun, PMIx) exported it,
// readable before vgpu_join (no MPI, no handle): so that a program prints its
// --help and usage errors once, not once a rank. 0 when no launcher started it.
int vgpu_launcher_rank(void);

// ---- control-plane collectives: small values in host memory ----
// Statistics, verdicts, a configuration: over MPI, bounded and rank-naming
// like the device collectives (VGPU_ETIMEOUT, said; with end_job_on_failure
// the job ends instead). Every rank calls the same ones in the same order.
// Types float32, float64, int32, int64; sendbuff == recvbuff in place.
int vgpu_ctrl_all_reduce(const void *sendbuff, void *recvbuff, size_t count,
                         vgpu_datatype_t datatype, vgpu_op_t op, vgpu_t *v);
int vgpu_ctrl_broadcast(void *buff, size_t bytes, int root, vgpu_t *v);
// recvbuff = every rank's `bytes` of sendbuff, in rank order (at most INT_MAX a rank).
int vgpu_ctrl_all_gather(const void *sendbuff, void *recvbuff, size_t bytes, vgpu_t *v);

// ---- asynchronous copies ----
// Returns once the host sources of every asynchronous copy
// (vgpu_memcpy_htod_async) have been read, without waiting for the rest of
// the stream.
int vgpu_wait_host_reads(vgpu_t *v);

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
// (the program's kernels on vgpu_stream, or vgpu_launch_host_func) and returns 0 or a negative status; a failure ends
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

// ---- the deterministic all-reduce ----
// The job holds `total` partial vectors of count floats (a micro-batch's
// gradient each), rank r parts_per_rank[r] of them back to back in parts, in
// rank order; every rank receives their sum in out, added in the canonical
// tree of vgpu_tree_sum over the partials' global index, so the bits do not
// depend on the rank count or the split. Collective. It needs the all-to-all
// of a backend chosen with vgpu_open_options.deterministic; keeps device
// scratch of vgpu_tree_scratch_bytes until vgpu_finalize.
int vgpu_all_reduce_tree(const float *parts, const int *parts_per_rank, float *out, size_t count,
                         vgpu_t *v);
// The device scratch vgpu_all_reduce_tree keeps (plan the cap with it).
size_t vgpu_tree_scratch_bytes(int nranks, int max_parts_per_rank, size_t count);
// leaves[0] = the sum of leaves[0..n), added pairwise with doubling strides
// (leaf i += leaf i + s, s = 1, 2, 4, ...) on the device; the other leaves
// are clobbered. One device computes vgpu_all_reduce_tree's reference so.
int vgpu_tree_sum(vgpu_t *v, float *const *leaves, int n, size_t count);

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
// evaluation, checkpoint, "injected slowness": time a rank is slowed on
// purpose, to rehearse a straggler (vgpu_train's VGPU_INJECT_SLOW), and
// "gradient bucket": a collective of part of a gradient made beside the
// backward pass, around the collective's call (arg: the microseconds since
// that part was final, arg2: its elements; vgpu-project starts the overlap
// there). An unknown `what` is ignored.
typedef enum {
    vgpu_span_step = 1, vgpu_span_data, vgpu_span_forward, vgpu_span_backward,
    vgpu_span_optimizer, vgpu_span_eval, vgpu_span_checkpoint, vgpu_span_injected_slowness,
    vgpu_span_gradient_bucket
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
