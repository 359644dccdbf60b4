// ring_algos.h: the ring backend's all-reduce algorithms, a row each: the
// one list that VGPU_RING_ALGO's values (common/env.c: parsed, documented)
// and the ring's algorithm table (launcher/comm/ring/ring_algo.c: the enum,
// the table, the choice) are generated from. Adding an algorithm is its file
// in launcher/comm/ring/ (which defines its descriptor, ring_<id>_algo:
// its functions and what it carries when forced; ring_internal.h's struct
// ring_algo_desc) and its row here.
//
// Why the list is here, in common/, and holds names alone: env.c parses and
// documents VGPU_RING_ALGO, and common/ may not include the launcher's
// headers (vgpu_train prints the environment table from its own copy of
// common/, without the ring). What an algorithm is beyond its name belongs
// to its file, so that nothing else changes with it.
#ifndef VGPU_RING_ALGOS_H
#define VGPU_RING_ALGOS_H

// X(ID, id, name): the ring's enum ring_algo value RING_ALGO_<ID>, its
// descriptor ring_<id>_algo, and its name (VGPU_RING_ALGO's value, the
// algorithm comm_ops.algo and vgpu_all_reduce_algorithm answer). The order
// is the choice's: the first row, the ring, takes what none of the others
// takes, and they are tried in their order (ring_algo.c).
#define RING_ALGOS(X)                   \
    X(RING, ring, "ring")               \
    X(ONE_SHOT, one_shot, "one-shot")   \
    X(TWO_SHOT, two_shot, "two-shot")   \
    X(DIRECT, direct, "direct")

#endif
