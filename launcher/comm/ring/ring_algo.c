// ring_algo.c: the ring engine's all-reduce algorithms in one table, and the
// one place that chooses among them: by size and rank count, the facts the
// set-up agreed (one host with host windows, every window mapped writable,
// more ranks than cores), and VGPU_RING_ALGO. The all-reduce goes through
// here (ring_core_all_reduce); an algorithm is a file of its own and a row
// below (and one in the sizes' table where it wins).
#include <limits.h>

#include "env.h"
#include "ring_internal.h"
#include "status.h"

#define COUNT_(a) (sizeof(a) / sizeof *(a))

// The algorithms, in the order the choice tries them: the first whose sizes
// (struct ring_tune) hold the call and that this ring can run takes it. The
// ring, last, takes the rest. The names are VGPU_RING_ALGO's values (which
// common/env.c numbers as enum ring_algo, after "auto") and comm_ops.algo's
// answers.
static const struct algo_ {
    enum ring_algo algo;
    const char *name;
    ring_all_reduce_fn all_reduce;
    int (*usable)(const struct ring_core *r, uint64_t bytes); // NULL: every ring, every size
    int scratch; // carried through the latency path's scratch (sized for the largest such)
} algos_[] = {
    {RING_ALGO_ONE_SHOT, "one-shot", ring_one_shot_all_reduce, ring_shot_usable, 1},
    {RING_ALGO_TWO_SHOT, "two-shot", ring_two_shot_all_reduce, ring_shot_usable, 1},
    {RING_ALGO_DIRECT, "direct", ring_direct_all_reduce, ring_direct_usable, 0},
    {RING_ALGO_RING, "ring", ring_ring_all_reduce, NULL, 0}, // last: what no other takes
};

// ---- which sizes each algorithm takes ----

#define KIB_ (1ull << 10)
#define UPTO_(bytes) ((bytes) + 1) // an end_bytes: sizes up to `bytes`, inclusive
#define EVERY_ UINT64_MAX          // an end_bytes: every size
#define ANY_ (-1)                  // a fact that does not matter
#define ONE_ RING_ALGO_ONE_SHOT
#define TWO_ RING_ALGO_TWO_SHOT
#define DIRECT_ RING_ALGO_DIRECT

// Measured on a 2-core AMD EPYC (docs/COLLECTIVES.md: Choosing the
// algorithm, scripts/bench_allreduce_algos.sh). With the direct all-reduce
// (ring_direct.c: one hand-over more than one-shot, no copy through
// scratch) it takes over from one-shot at 1 KiB with a core a rank; with
// ranks sharing cores every hand-over costs a context switch and one-shot
// wins longer: up to 64 KiB at np 2 (measured with both ranks on one core),
// 16 KiB at np 3, 8 KiB at np 4; two-shot never. Without it (forced
// otherwise, or more ranks than it takes), against the ring: one-shot up to
// 8 KiB with a core a rank; sharing cores, 32 KiB at np 2 and 4, 128 KiB at
// np 3 (where two-shot never won), and two-shot at np 4 up to 512 KiB,
// where the ring's halved traffic starts to count. The first row that
// matches the facts gives the sizes; none: the ring alone (several hosts,
// device windows, one rank, VGPU_RING_ALGO=ring, or =direct without it).
// The two-shot column includes one-shot's sizes (it starts where one-shot
// ends): the ranks agree on each column's smallest, so a rank's column must
// bound the whole latency path to keep what others carry in their scratch.
static const struct tune_row_ {
    enum ring_algo forced; // VGPU_RING_ALGO (RING_ALGO_AUTO: by measurement)
    int direct;            // struct ring_algo_facts' direct: 0, 1, ANY_
    int over;              // its oversubscribed: 0, 1, ANY_
    int n_min, n_max;      // ranks
    struct ring_tune tune; // what each algorithm takes then
} rows_[] = {
    // Forced: one-shot or two-shot up to 4 MiB (the scratch each rank
    // commits), the ring above (two-shot: a barrier, 0 bytes, goes one-shot:
    // nothing to split); direct at every size, where it runs.
    {RING_ALGO_ONE_SHOT, ANY_, ANY_, 2, INT_MAX,
     {{[ONE_] = UPTO_(4096 * KIB_), [TWO_] = UPTO_(4096 * KIB_)}}},
    {RING_ALGO_TWO_SHOT, ANY_, ANY_, 2, INT_MAX,
     {{[ONE_] = UPTO_(0), [TWO_] = UPTO_(4096 * KIB_)}}},
    {RING_ALGO_DIRECT, 1, ANY_, 2, INT_MAX, {{[DIRECT_] = EVERY_}}},
    // Direct: one-shot below it.
    {RING_ALGO_AUTO, 1, 0, 2, INT_MAX,
     {{[ONE_] = UPTO_(1 * KIB_), [TWO_] = UPTO_(1 * KIB_), [DIRECT_] = EVERY_}}},
    {RING_ALGO_AUTO, 1, 1, 2, 2,
     {{[ONE_] = UPTO_(64 * KIB_), [TWO_] = UPTO_(64 * KIB_), [DIRECT_] = EVERY_}}},
    {RING_ALGO_AUTO, 1, 1, 3, 3,
     {{[ONE_] = UPTO_(16 * KIB_), [TWO_] = UPTO_(16 * KIB_), [DIRECT_] = EVERY_}}},
    {RING_ALGO_AUTO, 1, 1, 4, INT_MAX,
     {{[ONE_] = UPTO_(8 * KIB_), [TWO_] = UPTO_(8 * KIB_), [DIRECT_] = EVERY_}}},
    // No direct: one-shot (and two-shot) below the ring.
    {RING_ALGO_AUTO, 0, 0, 2, INT_MAX, {{[ONE_] = UPTO_(8 * KIB_), [TWO_] = UPTO_(8 * KIB_)}}},
    {RING_ALGO_AUTO, 0, 1, 2, 2, {{[ONE_] = UPTO_(32 * KIB_), [TWO_] = UPTO_(32 * KIB_)}}},
    {RING_ALGO_AUTO, 0, 1, 3, 3, {{[ONE_] = UPTO_(128 * KIB_), [TWO_] = UPTO_(128 * KIB_)}}},
    {RING_ALGO_AUTO, 0, 1, 4, INT_MAX,
     {{[ONE_] = UPTO_(32 * KIB_), [TWO_] = UPTO_(512 * KIB_)}}},
};

