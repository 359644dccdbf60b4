// trace.c: the timeline's span buffer and its Chrome trace-event JSON
// (trace.h).
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "status.h"

int trace_enabled_;
static struct trace_span *spans_;
static size_t capacity_;
static _Atomic size_t count_; // slots taken: past capacity_, the excess was dropped
static _Atomic uint64_t dropped_;
static pthread_t owner_;      // lane 0's thread

// The device operations lane 0 made since the last phase span ended
// (trace_op_end), by enum trace_op: only that thread touches them.
static struct {
    uint64_t count, flops, bytes, ns;
} ops_[TRACE_OP_KINDS];

// The program's notes (trace_note), written into the file's otherData.
static struct {
    char key[TRACE_NOTE_KEY_MAX];
    double value;
} notes_[TRACE_NOTES_MAX];
static int n_notes_;

int trace_start(size_t capacity)
{
    trace_enabled_ = 0;
    if (capacity > capacity_) {
        struct trace_span *grown = malloc(capacity * sizeof *grown);
        if (!grown)
            return VGPU_ENOMEM;
        free(spans_);
        spans_ = grown;
        capacity_ = capacity;
    }
    // Touch every page now, not on the step path.
    memset(spans_, 0, capacity_ * sizeof *spans_);
    atomic_store(&count_, 0);
    atomic_store(&dropped_, 0);
    memset(ops_, 0, sizeof ops_);
    owner_ = pthread_self();
    trace_enabled_ = capacity_ > 0;
    return 0;
}

void trace_stop(void) { trace_enabled_ = 0; }

void trace_free(void)
{
    trace_enabled_ = 0;
    free(spans_);
    spans_ = NULL;
    capacity_ = 0;
    atomic_store(&count_, 0);
    n_notes_ = 0;
}

int trace_note(const char *key, double value)
{
    if (!key || !*key || strlen(key) >= TRACE_NOTE_KEY_MAX || !isfinite(value))
        return VGPU_EINVAL;
    for (const char *c = key; *c; c++) // written unescaped into the JSON
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
            return VGPU_EINVAL;
    int i = 0;
    while (i < n_notes_ && strcmp(notes_[i].key, key) != 0)
        i++;
    if (i == TRACE_NOTES_MAX)
        return -ENOSPC;
    snprintf(notes_[i].key, sizeof notes_[i].key, "%s", key);
    notes_[i].value = value;
    n_notes_ = i == n_notes_ ? n_notes_ + 1 : n_notes_;
    return 0;
}

// n consecutive slots (a TRACE_OPS span and its second half stay
// together), or NULL when the buffer is full (counted as dropped).
static struct trace_span *take_(size_t n)
{
    const size_t slot = atomic_fetch_add_explicit(&count_, n, memory_order_relaxed);
    if (slot + n > capacity_) {
        atomic_fetch_add_explicit(&dropped_, n, memory_order_relaxed);
        return NULL;
    }
    return &spans_[slot];
}

void trace_op_end(enum trace_op kind, uint64_t start_ns, uint64_t flops, uint64_t bytes)
{
    if (!start_ns || !trace_enabled_ || (unsigned)kind >= TRACE_OP_KINDS ||
        !pthread_equal(pthread_self(), owner_))
        return;
    const uint64_t now = trace_now_ns();
    ops_[kind].count++;
    ops_[kind].flops += flops;
    ops_[kind].bytes += bytes;
    ops_[kind].ns += now > start_ns ? now - start_ns : 0;
}

// What the phase that ends now (its span: start_us, dur) made, a
// TRACE_OPS pair a kind, over the phase's span; the counters start again.
static void ops_flush_(uint64_t start_us, uint32_t dur_us)
{
    for (int k = 0; k < TRACE_OP_KINDS; k++) {
        if (!ops_[k].count)
            continue;
        struct trace_span *two = take_(2);
        if (two) {
            two[0] = (struct trace_span){.start_us = start_us, .dur_us = dur_us,
                                         .what = TRACE_OPS, .lane = 2, .kind = (uint16_t)k,
                                         .arg = (int64_t)ops_[k].count,
                                         .arg2 = (int64_t)ops_[k].flops};
            two[1] = (struct trace_span){.start_us = start_us, .dur_us = dur_us,
                                         .what = TRACE_OPS_MORE, .lane = 2, .kind = (uint16_t)k,
                                         .arg = (int64_t)ops_[k].bytes,
                                         .arg2 = (int64_t)ops_[k].ns};
        }
        memset(&ops_[k], 0, sizeof ops_[k]);
    }
}

static int is_phase_(enum trace_what what)
{
    return what == TRACE_STEP || what == TRACE_DATA || what == TRACE_FORWARD ||
           what == TRACE_BACKWARD || what == TRACE_OPTIMIZER || what == TRACE_EVAL ||
           what == TRACE_CHECKPOINT;
}

