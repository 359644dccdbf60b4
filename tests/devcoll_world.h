// devcoll_world.h: fork()ed ranks for the device collectives' tests
// (test_devcoll.c, test_devcoll_p2p.c), with no MPI: n child processes that
// share one page (the handles, the arrivals), each running a rank's main on
// the simulated device, all reaped, or killed at a limit so that no test
// leaves a rank running.
#ifndef VGPU_DEVCOLL_WORLD_H
#define VGPU_DEVCOLL_WORLD_H

#include <stdint.h>
#include <stdio.h>

#include "devcoll.h"

#define WORLD_SPAWN_LIMIT_S 20 // a test's ranks are killed after this

// What the ranks of one test share (mapped before fork).
struct world {
    _Atomic int arrived; // arrivals at world_wait, all of them
    _Atomic int done;    // survivors of a dead or absent peer that have checked
    struct devcoll_handle h[DC_MAX_RANKS];
};

extern int world_me; // this child's rank, for its messages (-1 in the test's process)

// In a rank's main (or what it calls): a failed condition is printed and
// makes it return 1, which world_run reports.
#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "[rank %d] %s:%d: check failed: %s\n", world_me, __FILE__,       \
                    __LINE__, #cond);                                                        \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

// Waits until every rank has come here as often as this one (30 s at
// most): 0, or -1 at the limit.
int world_wait(struct world *w, int n);

// Creates this rank's communicator on the simulated device, exchanges the
// handles, connects, and waits for every peer to have connected. 0 or 1.
int world_join(struct world *w, int rank, int n, uint64_t area_bytes, double timeout_s,
               devcoll_t **d);

typedef int (*world_rank_fn)(struct world *w, int rank, int n, const void *arg);

// Runs fn on n fork()ed ranks (its return is the exit status); status[r]:
// rank r's wait status (-1: killed at the limit); *took_s: the wall time
// until the last one ended.
void world_spawn(int n, world_rank_fn fn, const void *arg, int *status, double *took_s);

// Whether a wait status is a rank that returned 0.
int world_exited_ok(int st);

// world_spawn where every rank must end well; returns the wall time.
double world_run(int n, world_rank_fn fn, const void *arg);

#endif