static int fact_is_(int want, int got) { return want == ANY_ || want == !!got; }

void ring_algo_tune(struct ring_tune *out, const struct ring_algo_facts *f)
{
    *out = (struct ring_tune){{0}};
    if (!f->one_host) // the latency path and direct read the other ranks' memory
        return;
    for (size_t i = 0; i < COUNT_(rows_); i++) {
        const struct tune_row_ *row = &rows_[i];
        if (row->forced == f->forced && fact_is_(row->direct, f->direct) &&
            fact_is_(row->over, f->oversubscribed) && f->ranks >= row->n_min &&
            f->ranks <= row->n_max) {
            *out = row->tune;
            return;
        }
    }
}

int ring_algo_direct_wanted(const struct ring_algo_facts *f)
{
    struct ring_algo_facts with = *f;
    with.direct = 1;
    struct ring_tune t;
    ring_algo_tune(&t, &with);
    return f->ranks <= RING_DIRECT_MAX_RANKS && t.end_bytes[RING_ALGO_DIRECT] != 0;
}

uint64_t ring_algo_scratch_bytes(const struct ring_tune *t)
{
    uint64_t most = 0;
    for (size_t i = 0; i < COUNT_(algos_); i++) {
        const uint64_t end = t->end_bytes[algos_[i].algo];
        if (algos_[i].scratch && end && end - 1 > most)
            most = end - 1;
    }
    return most;
}

enum ring_algo ring_algo_forced(void)
{
    // env.c's values: auto, then ring_algos.h's rows, which enum ring_algo numbers.
    return (enum ring_algo)(env_get()->ring_algo - 1);
}

// ---- the choice, per call ----

static const struct algo_ *choose_(const struct ring_core *r, uint64_t bytes)
{
    for (size_t i = 0; i + 1 < COUNT_(algos_); i++) {
        const struct algo_ *a = &algos_[i];
        const uint64_t end = r->tune.end_bytes[a->algo];
        if ((end == EVERY_ || bytes < end) && (!a->usable || a->usable(r, bytes)))
            return a;
    }
    return &algos_[COUNT_(algos_) - 1];
}

enum ring_algo ring_algo_for(const struct ring_core *r, uint64_t bytes)
{
    return choose_(r, bytes)->algo;
}

const char *ring_algo_name(enum ring_algo a)
{
    for (size_t i = 0; i < COUNT_(algos_); i++)
        if (algos_[i].algo == a)
            return algos_[i].name;
    return "ring";
}

int ring_core_all_reduce(struct ring_core *r, const void *send, void *recv, uint64_t count,
                         enum comm_dtype t, enum comm_reduce_op op)
{
    if (r->broken)
        return VGPU_ECOMM;
    return choose_(r, count * comm_dtype_size(t))->all_reduce(r, send, recv, count, t, op);
}

int ring_core_barrier(struct ring_core *r)
{
    // An empty all-reduce: its reduce-scatter chain alone proves that every
    // rank has arrived (rank p's last step needs p-1's, which needs p-2's ...).
    return ring_core_all_reduce(r, NULL, NULL, 0, COMM_FLOAT32, COMM_SUM);
}
