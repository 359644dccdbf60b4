// ring_internal.h: the ring collectives' engine, which runs on its windows
// (host memory, or device memory through ring_mem.h) and knows nothing of
// devices or of how the segments were set up (comm_ring.c does that). Shared
// by the engine's files, the backend's (comm_ring.c, ring_calls.c) and the
// engine's unit tests. The engine in layers: ring_core.c's primitives (waits,
// transfers, reductions); the algorithms, a file each, built of them
// (ring_ring.c, ring_shot.c, ring_direct.c; and ring_gather.c's all-gather and
// broadcast); ring_algo.c's table, the one place that chooses among the
// all-reduces and calls them.
//
// Every rank sits at one position of a ring; it only ever READS from its left
// neighbour and is only ever read by its right neighbour. A same-host
// neighbour's "window" (its arena, or its staging segment) is mapped here, so
// data moves with a single copy straight out of the neighbour's buffer; a
// neighbour on another host is reached with MPI point-to-point messages.
//
// Synchronisation: each rank owns a 64-bit progress counter in the shared
// control segment, the number of ring steps it has completed since the
// communicator was created. All ranks run the same steps in the same order,
// so "left has done step X" is simply left.progress >= X. See
// docs/COLLECTIVES.md for the schedule and why each wait is needed.
#ifndef VGPU_RING_INTERNAL_H
#define VGPU_RING_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "ring_algos.h"
#include "ring_mem.h"
#include "shm_flag.h"

// What a rank's collective is, in its slot's `calls` (low 2 bits).
enum ring_kind { RING_KIND_ALL_REDUCE, RING_KIND_ALL_GATHER, RING_KIND_BROADCAST,
                 RING_KIND_ALL_REDUCE_UPDATE };

// One rank's part of the control segment; two cache lines so that one rank's
// publishing never evicts another's counter from a waiter's cache.
struct ring_slot {
    struct shm_flag progress;   // ring steps completed, steps
    _Atomic uint64_t send_off;  // current collective: send buffer, bytes from window start
    _Atomic uint64_t recv_off;  // current collective: recv buffer, bytes from window start
    _Atomic uint64_t stride;    // current all-gather: bytes between rank blocks of recv;
                                // all-reduce: its size, bytes (RING_LEFT_CALL: failed in it)
    _Atomic uint64_t calls;     // collectives entered, with the kind in the low 2 bits
    char pad_[128 - sizeof(struct shm_flag) - 4 * sizeof(uint64_t)];
} __attribute__((aligned(128)));

// One neighbour as seen from this rank.
struct ring_link {
    int rank;                // its rank in the communicator
    int local;               // 1: same host (shared memory); 0: MPI messages
    struct ring_slot *slot;  // its control slot (local only)
    const char *win;         // its window mapped into this process (left and local only)
    uint64_t win_bytes;      // size of that mapping, bytes
};

// The latency path (ring_shot.c): collectives too small for the ring's
// 2(n-1) hand-overs, among ranks that are all on one host and use host
// windows. Every rank has a scratch area in the host's control segment,
// which all of them map: a collective copies its input there, announces
// it (one step), and every rank reduces straight out of the others'
// scratch. Two buffers a rank, used in turn (see ring_shot.c for why two
// suffice). Which sizes it carries: ring_algo.c.
struct ring_shot {
    struct ring_slot *slot;  // position q's control slot is slot[q] (one host: positions are slots)
    char *scratch;           // position q's scratch at scratch + q * stride
    uint64_t stride;         // bytes between two positions' scratch areas
    uint64_t buf_bytes;      // one of its two buffers, bytes (header, input, output)
    uint64_t cap_bytes;      // the largest collective it carries, bytes
    uint64_t calls;          // collectives it has carried, count
};

// The all-reduce algorithms, ring_algos.h's rows in their order
// (ring_algo.c: which takes which call). VGPU_RING_ALGO names one
// (RING_ALGO_AUTO: by the table).
#define RING_ALGO_ENUM_(ID, id, name) RING_ALGO_##ID,
enum ring_algo { RING_ALGO_AUTO = -1, RING_ALGOS(RING_ALGO_ENUM_) RING_ALGO_COUNT };
#undef RING_ALGO_ENUM_

