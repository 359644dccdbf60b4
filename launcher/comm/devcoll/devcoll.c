// devcoll.c: the host side of the device collectives: the windows, the
// calls' arguments and rounds, the algorithm choice, the errors, and the
// watchdog that turns a peer's death into an abort the device's waits see.
#include "devcoll.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "env.h"
#include "status.h"
#include "util.h"

#define SAME_(x, y) ((int)(x) == (int)(y))
_Static_assert(SAME_(DC_F32, COMM_FLOAT32) && SAME_(DC_F64, COMM_FLOAT64) &&
                   SAME_(DC_I32, COMM_INT32) && SAME_(DC_I64, COMM_INT64) &&
                   SAME_(DC_F16, COMM_FLOAT16) && SAME_(DC_BF16, COMM_BFLOAT16),
               "devcoll_proto.h's types are comm.h's");
_Static_assert(SAME_(KERNEL_OP_SUM, COMM_SUM) && SAME_(KERNEL_OP_AVG, COMM_AVG) &&
                   SAME_(KERNEL_OP_PROD, COMM_PROD) && SAME_(KERNEL_OP_MIN, COMM_MIN) &&
                   SAME_(KERNEL_OP_MAX, COMM_MAX),
               "kernels.h's operations are comm.h's");
_Static_assert(sizeof(struct dc_head) <= DC_HEAD_BYTES, "the mailboxes fit the head");

#define DEVCOLL_AREA_DEFAULT (4u << 20)
#define DEVCOLL_WATCH_MS 20

struct devcoll {
    const struct devcoll_exec *ex;
    void *ctx;
    int rank, n;
    uint64_t area_bytes, win_bytes;
    uint64_t timeout_ns;
    uint64_t rounds;            // launched so far
    uint64_t sent[DC_MAX_RANKS], received[DC_MAX_RANKS]; // point-to-point messages, by peer
    int blocks;                 // a call's blocks (devcoll_connect: every rank's least)
    int launch_failed;          // a launch failed: its rounds no longer match the peers'
    int keep_window;            // devcoll_abandon: a peer may still have it open
    enum devcoll_algo forced;   // VGPU_DEVCOLL_ALGO
    void *win;                  // this rank's window
    unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES];
    char *peer_win[DC_MAX_RANKS]; // every rank's window here (this rank's own at [rank])
    int32_t pid[DC_MAX_RANKS];
    struct dc_status *status_host, *status_dev;
    pthread_t watch;
    int watching;
    int (*failed_elsewhere)(void *arg); // devcoll_watch_also
    void *failed_arg;
    _Atomic int stop;
};

static enum devcoll_algo forced_algo_(void)
{
    const char *v = env_read("VGPU_DEVCOLL_ALGO");
    if (!v || !strcmp(v, "auto"))
        return DEVCOLL_AUTO;
    if (!strcmp(v, "oneshot"))
        return DEVCOLL_ONESHOT;
    if (!strcmp(v, "twoshot"))
        return DEVCOLL_TWOSHOT;
    env_warn_malformed("VGPU_DEVCOLL_ALGO", v, "auto, oneshot or twoshot");
    return DEVCOLL_AUTO;
}

static uint64_t area_default_(void)
{
    const char *v = env_read("VGPU_DEVCOLL_AREA_KB");
    if (!v)
        return DEVCOLL_AREA_DEFAULT;
    char *end;
    const unsigned long kb = strtoul(v, &end, 10);
    if (end != v && !*end && kb >= 1 && kb <= (1ul << 20))
        return (uint64_t)kb << 10;
    env_warn_malformed("VGPU_DEVCOLL_AREA_KB", v, "1 to 1048576");
    return DEVCOLL_AREA_DEFAULT;
}

