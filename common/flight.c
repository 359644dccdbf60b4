// flight.c: the flight recorder's ring, its records and their text form
// (flight.h). The verdict over records is in flight_verdict.c.
#include "flight.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLIGHT_MAGIC 0x76666c74u // "vflt"
#define FLIGHT_VERSION 1
#define RECORD_HEADER "vgpu-flight 1"

static struct flight_ring builtin_;
static struct flight_ring *ring_ = &builtin_;

static uint64_t now_us_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void stamp_(struct flight_ring *r, int rank, int size, const char *host)
{
    r->rank = rank;
    r->size = size;
    r->pid = (int32_t)getpid();
    snprintf(r->host, sizeof r->host, "%s", host ? host : "");
    r->version = FLIGHT_VERSION;
    atomic_store_explicit(&r->magic, FLIGHT_MAGIC, memory_order_release);
}

void flight_use(struct flight_ring *ring, int rank, int size, const char *host)
{
    struct flight_ring *next = ring ? ring : &builtin_;
    if (next != ring_) {
        // Nothing else writes this process's ring (the owner calls this
        // between collectives): a plain copy of the entries is whole.
        memcpy(next->entries, ring_->entries, sizeof next->entries);
        atomic_store(&next->next_seq, atomic_load(&ring_->next_seq));
        atomic_store(&next->phase, atomic_load(&ring_->phase));
        atomic_store(&next->phase_us, atomic_load(&ring_->phase_us));
        atomic_store(&next->step, atomic_load(&ring_->step));
        memcpy(next->backend, ring_->backend, sizeof next->backend);
    }
    stamp_(next, rank, size, host);
    ring_ = next;
}

struct flight_ring *flight_ring_self(void)
{
    if (ring_->magic != FLIGHT_MAGIC)
        stamp_(ring_, -1, 0, "");
    return ring_;
}

void flight_set_backend(const char *backend)
{
    snprintf(ring_->backend, sizeof ring_->backend, "%s", backend ? backend : "");
}

uint64_t flight_begin(enum flight_kind kind, uint64_t bytes)
{
    struct flight_ring *r = ring_;
    uint64_t seq = atomic_load_explicit(&r->next_seq, memory_order_relaxed);
    if (seq == 0)
        seq = 1;
    atomic_store_explicit(&r->next_seq, seq + 1, memory_order_relaxed);
    struct flight_entry *e = &r->entries[seq % FLIGHT_CAPACITY];
    // Unpublish, rewrite, publish: a reader that sees the same seq before
    // and after copying the fields has them whole.
    atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    e->bytes = bytes;
    e->start_us = now_us_();
    atomic_store_explicit(&e->end_us, 0, memory_order_relaxed);
    e->kind = (uint32_t)kind;
    atomic_store_explicit(&e->state, FLIGHT_ISSUED, memory_order_relaxed);
    atomic_store_explicit(&e->peer, -1, memory_order_relaxed);
    atomic_store_explicit(&e->seq, seq, memory_order_release);
    return seq;
}

static struct flight_entry *entry_(uint64_t seq)
{
    struct flight_entry *e = &ring_->entries[seq % FLIGHT_CAPACITY];
    return seq && atomic_load_explicit(&e->seq, memory_order_relaxed) == seq ? e : NULL;
}

void flight_waiting(int peer)
{
    struct flight_entry *e = entry_(atomic_load_explicit(&ring_->next_seq, memory_order_relaxed) - 1);
    const uint32_t state = e ? atomic_load_explicit(&e->state, memory_order_relaxed) : 0;
    if (state != FLIGHT_ISSUED && state != FLIGHT_WAITING)
        return; // finished: a wait outside the recorded collectives
    atomic_store_explicit(&e->peer, peer, memory_order_relaxed);
    atomic_store_explicit(&e->state, FLIGHT_WAITING, memory_order_release);
}

