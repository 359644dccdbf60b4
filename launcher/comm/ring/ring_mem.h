// ring_mem.h: how the ring engine touches memory. The ring's schedules
// (ring_ring.c, ring_gather.c) are one for every kind of window; what differs
// is how a chunk is reduced or copied (ring_core.c's ring_reduce, ring_copy,
// ring_settle; the one-host algorithms run on host windows only). Host
// memory (CPU devices, staging windows) is the engine's own loops and
// memcpy, seen by the neighbours as soon as it is written (ops == NULL).
// Device memory that the ranks map into each other (CUDA IPC of one GPU's
// arenas) is a kernel and asynchronous copies on the device's stream:
// nothing is written until the stream gets there, so `settle` waits for it.
// The engine calls settle before every publish of its progress, the host
// hand-shake its neighbours wait on: what a neighbour is told is done is done.
// Every operation writes only this rank's window and reads at most its left
// neighbour's.
#ifndef VGPU_RING_MEM_H
#define VGPU_RING_MEM_H

#include <stdint.h>

struct ring_mem_ops {
    // dst[i] = mine[i] op theirs[i] for n elements of type dtype (comm.h's
    // enum comm_dtype; op its enum comm_reduce_op), then / avg_div where
    // avg_div != 0 (kernels.h's kernel_reduce_*, no contraction: the same
    // bits on every implementation); dst may be mine.
    int (*reduce)(void *ctx, void *dst, const void *mine, const void *theirs, uint64_t n,
                  int dtype, int op, int avg_div);
    // bytes from src to dst (the engine never passes overlapping ranges).
    int (*copy)(void *ctx, void *dst, const void *src, uint64_t bytes);
    // Returns once every operation issued so far is complete and visible to
    // the other processes.
    int (*settle)(void *ctx);
    void *ctx;
};

#endif
