// comm.h: collectives between the job's virtual GPUs. Backends (ring, mpi,
// nccl) are struct comm_ops tables (comm_internal.h), chosen in choose.c;
// programs reach them through libvgpu's public API (vgpu/vgpu.h), never
// through this header.
//
// Contract: every rank of the communicator calls the same collectives in the
// same order with the same sizes (point-to-point, comm_send and comm_recv,
// involves only its two ranks). Buffers are device buffers of the comm's
// device. Calls block until the result is in the output buffer. Every wait is
// bounded by the configured timeout; a peer that does not arrive ends the job
// with a message naming it. Functions return 0 or a negative status.
#ifndef VGPU_COMM_H
#define VGPU_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"

typedef struct comm comm_t;

// Element types and reductions of the typed collectives, as NCCL's (avg of
// integers: the sum divided by the rank count, rounded toward zero; integer
// sums and products wrap around). COMM_FLOAT16 (IEEE binary16) and
// COMM_BFLOAT16 are 16-bit words: each reduction step converts both operands
// to float, applies the operation there and rounds back to nearest even (as
// NCCL's half reductions do); avg rounds the sum to the type, then divides
// it by the rank count in float and rounds again.
enum comm_dtype {
    COMM_FLOAT32,
    COMM_FLOAT64,
    COMM_INT32,
    COMM_INT64,
    COMM_FLOAT16,
    COMM_BFLOAT16,
    COMM_DTYPE_COUNT
};
enum comm_reduce_op { COMM_SUM, COMM_AVG, COMM_PROD, COMM_MIN, COMM_MAX, COMM_OP_COUNT };

// Bytes of one element (0 for a type that is not one); names ("float32",
// "bfloat16", "sum") for messages.
size_t comm_dtype_size(enum comm_dtype t);
const char *comm_dtype_name(enum comm_dtype t);
const char *comm_op_name(enum comm_reduce_op op);

struct comm_stats {
    uint64_t calls;        // collectives (and point-to-point calls) issued
    uint64_t bytes;        // payload bytes passed to collectives
    double seconds;        // time spent inside collectives
    // Of those, time spent waiting for peers to arrive (the ring: a same-host
    // neighbour's progress; across hosts, waits inside MPI transfers count as
    // moving data). wait_known = 0 where the backend cannot tell (mpi, nccl).
    double wait_seconds;
    int wait_known;
};

// Name of the backend in use ("ring", "mpi", "nccl").
const char *comm_backend_name(const comm_t *c);
int comm_rank(const comm_t *c);
int comm_size(const comm_t *c);

// recv[i] = op over ranks of send[i], count elements of type t, count >= 0.
// send == recv is the in-place form. Float sums are added in an order that
// depends on the backend and the rank count (not bitwise reproducible across
// them; comm_all_reduce_tree is).
int comm_all_reduce_typed(comm_t *c, const void *send, void *recv, size_t count,
                          enum comm_dtype t, enum comm_reduce_op op);
// The float32 form (count floats).
int comm_all_reduce(comm_t *c, const float *send, float *recv, size_t count,
                    enum comm_reduce_op op);
// NCCL's reduce-scatter: send holds size * recv_count elements; rank r
// receives in recv the reduction over ranks of block r of send (elements
// [r * recv_count, (r + 1) * recv_count)). recv may be send's block r (in
// place).
int comm_reduce_scatter(comm_t *c, const void *send, void *recv, size_t recv_count,
                        enum comm_dtype t, enum comm_reduce_op op);