void flight_resumed(void)
{
    struct flight_entry *e = entry_(atomic_load_explicit(&ring_->next_seq, memory_order_relaxed) - 1);
    uint32_t waiting = FLIGHT_WAITING;
    if (e && atomic_compare_exchange_strong_explicit(&e->state, &waiting, FLIGHT_ISSUED,
                                                     memory_order_release, memory_order_relaxed))
        atomic_store_explicit(&e->peer, -1, memory_order_relaxed);
}

void flight_end(uint64_t seq, int rc)
{
    struct flight_entry *e = entry_(seq);
    if (!e)
        return;
    atomic_store_explicit(&e->end_us, now_us_(), memory_order_relaxed);
    atomic_store_explicit(&e->state, rc < 0 ? FLIGHT_FAILED : FLIGHT_DONE, memory_order_release);
}

void flight_phase(enum flight_phase phase)
{
    atomic_store_explicit(&ring_->phase_us, now_us_(), memory_order_relaxed);
    atomic_store_explicit(&ring_->phase, (uint32_t)phase, memory_order_release);
}

void flight_step(int64_t step)
{
    atomic_store_explicit(&ring_->step, step, memory_order_relaxed);
}

// ---- records ----

int flight_snapshot(const struct flight_ring *ring, struct flight_record *rec)
{
    memset(rec, 0, sizeof *rec);
    if (atomic_load_explicit(&ring->magic, memory_order_acquire) != FLIGHT_MAGIC)
        return -1;
    rec->rank = ring->rank;
    rec->size = ring->size;
    rec->pid = ring->pid;
    snprintf(rec->host, sizeof rec->host, "%.*s", (int)sizeof ring->host - 1, ring->host);
    snprintf(rec->backend, sizeof rec->backend, "%.*s", (int)sizeof ring->backend - 1, ring->backend);
    snprintf(rec->process, sizeof rec->process, "running");
    rec->written_by = ring->rank;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    rec->at_us = now_us_();
    rec->wall_us = (uint64_t)wall.tv_sec * 1000000u + (uint64_t)wall.tv_nsec / 1000u;
    rec->phase = atomic_load_explicit(&ring->phase, memory_order_acquire);
    rec->phase_us = atomic_load_explicit(&ring->phase_us, memory_order_relaxed);
    rec->step = atomic_load_explicit(&ring->step, memory_order_relaxed);
    const uint64_t next = atomic_load_explicit(&ring->next_seq, memory_order_acquire);
    const uint64_t first = next > FLIGHT_CAPACITY ? next - FLIGHT_CAPACITY : 1;
    for (uint64_t seq = first; seq < next; seq++) {
        const struct flight_entry *e = &ring->entries[seq % FLIGHT_CAPACITY];
        if (atomic_load_explicit(&e->seq, memory_order_acquire) != seq)
            continue;
        struct flight_entry_copy c = {
            .seq = seq,
            .bytes = e->bytes,
            .start_us = e->start_us,
            .end_us = atomic_load_explicit(&e->end_us, memory_order_relaxed),
            .kind = e->kind,
            .state = atomic_load_explicit(&e->state, memory_order_acquire),
            .peer = atomic_load_explicit(&e->peer, memory_order_relaxed),
        };
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq)
            continue; // rewritten while we copied
        rec->entries[rec->count++] = c;
    }
    return 0;
}

