// nccl_test.h: the harness of nccl_api_test (fork N ranks, run named cases,
// collect each rank's first failure) and the checks the cases use. Written
// against nccl.h and cuda_runtime.h only: it tests whichever libnccl.so.2
// and libcudart.so.13 the loader finds.
#ifndef NCCL_TEST_H
#define NCCL_TEST_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nccl.h>

#define NT_MAX_RANKS 64
#define NT_MAX_IDS 6 // unique ids the parent makes for one case

// One rank's verdict, in memory shared with the parent (survives exec).
struct nt_slot {
    int failures;      // checks failed so far (count)
    int expect_killed; // the rank is about to SIGKILL itself on purpose
    char first[480];   // the first failure: "file:line: what"
};

struct nt_shared {
    struct nt_slot slot[NT_MAX_RANKS];
    _Atomic unsigned barrier_arrived; // nt_barrier: processes in the current round
    _Atomic unsigned barrier_round;   // rounds completed
};

// What a case sees on one rank.
struct nt_ctx {
    int rank;                     // this process's rank in [0, nranks)
    int nranks;                   // processes forked for the case
    int device;                   // CUDA device made current before the case
    cudaStream_t stream;          // a stream of the rank's own
    ncclUniqueId ids[NT_MAX_IDS]; // fresh ids made by the parent, in order
    struct nt_shared *shared;     // the verdicts
    const char *case_name;
};

// A case runs on every rank (or in one process, NT_ONE_PROCESS) and returns 0,
// or -1 after a failure it cannot go on from; soft failures are only counted.
typedef int (*nt_case_fn)(struct nt_ctx *ctx);

enum {
    NT_ONE_PROCESS = 1, // one process drives all nranks communicators
};

struct nt_case {
    const char *name;
    nt_case_fn fn;
    int min_ranks;    // skipped below this many ranks
    int ids;          // unique ids to make in the parent (<= NT_MAX_IDS)
    int flags;        // NT_ONE_PROCESS
    const char *env;  // "NAME=VALUE" the ranks need at load: they exec themselves with it
    const char *what; // one line for --list
};

