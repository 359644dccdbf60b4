// projection.h: a measured job's step time projected onto a target cluster
// (docs/PROJECTION.md has the model): compute scaled from the device
// measured to the target's by their peaks (the job's FLOPs, counted by the
// model), work without FLOPs by their memory bandwidths, and every
// collective of a step by an alpha-beta model of the target's algorithm
// over its links. Pure functions: no I/O, no MPI.
#ifndef VGPU_PROJECTION_H
#define VGPU_PROJECTION_H

#include <stdint.h>

#include "lanes.h"
#include "target.h"
#include "trace_profile.h"

// The time of collectives, seconds, by what pays it: the links' fixed cost
// (alpha) and their rate (bytes over beta), inside a host and between hosts.
struct comm_cost {
    double latency_intra_s, bytes_intra_s, latency_inter_s, bytes_inter_s;
};

// One collective of `bytes` (as profile_coll counts them) over n GPUs of
// the target, placed host by host (ceil(n / gpus_per_host) hosts).
struct comm_cost projection_collective(const struct target *t, enum profile_coll_kind kind,
                                       uint64_t bytes, long n);
double comm_cost_total(const struct comm_cost *c);

// How the device measured relates to the target's.
struct projection_scale {
    double flops;  // target time / measured time, of work the model counts FLOPs for
    double memory; // ... of the rest (1: taken as measured)
    int lanes;     // compute runs the lanes instead (lanes_apply): the ratios are not used
    double peak_flops; // the target's peak for the math chosen, FLOP/s (for the lanes)
};

// The scales for projecting onto t from a trace measured on `measured` (a
// target file of this machine, or NULL when t's device is the one
// measured), t's peak for `math`. Returns 0, or VGPU_ECONFIG with why in
// err (no measured device for a target that needs one, no peak for math,
// no FLOPs in the trace).
int projection_scale_for(struct projection_scale *s, const struct trace_profile *p,
                         const struct target *t, const struct target *measured,
                         enum target_math math, char *err, size_t err_bytes);

// What limits a projected step.
enum projection_limit {
    LIMIT_COMPUTE, LIMIT_MEMORY_BW, LIMIT_INTRA_LATENCY, LIMIT_INTRA_BW, LIMIT_INTER_LATENCY,
    LIMIT_INTER_BW, LIMIT_IMBALANCE, LIMIT_MEMORY_SIZE,
    // the lanes' (enum lanes_limit, in its order)
    LIMIT_LAUNCH, LIMIT_HOST_WORK, LIMIT_KERNEL_FLOOR, LIMIT_LANE_COMPUTE, LIMIT_LANE_MEMORY
};

// One row of the table: n GPUs. Times in seconds a step.
struct projection_row {
    long gpus, hosts;
    double step_s;
    double compute_s;     // the mean GPU's work: FLOP-counted, the rest, optimizer
    double flop_s, rest_s; // compute's parts: FLOP-counted, the rest (data, optimizer, other)
    double comm_s;        // the collectives the step waits for (of the buckets', the exposed)
    struct comm_cost comm;
    double hidden_s;      // the buckets' all-reduces that ran beside the backward pass
    double wait_s;        // the mean GPU waiting for the one with the most rows
    double samples_per_s; // 0 when the trace counts no samples
    double efficiency;    // step time of 1 GPU / (n x step time of n), or of 1 / of n (weak)
    double memory_bytes;  // device bytes a GPU needs (the trace's note; 0 = not known)
    int fits;             // memory_bytes <= the target's memory (1 when either is unknown)
    enum projection_limit limit;
    int lanes_on;         // compute is the lanes' critical path (projection_scale.lanes)
    struct lanes lanes;   // then its lanes (the mean GPU's rows)
};

// The row for n GPUs (1 <= n <= target_gpus(t)); one_gpu_step_s: the step
// time of 1 GPU (for the efficiency; 0 when this is that row).
void projection_row(struct projection_row *r, const struct trace_profile *p, const struct target *t,
                    const struct projection_scale *s, long n, double one_gpu_step_s);
const char *projection_limit_name(enum projection_limit l);

// A target whose [intra] says calibrated takes its latency and rate from
// the measured machine's file. 0, or VGPU_ECONFIG (no such file, or it has
// no rate) with why in err.
int projection_calibrate(struct target *t, const struct target *measured, char *err,
                         size_t err_bytes);

#endif
