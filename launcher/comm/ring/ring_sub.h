// ring_sub.h: rings of a ring's own ranks (ring_sub.c): the hierarchical
// all-reduce across hosts, and the staged ring that carries small
// all-reduces where the ring's windows are GPU memory.
#ifndef VGPU_RING_SUB_H
#define VGPU_RING_SUB_H

#include "comm_internal.h"

struct ring_hier;

// The ranks a host when the n ranks (nodes[q]: rank q's host index) span
// two hosts or more with the same number, two or more, on each; else 0 (the
// flat ring).
int ring_hier_shape(const int *nodes, int n);

// *out: the hierarchical all-reduce for the ranks of `mpi` (c's), or NULL
// where ring_hier_shape says 0 or VGPU_RING_ALGO names an algorithm (the
// flat ring). world: the job's name of each rank (NULL: c's ranks are the
// job's). Collective over `mpi`; every rank gets the same result. 0 or a
// status (nothing left behind).
int ring_hier_create(comm_t *c, MPI_Comm mpi, const struct comm_args *args, const int *nodes,
                     const int *world, struct ring_hier **out);
// Whether it carries an all-reduce with this operation (not COMM_AVG).
int ring_hier_applies(const struct ring_hier *h, enum comm_reduce_op op);
// comm_ops.all_reduce, on device buffers.
int ring_hier_all_reduce(struct ring_hier *h, const void *send, void *recv, size_t count,
                         enum comm_dtype t, enum comm_reduce_op op);
// Seconds its sub-rings waited for peers.
double ring_hier_waited(const struct ring_hier *h);
void ring_hier_destroy(struct ring_hier *h);

// *out: a ring of the ranks of `mpi` (c's) with staging windows, for
// all-reduces of up to *bytes (ring_device_small_bytes; 0 and NULL where
// none). Collective over `mpi`. 0 or a status (nothing left behind).
int ring_small_create(comm_t *c, MPI_Comm mpi, const struct comm_args *args, const int *world,
                      comm_t **out, uint64_t *bytes);

#endif