// Which sizes each algorithm takes on one ring (ring_algo_tune, then the
// smallest of every rank's): algorithm a takes a call of fewer than
// end_bytes[a] bytes (UINT64_MAX: every size; 0: none) that no algorithm
// before it in ring_algo.c's order took; the ring takes the rest.
struct ring_tune {
    uint64_t end_bytes[RING_ALGO_COUNT]; // by enum ring_algo, bytes
};

// Bytes of scratch one rank needs for collectives of up to cap_bytes among
// n ranks (its stride).
uint64_t ring_shot_stride(uint64_t cap_bytes, int n);

struct ring_core;
// Called at half the timeout (timed_out = 0) and at the timeout (1) of a
// wait for rank `peer`; prints the diagnostics (may be NULL: silent).
typedef void (*ring_report_fn)(struct ring_core *r, int peer, int timed_out, double waited_s);

struct ring_core {
    int pos;                 // this rank's position in the ring
    int size;                // ranks in the ring
    const int *order;        // ring position -> communicator rank, [size]
    int rank;                // this rank in the communicator
    struct ring_link left, right;
    struct ring_slot *me;    // this rank's control slot
    char *win;               // this rank's window; offsets are from here
    const struct ring_mem_ops *mem; // how its windows are touched; NULL = host memory
    uint64_t win_bytes;      // its size, bytes
    uint64_t progress;       // steps completed (what me->progress says), steps
    uint64_t calls;          // collectives entered, calls
    uint64_t slice_bytes;    // data moved per ring step, bytes
    char *landing;           // receives a remote left's chunk before reducing it: two buffers
    uint64_t landing_bytes;  // the size of one, bytes (>= one chunk)
    uint64_t msg_bytes;      // a step over an MPI link goes as messages of at most this, bytes
    MPI_Request *reqs;       // RING_XFERS transfers' requests, xfer_parts each (MPI links only)
    int xfer_parts;          // messages in one transfer, at most
    MPI_Comm mpi;            // for remote links (MPI_COMM_NULL when every link is local)
    double timeout_s;        // bound on every wait, seconds
    unsigned spin_count;     // polls before yielding, iterations
    double yield_s;          // then yields between polls for this long before sleeping, s
    int broken;              // a wait timed out: the ring state is unusable
    double waited_s;         // time spent waiting for a same-host neighbour's progress, seconds
    struct ring_tune tune;   // which algorithm takes which all-reduce (ring_algo.c); zero: the ring
    struct ring_shot *shot;  // the latency path; NULL where it does not apply
    const struct ring_link *all; // every position's link, its window mapped writable (the
                             // direct all-reduce: one host, host windows); [size], all[pos]
                             // is this rank; NULL where it does not apply
    ring_report_fn report;   // diagnostics for slow/missing peers
    void *report_arg;        // for report
    const int *world;        // the job's rank of each rank, for the flight recorder; NULL: the same
};

// Transfers over MPI links in flight at once (RING_XFERS): the
// all-reduce's sends of two steps, alternating between two slots so that one
// step's may still be in flight while the next is posted, and one receive.
enum { RING_XFER_SEND_EVEN, RING_XFER_SEND_ODD, RING_XFER_RECV, RING_XFERS };

// A step to or from a remote neighbour goes as messages of at most
// msg_bytes (0: the step's bytes in one message), all posted at once. Why:
// Open MPI's TCP transport sends a message above its eager limit (64 KiB)
// only once the receiver answers its request to send, and that answer
// leaves behind whatever the receiver is itself sending on its link: in a
// ring, a step's worth of data. Every rank must cut alike (the receiver
// posts a receive a message). Allocates the requests for steps of up to
// r->landing_bytes (a chunk: set that first); 0 (or UINT64_MAX) is a step in
// one message. Returns 0, VGPU_ENOMEM, or VGPU_EINVAL (more messages a step
// than an int counts).
int ring_core_set_messages(struct ring_core *r, uint64_t msg_bytes);
void ring_core_free_messages(struct ring_core *r);

// Elements (of elem_bytes each) of an all-reduce round (all ranks agree: it
// depends on slice, size and type).
uint64_t ring_round_elems(const struct ring_core *r, size_t elem_bytes);

// [*lo, *hi) of chunk c (0..parts-1) of a round of n elements: balanced, and
// aligned to 16 elements so that two ranks never write one cache line.
void ring_chunk(uint64_t n, int parts, int c, uint64_t *lo, uint64_t *hi);

// ---- the collectives (all-reduce, barrier: ring_algo.c; the update form:
// ring_ring.c; all-gather, broadcast: ring_gather.c) ----

