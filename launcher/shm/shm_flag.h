// shm_flag.h: bounded waiting on a progress counter in memory shared between
// processes: spin briefly, then yield the core for a while, then sleep on a
// futex that the publisher wakes.
//
// Why not pure spinning: ranks routinely outnumber cores (4 ranks on 2
// cores), and a spinning waiter burns the time slice that the peer it waits
// for needs. Why spin first: when a core is free the peer usually publishes
// within microseconds, and a sleep/wake costs several. Why yield before
// sleeping: on a shared core sched_yield hands the core straight to the peer,
// which then runs until it publishes; a futex sleep and wake-up costs ~25 us
// a hand-over on top (4 ranks on 2 cores: an 8-byte all-reduce in 190 us
// sleeping, 50 us yielding; docs/COLLECTIVES.md). Sleep only when the wait is
// long (the peer is computing), so an idle waiter stops using the CPU.
#ifndef VGPU_SHM_FLAG_H
#define VGPU_SHM_FLAG_H

#include <stdatomic.h>
#include <stdint.h>

// One publisher's counter. Lives in shared memory (all-zero is a valid
// initial state); only its owner publishes, any number of processes wait.
struct shm_flag {
    _Atomic uint64_t value;    // monotonically increasing progress, steps
    _Atomic uint32_t seq;      // futex word: bumped by every publish
    _Atomic uint32_t sleepers; // waiters that may be asleep on seq, count
};

struct shm_flag_wait_opts {
    double timeout_s;    // give up after this long, seconds (<= 0: never)
    unsigned spin_count; // polls before yielding, iterations
    double yield_s;      // then sched_yield between polls for this long before sleeping, s
    // Called once, when half of timeout_s has passed without progress (may be NULL).
    void (*on_slow)(void *arg, double waited_s);
    void *arg;           // passed to on_slow
    double *waited_s;    // out (may be NULL): on VGPU_ETIMEOUT, the time waited by the
                         // wait clock (util.h: time the waiter was stopped not counted), s
};

// Stores `value` (must not decrease) and wakes sleeping waiters. The store is
// a release: everything written before it is visible to a waiter that sees it.
// Makes a system call only when some waiter is asleep.
void shm_flag_publish(struct shm_flag *f, uint64_t value);

// The current value (an acquire load).
uint64_t shm_flag_read(struct shm_flag *f);

// Waits until the flag's value is >= target. Returns 0, or VGPU_ETIMEOUT
// after o->timeout_s (nothing is logged here: the caller knows who it waited for).
int shm_flag_wait(struct shm_flag *f, uint64_t target, const struct shm_flag_wait_opts *o);

#endif
