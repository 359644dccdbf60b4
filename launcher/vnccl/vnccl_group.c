// vnccl_group.c: ncclGroupStart/End. Calls between them are queued (per
// thread, as NCCL's group state is) and run at the outermost End: the
// initialisations first, then each communicator's calls, its collectives in
// order and its sends and receives together. Where the group spans several
// communicators (one process driving several ranks: ncclCommInitAll, or a
// loop over devices), each runs on a thread of its own, since their ranks
// wait for each other.
#include <stdlib.h>
#include <string.h>

#include "vnccl.h"

struct queued {
    struct ncclComm *comm;
    struct vnccl_call call;
    // an initialisation: the communicator to fill, and its arguments
    int is_init, nranks, rank, device;
    struct vnccl_id id;
};

static __thread struct {
    int depth;
    struct queued *ops;
    int count, cap;
    ncclResult_t first_error; // an argument error met while queueing
} group_;

int vnccl_group_depth(void) { return group_.depth; }

static int push_(const struct queued *q)
{
    if (group_.count == group_.cap) {
        int cap = group_.cap ? 2 * group_.cap : 16;
        struct queued *ops = realloc(group_.ops, (size_t)cap * sizeof *ops);
        if (!ops) {
            group_.first_error = ncclSystemError;
            return 1;
        }
        group_.ops = ops;
        group_.cap = cap;
    }
    group_.ops[group_.count++] = *q;
    return 1;
}

int vnccl_group_queue(struct ncclComm *c, const struct vnccl_call *call)
{
    if (group_.depth == 0)
        return 0;
    struct queued q = {.comm = c, .call = *call};
    const int before = group_.count;
    push_(&q);
    // The call is in progress until the group has run it: an ncclCommAbort
    // of another thread (PyTorch's watchdog) waits for it, as for a call
    // outside a group, instead of freeing the communicator under it
    // (released by clear_).
    if (group_.count > before)
        atomic_fetch_add(&c->busy, 1);
    return 1;
}

int vnccl_group_queue_init(struct ncclComm *c, int nranks, const struct vnccl_id *id, int rank)
{
    if (group_.depth == 0)
        return 0;
    struct queued q = {.comm = c, .is_init = 1, .nranks = nranks, .rank = rank,
                       .device = vnccl_current_device(NULL, 0), .id = *id};
    return push_(&q);
}

void vnccl_group_start(void) { group_.depth++; }

void vnccl_group_fail(ncclResult_t st)
{
    if (group_.depth > 0 && group_.first_error == ncclSuccess)
        group_.first_error = st;
}

// One lane: a communicator's queued calls (or one initialisation).
struct lane {
    struct queued *ops;
    int count;
    ncclResult_t result;
    pthread_t thread;
};

static ncclResult_t run_comm_(struct ncclComm *c, struct queued *ops, int count)
{
    ncclResult_t st = ncclSuccess;
    int p2p = 0;
    for (int i = 0; i < count && st == ncclSuccess; i++) {
        if (ops[i].call.kind == VNCCL_SEND || ops[i].call.kind == VNCCL_RECV)
            p2p++;
        else
            st = vnccl_collective(c, &ops[i].call);
    }
    if (st != ncclSuccess || p2p == 0)
        return st;
    struct vnccl_call *calls = malloc((size_t)p2p * sizeof *calls);
    if (!calls)
        return ncclSystemError;
    int n = 0;
    for (int i = 0; i < count; i++)
        if (ops[i].call.kind == VNCCL_SEND || ops[i].call.kind == VNCCL_RECV)
            calls[n++] = ops[i].call;
    st = vnccl_p2p(c, calls, n);
    free(calls);
    return st;
}

static void *run_lane_(void *arg)
{
    struct lane *l = arg;
    struct queued *q = &l->ops[0];
    if (q->is_init) {
        vnccl_set_device(q->device);
        l->result = vnccl_join(q->comm, q->nranks, &q->id, q->rank);
        atomic_store(&q->comm->async_error, (int)l->result);
        return NULL;
    }
    vnccl_set_device(q->comm->device);
    l->result = run_comm_(q->comm, l->ops, l->count);
    return NULL;
}

// Runs lanes together (threads when there are several); the first error.
static ncclResult_t run_lanes_(struct lane *lanes, int n)
{
    if (n == 1) {
        run_lane_(&lanes[0]);
        return lanes[0].result;
    }
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&lanes[started].thread, NULL, run_lane_, &lanes[started]))
            break;
    for (int i = started; i < n; i++) // no thread for it: its peers will time out
        lanes[i].result = ncclSystemError;
    ncclResult_t st = ncclSuccess;
    for (int i = 0; i < n; i++) {
        if (i < started)
            pthread_join(lanes[i].thread, NULL);
        if (st == ncclSuccess)
            st = lanes[i].result;
    }
    return st;
}

// Sorts the queue into lanes: each initialisation its own, then one a
// communicator in order of first use (calls keep their order within it).
static ncclResult_t run_queue_(struct queued *ops, int count)
{
    struct queued *sorted = malloc((size_t)count * sizeof *sorted);
    struct lane *lanes = calloc((size_t)count, sizeof *lanes);
    char *taken = calloc((size_t)count, 1);
    if (!sorted || !lanes || !taken) {
        free(sorted);
        free(lanes);
        free(taken);
        return ncclSystemError;
    }
    int nl = 0, at = 0;
    for (int i = 0; i < count; i++)
        if (ops[i].is_init) {
            sorted[at] = ops[i];
            lanes[nl++] = (struct lane){.ops = &sorted[at++], .count = 1};
        }
    ncclResult_t st = nl ? run_lanes_(lanes, nl) : ncclSuccess;
    int first_comm_lane = nl;
    for (int i = 0; i < count; i++) {
        if (ops[i].is_init || taken[i])
            continue;
        struct ncclComm *c = ops[i].comm;
        struct lane *l = &lanes[nl++];
        l->ops = &sorted[at];
        for (int j = i; j < count; j++)
            if (!ops[j].is_init && ops[j].comm == c) {
                sorted[at++] = ops[j];
                taken[j] = 1;
                l->count++;
            }
    }
    if (st == ncclSuccess && nl > first_comm_lane)
        st = run_lanes_(lanes + first_comm_lane, nl - first_comm_lane);
    free(sorted);
    free(lanes);
    free(taken);
    return st;
}

static void clear_(void)
{
    for (int i = 0; i < group_.count; i++) // each queued call's hold (vnccl_group_queue)
        if (!group_.ops[i].is_init)
            atomic_fetch_sub(&group_.ops[i].comm->busy, 1);
    free(group_.ops);
    group_.ops = NULL;
    group_.count = group_.cap = 0;
    group_.first_error = ncclSuccess;
}

ncclResult_t vnccl_group_end(int simulate, float *estimate_s)
{
    if (group_.depth == 0)
        return ncclInvalidUsage;
    if (--group_.depth > 0)
        return ncclSuccess;
    ncclResult_t st = group_.first_error;
    if (simulate) {
        double total = 0;
        for (int i = 0; i < group_.count; i++)
            if (!group_.ops[i].is_init)
                total += vnccl_estimate_s(group_.ops[i].comm, &group_.ops[i].call);
        *estimate_s = (float)total;
    } else if (st == ncclSuccess && group_.count) {
        st = run_queue_(group_.ops, group_.count);
    }
    clear_();
    return st;
}
