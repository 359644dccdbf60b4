// vnccl.h: vgpu's NCCL (libnccl.so.2 served by vgpu), its insides. The
// public interface is NCCL's own nccl.h; this header is what the library's
// files share: a communicator, its shared segment, the engine's calls.
//
// Ranks of one communicator are processes (or threads) of one host. They meet
// in a shared-memory segment named from the unique id (vnccl_join.c), and
// every collective goes through it: each rank copies its input into its own
// stage area, the ranks reduce (or copy) out of each other's stages, and
// barriers of per-rank counters order the phases (vnccl_coll.c). User
// buffers are touched only by copies through the CUDA runtime when the
// process has one (vnccl_cuda.c), so device memory and host memory both work,
// and the simulated runtime's tests test the GPU path's code.
#ifndef VGPU_VNCCL_H
#define VGPU_VNCCL_H

#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm_flag.h"

#define VNCCL_ID_MAGIC 0x3130434e55504756ull // "VGPUNC01"
#define VNCCL_SEG_MAGIC 0x3130474553434e56ull // "VNCSEG01"
#define VNCCL_MAX_RANKS 4096

// The 128 bytes of an ncclUniqueId as vgpu makes them.
struct vnccl_id {
    uint64_t magic;      // VNCCL_ID_MAGIC
    uint64_t machine;    // hash of the maker's boot id: ranks of another host are refused
    uint64_t nonce[2];   // random: names the segment
    uint32_t maker_pid;  // for messages
    char pad[NCCL_UNIQUE_ID_BYTES - 36];
};
_Static_assert(sizeof(struct vnccl_id) == NCCL_UNIQUE_ID_BYTES, "id is NCCL's size");

// What a rank says its current collective is; every rank compares all of
// them before writing any output.
struct vnccl_desc {
    uint32_t kind;   // enum vnccl_kind
    uint32_t dtype;  // ncclDataType_t
    uint32_t op;     // ncclRedOp_t, premultiplied sums all as ncclNumOps
    int32_t root;    // rooted collectives, else -1
    uint64_t count;  // as the call says it
    uint64_t seq;    // collectives on this communicator so far
};

// One rank's slot in the segment (two cache lines a counter, so one rank's
// publishing does not evict another's).
struct vnccl_slot {
    _Atomic uint32_t pid;    // the process that claimed the rank (0: free)
    int32_t device;          // its CUDA device at init (-1: none)
    char bus_id[24];         // that device's PCI bus id ("" without one)
    struct vnccl_desc desc;  // its current collective
    char pad_[128 - 4 - 4 - 24 - sizeof(struct vnccl_desc)];
    struct shm_flag step;    // barriers passed
    char pad2_[128 - sizeof(struct shm_flag)];
} __attribute__((aligned(128)));

// A point-to-point channel from one rank to another: the sender writes a
// chunk into its slice of the p2p area when the receiver has taken the last.
struct vnccl_chan {
    struct shm_flag sent;      // bytes written, all messages
    struct shm_flag taken;     // bytes taken by the receiver
    _Atomic uint64_t msg_len;  // the current message's length, bytes
    _Atomic uint64_t msg_at;   // where in `sent` it started, bytes
    char pad_[64 - 2 * sizeof(uint64_t)];
} __attribute__((aligned(64)));

// The segment's first page.
struct vnccl_head {
    _Atomic uint64_t magic;   // VNCCL_SEG_MAGIC once the maker filled the rest
    uint32_t nranks;
    uint32_t pad0;
    uint64_t stage_bytes;     // each rank's stage (and its p2p area), bytes
    uint64_t total_bytes;     // the segment, bytes
    _Atomic uint32_t joined;  // ranks that claimed their slot
    _Atomic uint32_t opened;  // processes that opened the segment, count
    _Atomic uint32_t left;    // ...and that have left it, count
    _Atomic uint32_t nranks_min, nranks_max; // the rank counts they were given (vnccl_join.c)
    _Atomic uint32_t fail_claim; // the first rank to fail it writes why and fail_status...
    _Atomic uint32_t failed;  // ...then sets this: nonzero, the communicator has failed
    _Atomic int32_t fail_status; // its ncclResult_t
    _Atomic uint32_t dc_closed; // ranks that closed the others' device-collective windows
    char why[476];            // the first failure, for every rank's message
};

enum vnccl_kind {
    VNCCL_ALL_REDUCE, VNCCL_REDUCE, VNCCL_REDUCE_SCATTER, VNCCL_ALL_GATHER, VNCCL_BROADCAST,
    VNCCL_ALL_TO_ALL, VNCCL_GATHER, VNCCL_SCATTER, VNCCL_SEND, VNCCL_RECV, VNCCL_KIND_COUNT
};