int devcoll_create(const struct devcoll_exec *ex, void *ctx, int rank, int n,
                   uint64_t area_bytes, double timeout_s, devcoll_t **out)
{
    *out = NULL;
    if (n < 1 || n > DC_MAX_RANKS || rank < 0 || rank >= n || !(timeout_s > 0) ||
        ex->blocks < 1 || ex->blocks > DC_MAX_BLOCKS || ex->lanes < 1)
        return VGPU_EINVAL;
    devcoll_t *d = calloc(1, sizeof *d);
    if (!d)
        return VGPU_ENOMEM;
    d->ex = ex;
    d->ctx = ctx;
    d->rank = rank;
    d->n = n;
    d->area_bytes = (area_bytes ? area_bytes : area_default_()) / DC_UNIT * DC_UNIT;
    // Reduce-scatter cuts an area into n pieces of whole units.
    if (d->area_bytes < (uint64_t)n * DC_UNIT)
        d->area_bytes = (uint64_t)n * DC_UNIT;
    d->win_bytes = DC_HEAD_BYTES + 4 * d->area_bytes;
    d->timeout_ns = timeout_s < 1e9 ? (uint64_t)(timeout_s * 1e9) : (uint64_t)1e18;
    d->blocks = ex->blocks;
    if (ex->max_blocks) {
        const int most = ex->max_blocks(ctx, n);
        d->blocks = most < 1 ? 1 : most < d->blocks ? most : d->blocks;
    }
    d->forced = forced_algo_();
    int status = ex->status_alloc(ctx, &d->status_host, &d->status_dev);
    if (status == 0)
        status = ex->win_create(ctx, d->win_bytes, &d->win, d->handle);
    if (status != 0) {
        devcoll_destroy(d);
        return status;
    }
    d->peer_win[rank] = d->win;
    d->pid[rank] = (int32_t)getpid();
    *out = d;
    return 0;
}

void devcoll_handle(const devcoll_t *d, struct devcoll_handle *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->win, d->handle, sizeof h->win);
    h->pid = (int32_t)getpid();
    h->rank = d->rank;
    h->blocks = d->blocks;
    h->win_bytes = d->win_bytes;
}

// Every DEVCOLL_WATCH_MS: a peer whose process is gone aborts this rank's
// waits, naming it (the device cannot see processes).
static void *watch_(void *arg)
{
    devcoll_t *d = arg;
    const struct timespec tick = {0, DEVCOLL_WATCH_MS * 1000000L};
    while (!d->stop) {
        for (int q = 0; q < d->n; q++)
            if (q != d->rank && util_proc_gone(d->pid[q])) {
                devcoll_abort(d, q);
                return NULL;
            }
        if (d->failed_elsewhere && d->failed_elsewhere(d->failed_arg)) {
            devcoll_abort(d, d->rank);
            return NULL;
        }
        nanosleep(&tick, NULL);
    }
    return NULL;
}

void devcoll_watch_also(devcoll_t *d, int (*failed)(void *arg), void *arg)
{
    d->failed_elsewhere = failed;
    d->failed_arg = arg;
}

int devcoll_connect(devcoll_t *d, const struct devcoll_handle *all)
{
    for (int q = 0; q < d->n; q++)
        if (all[q].rank != q || all[q].win_bytes != d->win_bytes || all[q].blocks < 1)
            return VGPU_EINVAL;
    for (int q = 0; q < d->n; q++) // block b pairs with block b: every rank alike
        d->blocks = all[q].blocks < d->blocks ? all[q].blocks : d->blocks;
    for (int q = 0; q < d->n; q++) {
        d->pid[q] = all[q].pid;
        if (q == d->rank)
            continue;
        void *w;
        const int status = d->ex->win_open(d->ctx, all[q].win, d->win_bytes, &w);
        if (status != 0)
            return status;
        d->peer_win[q] = w;
    }
    if (d->n > 1 && pthread_create(&d->watch, NULL, watch_, d) == 0)
        d->watching = 1;
    return 0;
}

void devcoll_close_peers(devcoll_t *d)
{
    if (!d)
        return;
    if (d->watching) {
        d->stop = 1;
        pthread_join(d->watch, NULL);
        d->watching = 0;
    }
    for (int q = 0; q < d->n; q++)
        if (q != d->rank && d->peer_win[q]) {
            d->ex->win_close(d->ctx, d->peer_win[q], d->win_bytes);
            d->peer_win[q] = NULL;
        }
}

void devcoll_destroy(devcoll_t *d)
{
    if (!d)
        return;
    devcoll_close_peers(d);
    // After an error a peer may not have run its call yet, and would write
    // into a freed, exported allocation (on a GPU: a fault for every client
    // of the MPS server): left to the process's end, which frees it.
    const int failed = d->status_host && devcoll_error(d, NULL, NULL, 0) != 0;
    if (d->win && (d->ex->on_host || (!failed && !d->keep_window)))
        d->ex->win_free(d->ctx, d->win, d->win_bytes, d->handle);
    if (d->status_host)
        d->ex->status_free(d->ctx, d->status_host);
    free(d);
}

void devcoll_abandon(devcoll_t *d)
{
    if (d)
        d->keep_window = 1;
    devcoll_destroy(d);
}

int devcoll_mode(void)
{
    const char *v = env_read("VGPU_DEVCOLL");
    if (!v || !strcmp(v, "auto"))
        return -1;
    if (!strcmp(v, "0") || !strcmp(v, "1"))
        return v[0] - '0';
    env_warn_malformed("VGPU_DEVCOLL", v, "auto, 0 or 1");
    return -1;
}