// ---- failures ----
// nt_fail records a failure of this rank (the first one kept for the
// report, each printed to stderr with [rank R]) and returns -1.
int nt_fail(struct nt_ctx *ctx, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
// nt_fail_nccl: a call that returned rc where ncclSuccess was due; names the
// call, the code's string and ncclGetLastError(comm).
int nt_fail_nccl(struct nt_ctx *ctx, const char *file, int line, const char *call, ncclResult_t rc,
                 ncclComm_t comm);
int nt_fail_cuda(struct nt_ctx *ctx, const char *file, int line, const char *call, cudaError_t rc);

// Hard checks: on failure, return -1 from the calling case.
#define NT_NCCL(ctx, comm, call)                                                                   \
    do {                                                                                           \
        ncclResult_t nt_rc_ = (call);                                                              \
        if (nt_rc_ != ncclSuccess)                                                                 \
            return nt_fail_nccl((ctx), __FILE__, __LINE__, #call, nt_rc_, (comm));                 \
    } while (0)
#define NT_CUDA(ctx, call)                                                                         \
    do {                                                                                           \
        cudaError_t nt_ce_ = (call);                                                               \
        if (nt_ce_ != cudaSuccess)                                                                 \
            return nt_fail_cuda((ctx), __FILE__, __LINE__, #call, nt_ce_);                         \
    } while (0)
#define NT_REQUIRE(ctx, cond, ...)                                                                 \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return nt_fail((ctx), __FILE__, __LINE__, __VA_ARGS__);                                \
    } while (0)
// Soft check: counted, and the case goes on (the ranks stay in step).
#define NT_EXPECT(ctx, cond, ...)                                                                  \
    do {                                                                                           \
        if (!(cond))                                                                               \
            (void)nt_fail((ctx), __FILE__, __LINE__, __VA_ARGS__);                                 \
    } while (0)
// The call returns exactly want (soft).
#define NT_EXPECT_RC(ctx, call, want)                                                              \
    do {                                                                                           \
        ncclResult_t nt_rc_ = (call);                                                              \
        if (nt_rc_ != (want))                                                                      \
            (void)nt_fail((ctx), __FILE__, __LINE__, "%s returned %s (%d), expected %s", #call,    \
                          ncclGetErrorString(nt_rc_), (int)nt_rc_, #want);                         \
    } while (0)

// ---- helpers (harness.c) ----
// nt_comm_init: ncclCommInitRank(comm, nranks, ids[id_index], rank), checked.
int nt_comm_init(struct nt_ctx *ctx, ncclComm_t *comm, int id_index);
// nt_dev_alloc: cudaMalloc'd buffer of bytes (at least 1), filled with
// copies of the host bytes src (src may be NULL: filled with NT_SENTINEL).
// NULL after a recorded failure.
void *nt_dev_alloc(struct nt_ctx *ctx, size_t bytes, const void *src);
#define NT_SENTINEL 0xA5
// nt_dev_read: the device buffer's bytes into host (synchronous); -1 on failure.
int nt_dev_read(struct nt_ctx *ctx, void *host, const void *dev, size_t bytes);
// nt_sync: cudaStreamSynchronize(ctx->stream), checked.
int nt_sync(struct nt_ctx *ctx);
// nt_untouched: every byte of dev (bytes long) still NT_SENTINEL; else a
// soft failure naming what and the first changed byte. Returns 0 or -1.
int nt_untouched(struct nt_ctx *ctx, const void *dev, size_t bytes, const char *what);
// nt_barrier: waits until every rank of the case has called it (the
// harness's own shared memory, nothing of NCCL's), for ordering a test's
// steps between ranks. Bounded only by the case's time limit.
void nt_barrier(struct nt_ctx *ctx);
// nt_now_s: a monotonic clock in seconds.
double nt_now_s(void);
// nt_names_rank: msg names "rank R" (R not followed by another digit).
int nt_names_rank(const char *msg, int rank);

// ---- data (data.c) ----
// nt_pattern: bytes that are a function of (rank, tag, index), never all
// NT_SENTINEL; nt_pattern_new: the same in a new host buffer (free it), NULL
// after a recorded failure.
void nt_pattern(unsigned char *buf, size_t bytes, int rank, unsigned tag);
unsigned char *nt_pattern_new(struct nt_ctx *ctx, size_t bytes, int rank, unsigned tag);
// nt_expect_bytes: the device buffer dev holds want (bytes long), else a soft
// failure naming what and the first wrong byte; -1 only when dev cannot be read.
int nt_expect_bytes(struct nt_ctx *ctx, const void *dev, const unsigned char *want, size_t bytes,
                    const char *what);

// ---- checked collectives shared by the case files (cases_move.c) ----
// Each runs one collective of count elements of type on comm and checks the
// result (soft); -1 when the ranks cannot go on. broadcast's form: 0
// ncclBroadcast out of place, 1 in place, 2 ncclBcast.
int nt_check_allgather(struct nt_ctx *ctx, ncclComm_t comm, ncclDataType_t type, size_t count,
                       int inplace);
int nt_check_broadcast(struct nt_ctx *ctx, ncclComm_t comm, ncclDataType_t type, size_t count,
                       int root, int form);
int nt_check_alltoall(struct nt_ctx *ctx, ncclComm_t comm, ncclDataType_t type, size_t count);

// ---- the cases (one table per file) ----
extern const struct nt_case nt_cases_reduce[];
extern const struct nt_case nt_cases_move[];
extern const struct nt_case nt_cases_p2p[];
extern const struct nt_case nt_cases_comm[];
extern const struct nt_case nt_cases_fault[];

#endif