void trace_end(enum trace_what what, unsigned kind, uint64_t start_us, int64_t arg, int64_t arg2)
{
    if (!start_us || !trace_enabled_)
        return;
    const uint64_t now = trace_now_us();
    const uint64_t dur64 = now > start_us ? now - start_us : 0;
    const uint32_t dur = dur64 > UINT32_MAX ? UINT32_MAX : (uint32_t)dur64;
    const int lane = !pthread_equal(pthread_self(), owner_);
    if (!lane && is_phase_(what))
        ops_flush_(start_us, dur);
    struct trace_span *s = take_(1);
    if (s)
        *s = (struct trace_span){.start_us = start_us, .dur_us = dur, .what = (uint8_t)what,
                                 .lane = (uint8_t)lane, .kind = (uint16_t)kind, .arg = arg,
                                 .arg2 = arg2};
}

// Read once every thread that records has stopped (a program reads its
// timeline after its collectives have returned).
const struct trace_span *trace_spans(size_t *count, uint64_t *dropped)
{
    const size_t taken = atomic_load(&count_);
    *count = taken < capacity_ ? taken : capacity_;
    *dropped = atomic_load(&dropped_);
    return spans_;
}

// Each kind of span: its name, and the category chrome://tracing colours and
// filters by.
static const struct {
    const char *name, *cat;
} whats_[TRACE_WHAT_COUNT] = {
    [TRACE_STEP] = {"step", "step"},
    [TRACE_DATA] = {"data", "compute"},
    [TRACE_FORWARD] = {"forward", "compute"},
    [TRACE_BACKWARD] = {"backward", "compute"},
    [TRACE_OPTIMIZER] = {"optimizer", "optimizer"},
    [TRACE_COLLECTIVE] = {"collective", "comm"},
    [TRACE_REDUCE_SCATTER] = {"ring reduce-scatter", "comm"},
    [TRACE_ALL_GATHER] = {"ring all-gather", "comm"},
    [TRACE_WAIT] = {"wait", "wait"},
    [TRACE_CONTROL] = {"control", "control"},
    [TRACE_EVAL] = {"evaluation", "eval"},
    [TRACE_CHECKPOINT] = {"checkpoint", "checkpoint"},
    [TRACE_INJECTED_SLOW] = {"injected slowness", "injected"},
    [TRACE_BUCKET] = {"gradient bucket", "comm"},
    [TRACE_OPS] = {"device ops", "device"},
};

const char *trace_op_name(unsigned kind)
{
    static const char *const names[TRACE_OP_KINDS] = {
        [TRACE_OP_GEMM] = "gemm ops",           [TRACE_OP_KERNEL] = "kernel ops",
        [TRACE_OP_COPY_HOST] = "host copies",   [TRACE_OP_COPY_DEVICE] = "device copies",
        [TRACE_OP_SYNC] = "syncs",
    };
    return kind < TRACE_OP_KINDS ? names[kind] : "?";
}

struct trace_call trace_call_begin(unsigned kind, uint64_t bytes)
{
    return (struct trace_call){.kind = kind, .bytes = bytes,
                               .seq = flight_begin((enum flight_kind)kind, bytes),
                               .start_us = trace_begin()};
}

void trace_call_end(const struct trace_call *call, enum trace_what what, int rc)
{
    trace_end(what, call->kind, call->start_us, (int64_t)call->seq, (int64_t)call->bytes);
    flight_end(call->seq, rc);
}

const char *trace_what_name(unsigned what)
{
    return what < TRACE_WHAT_COUNT && whats_[what].name ? whats_[what].name : "?";
}

static const char *what_cat_(unsigned what)
{
    return what < TRACE_WHAT_COUNT && whats_[what].cat ? whats_[what].cat : "?";
}

