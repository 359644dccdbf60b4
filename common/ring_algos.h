// ring_algos.h: the ring backend's all-reduce algorithms, a row each: the
// one list that VGPU_RING_ALGO's values (common/env.c: parsed, documented)
// and the ring's enum ring_algo (launcher/comm/ring/ring_internal.h) are
// generated from.
//
// Why the list is here, in common/, and holds names alone: env.c parses and
// documents VGPU_RING_ALGO, and common/ may not include the launcher's
// headers (vgpu_train prints the environment table from its own copy of
// common/, without the ring).
#ifndef VGPU_RING_ALGOS_H
#define VGPU_RING_ALGOS_H

// X(ID, id, name): the ring's enum ring_algo value RING_ALGO_<ID> and its
// name (VGPU_RING_ALGO's value, the algorithm comm_ops.algo and
// vgpu_all_reduce_algorithm answer). `id` names its functions (to come).
#define RING_ALGOS(X)                   \
    X(RING, ring, "ring")               \
    X(ONE_SHOT, one_shot, "one-shot")   \
    X(TWO_SHOT, two_shot, "two-shot")   \
    X(DIRECT, direct, "direct")

#endif