// The collectives on the windows (host memory, or device memory through
// r->mem). Pointers lie inside r->win (their offsets are published to the
// right neighbour), except where a length is 0.
// Return 0, VGPU_ETIMEOUT (reported through r->report; the ring is broken
// from then on) or VGPU_ECOMM (an MPI failure, or called on a broken ring).
//
// recv = op(send over ranks), count elements of type t; send == recv is the
// in-place form.
int ring_core_all_reduce(struct ring_core *r, const void *send, void *recv, uint64_t count,
                         enum comm_dtype t, enum comm_reduce_op op);
// The all-reduce with a sharded update: grads (in place) are summed over the
// ranks, but each range [lo, lo + n) of the result is complete on one rank
// only, which calls update(ctx, lo, n) on it (lo in floats from grads); the
// ranges cover [0, count) once over all ranks. The ranks' `params` ranges
// are then all-gathered, so params end identical everywhere. update runs
// before any peer reads those params; grads hold the sum only in this
// rank's ranges afterwards.
typedef int (*ring_update_fn)(void *ctx, uint64_t lo, uint64_t n);
int ring_core_all_reduce_update(struct ring_core *r, float *grads, float *params, uint64_t count,
                                ring_update_fn update, void *ctx);
// Rank q's `bytes` land at recv + q * stride (stride >= bytes); send may be
// recv + rank * stride (in place).
int ring_core_all_gather(struct ring_core *r, const char *send, char *recv, uint64_t bytes,
                         uint64_t stride);
// buf of ring position root_pos is copied into everyone's buf.
int ring_core_broadcast(struct ring_core *r, char *buf, uint64_t bytes, int root_pos);
// Returns once every rank has entered the barrier.
int ring_core_barrier(struct ring_core *r);

// ---- the choice (ring_algo.c) ----

// What the choice depends on besides a call's size: the same on every rank
// once the set-up has agreed them.
struct ring_algo_facts {
    int ranks;             // in the ring
    int one_host;          // every rank on this host, with host windows (the latency
                           // path and direct read the others' memory)
    int oversubscribed;    // this machine runs more of the job's ranks than it has cores
    int direct;            // every rank's window mapped writable here (agreed)
    enum ring_algo forced; // VGPU_RING_ALGO (RING_ALGO_AUTO: by measurement)
};
// The sizes each algorithm takes with these facts (*out zero: the ring alone).
void ring_algo_tune(struct ring_tune *out, const struct ring_algo_facts *f);
// Whether this rank would have direct run (f->direct ignored): the set-up
// maps every window where every rank would.
int ring_algo_direct_wanted(const struct ring_algo_facts *f);
// The largest all-reduce the latency path's scratch must hold, bytes (0: none).
uint64_t ring_algo_scratch_bytes(const struct ring_tune *t);
// VGPU_RING_ALGO as this rank reads it.
enum ring_algo ring_algo_forced(void);
// The algorithm ring_core_all_reduce uses for `bytes` (all ranks choose alike).
enum ring_algo ring_algo_for(const struct ring_core *r, uint64_t bytes);
const char *ring_algo_name(enum ring_algo a);

// ---- the all-reduce algorithms, a file each ----

// An algorithm's all-reduce: ring_core_all_reduce's contract, r not broken.
typedef int (*ring_all_reduce_fn)(struct ring_core *r, const char *send, char *recv,
                                  uint64_t count, enum comm_dtype t, enum comm_reduce_op op);

// An all-reduce algorithm: its file defines `const struct ring_algo_desc
// ring_<id>_algo` for its row in ring_algos.h, and nothing else names it.
// What VGPU_RING_ALGO=<its name> makes it carry is here (ring_algo.c
// generates the forced sizes from it); which sizes it takes by itself is
// ring_algo.c's measured table, where it has a column only where it wins.
struct ring_algo_desc {
    ring_all_reduce_fn all_reduce;
    // Whether it can run this call on this ring (checked at each call, after
    // the sizes; every rank answers alike). NULL: every ring, every size.
    int (*usable)(const struct ring_core *r, uint64_t bytes);
    uint64_t forced_max_bytes; // forced: the largest call it carries (the ring takes larger),
                               // bytes; UINT64_MAX: every size
    uint64_t forced_min_bytes; // forced: the smallest; smaller calls go to the algorithms
                               // before it in ring_algos.h (two-shot: a barrier, 0 bytes,
                               // has nothing to split), bytes
    int scratch;               // 1: carried through the latency path's scratch (struct
                               // ring_shot), which is sized for the largest such call
    int all_windows;           // 1: needs every rank's window mapped writable here
                               // (ring_algo_facts.direct); forced where that is not, the ring
};
#define RING_ALGO_DECLARE_(ID, id, name) extern const struct ring_algo_desc ring_##id##_algo;
RING_ALGOS(RING_ALGO_DECLARE_)
#undef RING_ALGO_DECLARE_