// A premultiplied sum made by ncclRedOpCreatePreMulSum.
struct vnccl_premul {
    int used;
    ncclDataType_t dtype;
    ncclScalarResidence_t residence;
    unsigned char value[8];  // host immediate: the scalar itself
    const void *device_ptr;  // device residence: read at each call
};
#define VNCCL_MAX_PREMUL 64

struct ncclComm {
    uint64_t magic;            // VNCCL_COMM_MAGIC while alive
    int rank, nranks;
    int device;                // CUDA device at init (-1: none)
    struct vnccl_id id;
    char name[64];             // the segment's name
    char label[64];            // config's commName, or "" (messages)
    struct vnccl_head *head;
    struct vnccl_slot *slots;  // [nranks]
    struct vnccl_chan *chans;  // [nranks * nranks], from * nranks + to
    char *stage;               // [nranks] stages of stage_bytes
    char *p2p;                 // [nranks] p2p areas of stage_bytes
    char *result;              // stage_bytes: the all-reduce's reduced chunk
    uint64_t map_bytes;
    uint64_t step;             // barriers this rank passed
    uint64_t seq;              // collectives issued
    uint64_t splits;           // splits and shrinks made from it (names their segments)
    uint64_t *p2p_sent;        // [nranks] bytes this rank sent to each peer
    uint64_t *p2p_taken;       // [nranks] bytes this rank took from each peer
    double timeout_s;
    unsigned spin_count;       // polls before a wait yields its core (few when ranks outnumber cores)
    int blocking;
    _Atomic int async_error;   // ncclResult_t: ncclInProgress while a nonblocking init runs
    int finalized, revoked;
    pthread_t init_thread;
    int init_thread_live;      // under lock: a watchdog thread may ask while the main one calls
    pthread_mutex_t lock;
    _Atomic int busy;          // calls in progress (ncclCommAbort from another thread waits)
    _Atomic int aborted;       // ncclCommAbort was called: a creation still meeting its peers stops
    struct vnccl_premul premul[VNCCL_MAX_PREMUL];
    char last_error[512];
    // measured collectives (ncclGroupSimulateEnd's estimate)
    double stat_n, stat_x, stat_y, stat_xx, stat_xy;
    struct devcoll *dc;        // the device collectives (vnccl_devcoll.c); NULL: staged only
    int dc_said;               // what they met has been said (and recorded) on this rank
};
#define VNCCL_COMM_MAGIC 0x4d4d4f434c43434eull

// ---- vnccl_types.c: types and reductions ----
size_t vnccl_type_size(ncclDataType_t t); // 0: not a type
const char *vnccl_type_name(ncclDataType_t t);
const char *vnccl_op_name(ncclRedOp_t op);
// acc[i] = acc[i] op x[i] for n elements (op: ncclSum..ncclAvg; avg and
// premultiplied sums reduce as sums); last_div != 0: divide the result by it
// afterwards (avg's last step).
void vnccl_reduce(void *acc, const void *x, size_t n, ncclDataType_t t, ncclRedOp_t op,
                  int last_div);
// x[i] = scalar * x[i], rounded to the type; scalar is one element of type t.
void vnccl_scale(void *x, size_t n, ncclDataType_t t, const void *scalar);
// ncclAvg as NCCL computes it: integer types divide the sum by the rank count
// (1 here: vnccl_reduce's last_div); floating types are a premultiplied sum,
// each rank's x[i] times 1/nranks (the scalar rounded to the type, fp8's to
// a half), so the sum of large values cannot overflow or saturate first.
int vnccl_avg_divides(ncclDataType_t t);
void vnccl_scale_avg(void *x, size_t n, ncclDataType_t t, int nranks);

struct vnccl_call;
struct devcoll;

// ---- vnccl_cuda.c: user buffers through the process's CUDA runtime ----
// Copies bytes from src to dst (either device or host memory) in order on
// stream and waits for it. 0 or ncclUnhandledCudaError (message in err).
ncclResult_t vnccl_copy(void *dst, const void *src, size_t bytes, cudaStream_t stream,
                        char *err, size_t err_bytes);
// ncclInvalidUsage (why in err) when the stream is being captured into a CUDA
// graph: the staged calls wait for the stream, which a capture forbids.
ncclResult_t vnccl_stream_usable(cudaStream_t stream, char *err, size_t err_bytes);
// The current CUDA device and its PCI bus id; -1 and "" without CUDA.
int vnccl_current_device(char *bus_id, size_t bus_bytes);
void vnccl_set_device(int device);
ncclResult_t vnccl_device_alloc(void **ptr, size_t bytes);
ncclResult_t vnccl_device_free(void *ptr);
// The program's CUDA runtime (dlopen's handle) where one answers with a
// device; NULL where copies go through the driver or host memory.
void *vnccl_runtime_handle(void);
// Waits for the work queued on stream (nothing to wait for in host memory).
ncclResult_t vnccl_stream_wait(cudaStream_t stream);

