// ring_sub.c: rings of a ring's own ranks, beside it.
//
// The hierarchical all-reduce across hosts, NCCL's shape for
// several ranks a host: the host's ranks sum through shared memory (a ring,
// or its latency path, on one host), one ring a local index carries that
// index's block of the host's sum between the hosts, and the host's ranks
// gather the blocks back. A host's network then carries 2(H-1)/H of the
// data instead of the flat ring's 2(n-1)/n (4 hosts of 2 ranks: 1.5 S
// against 1.75 S), in 2(H-1) steps a network link instead of 2(n-1).
// Every rank gets the same bits: the host's sum is the same on each of its
// ranks (the ring all-gathers it), and the rings between hosts see equal
// inputs in the same order.
#include <stdlib.h>

#include "comm_internal.h"
#include "env.h"
#include "log.h"
#include "ring_sub.h"
#include "status.h"

struct ring_hier {
    comm_t *local;  // this host's ranks
    comm_t *cross;  // one rank a host: those with this rank's local index
    int li;         // this rank's index among its host's ranks
};

int ring_hier_shape(const int *nodes, int n)
{
    int hosts = 0, per_host = 0;
    for (int q = 0; q < n; q++) {
        int first = 1, count = 0;
        for (int p = 0; p < n; p++) {
            first &= !(p < q && nodes[p] == nodes[q]);
            count += nodes[p] == nodes[q];
        }
        if (!first)
            continue;
        if (hosts++ && count != per_host)
            return 0; // uneven hosts: the flat ring
        per_host = count;
    }
    return hosts >= 2 && per_host >= 2 ? per_host : 0;
}

// A ring with `sub`'s arguments, created on all of `parent`'s ranks or on
// none: each ring agrees among its own ranks, this among all of them, so
// that no rank goes on without the others.
static int agreed_ring_(comm_t *c, MPI_Comm parent, const struct comm_args *sub, const char *what,
                        comm_t **out)
{
    int status = comm_agree(c, parent, comm_create(out, &comm_ring_ops, sub), what);
    if (status < 0 && *out) {
        comm_destroy(*out);
        *out = NULL;
    }
    return status;
}

// One sub-ring over the ranks of `parent` with this color, ordered by key;
// its ranks named as the job names them (world: the parent's names, or
// NULL when the parent's ranks are the job's).
static int sub_ring_(comm_t *c, MPI_Comm parent, int color, int key, const struct comm_args *args,
                     const int *world, comm_t **out)
{
    MPI_Comm split = MPI_COMM_NULL;
    int status = comm_mpi_check(MPI_Comm_split(parent, color, key, &split), "ring",
                                "MPI_Comm_split");
    int n = 0, *names = NULL, *mine = NULL;
    if (status == 0) {
        MPI_Comm_size(split, &n);
        names = malloc((size_t)n * sizeof *names);
        mine = malloc((size_t)n * sizeof *mine);
        status = names && mine ? 0 : VGPU_ENOMEM;
    }
    if (status == 0) { // sub rank q is parent rank names[q], the job's world[names[q]]
        MPI_Group sub_group, parent_group;
        MPI_Comm_group(split, &sub_group);
        MPI_Comm_group(parent, &parent_group);
        for (int q = 0; q < n; q++)
            mine[q] = q;
        MPI_Group_translate_ranks(sub_group, n, mine, parent_group, names);
        MPI_Group_free(&sub_group);
        MPI_Group_free(&parent_group);
        for (int q = 0; world && q < n; q++)
            names[q] = world[names[q]];
    }
    status = comm_agree(c, parent, status, "ring set-up (hierarchical)");
    if (status == 0) {
        struct comm_args sub = *args;
        sub.mpi_comm = split;
        sub.world_ranks = names;
        status = agreed_ring_(c, parent, &sub, "ring set-up (hierarchical)", out);
    }
    free(names);
    free(mine);
    if (split != MPI_COMM_NULL)
        MPI_Comm_free(&split); // the ring keeps a duplicate
    return status;
}

