// flight.h: the flight recorder. Every rank keeps the last FLIGHT_CAPACITY
// collectives it entered (sequence number, kind, bytes, state, the peer it
// waits for, timestamps) and what it is doing between them (a phase), in a
// fixed ring with no allocation or I/O on the step path. When something goes
// wrong the ring is written to a text file (a "record"), and the records of
// a job's ranks give the verdict: the first collective that not every rank
// entered, who is missing, and what each was last doing.
//
// Every rank calls the same collectives in the same order (comm.h's
// contract), so sequence number k names the same call on every rank. The
// data plane (comm_*) and the control plane (runtime_*) share one numbering.
//
// One ring per process (a global, like the log's identity). Its owner writes
// it; another thread or a host-mate's process may read it at any time: an
// entry is published by its seq (written last, with release), so a reader
// that sees the seq it read before and after its copy has a whole entry.
#ifndef VGPU_FLIGHT_H
#define VGPU_FLIGHT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FLIGHT_CAPACITY 256 // entries a ring keeps (a power of two)

enum flight_kind {
    FLIGHT_ALL_REDUCE = 1,
    FLIGHT_ALL_REDUCE_UPDATE, // all-reduce with the sharded optimizer step
    FLIGHT_ALL_REDUCE_TREE,   // the deterministic all-reduce
    FLIGHT_BROADCAST,
    FLIGHT_ALL_GATHER,
    FLIGHT_BARRIER,
    FLIGHT_REDUCE_SCATTER,
    FLIGHT_CTL_GATHER, // control plane (host memory, MPI)
    FLIGHT_CTL_BROADCAST,
    FLIGHT_CTL_REDUCE,
    FLIGHT_CTL_BARRIER,
    FLIGHT_CTL_EXCHANGE, // rank 0 with each rank in turn (clock sync, the trace's gather)
    FLIGHT_REDUCE,       // to one root rank
    // Point-to-point: timeline spans only (trace.h; their number is the
    // peer's rank), never entries here: two ranks take part, and sequence
    // numbers name calls that every rank makes.
    FLIGHT_SEND,
    FLIGHT_RECV,
    FLIGHT_KIND_COUNT
};

enum flight_state {
    FLIGHT_ISSUED = 1, // entered, not finished
    FLIGHT_WAITING,    // entered, waiting for a peer (entry.peer, -1 = unknown)
    FLIGHT_DONE,
    FLIGHT_FAILED, // ended with an error (a timeout, a broken peer)
};

// What a rank does between collectives (the program says; FLIGHT_PHASE_NONE
// until it does).
enum flight_phase {
    FLIGHT_PHASE_NONE,
    FLIGHT_PHASE_SETUP,
    FLIGHT_PHASE_DATA,
    FLIGHT_PHASE_FORWARD,
    FLIGHT_PHASE_BACKWARD,
    FLIGHT_PHASE_OPTIMIZER,
    FLIGHT_PHASE_EVAL,
    FLIGHT_PHASE_CHECKPOINT,
    FLIGHT_PHASE_COUNT
};

struct flight_entry {
    _Atomic uint64_t seq;   // 0 = empty or being rewritten
    uint64_t bytes;         // payload bytes
    uint64_t start_us;      // CLOCK_MONOTONIC, microseconds
    _Atomic uint64_t end_us; // 0 = not finished
    uint32_t kind;          // enum flight_kind
    _Atomic uint32_t state; // enum flight_state
    _Atomic int32_t peer;   // the rank waited for (-1 = none known)
    uint32_t pad_;
};

// A ring. Lives in memory a host-mate can map (runtime) or in the process.
struct flight_ring {
    _Atomic uint32_t magic;
    uint32_t version;
    int32_t rank, size;
    int32_t pid, pad_;
    char host[64];
    char backend[16];
    _Atomic uint64_t next_seq;   // sequence number of the next collective (from 1)
    _Atomic uint32_t phase;      // enum flight_phase
    _Atomic uint64_t phase_us;   // when it began, CLOCK_MONOTONIC us
    _Atomic int64_t step;        // the program's step (training step; 0 = none said)
    struct flight_entry entries[FLIGHT_CAPACITY];
};

// ---- recording (the owner) ----

// Makes `ring` this process's ring (NULL: the built-in one) and stamps it
// with the identity; entries already recorded move with it.
void flight_use(struct flight_ring *ring, int rank, int size, const char *host);
// This process's ring (never NULL).
struct flight_ring *flight_ring_self(void);
void flight_set_backend(const char *backend);

// Enters a collective; returns its sequence number.
uint64_t flight_begin(enum flight_kind kind, uint64_t bytes);
// The collective in progress (the last one entered) waits for `peer` (-1:
// for someone unknown). Collectives do not nest.
void flight_waiting(int peer);
// The wait is over: the collective goes on (no-op unless it was waiting).
void flight_resumed(void);
// Ends it: rc 0 done, < 0 failed.
void flight_end(uint64_t seq, int rc);
void flight_phase(enum flight_phase phase);
// The program's step (a training step number), shown beside a rank's doing.
void flight_step(int64_t step);

// ---- records (the reader) ----

// A consistent copy of a ring at one moment, with what its writer knew.
struct flight_record {
    int rank, size, pid;
    char host[64];
    char backend[16];
    char process[16];  // "running", "stopped", "dead", as its writer saw it
    char reason[48];   // why it was written: "timeout", "SIGUSR2", ...
    int written_by;    // the rank that wrote it (itself, or a host-mate)
    uint64_t at_us;    // when it was copied, CLOCK_MONOTONIC us
    uint64_t wall_us;  // the same moment, CLOCK_REALTIME us
    uint32_t phase;
    uint64_t phase_us;
    int64_t step;
    int count;         // entries, oldest first
    struct flight_entry_copy {
        uint64_t seq, bytes, start_us, end_us;
        uint32_t kind, state;
        int32_t peer;
    } entries[FLIGHT_CAPACITY];
};

// Copies `ring` into *rec (entries caught mid-rewrite are left out).
// Returns 0, or -1 if the ring was never stamped (not a ring).
int flight_snapshot(const struct flight_ring *ring, struct flight_record *rec);

// Writes a record in the text form flight_read parses. 0 or -errno.
int flight_write(const struct flight_record *rec, FILE *f);
// Reads one; 0, or -1 with what is wrong in err.
int flight_read(FILE *f, struct flight_record *rec, char *err, size_t err_bytes);

const char *flight_kind_name(uint32_t kind);
const char *flight_state_name(uint32_t state);
const char *flight_phase_name(uint32_t phase);

// The verdict over a job's records: recs[r] is rank r's record or NULL
// (none known), for r < size. Writes lines to `out`: the first is the
// headline ("collective #57 (all-reduce, 203264 bytes) was not entered by
// rank 2; ranks 0, 1, 3 are in it"), then one line a rank. Returns 1 when a
// collective is stuck (some record has an unfinished collective), else 0.
int flight_verdict(const struct flight_record *const *recs, int size, FILE *out);

// The last `n` entries of a record, one line each, for "what is it doing".
void flight_print_last(const struct flight_record *rec, int n, FILE *out);

#endif