static const char *const kind_names_[FLIGHT_KIND_COUNT] = {
    [FLIGHT_ALL_REDUCE] = "all-reduce",
    [FLIGHT_ALL_REDUCE_UPDATE] = "all-reduce+update",
    [FLIGHT_ALL_REDUCE_TREE] = "all-reduce-tree",
    [FLIGHT_BROADCAST] = "broadcast",
    [FLIGHT_ALL_GATHER] = "all-gather",
    [FLIGHT_BARRIER] = "barrier",
    [FLIGHT_REDUCE_SCATTER] = "reduce-scatter",
    [FLIGHT_CTL_GATHER] = "control-gather",
    [FLIGHT_CTL_BROADCAST] = "control-broadcast",
    [FLIGHT_CTL_REDUCE] = "control-reduce",
    [FLIGHT_CTL_BARRIER] = "control-barrier",
    [FLIGHT_CTL_EXCHANGE] = "control-exchange",
    [FLIGHT_REDUCE] = "reduce",
    [FLIGHT_SEND] = "send",
    [FLIGHT_RECV] = "recv",
};
static const char *const state_names_[] = {
    [FLIGHT_ISSUED] = "issued",
    [FLIGHT_WAITING] = "waiting",
    [FLIGHT_DONE] = "done",
    [FLIGHT_FAILED] = "failed",
};
static const char *const phase_names_[FLIGHT_PHASE_COUNT] = {
    [FLIGHT_PHASE_NONE] = "-",
    [FLIGHT_PHASE_SETUP] = "setup",
    [FLIGHT_PHASE_DATA] = "data",
    [FLIGHT_PHASE_FORWARD] = "forward",
    [FLIGHT_PHASE_BACKWARD] = "backward",
    [FLIGHT_PHASE_OPTIMIZER] = "optimizer",
    [FLIGHT_PHASE_EVAL] = "evaluation",
    [FLIGHT_PHASE_CHECKPOINT] = "checkpoint",
};

static const char *name_(const char *const *names, size_t n, uint32_t i)
{
    return i < n && names[i] ? names[i] : "?";
}

const char *flight_kind_name(uint32_t kind)
{
    return name_(kind_names_, FLIGHT_KIND_COUNT, kind);
}

const char *flight_state_name(uint32_t state)
{
    return name_(state_names_, sizeof state_names_ / sizeof state_names_[0], state);
}

const char *flight_phase_name(uint32_t phase)
{
    return name_(phase_names_, FLIGHT_PHASE_COUNT, phase);
}

static uint32_t lookup_(const char *const *names, size_t n, const char *word)
{
    for (size_t i = 0; i < n; i++)
        if (names[i] && strcmp(names[i], word) == 0)
            return (uint32_t)i;
    return 0;
}

// Words are written without spaces: "" as "-".
static const char *word_(const char *s) { return s[0] ? s : "-"; }

int flight_write(const struct flight_record *rec, FILE *f)
{
    fprintf(f, RECORD_HEADER "\n");
    fprintf(f, "rank %d of %d\nhost %s\npid %d\nbackend %s\nprocess %s\nwritten_by %d\n",
            rec->rank, rec->size, word_(rec->host), rec->pid, word_(rec->backend),
            word_(rec->process), rec->written_by);
    fprintf(f, "reason %s\nat_us %" PRIu64 "\nwall_us %" PRIu64 "\nphase %s %" PRIu64 "\n",
            word_(rec->reason), rec->at_us, rec->wall_us, flight_phase_name(rec->phase),
            rec->phase_us);
    fprintf(f, "step %" PRId64 "\n", rec->step);
    fprintf(f, "entries %d\n# seq kind bytes state peer start_us end_us\n", rec->count);
    for (int i = 0; i < rec->count; i++) {
        const struct flight_entry_copy *e = &rec->entries[i];
        fprintf(f, "%" PRIu64 " %s %" PRIu64 " %s %d %" PRIu64 " %" PRIu64 "\n", e->seq,
                flight_kind_name(e->kind), e->bytes, flight_state_name(e->state), e->peer,
                e->start_us, e->end_us);
    }
    fflush(f);
    return ferror(f) ? -EIO : 0;
}

#define FAIL(...)                                  \
    do {                                           \
        snprintf(err, err_bytes, __VA_ARGS__);     \
        return -1;                                 \
    } while (0)