// Host names and labels come from the system and the user: escape for JSON.
static void json_string_(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

// more: the slot after s (a TRACE_OPS span's second half), or NULL.
static void span_(FILE *f, const struct trace_rank *r, const struct trace_span *s,
                  const struct trace_span *more, uint64_t origin_us)
{
    const int64_t ts = (int64_t)s->start_us + r->offset_us - (int64_t)origin_us;
    const char *name = trace_what_name(s->what);
    if (s->what == TRACE_COLLECTIVE || s->what == TRACE_CONTROL)
        name = flight_kind_name(s->kind);
    if (s->what == TRACE_OPS_MORE || !s->what) // with its first half; a slot never filled
        return;
    if (s->what == TRACE_OPS)
        name = trace_op_name(s->kind);
    fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%" PRId64
               ",\"dur\":%" PRIu32,
            name, what_cat_(s->what),
            r->rank, s->lane, ts, s->dur_us);
    switch (s->what) {
    case TRACE_STEP:
        fprintf(f, ",\"args\":{\"step\":%" PRId64 "}", s->arg);
        break;
    case TRACE_COLLECTIVE:
    case TRACE_CONTROL:
        // Point-to-point has no recorder number: its argument is the peer.
        fprintf(f, ",\"args\":{\"%s\":%" PRId64 ",\"bytes\":%" PRId64 "}",
                s->kind == FLIGHT_SEND || s->kind == FLIGHT_RECV ? "peer" : "seq", s->arg, s->arg2);
        break;
    case TRACE_REDUCE_SCATTER:
    case TRACE_ALL_GATHER:
        fprintf(f, ",\"args\":{\"bytes\":%" PRId64 "}", s->arg2);
        break;
    case TRACE_WAIT:
        fprintf(f, ",\"args\":{\"peer\":%" PRId64 "}", s->arg);
        break;
    case TRACE_DATA:
    case TRACE_FORWARD:
    case TRACE_BACKWARD: // what vgpu-project scales compute by (0: not counted)
        if (s->arg || s->arg2)
            fprintf(f, ",\"args\":{\"rows\":%" PRId64 ",\"flops\":%" PRId64 "}", s->arg, s->arg2);
        break;
    case TRACE_BUCKET: // final since ts - ready_us (vgpu-project's overlap starts there)
        fprintf(f, ",\"args\":{\"ready_us\":%" PRId64 ",\"count\":%" PRId64 "}", s->arg, s->arg2);
        break;
    case TRACE_OPTIMIZER: // a sharded update's range of parameters (count 0: all)
        if (s->arg2)
            fprintf(f, ",\"args\":{\"first\":%" PRId64 ",\"count\":%" PRId64 "}", s->arg, s->arg2);
        break;
    case TRACE_OPS: // the phase's operations of a kind (vgpu-project's lanes)
        fprintf(f, ",\"args\":{\"n\":%" PRId64 ",\"flops\":%" PRId64, s->arg, s->arg2);
        if (more && more->what == TRACE_OPS_MORE && more->kind == s->kind)
            fprintf(f, ",\"bytes\":%" PRId64 ",\"busy_us\":%.3f", more->arg,
                    (double)more->arg2 / 1e3);
        fputc('}', f);
        break;
    default:
        break;
    }
    fputc('}', f);
}

int trace_json_begin(FILE *f, const struct trace_rank *ranks, int n, const char *label)
{
    int64_t skew = 0;
    uint64_t dropped = 0;
    for (int i = 0; i < n; i++) {
        skew = ranks[i].uncertainty_us > skew ? ranks[i].uncertainty_us : skew;
        dropped += ranks[i].dropped;
    }
    fputs("{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"producer\":", f);
    json_string_(f, label ? label : "vgpu");
    fprintf(f, ",\"ranks\":%d,\"clock_uncertainty_us\":%" PRId64 ",\"dropped_spans\":%" PRIu64,
            n, skew, dropped);
    if (n_notes_) {
        fputs(",\"notes\":{", f);
        for (int i = 0; i < n_notes_; i++)
            fprintf(f, "%s\"%s\":%.17g", i ? "," : "", notes_[i].key, notes_[i].value);
        fputc('}', f);
    }
    fputs(",\"clocks\":[", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s{\"rank\":%d,\"offset_us\":%" PRId64 ",\"uncertainty_us\":%" PRId64 "}",
                i ? "," : "", ranks[i].rank, ranks[i].offset_us, ranks[i].uncertainty_us);
    fputs("]},\n\"traceEvents\":[\n", f);
    // A named, ordered process per rank; every span follows with a comma.
    for (int i = 0; i < n; i++) {
        char name[128];
        snprintf(name, sizeof name, "rank %d (%s, pid %d)", ranks[i].rank, ranks[i].host,
                 ranks[i].pid);
        fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
                i ? ",\n" : "", ranks[i].rank);
        json_string_(f, name);
        fprintf(f, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{"
                   "\"sort_index\":%d}}",
                ranks[i].rank, ranks[i].rank);
        // The lanes' rows (a lane without spans draws none).
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{"
                   "\"name\":\"steps\"}},\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
                   "\"tid\":1,\"args\":{\"name\":\"overlapped collectives\"}},\n"
                   "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":2,\"args\":{"
                   "\"name\":\"device ops (a phase's, counted)\"}}",
                ranks[i].rank, ranks[i].rank, ranks[i].rank);
    }
    return ferror(f) ? -EIO : 0;
}

int trace_json_spans(FILE *f, const struct trace_rank *rank, const struct trace_span *spans,
                     size_t count, uint64_t origin_us)
{
    for (size_t k = 0; k < count; k++)
        span_(f, rank, &spans[k], k + 1 < count ? &spans[k + 1] : NULL, origin_us);
    return ferror(f) ? -EIO : 0;
}

int trace_json_end(FILE *f)
{
    fputs("\n]}\n", f);
    fflush(f);
    return ferror(f) ? -EIO : 0;
}
