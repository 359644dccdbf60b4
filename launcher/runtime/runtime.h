// runtime.h: what turns N MPI processes into N virtual GPUs: bootstrap,
// configuration agreement, device binding, the communicator, the job table,
// the job's timeline. libvgpu's API (api/) is its one user in the library;
// programs, vgpu_train included, see only the public headers, never this
// one nor MPI/CUDA/NCCL.
#ifndef VGPU_RUNTIME_H
#define VGPU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "device.h"
#include "log.h" // VGPU_NORETURN

struct runtime {
    int rank, size;               // world
    int local_rank, local_size;   // on this host
    int node_index, node_count;   // host number (0..node_count-1) and hosts in the job
    char host[64];
    struct config cfg;            // identical on every rank after runtime_load_config
    char *config_text;            // the config file as rank 0 read it (NULL: none), every
                                  // rank's copy: the program's own sections are in it
    device_t dev;                 // this rank's virtual GPU (after runtime_open)
    comm_t *comm;                 // collectives between the virtual GPUs (after runtime_open)
    int physical_devices;         // distinct physical devices in the job
    int simulated;                // the GPUs are VGPU_SIM_GPUS's (CPU math behind them)
    int blas_threads;             // a CPU device's BLAS threads (devices.cpu_threads)
    int planned;                  // runtime_open only planned (plan_only): nothing is open
    char backend_reason[512];     // why the collective backend was chosen
    int launched;                 // started by a launcher (mpirun, srun): a rank's stdout is
                                  // then not the user's terminal
    void *impl;                   // MPI communicators
};

struct runtime_open_args {
    uint64_t min_bytes;   // least device memory a rank needs (0 = no check)
    uint64_t largest_collective_bytes; // the largest single collective the program makes
                                       // (0 = unknown): sizes host staging windows
    int quiet;            // no job table
    int one_blas_thread;  // GEMM results must not depend on how a GEMM is split over
                          // threads (bitwise-reproducible training): one BLAS thread
    int plan_only;        // discover, bind, choose the backend, print the job table
                          // (rank 0), open nothing (rt->planned is set)
    int tree_all_reduce;  // the program uses the deterministic all-reduce (an
                          // all-to-all): the backend must have one on these devices
};

// This process's rank as its launcher exported it (mpirun, srun, PMIx),
// readable before MPI starts, so that a program prints help and usage errors
// once; 0 when no launcher started it.
int runtime_launcher_rank(void);

// How a process joins: vgpu_train's way is all zero (NULL).
struct runtime_join {
    const void *mpi_comm; // the job's ranks: points to an MPI_Comm of the program's
                          // (MPI initialised by it); NULL: MPI_COMM_WORLD
    int library;          // libvgpu: no start-up watch and no fatal hook (neither may end
                          // the program); every wait until runtime_open returns is
                          // bounded (VGPU_COMM_TIMEOUT_S before the config) and a
                          // failed one returns its status, said, instead of ending the job
};

// MPI_Init_thread (unless the program started MPI), the job's ranks and host
// topology, rank-tagged logging; for vgpu_train, fatal errors end the whole
// job (MPI_Abort) and start-up is watched from here on (runtime_stage).
// Returns 0 or a negative status.
int runtime_bootstrap(struct runtime *rt, int *argc, char ***argv, const struct runtime_join *join);

// The runtime's start-up stages, in order (a program adds its own by name,
// runtime_stage_named: vgpu_train's data, model and warm-up between and
// after them). Each must finish within comm.timeout_s (before
// the config is read: VGPU_COMM_TIMEOUT_S, else 300 s), not counting time the
// process was stopped; past it the rank names the stage and the host-mates
// that are behind or stopped, and exits 1 (startup_watch.h).
enum runtime_stage {
    RUNTIME_STAGE_MPI,     // MPI_Init_thread (runtime_bootstrap)
    RUNTIME_STAGE_JOIN,    // hosts and the arrival board (runtime_bootstrap)
    RUNTIME_STAGE_CONFIG,  // runtime_load_config
    RUNTIME_STAGE_DEVICES, // runtime_open: discovery, binding, the virtual GPU
    RUNTIME_STAGE_CONNECT, // runtime_open: the collective backend
};
// Enters `stage` (its clock starts now).
void runtime_stage(struct runtime *rt, enum runtime_stage stage);
// Enters a stage of the program's own, by name (a string that lives until
// runtime_started); host-mates behind or stopped are named with it.
void runtime_stage_named(struct runtime *rt, const char *name);
// Start-up is over: the watch ends (waits are bounded by comm.timeout_s).
void runtime_started(struct runtime *rt);

