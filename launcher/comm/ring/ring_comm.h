// ring_comm.h: the ring backend's communicator, shared by its set-up and
// teardown (comm_ring.c, which holds the backend's table) and its per-call
// path (ring_calls.c: device buffers to the engine's windows, in pieces).
#ifndef VGPU_RING_COMM_H
#define VGPU_RING_COMM_H

#include "comm_internal.h"
#include "devcoll.h"
#include "ring_internal.h"

struct ring_ctl;  // the host's control segment (comm_ring.c)
struct ring_peer; // what every rank tells every other at create (comm_ring.c)
struct ring_hier; // ring_sub.h

struct ring_comm {
    struct ring_core core;     // first: comm_ring.c's report_ gets back here from the core
    MPI_Comm mpi;              // duplicate of the communicator
    device_t *dev;
    struct ring_peer *peers;   // by rank, [size]
    int *order;                // ring position -> rank, [size]
    int *pos_of;               // rank -> ring position, [size]
    int *slot_of;              // rank -> slot index on its host, [size]
    int oversubscribed;        // this machine runs more ranks than it has cores
    struct ring_ctl *ctl;      // the host's control segment
    size_t ctl_bytes;
    enum ring_window kind;     // what the windows are (ring_window_kind)
    int staging;               // device buffers pass through `stage`
    char *stage;               // (staging) this rank's window
    uint64_t stage_bytes;
    void *left_map;            // the left neighbour's window, mapped read-only (not direct)
    size_t left_map_bytes;
    struct ring_link *all;     // (direct) every position's link, windows mapped writable, [size]
    void *left_dev;            // (device windows) the left's arena, opened by IPC
    uint64_t piece_bytes;      // unit of one engine pass, bytes
    struct ring_shot shot;     // the latency path (every rank on this host, host windows)
    int direct;                // every rank on this host, host windows: the direct all-reduce
    size_t shot_at;            // where its scratch starts in the control segment, bytes (0: none)
    int *world;                // the job's rank of each rank, [size]; NULL: the same
    struct ring_hier *hier;    // the all-reduce across hosts of several ranks each; NULL: flat
    comm_t *small;             // (device windows) a staged ring for small all-reduces; NULL: none
    uint64_t small_bytes;      // up to this size they take it, bytes
    struct devcoll *dc;        // the device collectives (every rank on this device); NULL: none
    struct devcoll_sim_ctx dc_view; // (simulated device collectives) how they reach dev's memory
};

// comm_ops' per-call operations (ring_calls.c), on c->impl, a struct ring_comm.
int ring_comm_all_reduce(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                         enum comm_reduce_op op);
int ring_comm_all_reduce_update(comm_t *c, float *grads, float *params, size_t count,
                                comm_update_fn update, void *ctx);
int ring_comm_broadcast(comm_t *c, void *buf, size_t bytes, int root);
int ring_comm_all_gather(comm_t *c, const void *send, void *recv, size_t bytes);
int ring_comm_all_to_all(comm_t *c, const void *send, void *recv, size_t bytes);
int ring_comm_send(comm_t *c, const void *buf, size_t bytes, int peer);
int ring_comm_recv(comm_t *c, void *buf, size_t bytes, int peer);
int ring_comm_barrier(comm_t *c);
double ring_comm_waited(const comm_t *c);
const char *ring_comm_algo(const comm_t *c, size_t bytes);
int ring_comm_async_error(comm_t *c);
int ring_comm_reduce_scatter(comm_t *c, const void *send, void *recv, size_t recv_count,
                             enum comm_dtype t, enum comm_reduce_op op);
int ring_comm_reduce(comm_t *c, const void *send, void *recv, size_t count, enum comm_dtype t,
                     enum comm_reduce_op op, int root);

#endif
