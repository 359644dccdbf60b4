// startup_watch.h: a bound on start-up, from before MPI_Init_thread to the
// first training step. Start-up is a row of blocking steps (MPI's wire-up,
// the communicator splits, device discovery, ring set-up); a rank that stops
// or dies in one would leave the others waiting in theirs for ever, and the
// control plane's bounded waits do not exist yet in most of them. A thread
// of each rank watches how long the current stage has lasted; past the bound
// it names the stage, asks the caller who is behind, prints one line and
// ends the process (exit status 1), which ends the job through its launcher.
//
// Time the process itself spent stopped (a whole-job suspend) does not count:
// the watcher's clock drops gaps of over a second between two of its looks.
#ifndef VGPU_STARTUP_WATCH_H
#define VGPU_STARTUP_WATCH_H

#include <stddef.h>

struct startup_watch_hooks {
    // Called by the watcher about ten times a second (a heartbeat that shows
    // host-mates this process runs); may be NULL.
    void (*beat)(void *arg);
    // Fills buf with who this rank is waiting for, e.g. "rank 2 (host a) is
    // stopped"; "" when it cannot tell. May be NULL.
    void (*describe)(void *arg, char *buf, size_t bytes);
    void *arg;
};

// Starts the watcher with its first stage. bound_s <= 0: no bound. Returns 0
// or a negative status (the thread could not start; start-up goes unwatched).
int startup_watch_begin(const char *stage, double bound_s);

// Enters the next stage (a string that lives for the program); its clock
// starts now. Safe to call when no watcher runs.
void startup_watch_stage(const char *stage);
void startup_watch_set_bound(double bound_s);
void startup_watch_set_hooks(const struct startup_watch_hooks *hooks);

// Start-up is over: stops and joins the watcher. Idempotent.
void startup_watch_end(void);

// The pure rule, for tests: whether a stage that has lasted waited_s seconds
// (own stopped time already removed) is past bound_s.
int startup_watch_expired(double waited_s, double bound_s);

#endif