// Rank 0 reads `path` (NULL = defaults only), once, and applies the
// overrides ("section.key=value") and validation of vgpu's own sections; a
// section vgpu does not know, and an override of its keys, is the program's
// (skipped). Every rank gets the same config, the file's text
// (rt->config_text) and the same verdict. On error every rank returns
// VGPU_ECONFIG (or -errno) and err holds rank 0's message ("file:line: ...").
int runtime_load_config(struct runtime *rt, const char *path, const char *const *overrides,
                        int n_overrides, char *err, size_t err_bytes);

// Discovers devices, binds this rank, opens its virtual GPU, picks and
// connects the collective backend, and (rank 0, unless quiet) prints the job
// table. Every rank returns the same verdict; messages are already printed.
// (Library mode: a rank that stops or fails a control-plane wait returns
// VGPU_ETIMEOUT or VGPU_ECOMM, said, and so do the others that waited for it.)
int runtime_open(struct runtime *rt, const struct runtime_open_args *args);

// Host-memory collectives over MPI, libvgpu's vgpu_host_* (small data:
// stats, verdicts; training data goes through rt->comm on device memory).
// Every rank calls each in the same order. A rank that does not arrive
// within comm.timeout_s, or an MPI failure, is said naming the missing
// host-mates. Returns 0, VGPU_EINVAL for a bad argument (nothing sent), or
// in library mode the failure, said (then MPI is not used again); in
// vgpu_train's mode a failure ends the job (MPI_Abort), since the others
// could not go on without this rank. all_reduce: float32/64, int32/64; avg
// divides the sum by the rank count. all_gather: recv = the concatenation
// over ranks of `bytes` from each (at most INT_MAX bytes a rank).
int runtime_host_all_reduce(struct runtime *rt, const void *send, void *recv, size_t count,
                            enum comm_dtype t, enum comm_reduce_op op);
int runtime_host_broadcast(struct runtime *rt, void *buf, size_t bytes, int root);
int runtime_host_all_gather(struct runtime *rt, const void *send, void *recv, size_t bytes);

// Orderly teardown: communicator, device, MPI_Finalize. Safe after a failed
// runtime_open. Returns exit_code for convenience.
int runtime_close(struct runtime *rt, int exit_code);
// Whether this thread may call a collective now: it is MPI's main thread, or
// MPI provides MPI_THREAD_SERIALIZED (vgpu.h: Threads); 0 is said. Also sets
// the thread's waits to sleep when it is not the main thread
// (util_waits_beside_compute): called at every collective's entry.
int runtime_collective_thread_ok(void);

// The timeline (common/trace.h), collective: runtime_trace_begin has rank 0
// open `path` (an error there: every rank returns VGPU_ECONFIG, said), every
// rank allocate its span buffer and measure its clock's offset to rank 0's,
// and recording start; `label` names the producer in the file.
// runtime_trace_write measures the offsets again, gathers every rank's
// spans to rank 0, which writes the Chrome trace-event JSON and says where;
// VGPU_EIO if it could not (said). Waits are bounded by comm.timeout_s.
int runtime_trace_begin(struct runtime *rt, const char *path, const char *label);
int runtime_trace_write(struct runtime *rt);

// For the program's signal thread (worker/preempt.h's observer): SIGUSR2
// writes this rank's flight record and prints its last collectives; the
// first stop signal writes the records of this rank and of any host-mate
// that is stopped or dead, and then prints the verdict (flight_job.h).
void runtime_on_signal(int sig);

// Ends the whole job now (MPI_Abort) with exit_code.
void runtime_abort(struct runtime *rt, int exit_code) VGPU_NORETURN;

#endif