int devcoll_applies(int mode, int has_exec, int gpu, int mps, int ranks)
{
    if (mode == 0 || !has_exec || ranks < 2 || ranks > DC_MAX_RANKS)
        return 0;
    return mode == 1 || (gpu && mps);
}

enum devcoll_algo devcoll_algo_for(const devcoll_t *d, uint64_t bytes)
{
    if (d->forced != DEVCOLL_AUTO)
        return d->forced;
    // On paper until the GPU check measures both (docs/COLLECTIVES.md): one
    // launch reads n inputs (n x the data) where two-shot reads ~2x with a
    // second barrier; vLLM's custom all-reduce switches near 256 KiB on
    // 2-4 GPUs and lower with more.
    const uint64_t one_shot_max = d->n <= 4 ? 256u << 10 : 64u << 10;
    return d->n <= 2 || bytes <= one_shot_max ? DEVCOLL_ONESHOT : DEVCOLL_TWOSHOT;
}

const char *devcoll_algo_name(enum devcoll_algo a)
{
    return a == DEVCOLL_ONESHOT ? "oneshot" : a == DEVCOLL_TWOSHOT ? "twoshot" : "auto";
}

uint64_t devcoll_rounds(const devcoll_t *d) { return d->rounds; }

// The arguments every call carries.
static void args_(const devcoll_t *d, struct dc_args *a, int kind, const void *send, void *recv)
{
    memset(a, 0, sizeof *a);
    memcpy(a->win, d->peer_win, sizeof a->win);
    a->area_bytes = d->area_bytes;
    a->send = send;
    a->recv = recv;
    a->kind = kind;
    a->dtype = DC_BYTE;
    a->rank = d->rank;
    a->n = d->n;
    a->round0 = d->rounds;
    a->status = d->status_dev;
    a->timeout_ns = d->timeout_ns;
}

static int go_(devcoll_t *d, const struct dc_args *a, void *stream)
{
    if (d->launch_failed)
        return VGPU_ECOMM;
    const int status = d->ex->launch(d->ctx, stream, a, d->blocks, d->ex->lanes);
    if (status == 0) {
        d->rounds += dc_rounds(a);
    } else { // this rank's rounds would pair with the peers' earlier ones: no more calls
        d->launch_failed = 1;
        devcoll_abort(d, d->rank);
    }
    return status;
}

static int launch_(devcoll_t *d, int kind, const void *send, void *recv, uint64_t count,
                   int dtype, int op, int root, void *stream)
{
    const int moves = kind == DC_ALL_GATHER || kind == DC_BROADCAST || kind == DC_MARK;
    if (dtype < 0 || dtype >= (moves ? DC_TYPES : DC_BYTE) || op < 0 || op >= COMM_OP_COUNT ||
        root < 0 || root >= d->n || count >= DC_MAX_COUNT)
        return VGPU_EINVAL;
    // Only the buffers this rank's call touches: broadcast reads send on
    // root alone, reduce writes recv on root alone (as NCCL's).
    const int off_root = d->rank != root;
    const int needs_send = kind != DC_MARK && !(kind == DC_BROADCAST && off_root);
    const int needs_recv = kind != DC_MARK && !(kind == DC_REDUCE && off_root);
    if (count && ((needs_send && !send) || (needs_recv && !recv)))
        return VGPU_EINVAL;
    struct dc_args a;
    args_(d, &a, kind, send, recv);
    a.count = kind == DC_MARK ? 0 : count; // a mark's "count" is its tag
    a.dtype = dtype;
    a.op = op;
    a.root = root;
    a.desc = dc_desc(kind, dtype, op, root, count);
    return go_(d, &a, stream);
}

// A message's two sides: the peer is another rank, the size one the
// marks can count in pieces.
static int p2p_(devcoll_t *d, int kind, const void *send, void *recv, uint64_t bytes, int peer,
                void *stream)
{
    if (peer < 0 || peer >= d->n || peer == d->rank || bytes >= DC_MAX_COUNT ||
        bytes / d->area_bytes >= UINT32_MAX || (bytes && !send && !recv))
        return VGPU_EINVAL;
    uint64_t *msgs = kind == DC_SEND ? &d->sent[peer] : &d->received[peer];
    struct dc_args a;
    args_(d, &a, kind, send, recv);
    a.count = bytes;
    a.peer = peer;
    a.msg = *msgs;
    const int status = go_(d, &a, stream);
    if (status == 0)
        *msgs += 1;
    return status;
}

int devcoll_send(devcoll_t *d, const void *buf, uint64_t bytes, int peer, void *stream)
{
    return p2p_(d, DC_SEND, buf, NULL, bytes, peer, stream);
}

