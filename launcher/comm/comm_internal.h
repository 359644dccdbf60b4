// comm_internal.h: the collective backend interface, shared by the collective backends.
#ifndef VGPU_COMM_INTERNAL_H
#define VGPU_COMM_INTERNAL_H

#include <mpi.h>

#include "comm.h"
#include "device.h"

// What a backend needs to connect.
struct comm_args {
    MPI_Comm mpi_comm;       // the ranks of the communicator (duplicated by create)
    device_t *dev;           // this rank's device
    double timeout_s;        // bound on every wait
    uint64_t slice_bytes;    // ring pipelining granularity
    uint64_t largest_bytes;  // the largest collective the caller will make (0 = unknown)
    int node_index;          // this rank's host index (ranks with equal index share memory)
    const char *host;
    const int *world_ranks;  // the job's rank of each rank of mpi_comm, for messages (NULL: the same)
    int force_staging;       // ring: staging windows whatever the devices (its small-collective ring)
};

struct comm_ops {
    const char *name;
    // Connects; on failure leaves nothing behind.
    int (*create)(comm_t *c, const struct comm_args *args);
    // comm_all_reduce_typed, arguments checked.
    int (*all_reduce)(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                      enum comm_reduce_op op);
    // comm_reduce_scatter; NULL where the backend has none (comm.c then
    // all-reduces the whole and keeps this rank's block: twice the traffic).
    int (*reduce_scatter)(comm_t *c, const void *send, void *recv, size_t recv_count,
                          enum comm_dtype t, enum comm_reduce_op op);
    // comm_reduce, arguments checked; NULL where the backend has none
    // (comm.c then all-reduces, into device scratch on the ranks but root).
    int (*reduce)(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                  enum comm_reduce_op op, int root);
    // comm_send / comm_recv, arguments checked (peer is another rank of c).
    int (*send)(comm_t *c, const void *buf, size_t bytes, int peer);
    int (*recv)(comm_t *c, void *buf, size_t bytes, int peer);
    int (*broadcast)(comm_t *c, void *buf, size_t bytes, int root);
    int (*all_gather)(comm_t *c, const void *send, void *recv, size_t bytes);
    // comm_all_reduce_update's sharded form; NULL where the backend has none
    // (comm.c then all-reduces and updates everything on every rank).
    int (*all_reduce_update)(comm_t *c, float *grads, float *params, size_t count,
                             comm_update_fn update, void *ctx);
    // Block q of send (`bytes` each, N blocks) goes to rank q; recv block q
    // comes from rank q. NULL where the backend has none (the deterministic
    // all-reduce then says so).
    int (*all_to_all)(comm_t *c, const void *send, void *recv, size_t bytes);
    int (*barrier)(comm_t *c);
    void (*destroy)(comm_t *c);
    // Seconds spent waiting for peers so far (comm_stats.wait_seconds); NULL
    // where the backend cannot tell.
    double (*waited)(const comm_t *c);
    // The algorithm an all-reduce of `bytes` uses (e.g. "one-shot"); NULL:
    // the backend's name.
    const char *(*algo)(const comm_t *c, size_t bytes);
    // What calls that returned before their work was done have found since
    // (the device collectives): 0 or the error; NULL: nothing is left behind.
    int (*async_error)(comm_t *c);
};

// Reduce-scatter and reduce as the all-reduce, through device scratch
// (comm.c: what a backend without its own takes, and one that has its own
// only sometimes falls back to).
int comm_reduce_scatter_by_all_reduce(comm_t *c, const void *send, void *recv, size_t recv_count,
                                      enum comm_dtype t, enum comm_reduce_op op);
int comm_reduce_by_all_reduce(comm_t *c, const void *send, void *recv, size_t count,
                              enum comm_dtype t, enum comm_reduce_op op, int root);

struct comm {
    const struct comm_ops *ops;
    int rank, size;
    device_t *dev;
    double timeout_s;
    struct comm_stats stats;
    void *impl;              // backend state
    void *tree_scratch;      // device scratch of the deterministic all-reduce (comm.c)
    size_t tree_scratch_bytes;
    int32_t *verdict;        // one int on the device: the ranks agree through it (comm.c)
    int failed;              // a collective timed out or MPI failed: peers may never come
    int *world;              // the job's rank of each rank, [size]; NULL: the same (messages)
    char *p2p_host;          // host buffer of staged point-to-point pieces (mpi_p2p.c); NULL: none yet
    int p2p_pinned;          // p2p_host is page-locked
};

