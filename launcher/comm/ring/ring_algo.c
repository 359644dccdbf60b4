// ring_algo.c: the one place that chooses among the ring engine's all-reduce
// algorithms: by size and rank count, the facts the set-up agreed (one host
// with host windows, every window mapped writable, more ranks than cores),
// and VGPU_RING_ALGO. The all-reduce goes through here (ring_core_all_reduce).
//
// An algorithm is its file (with its descriptor, struct ring_algo_desc) and
// its row in common/ring_algos.h; the table below and what VGPU_RING_ALGO
// forces are generated from those. The sizes' table (rows_) is a tuning
// table: an algorithm that is never chosen by itself needs no entry there;
// one that wins at some sizes, once measured, gets a column value in the
// rows where it wins.
#include <limits.h>

#include "env.h"
#include "ring_internal.h"
#include "status.h"

#define COUNT_(a) (sizeof(a) / sizeof *(a))

// The algorithms by enum ring_algo (ring_algos.h's order, which is the
// choice's): the first after the ring whose sizes (struct ring_tune) hold the
// call and that this ring can run takes it; the ring, first, takes the rest.
static const struct algo_ {
    const char *name;              // VGPU_RING_ALGO's value, comm_ops.algo's answer
    const struct ring_algo_desc *d; // its file's descriptor
} algos_[] = {
#define ALGO_ROW_(ID, id, name) [RING_ALGO_##ID] = {name, &ring_##id##_algo},
    RING_ALGOS(ALGO_ROW_)
#undef ALGO_ROW_
};
_Static_assert(COUNT_(algos_) == RING_ALGO_COUNT && RING_ALGO_RING == 0,
               "ring_algos.h: one row an algorithm, the ring first");

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
// matches the facts gives the sizes; none: the ring alone (one rank).
// The two-shot column includes one-shot's sizes (it starts where one-shot
// ends): the ranks agree on each column's smallest, so a rank's column must
// bound the whole latency path to keep what others carry in their scratch.
// VGPU_RING_ALGO=<name> takes no row here: forced_tune_ below.
static const struct tune_row_ {
    int direct;            // struct ring_algo_facts' direct: 0, 1, ANY_
    int over;              // its oversubscribed: 0, 1, ANY_
    int n_min, n_max;      // ranks
    struct ring_tune tune; // what each algorithm takes then
} rows_[] = {
    // Direct: one-shot below it.
    {1, 0, 2, INT_MAX,
     {{[ONE_] = UPTO_(1 * KIB_), [TWO_] = UPTO_(1 * KIB_), [DIRECT_] = EVERY_}}},
    {1, 1, 2, 2,
     {{[ONE_] = UPTO_(64 * KIB_), [TWO_] = UPTO_(64 * KIB_), [DIRECT_] = EVERY_}}},
    {1, 1, 3, 3,
     {{[ONE_] = UPTO_(16 * KIB_), [TWO_] = UPTO_(16 * KIB_), [DIRECT_] = EVERY_}}},
    {1, 1, 4, INT_MAX,
     {{[ONE_] = UPTO_(8 * KIB_), [TWO_] = UPTO_(8 * KIB_), [DIRECT_] = EVERY_}}},
    // No direct: one-shot (and two-shot) below the ring.
    {0, 0, 2, INT_MAX, {{[ONE_] = UPTO_(8 * KIB_), [TWO_] = UPTO_(8 * KIB_)}}},
    {0, 1, 2, 2, {{[ONE_] = UPTO_(32 * KIB_), [TWO_] = UPTO_(32 * KIB_)}}},
    {0, 1, 3, 3, {{[ONE_] = UPTO_(128 * KIB_), [TWO_] = UPTO_(128 * KIB_)}}},
    {0, 1, 4, INT_MAX,
     {{[ONE_] = UPTO_(32 * KIB_), [TWO_] = UPTO_(512 * KIB_)}}},
};

static int fact_is_(int want, int got) { return want == ANY_ || want == !!got; }

// VGPU_RING_ALGO=<name>, from its descriptor: it carries its sizes
// (forced_min_bytes to forced_max_bytes), the algorithms before it what is
// below them, and the ring the rest; where it needs every window and they
// are not all mapped, the ring all. The latency path's columns after it
// include its sizes, as in rows_ (the ranks agree on each column's smallest).
static void forced_tune_(struct ring_tune *out, const struct ring_algo_facts *f)
{
    const struct ring_algo_desc *d = algos_[f->forced].d;
    if (d->all_windows && !f->direct)
        return;
    const uint64_t end = d->forced_max_bytes == UINT64_MAX ? EVERY_ : UPTO_(d->forced_max_bytes);
    for (int a = 0; a < RING_ALGO_COUNT; a++) {
        if (a == RING_ALGO_RING) // the ring: what the rest leave
            continue;
        if (a < (int)f->forced)
            out->end_bytes[a] = d->forced_min_bytes;
        else if (a == (int)f->forced || (d->scratch && algos_[a].d->scratch))
            out->end_bytes[a] = end;
    }
}

void ring_algo_tune(struct ring_tune *out, const struct ring_algo_facts *f)
{
    *out = (struct ring_tune){{0}};
    if (!f->one_host || f->ranks < 2) // the ring alone: every other reads the others' memory
        return;
    if (f->forced != RING_ALGO_AUTO) {
        forced_tune_(out, f);
        return;
    }
    for (size_t i = 0; i < COUNT_(rows_); i++) {
        const struct tune_row_ *row = &rows_[i];
        if (fact_is_(row->direct, f->direct) && fact_is_(row->over, f->oversubscribed) &&
            f->ranks >= row->n_min && f->ranks <= row->n_max) {
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
    for (int a = 0; a < RING_ALGO_COUNT; a++)
        if (algos_[a].d->all_windows && t.end_bytes[a] != 0)
            return f->ranks <= RING_DIRECT_MAX_RANKS;
    return 0;
}

uint64_t ring_algo_scratch_bytes(const struct ring_tune *t)
{
    uint64_t most = 0;
    for (int a = 0; a < RING_ALGO_COUNT; a++) {
        const uint64_t end = t->end_bytes[a];
        if (algos_[a].d->scratch && end && end - 1 > most)
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

enum ring_algo ring_algo_for(const struct ring_core *r, uint64_t bytes)
{
    for (int a = 0; a < RING_ALGO_COUNT; a++) {
        const struct ring_algo_desc *d = algos_[a].d;
        const uint64_t end = r->tune.end_bytes[a];
        if (a != RING_ALGO_RING && (end == EVERY_ || bytes < end) &&
            (!d->usable || d->usable(r, bytes)))
            return (enum ring_algo)a;
    }
    return RING_ALGO_RING;
}

const char *ring_algo_name(enum ring_algo a)
{
    return a >= 0 && a < RING_ALGO_COUNT ? algos_[a].name : "ring";
}

int ring_core_all_reduce(struct ring_core *r, const void *send, void *recv, uint64_t count,
                         enum comm_dtype t, enum comm_reduce_op op)
{
    if (r->broken)
        return VGPU_ECOMM;
    const enum ring_algo a = ring_algo_for(r, count * comm_dtype_size(t));
    return algos_[a].d->all_reduce(r, send, recv, count, t, op);
}

int ring_core_barrier(struct ring_core *r)
{
    // An empty all-reduce: its reduce-scatter chain alone proves that every
    // rank has arrived (rank p's last step needs p-1's, which needs p-2's ...).
    return ring_core_all_reduce(r, NULL, NULL, 0, COMM_FLOAT32, COMM_SUM);
}