int devcoll_recv(devcoll_t *d, void *buf, uint64_t bytes, int peer, void *stream)
{
    return p2p_(d, DC_RECV, NULL, buf, bytes, peer, stream);
}

int devcoll_all_reduce(devcoll_t *d, const void *send, void *recv, uint64_t count, int dtype,
                       int op, void *stream)
{
    const uint64_t bytes = dtype >= 0 && dtype < DC_TYPES ? count * dc_elem_bytes(dtype) : 0;
    const int kind = devcoll_algo_for(d, bytes) == DEVCOLL_TWOSHOT ? DC_ALL_REDUCE_TWO
                                                                    : DC_ALL_REDUCE_ONE;
    return launch_(d, kind, send, recv, count, dtype, op, 0, stream);
}

int devcoll_reduce_scatter(devcoll_t *d, const void *send, void *recv, uint64_t count,
                           int dtype, int op, void *stream)
{
    return launch_(d, DC_REDUCE_SCATTER, send, recv, count, dtype, op, 0, stream);
}

int devcoll_all_gather(devcoll_t *d, const void *send, void *recv, uint64_t count, int dtype,
                       void *stream)
{
    return launch_(d, DC_ALL_GATHER, send, recv, count, dtype, COMM_SUM, 0, stream);
}

int devcoll_broadcast(devcoll_t *d, const void *send, void *recv, uint64_t count, int dtype,
                      int root, void *stream)
{
    return launch_(d, DC_BROADCAST, send, recv, count, dtype, COMM_SUM, root, stream);
}

int devcoll_reduce(devcoll_t *d, const void *send, void *recv, uint64_t count, int dtype, int op,
                   int root, void *stream)
{
    return launch_(d, DC_REDUCE, send, recv, count, dtype, op, root, stream);
}

int devcoll_mark(devcoll_t *d, uint64_t tag, void *stream)
{
    return launch_(d, DC_MARK, NULL, NULL, tag & (DC_MAX_COUNT - 1), DC_BYTE, COMM_SUM, 0, stream);
}

int devcoll_sync(devcoll_t *d)
{
    const int status = d->ex->sync(d->ctx);
    return status ? status : devcoll_error(d, NULL, NULL, 0);
}

// The status's error and the rank it names, as the user should read them:
// a peer that gave up, or one that never came, may have done so because a
// third one died, and the dead one is where to look.
static uint32_t fault_(const devcoll_t *d, int *who)
{
    const struct dc_status *s = d->status_host;
    const uint32_t error = __atomic_load_n(&s->error, __ATOMIC_ACQUIRE);
    *who = s->peer;
    if (error == DC_ERR_LEFT || error == DC_ERR_TIMEOUT)
        for (int q = 0; q < d->n; q++)
            if (q != d->rank && d->pid[q] > 0 && util_proc_gone(d->pid[q])) {
                *who = q;
                return DC_ERR_ABORT;
            }
    return error;
}

int devcoll_error(const devcoll_t *d, int *peer, char *what, size_t what_bytes)
{
    int who;
    const uint32_t error = fault_(d, &who);
    if (peer)
        *peer = who;
    if (what && what_bytes) {
        const char *how = "";
        const uint64_t call = d->status_host->call;
        const int p2p = (call & DC_P2P_CALL) != 0;
        switch (error) {
        case DC_ERR_TIMEOUT:
            how = p2p ? "did not take part within the timeout"
                      : "did not reach the collective within the timeout";
            break;
        case DC_ERR_LEFT: how = "gave up first (its own error says why)"; break;
        case DC_ERR_MISMATCH:
            how = p2p ? "sent or expected another size"
                      : "called another collective (type, count, operation or root differ)";
            break;
        case DC_ERR_ABORT: how = who == d->rank ? "aborted the communicator" : "has exited"; break;
        default: break;
        }
        if (error)
            snprintf(what, what_bytes, "device %s %llu: rank %d %s",
                     p2p ? "send/recv after collective" : "collective",
                     (unsigned long long)(call & ~DC_P2P_CALL), who, how);
        else
            what[0] = '\0';
    }
    return error == DC_OK ? 0 : error == DC_ERR_TIMEOUT ? VGPU_ETIMEOUT : VGPU_ECOMM;
}

int devcoll_fault(const devcoll_t *d)
{
    int who;
    return (int)fault_(d, &who);
}

void devcoll_abort(devcoll_t *d, int peer)
{
    __atomic_store_n(&d->status_host->abort, (uint32_t)(peer + 1), __ATOMIC_RELEASE);
}