// The job's rank of rank q of c, for messages.
int comm_rank_name(const comm_t *c, int q);

// The MPI tag of point-to-point messages on a backend's communicator: no
// collective's traffic uses it (the ring's engine sends under its own,
// ring_core.c's RING_TAG; everything else there is MPI collectives).
#define COMM_P2P_TAG 0x7032
// comm_send (send = 1) or comm_recv of `bytes` of buf with rank peer of c,
// over MPI point-to-point on `mpi` (the backend's duplicate of the
// communicator), in pieces, each wait bounded by c->timeout_s (VGPU_ETIMEOUT
// naming the peer; a receive that timed out is cancelled). staged: copy
// through a host buffer of c's (also where buf has no host view). 0 or a
// negative status.
int comm_mpi_p2p(comm_t *c, MPI_Comm mpi, void *buf, size_t bytes, int peer, int send,
                 int staged);
// Frees that host buffer (comm_destroy; kept after a failure, when a send
// may still read it).
void comm_p2p_release(comm_t *c);

// buf[i] /= by for n elements of type t in host memory (COMM_AVG after a
// sum; integers round toward zero).
void comm_divide_host(void *buf, size_t n, enum comm_dtype t, int by);
// Element i of buf (host memory, type t) = v, converted (half types rounded
// to nearest even): the exact-value checks' inputs (tests, the benchmark).
void comm_host_put(void *buf, size_t i, enum comm_dtype t, int64_t v);

extern const struct comm_ops comm_mpi_ops;
extern const struct comm_ops comm_ring_ops;
// NCCL's table, NULL where this binary has no NCCL (its folder's absent.c).
const struct comm_ops *comm_nccl_backend(void);

// Waits for a nonblocking MPI request, bounded by timeout_s: every poll that
// finds it unfinished calls on_poll (when set), half the bound calls on_half
// once, and at the bound it
// returns VGPU_ETIMEOUT (a collective cannot be cancelled: the caller ends the
// job). Time this process itself spent stopped (over a second between polls)
// does not count. Spins briefly, then sleeps, so oversubscribed ranks leave
// the core to the ones computing. *waited_s (may be NULL) gets the wait,
// whatever the outcome. VGPU_ECOMM if MPI fails.
struct comm_wait_hooks {
    void (*on_poll)(void *arg, double now_s);
    void (*on_half)(void *arg, double waited_s);
    void *arg;
};
int comm_mpi_wait(MPI_Request *req, double timeout_s, const struct comm_wait_hooks *hooks,
                  double *waited_s);

// comm_mpi_wait with the bound c->timeout_s and the messages for collective
// `what` (a warning at half, an error at the bound).
int comm_mpi_wait_bounded(comm_t *c, MPI_Request *req, const char *what);

// An MPI call's result as a status: 0, or VGPU_ECOMM after logging
// "<backend> backend: <call> failed: <MPI's message>".
int comm_mpi_check(int mpi_rc, const char *backend, const char *call);

// A committed MPI type of `len` bytes whose extent is `stride`: with count 1
// per rank, piece i of every rank's block lands at its own block, so buffers
// need no reshuffling. Free it with MPI_Type_free. 0 or VGPU_ECOMM.
int comm_mpi_strided_type(const char *backend, size_t len, size_t stride, MPI_Datatype *out);

// All or none: every rank of `mpi` learns whether all of them succeeded at
// `what`, so that all go on or all stop together (a rank that went on alone
// would wait for the others). Bounded by c->timeout_s like every collective
// wait. Returns this rank's own rc if it failed, VGPU_ECOMM if another rank
// did, the wait's status if the agreement itself failed (VGPU_ETIMEOUT: the
// caller must end the job, as after any collective that timed out), else 0.
int comm_agree(comm_t *c, MPI_Comm mpi, int rc, const char *what);

// A backend's own duplicate of `parent` (MPI_Comm_idup), bounded by
// c->timeout_s as every set-up exchange is: a rank that never arrives costs
// the timeout, named, not a hang. *out is MPI_COMM_NULL unless it returns 0.
int comm_mpi_dup_bounded(comm_t *c, MPI_Comm parent, MPI_Comm *out, const char *what);

// The minimum of *value over the ranks of `mpi`, in place, bounded by
// c->timeout_s (set-up parameters every rank must share). 0 or a status.
int comm_mpi_min_u64_bounded(comm_t *c, MPI_Comm mpi, uint64_t *value, const char *what);

// Backend by name ("ring", "mpi", "nccl"); NULL if unknown or not built.
const struct comm_ops *comm_find_ops(const char *name);

