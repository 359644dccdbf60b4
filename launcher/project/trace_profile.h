// trace_profile.h: what vgpu-project needs of a --trace file (a Chrome
// trace-event JSON written by libvgpu, common/trace.c): one step of the job
// as measured, per sample and per parameter where the spans say how many,
// and the collectives a step makes, with their sizes.
#ifndef VGPU_TRACE_PROFILE_H
#define VGPU_TRACE_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#define PROFILE_COLL_MAX 32 // distinct (kind, size) collectives a step
#define PROFILE_BUCKETS_MAX 512 // gradient buckets a step (overlapped all-reduces)
#define PROFILE_NOTES_MAX 64

enum profile_coll_kind {
    PROFILE_ALL_REDUCE,     // all-reduce, all-reduce+update, all-reduce-tree, control-reduce
    PROFILE_REDUCE_SCATTER, // bytes: the whole buffer
    PROFILE_ALL_GATHER,     // bytes: the whole result
    PROFILE_BROADCAST,
    PROFILE_BARRIER,
};

// One kind and size of collective, and how many a step makes (a mean over
// the steps: a collective every 100 steps counts 0.01).
struct profile_coll {
    char name[32];               // as the trace names it ("all-reduce+update")
    enum profile_coll_kind kind;
    uint64_t bytes;
    double per_step;
};

// An all-reduce made beside the backward pass (a "gradient bucket" span of
// the trace, around its collective on the overlapped lane): its size, and
// when the pass had made its part final, as a share of the pass.
struct profile_bucket {
    uint64_t bytes;
    double ready_share;          // 0: at the backward pass's start, 1: at its end (median)
};

// The device operations a trace counts (libvgpu's timeline, common/trace.h
// enum trace_op: the "device ops" spans), by kind.
enum profile_op {
    PROFILE_OP_GEMM,        // matrix products: FLOPs
    PROFILE_OP_KERNEL,      // the other math operations: bytes
    PROFILE_OP_COPY_HOST,   // copies between the host and the device
    PROFILE_OP_COPY_DEVICE, // copies and fills in device memory
    PROFILE_OP_SYNC,        // the host waiting for the device
    PROFILE_OP_KINDS
};

// A step's operations of one kind, a rank (medians over the steps).
struct profile_ops {
    double count;           // operations a step
    double flops, bytes;    // a sample (a step when the trace counts no rows)
    double busy_us;         // the time their calls took here, a step
};

struct trace_profile {
    char producer[192];          // the program that wrote it (otherData.producer)
    int ranks;                   // ranks measured
    long steps;                  // steps used per rank (the first one, a warm-up, left out)
    double global_batch;         // samples a step (0: the spans count no rows)
    // Medians over every rank's steps, microseconds:
    double flop_us_per_sample;   // forward + backward a sample (0 with no rows)
    double data_us_per_sample;   // the batch onto the device, a sample
    double compute_us_per_rank;  // forward + backward + data a step, a rank (what it did here)
    double flops_per_sample;     // the model's count, forward + backward (0: not counted)
    double flops_per_rank;       // the FLOPs a rank's step (0: not counted)
    double optimizer_us_per_param; // a sharded update, a parameter (0: none)
    uint64_t sharded_params;     // parameters the sharded updates cover a step, all ranks
    double optimizer_full_us;    // an update of every parameter a step (not sharded)
    double other_us;             // the rest of a step outside compute, collectives and the
                                 // wait for the buckets' all-reduces after the pass
    double comm_us, wait_us;     // in collectives a step, and of it waiting for a peer
    double step_us;              // a step
    struct profile_coll coll[PROFILE_COLL_MAX]; // the step's collectives but the buckets'
    int n_coll;
    double backward_share;       // of forward + backward, the backward pass's time (median)
    struct profile_bucket bucket[PROFILE_BUCKETS_MAX]; // in the order they ran, a step
    int n_buckets;
    int has_ops;                 // the trace counts device operations (0: a trace from before
                                 // issue 47: the projection scales compute by the peaks alone)
    struct profile_ops ops[PROFILE_OP_KINDS];
    double host_us;              // the host's own work a step: the step less its collectives,
                                 // the operations' calls (syncs included), the buckets' wait
    double rows_per_rank;        // samples a rank a step (median; 0: not counted)
    struct {
        char key[48];
        double value;
    } notes[PROFILE_NOTES_MAX];  // otherData.notes (vgpu_timeline_note)
    int n_notes;
};

// Reads a trace file. Returns 0, or VGPU_EFORMAT / VGPU_ENOMEM / -errno with
// what is wrong (and where) in err: not JSON, cut off, not a vgpu trace, no
// steps, no collectives.
int trace_profile_load(struct trace_profile *p, const char *path, char *err, size_t err_bytes);
// The same from text in memory (origin names it in errors).
int trace_profile_parse(struct trace_profile *p, const char *text, size_t bytes, const char *origin,
                        char *err, size_t err_bytes);
// A note's value, or `otherwise` when the trace has none of that key.
double trace_profile_note(const struct trace_profile *p, const char *key, double otherwise);

#endif