// Reads the next line into buf (without its newline); 0 at the end, 2 for a
// last line cut short (no newline: the file was truncated).
static int line_(FILE *f, char *buf, size_t bytes)
{
    do {
        if (!fgets(buf, (int)bytes, f))
            return 0;
        if (!strchr(buf, '\n'))
            return 2;
        buf[strcspn(buf, "\n")] = '\0';
    } while (buf[0] == '#');
    return 1;
}

static void unword_(char *s)
{
    if (strcmp(s, "-") == 0)
        s[0] = '\0';
}

int flight_read(FILE *f, struct flight_record *rec, char *err, size_t err_bytes)
{
    memset(rec, 0, sizeof *rec);
    char line[256], word[64];
    if (!line_(f, line, sizeof line) || strcmp(line, RECORD_HEADER) != 0)
        FAIL("not a flight record (the first line is not \"%s\")", RECORD_HEADER);
    if (!line_(f, line, sizeof line) ||
        sscanf(line, "rank %d of %d", &rec->rank, &rec->size) != 2 || rec->rank < 0 ||
        rec->size <= rec->rank)
        FAIL("bad rank line: %s", line);
    if (!line_(f, line, sizeof line) || sscanf(line, "host %63s", rec->host) != 1)
        FAIL("bad host line");
    if (!line_(f, line, sizeof line) || sscanf(line, "pid %d", &rec->pid) != 1)
        FAIL("bad pid line");
    if (!line_(f, line, sizeof line) || sscanf(line, "backend %15s", rec->backend) != 1)
        FAIL("bad backend line");
    if (!line_(f, line, sizeof line) || sscanf(line, "process %15s", rec->process) != 1)
        FAIL("bad process line");
    if (!line_(f, line, sizeof line) || sscanf(line, "written_by %d", &rec->written_by) != 1)
        FAIL("bad written_by line");
    if (!line_(f, line, sizeof line) || sscanf(line, "reason %47s", rec->reason) != 1)
        FAIL("bad reason line");
    if (!line_(f, line, sizeof line) || sscanf(line, "at_us %" SCNu64, &rec->at_us) != 1)
        FAIL("bad at_us line");
    if (!line_(f, line, sizeof line) || sscanf(line, "wall_us %" SCNu64, &rec->wall_us) != 1)
        FAIL("bad wall_us line");
    if (!line_(f, line, sizeof line) ||
        sscanf(line, "phase %63s %" SCNu64, word, &rec->phase_us) != 2)
        FAIL("bad phase line");
    rec->phase = lookup_(phase_names_, FLIGHT_PHASE_COUNT, word);
    if (!line_(f, line, sizeof line) || sscanf(line, "step %" SCNd64, &rec->step) != 1)
        FAIL("bad step line");
    unword_(rec->host);
    unword_(rec->backend);
    unword_(rec->process);
    unword_(rec->reason);
    int count;
    if (!line_(f, line, sizeof line) || sscanf(line, "entries %d", &count) != 1 || count < 0 ||
        count > FLIGHT_CAPACITY)
        FAIL("bad entries line");
    for (int i = 0; i < count; i++) {
        struct flight_entry_copy *e = &rec->entries[i];
        char kind[64], state[64];
        if (line_(f, line, sizeof line) != 1)
            FAIL("truncated: %d of %d entries", i, count);
        if (sscanf(line, "%" SCNu64 " %63s %" SCNu64 " %63s %d %" SCNu64 " %" SCNu64, &e->seq,
                   kind, &e->bytes, state, &e->peer, &e->start_us, &e->end_us) != 7)
            FAIL("bad entry %d: %s", i + 1, line);
        e->kind = lookup_(kind_names_, FLIGHT_KIND_COUNT, kind);
        e->state = lookup_(state_names_, sizeof state_names_ / sizeof state_names_[0], state);
        if (!e->kind || !e->state || e->seq == 0 || (i && e->seq <= rec->entries[i - 1].seq))
            FAIL("bad entry %d: %s", i + 1, line);
    }
    rec->count = count;
    return 0;
}