// Creates a communicator with backend `ops`. *out is owned by the caller and
// released with comm_destroy. Returns 0 or a negative status.
int comm_create(comm_t **out, const struct comm_ops *ops, const struct comm_args *args);
// Disconnects and frees; comm_destroy(NULL) is a no-op.
void comm_destroy(comm_t *c);

// The pure backend policy (comm.backend = auto|ring|mpi|nccl): auto gives
// nccl when NCCL (>= 2.14) is built and every rank has a CUDA device of its
// own, or ranks share GPUs within what NCCL documents (NCCL >= 2.30 with
// NCCL_MULTI_RANK_GPU_ENABLE=1, at most 2 ranks a GPU unless MPS runs and
// NCCL_MAX_CTAS is set), and no rank is on a MIG instance (NCCL does not
// support MIG); else ring. A job that needs the deterministic all-to-all on
// CUDA devices gets mpi (the ring's and NCCL's have none there). Sets
// *chosen and a one-line reason in why; returns VGPU_ECONFIG (why says what
// to change) for an explicit choice that cannot work. The facts must be the
// same on every rank (the runtime agrees them), or ranks build different
// backends.
struct comm_choice_facts {
    int nccl_built;        // this binary has the NCCL backend
    int nccl_version;      // NCCL at run time on every rank (22809 = 2.28.9; the lowest
                           // of the ranks'), 0 = missing on some rank
    int all_cuda;          // every rank has a CUDA device
    int max_ranks_per_gpu; // most ranks on one GPU (1 = every rank its own)
    int multi_rank_env;    // NCCL_MULTI_RANK_GPU_ENABLE=1 on every rank
    int max_ctas_set;      // NCCL_MAX_CTAS is set on every rank
    int mps;               // the ranks are MPS clients
    int mig;               // some rank's device is a MIG instance
    int all_to_all;        // the job uses the deterministic all-reduce (an all-to-all)
    int staged;            // some rank's memory is not host-addressable (a CUDA device,
                           // or VGPU_RING_STAGING=1): the ring's all-to-all cannot run
};
int comm_choose_backend(const char *requested, const struct comm_choice_facts *f,
                        const char **chosen, char *why, size_t why_bytes);

// How many ranks a GPU NCCL may run with these facts (1, 2, or INT_MAX
// under MPS with NCCL_MAX_CTAS; only version, multi_rank_env, mps and
// max_ctas_set are read), or 0 when NCCL cannot run this job at all (not
// built, no CUDA, MIG, no or too old NCCL, deterministic mode on GPUs).
int comm_nccl_ranks_per_gpu(const struct comm_choice_facts *f);

// NCCL version found at run time (e.g. 22807 for 2.28.7); 0 without NCCL.
int comm_nccl_runtime_version(void);

// ---- the ring's windows and machine facts (ring_facts.c) ----

// What each rank's device is, for the choice of window kind.
struct ring_device_fact {
    int node;       // host index
    int cuda;       // a CUDA device (not host-addressable)
    int mig;        // a MIG instance (no CUDA IPC)
    int mps;        // the GPU's contexts are shared through MPS (else they take turns)
    int limited;    // an MPS pinned memory limit, which a mapped neighbour's arena counts against
    char uuid[48];  // the GPU's (or instance's) UUID
};
enum ring_window {
    RING_WINDOW_HOST,   // CPU arenas, mapped between the host's ranks
    RING_WINDOW_STAGED, // host staging segments; device buffers copied through them
    RING_WINDOW_DEVICE, // GPU arenas of one GPU, mapped between its ranks (CUDA IPC)
};
// The window kind for rank `me` of n (facts by rank; all ranks decide alike):
// host windows for CPU devices; device windows (CUDA IPC) when every rank is
// on this host, on this GPU, none a MIG instance, and the GPU runs them
// together (MPS without a pinned memory limit); else staging. `staging` is
// VGPU_RING_STAGING: 1 always staging, 0 device windows wherever CUDA IPC
// works (MPS or not), -1 the choice above.
enum ring_window ring_window_kind(const struct ring_device_fact *facts, int n, int me,
                                  int staging);
// The cores the ranks of this machine have between them: the online CPUs,
// or this process's affinity mask where that is larger (ring_facts.c).
int ring_cpus_available(void);
// Device windows (ranks sharing a GPU under MPS) keep a second, staged ring
// for all-reduces of up to this many bytes among n ranks: its host latency
// path beats a step-synchronised ring on the GPU there (ring_facts.c).
uint64_t ring_device_small_bytes(int n);

#endif
