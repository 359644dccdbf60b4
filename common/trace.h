// trace.h: the timeline (--trace). While on, a rank records spans (what,
// start, duration, and for collectives their flight recorder number and
// size) into a buffer allocated up front: no allocation, lock or I/O on the
// step path. Off, each call site costs one load and one branch. At the end
// the runtime gathers every rank's spans with its clock offset to rank 0 and
// rank 0 writes one Chrome trace-event JSON file (trace_write_json), which
// chrome://tracing and Perfetto open.
#ifndef VGPU_TRACE_H
#define VGPU_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

enum trace_what {
    TRACE_STEP = 1,       // a training step (arg: its number)
    TRACE_DATA,           // loading the batch's rows onto the device (arg: rows)
    TRACE_FORWARD,        // arg: rows; arg2: FLOPs the model counts for them (0: not counted)
    TRACE_BACKWARD,       // as TRACE_FORWARD
    TRACE_OPTIMIZER,      // arg, arg2: a sharded update's first parameter and count (0: all)
    TRACE_COLLECTIVE,     // kind: enum flight_kind; arg: its number (send, recv: the peer); arg2: bytes
    TRACE_REDUCE_SCATTER, // a ring all-reduce's phases (arg2: bytes of the round)
    TRACE_ALL_GATHER,
    TRACE_WAIT,           // waiting for a peer (arg: its rank, -1 unknown)
    TRACE_CONTROL,        // a control-plane exchange (kind, arg as TRACE_COLLECTIVE)
    TRACE_EVAL,
    TRACE_CHECKPOINT,
    TRACE_INJECTED_SLOW,  // VGPU_INJECT_SLOW's sleep
    TRACE_BUCKET,         // a gradient bucket's collective (around it); arg: microseconds
                          // since its values were final; arg2: its elements
    TRACE_OPS,            // the device operations of one kind a phase made (kind: enum
                          // trace_op; arg: how many; arg2: their FLOPs), over the phase's span
    TRACE_OPS_MORE,       // the slot after TRACE_OPS (arg: their bytes; arg2: ns inside them)
    TRACE_WHAT_COUNT
};

struct trace_span {
    uint64_t start_us; // CLOCK_MONOTONIC of the rank that recorded it
    uint32_t dur_us;
    uint8_t what;      // enum trace_what
    uint8_t lane;      // 0: the thread that started the trace; 1: any other (a program's
                       // collectives overlapped with its compute), drawn as a row of its own;
                       // 2: TRACE_OPS, the counted device operations' row
    uint16_t kind;     // enum flight_kind (collectives, control)
    int64_t arg, arg2;
};

extern int trace_enabled_; // read by the inline check below; set by trace_start

// Allocates room for `capacity` spans and starts recording (a second call
// starts over); the calling thread's spans are lane 0. Returns 0, or
// VGPU_ENOMEM.
int trace_start(size_t capacity);
// Stops recording; the spans stay until trace_free.
void trace_stop(void);
void trace_free(void);

static inline uint64_t trace_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
// The start of a span: its time, or 0 when tracing is off (trace_end then
// does nothing).
static inline uint64_t trace_begin(void) { return trace_enabled_ ? trace_now_us() : 0; }
// Records a span begun at start_us (from trace_begin) ending now, from any
// thread. When the buffer is full the span is counted as dropped.
void trace_end(enum trace_what what, unsigned kind, uint64_t start_us, int64_t arg, int64_t arg2);

// ---- device operations (vgpu-project's lanes: docs/PROJECTION.md) ----
// Each operation the program puts on its device (a math operation, a copy)
// and each wait for the device is counted, not drawn: while tracing, the
// thread that started the trace adds its kind's count, FLOPs, bytes and the
// time the call took into a few counters (two clock reads an operation, no
// span), and each phase span's end (step, data, forward, backward,
// optimizer, evaluation, checkpoint) writes what accumulated since the
// last one as a TRACE_OPS span a kind over that phase's span. Other
// threads' operations (a collective's) are not counted.
enum trace_op {
    TRACE_OP_GEMM,        // matrix products (FLOPs: 2 m n k)
    TRACE_OP_KERNEL,      // the other math operations (elementwise, reductions, a layer's)
    TRACE_OP_COPY_HOST,   // copies between the host and the device (the host link)
    TRACE_OP_COPY_DEVICE, // copies and fills inside device memory
    TRACE_OP_SYNC,        // the host waiting for the device (the program's own waits)
    TRACE_OP_KINDS
};
static inline uint64_t trace_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
// The start of an operation: its time (ns), or 0 when tracing is off.
static inline uint64_t trace_op_begin(void) { return trace_enabled_ ? trace_now_ns() : 0; }
// Counts an operation begun at start_ns (from trace_op_begin) ending now.
void trace_op_end(enum trace_op kind, uint64_t start_ns, uint64_t flops, uint64_t bytes);
// The name the file gives a kind's TRACE_OPS spans ("gemm ops").
const char *trace_op_name(unsigned kind);

// A number the program adds to the file's otherData "notes" (the model's
// sizing: vgpu_train notes the device bytes a rank needs at each rank count,
// which vgpu-project reads). A key again replaces its value; the notes last
// until trace_free. Returns 0, VGPU_EINVAL (an empty or over-long key, one
// with '"', '\\' or a control character, a value not finite) or -ENOSPC (full).
#define TRACE_NOTES_MAX 64
#define TRACE_NOTE_KEY_MAX 48
int trace_note(const char *key, double value);

// The recorded spans (in order of their end) and how many were dropped.
const struct trace_span *trace_spans(size_t *count, uint64_t *dropped);

// One rank's part of the file.
struct trace_rank {
    int rank;
    char host[64];
    int pid;
    int64_t offset_us;       // add to this rank's times to get rank 0's clock
    int64_t uncertainty_us;  // how far off the offset may be (0: the same clock)
    uint64_t count, dropped; // spans it recorded, and lost to a full buffer
};

// The Chrome trace-event JSON, in three parts so that the spans can be
// written rank by rank as they arrive: the header (otherData: the clock
// offsets, their largest uncertainty, dropped spans; a named process per
// rank, "rank R (host, pid)"), then each rank's spans as complete events
// ("ph":"X", times in microseconds from origin_us, rank 0's clock), then
// the end. Each returns 0 or -EIO.
int trace_json_begin(FILE *f, const struct trace_rank *ranks, int n, const char *label);
int trace_json_spans(FILE *f, const struct trace_rank *rank, const struct trace_span *spans,
                     size_t count, uint64_t origin_us);
int trace_json_end(FILE *f);

const char *trace_what_name(unsigned what);

// A collective under way, for the flight recorder and the timeline at once:
// trace_call_begin enters it in both (kind: enum flight_kind), and
// trace_call_end ends it with its result as a span of `what` (collective or
// control) whose arguments are its number and size.
struct trace_call {
    unsigned kind;
    uint64_t bytes, seq, start_us;
};
struct trace_call trace_call_begin(unsigned kind, uint64_t bytes);
void trace_call_end(const struct trace_call *call, enum trace_what what, int rc);

#endif