int ring_hier_create(comm_t *c, MPI_Comm mpi, const struct comm_args *args, const int *nodes,
                     const int *world, struct ring_hier **out)
{
    *out = NULL;
    const int n = c->size, me = c->rank;
    if (!ring_hier_shape(nodes, n))
        return 0;
    // VGPU_RING_ALGO=ring (or a forced one-host algorithm) on any rank: the
    // flat ring, on every rank (each must make the same calls from here).
    uint64_t allowed = env_get()->ring_algo == 0;
    int status = comm_mpi_min_u64_bounded(c, mpi, &allowed, "ring set-up (hierarchical)");
    if (status < 0 || !allowed)
        return status;
    int li = 0;
    for (int q = 0; q < me; q++)
        li += nodes[q] == nodes[me];
    struct ring_hier *h = calloc(1, sizeof *h);
    status = comm_agree(c, mpi, h ? 0 : VGPU_ENOMEM, "ring set-up (hierarchical)");
    if (status < 0) {
        free(h);
        return status;
    }
    h->li = li;
    status = sub_ring_(c, mpi, nodes[me], me, args, world, &h->local);
    if (status == 0)
        status = sub_ring_(c, mpi, li, nodes[me], args, world, &h->cross);
    if (status < 0) {
        ring_hier_destroy(h);
        return status;
    }
    *out = h;
    return 0;
}

int ring_hier_applies(const struct ring_hier *h, enum comm_reduce_op op)
{
    // An average of averages is not the average for integers (truncation):
    // the flat ring divides once.
    return h && op != COMM_AVG;
}

int ring_hier_all_reduce(struct ring_hier *h, const void *send, void *recv, size_t count,
                         enum comm_dtype t, enum comm_reduce_op op)
{
    comm_t *local = h->local, *cross = h->cross;
    const size_t es = comm_dtype_size(t), g = (size_t)local->size;
    const size_t block = count / g, tail = count - block * g;
    char *r = recv;
    TRY(local->ops->all_reduce(local, send, recv, count, t, op));
    if (block) {
        char *mine = r + (size_t)h->li * block * es;
        TRY(cross->ops->all_reduce(cross, mine, mine, block, t, op));
    }
    if (tail) { // under g elements: each local index carries them, the same bits
        char *end = r + g * block * es;
        TRY(cross->ops->all_reduce(cross, end, end, tail, t, op));
    }
    if (block)
        TRY(local->ops->all_gather(local, r + (size_t)h->li * block * es, r, block * es));
    return 0;
}

double ring_hier_waited(const struct ring_hier *h)
{
    double w = 0;
    if (h && h->local && h->local->ops->waited)
        w += h->local->ops->waited(h->local);
    if (h && h->cross && h->cross->ops->waited)
        w += h->cross->ops->waited(h->cross);
    return w;
}

// ---- small all-reduces on device windows ----
//
// Ranks sharing a GPU under MPS map each other's arenas, and the ring's every
// step synchronises the GPU stream: a floor of tens of microseconds at any
// size. A ring of the same ranks with staging windows takes the host latency
// path (one-shot, two-shot) instead, with two copies between the GPU and
// host memory: faster up to ring_device_small_bytes (ring_facts.c, measured).

int ring_small_create(comm_t *c, MPI_Comm mpi, const struct comm_args *args, const int *world,
                      comm_t **out, uint64_t *bytes)
{
    *out = NULL;
    *bytes = ring_device_small_bytes(c->size);
    if (!*bytes)
        return 0;
    struct comm_args sub = *args;
    sub.mpi_comm = mpi;
    sub.world_ranks = world;
    sub.force_staging = 1;
    sub.largest_bytes = *bytes;
    int status = agreed_ring_(c, mpi, &sub, "ring set-up (small collectives)", out);
    if (!*out)
        *bytes = 0;
    return status;
}

void ring_hier_destroy(struct ring_hier *h)
{
    if (!h)
        return;
    comm_destroy(h->cross);
    comm_destroy(h->local);
    free(h);
}
