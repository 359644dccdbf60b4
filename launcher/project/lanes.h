// lanes.h: a step's compute on a target as two lanes (issue 47;
// docs/PROJECTION.md, "The lanes"): the host lane (its own work as measured,
// a launch cost an operation, a cost a wait for the device) and the device
// lane (each kind of operation at max(FLOPs / peak, bytes / rate, count x the
// shortest kernel)); the compute is the critical path of the two. Pure
// arithmetic over a trace's counted device operations and a target's device
// facts.
#ifndef VGPU_LANES_H
#define VGPU_LANES_H

#include "target.h"
#include "trace_profile.h"

// What sets a step's compute in the lanes.
enum lanes_limit {
    LANES_LAUNCH,  // the host lane, by its launches and waits (launch-bound)
    LANES_HOST,    // the host lane, by the host's own work
    LANES_FLOOR,   // the device lane, by its operations' shortest time (launch-bound on the device)
    LANES_COMPUTE, // the device lane, by FLOPs at the peak (compute-bound)
    LANES_MEMORY,  // the device lane, by bytes at the memory or host link's rate (memory-bound)
};

// Seconds a step, on the target.
struct lanes {
    double own_s, launch_s, sync_s; // the host lane's parts: own work, launches, waits
    double host_s;                  // own + launches (+ waits: synchronous devices)
    double flop_s, bytes_s, floor_s; // the device lane's kinds, by the term that set each
    double device_s;                // their sum
    double compute_s;               // the critical path
    enum lanes_limit limit;
};

// Whether a projection runs the lanes: the trace counts device operations,
// the target gives device.launch_us, and it is not the device measured.
int lanes_apply(const struct trace_profile *p, const struct target *t);
// The lanes of one GPU computing `rows` samples (the trace's per-sample
// FLOPs and bytes times rows; rows 1 with per-step values when the trace
// counts no rows) at peak_flops (the target's, for the math chosen).
void lanes_compute(struct lanes *l, const struct trace_profile *p, const struct target *t,
                   double peak_flops, double rows);

#endif