// ---- vnccl_devcoll.c: the device collectives, where ranks share one GPU ----
// Collective over the communicator, after the ranks have met: sets c->dc
// where every rank takes them (else it stays NULL: the staged engine).
ncclResult_t vnccl_devcoll_setup(struct ncclComm *c);
void vnccl_devcoll_teardown(struct ncclComm *c);
// Queues the call on them and returns 1 (its status in *st), or 0 where
// they do not carry it; a collective they do not carry is marked in their
// sequence first (devcoll_mark), so that ranks whose calls differ fail
// together, whichever path each call took (*st, returning 1).
int vnccl_devcoll_call(struct ncclComm *c, const struct vnccl_call *k, ncclResult_t *st);
// What the kernels met so far (the communicator fails with it), or ncclSuccess.
ncclResult_t vnccl_devcoll_error(struct ncclComm *c);

// ---- vnccl_join.c: ids, segments, waits ----
ncclResult_t vnccl_make_id(struct vnccl_id *id);
// Derives the id of a communicator made from `parent` (a split or a shrink):
// every member computes the same one.
void vnccl_derive_id(const struct vnccl_id *parent, uint64_t seq, int64_t color,
                     struct vnccl_id *out);
// Joins the communicator of id as rank of nranks: fills c (allocated by the
// caller, zeroed); on failure c holds the message in last_error.
ncclResult_t vnccl_join(struct ncclComm *c, int nranks, const struct vnccl_id *id, int rank);
void vnccl_leave(struct ncclComm *c);
// Waits until flag >= target, watching the communicator: a failed or
// aborted peer, a dead process, the timeout. peer: whom it waits for.
ncclResult_t vnccl_wait(struct ncclComm *c, struct shm_flag *flag, uint64_t target, int peer,
                        const char *what);
// Fails the communicator when the process of rank `peer` (-1: of any rank)
// is gone (exited, or a zombie); returns its rank, or -1. Only the peer a
// wait is for counts: a rank that has finished and exited while a slower one
// still waits for another is no failure.
int vnccl_watch(struct ncclComm *c, int peer, const char *what);
// ncclSuccess, or the status of the communicator's failure (any rank's).
ncclResult_t vnccl_failure(const struct ncclComm *c);
// Marks the communicator failed for every rank (the first reason stays).
void vnccl_fail(struct ncclComm *c, ncclResult_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Records an error in c's last error (and the thread's), says it on stderr.
ncclResult_t vnccl_error(struct ncclComm *c, ncclResult_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// The calling thread's last error message ("" if none): ncclGetLastError(NULL).
const char *vnccl_thread_error(void);
const char *vnccl_kind_name(enum vnccl_kind k);

// ---- vnccl_coll.c: the collectives and point-to-point ----
struct vnccl_call {
    enum vnccl_kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dtype;
    ncclRedOp_t op;
    int root;   // rooted collectives; the peer of send/recv
    cudaStream_t stream;
};
ncclResult_t vnccl_collective(struct ncclComm *c, const struct vnccl_call *call);
// Runs point-to-point calls together until every one is done (a group's).
ncclResult_t vnccl_p2p(struct ncclComm *c, const struct vnccl_call *calls, int n);
// The host all-gather of `bytes` from every rank into out[nranks * bytes]
// (splits agree on colors through it).
ncclResult_t vnccl_host_all_gather(struct ncclComm *c, const void *mine, void *out,
                                   size_t bytes);

// Seconds a call would take, from this communicator's measured collectives
// (a least-squares line over their bytes); 0 before it has run one.
double vnccl_estimate_s(const struct ncclComm *c, const struct vnccl_call *call);

// Waits for a non-blocking creation's thread, once, whichever thread asks.
void vnccl_finish_init(struct ncclComm *c);

// ---- vnccl_group.c ----
// Inside ncclGroupStart/End the call (or the initialisation) is queued
// (returns 1), else 0.
int vnccl_group_queue(struct ncclComm *c, const struct vnccl_call *call);
int vnccl_group_queue_init(struct ncclComm *c, int nranks, const struct vnccl_id *id, int rank);
int vnccl_group_depth(void);
void vnccl_group_start(void);
// A call of the group failed its checks: the whole group fails at its End (as NCCL's).
void vnccl_group_fail(ncclResult_t st);
// The outermost End runs the queue (simulate: only estimates it, seconds).
ncclResult_t vnccl_group_end(int simulate, float *estimate_s);

#endif