// NCCL's reduce: recv on rank root = op over ranks of send, count elements
// of type t (every type and operation of the all-reduce); recv is neither
// read nor written on the other ranks (may be NULL there); send == recv on
// root is the in-place form. The ring's reduce is its all-reduce (into
// device scratch of the send's size on the ranks but root, the ranks
// agreeing first that every one has it: VGPU_EDEVMEM on all of them if
// not; the device collectives' own reduce, without scratch, where they
// run), so a reduce then a broadcast from root gives the all-reduce's bits;
// mpi and nccl take their library's reduce (MPI_Reduce, ncclReduce), equal
// to their all-reduce wherever the result is exact (integers, min, max,
// sums of exactly representable partials) and possibly rounded otherwise
// in float sums, products and averages. A root out of range, or a buffer
// that is not this device's memory: VGPU_EINVAL.
int comm_reduce(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                enum comm_reduce_op op, int root);
// Point-to-point, as NCCL's ncclSend/ncclRecv outside a group: `bytes` of
// buf (device memory) go to rank peer, which receives them with comm_recv
// of the same size from this rank; only the two ranks take part (the
// collectives' same-order contract does not cover these calls, but between
// one pair messages arrive in the order sent). Both block until buf may be
// reused (send) or holds the message (recv); the device collectives queue
// them on the device's stream instead, as their collectives. A send may
// wait for the matching recv (nothing is buffered by promise): ranks that
// exchange must order their calls (e.g. even ranks send first). Every wait is bounded by
// the timeout: VGPU_ETIMEOUT, with a message naming the peer, and the
// communicator is failed as after any timeout. peer out of range or this
// rank itself: VGPU_EINVAL (NCCL allows a self-send only inside a group;
// a device copy does it). Counted in comm_get_stats (calls, bytes, time)
// and in the timeline, but not in the flight recorder, whose numbers are
// of calls every rank makes.
int comm_send(comm_t *c, const void *buf, size_t bytes, int peer);
int comm_recv(comm_t *c, void *buf, size_t bytes, int peer);
// Copies `bytes` of root's buf into every rank's buf.
int comm_broadcast(comm_t *c, void *buf, size_t bytes, int root);
// recv = concatenation over ranks (in rank order) of each rank's `bytes` of send.
int comm_all_gather(comm_t *c, const void *send, void *recv, size_t bytes);
int comm_barrier(comm_t *c);

// A sharded optimizer step fused into the gradient all-reduce (ZeRO stage 1
// in spirit): grads (float32, in place) are summed over the ranks, and every
// range [first, first + count) of the sum is handed to update(ctx, first,
// count) on exactly one rank, which updates params there (and the optimizer
// state it keeps for that range); then the ranks' updated params ranges are
// all-gathered. Afterwards params are identical on every rank and each element
// was updated once, from the same summed gradient an all-reduce gives, so the
// result equals all-reduce + a full update on every rank; grads hold the sum
// only in this rank's ranges, and optimizer state is current only there.
// Which ranges a rank gets depends on the backend; a backend without a
// sharded form all-reduces and updates [0, count) on every rank.
typedef int (*comm_update_fn)(void *ctx, size_t first, size_t count);
int comm_all_reduce_update(comm_t *c, float *grads, float *params, size_t count,
                           comm_update_fn update, void *ctx);

// The deterministic all-reduce: the job holds `total` partial vectors of
// `count` floats (one per micro-batch), rank r the partials
// [first_r, first_r + parts_per_rank[r]) back to back in `parts` (device),
// first_r = sum of parts_per_rank[q] for q < r. Every rank receives in `out`
// their sum combined in the canonical tree of comm_tree_sum over the partial
// index, so the bits do not depend on how many ranks there are or how the
// partials are split. Each chunk's owner receives that chunk of every partial
// (all-to-all), sums in tree order, then the chunks are all-gathered. `parts`
// is left as it was. Uses device scratch of about 2 * max(parts_per_rank) *
// count floats, kept until comm_destroy (comm_tree_scratch_bytes says how much).
int comm_all_reduce_tree(comm_t *c, const float *parts, const int *parts_per_rank, float *out,
                         size_t count);
uint64_t comm_tree_scratch_bytes(int nranks, int max_parts_per_rank, size_t count);

// The canonical tree: leaves[0] = sum of leaves[0..n), added pairwise with
// doubling strides (leaf i += leaf i + s for s = 1, 2, 4, ...), elementwise
// on the device. The other leaves are clobbered. A single device computes the
// reference with this very function.
int comm_tree_sum(device_t *dev, float *const *leaves, int n, size_t count);
struct comm_stats comm_get_stats(const comm_t *c);
// The algorithm an all-reduce of `bytes` runs with (e.g. the ring backend's
// "one-shot", "two-shot" or "ring"; the mpi backend's "mpi").
const char *comm_algo_name(const comm_t *c, size_t bytes);
// The error a call that returned before its work was done has met since
// (the device collectives queue their kernels: NCCL's asynchronous errors),
// said once where it was found; 0 when none (or c is NULL). Call it after
// the device's stream is synchronised to know the results are whole.
int comm_async_error(comm_t *c);
// Whether a collective of c timed out or met an MPI failure: a peer may never
// come, so nothing collective (teardown, MPI_Finalize) should wait for it.
int comm_failed(const comm_t *c);
// Marks the communicator failed from outside (the control plane lost a
// peer): its teardown then aborts instead of waiting for peers. NULL: no-op.
void comm_mark_failed(comm_t *c);

#endif