// The ring (ring_ring.c): reduce-scatter then all-gather; any ring, any size.
// The latency path (ring_shot.c: one-shot, two-shot): on host windows, where
// r->shot is set up with scratch for the call. The direct all-reduce
// (ring_direct.c): every rank on this host with host windows, each mapped
// writable here (r->all), at most RING_DIRECT_MAX_RANKS of them.
#define RING_DIRECT_MAX_RANKS 64
// A rank that fails inside a direct all-reduce says so in its slot's
// `stride`, so that no peer still checking writes into its buffers.
#define RING_LEFT_CALL UINT64_MAX

// ---- the primitives the algorithms are built of (ring_core.c) ----

// a mod n, in [0, n).
static inline int ring_mod(int64_t a, int n) { return (int)(((a % n) + n) % n); }

// Waits until the rank `rank` whose slot this is has completed `target`
// steps (bounded by r->timeout_s; VGPU_ETIMEOUT breaks the ring).
int ring_wait(struct ring_core *r, struct ring_slot *slot, int rank, uint64_t target);
// The same for a same-host neighbour.
int ring_wait_link(struct ring_core *r, const struct ring_link *l, uint64_t target);
// Waits for what this rank issued (nothing to wait for on host memory).
int ring_settle(struct ring_core *r);
// Enters a collective of `kind` (enum ring_kind): publishes its buffers
// (inside r->win, or NULL) and `stride` (all-gather: bytes between rank
// blocks; all-reduce: its size), then "arrived" (one step).
int ring_arrive(struct ring_core *r, int kind, const void *send, const void *recv,
                uint64_t stride);
// Tells the others this rank has done `value` steps: only once what the
// steps wrote is there (device windows: settled).
int ring_publish(struct ring_core *r, uint64_t value);
// dst = mine op theirs (n elements of type t), divided by avg_div where it
// is not 0; dst may be mine.
int ring_reduce(struct ring_core *r, enum comm_dtype t, enum comm_reduce_op op, char *dst,
                const char *mine, const char *theirs, uint64_t n, int avg_div);
// bytes from src to dst (which may overlap).
int ring_copy(struct ring_core *r, void *dst, const void *src, uint64_t bytes);
// Same-host peer l's buffer at its published offset `off`, after checking
// that it is in this rank's collective and that `bytes` from there lie
// inside its window: a rank that called with other sizes than its
// neighbours must fail, not read past a mapping. Returns 0 or VGPU_ECOMM.
int ring_peer_ptr(struct ring_core *r, const struct ring_link *l, uint64_t off, uint64_t bytes,
                  const char **out);

// A transfer: one step's messages to or from a remote neighbour.
struct ring_xfer {
    MPI_Request *req; // parts requests (MPI_REQUEST_NULL once complete)
    int parts;        // messages posted, count
};
// Transfer slot k (RING_XFER_*), with no messages (none at all on a ring
// without MPI links: it has no requests).
struct ring_xfer ring_xfer_slot(struct ring_core *r, int k);
// Posts bytes of buf to the right neighbour, or from the left one into buf
// (in messages of r->msg_bytes; 0 bytes: one empty message, which still
// carries the step's "I am done"). 0 or VGPU_ECOMM.
int ring_xfer_send(struct ring_core *r, struct ring_xfer *x, const void *buf, uint64_t bytes);
int ring_xfer_recv(struct ring_core *r, struct ring_xfer *x, void *buf, uint64_t bytes);
// Completes a transfer with rank `peer` within the timeout: 0,
// VGPU_ETIMEOUT or VGPU_ECOMM (the ring is broken).
int ring_xfer_wait(struct ring_core *r, struct ring_xfer *x, int peer);
// Receives bytes from the remote left into buf and waits for them.
int ring_recv_left(struct ring_core *r, void *buf, uint64_t bytes);

#endif
