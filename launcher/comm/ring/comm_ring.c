// comm_ring.c: the ring collective backend: its table of operations, and a
// communicator's set-up and teardown: bootstrap (shared control segment,
// peers' windows mapped), what a window is (a CPU arena, a host staging
// segment that device buffers are copied through, or a GPU arena the ranks
// sharing that GPU map into each other with CUDA IPC: decided by
// ring_facts.c's ring_window_kind), the agreements every rank's choice of
// algorithm rests on (ring_algo.c), and diagnostics. The per-call path is
// ring_calls.c.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm_internal.h"
#include "devcoll.h"
#include "device_internal.h"
#include "env.h"
#include "log.h"
#include "util.h"
#include "ring_comm.h"
#include "ring_sub.h"
#include "shm_share.h"
#include "status.h"

#define RING_CTL_MAGIC 0x76677075636f6e31ull // "vgpucon1"
#define RING_DEFAULT_SLICE_BYTES (1u << 20)
// The largest message of a step between hosts (ring_core_set_messages says
// why it is cut): under Open MPI's TCP eager limit, 64 KiB less the PML's
// header. Measured (docs/COLLECTIVES.md): 3 namespace hosts behind 200 Mbit
// links, the default job's step 55.5-60.7 ms in one message a step, 52.5 ms
// with the handshake gone (the link's rate: 52.6 ms).
#define RING_NET_MSG_BYTES (63u << 10)
// Collectives are cut into pieces of this many bytes (all ranks alike), so
// that a staging window of this size carries any count.
#define RING_PIECE_BYTES (64ull << 20)
#define RING_MIN_STAGE_BYTES (64ull << 10) // the smallest staging window
// Polls of a neighbour's counter before sleeping on the futex (tuned with
// scripts/bench_allreduce.sh; override with VGPU_RING_SPIN). With a core per
// rank the neighbour is running and usually publishes within microseconds:
// spin long. Oversubscribed, a spinning rank only delays the neighbour it
// waits for (they share a core): yield almost at once. "Oversubscribed" counts
// the ranks of every host on this machine (network namespaces share its cores).
#define RING_SPIN_DEDICATED 20000
#define RING_SPIN_OVERSUBSCRIBED 20
// Then yielding between polls, before sleeping (shm_flag.h: why): long enough
// to cover a peer's time slice on a shared core, short enough that a rank
// waiting for a peer's computation soon stops using a core.
#define RING_YIELD_S 250e-6

struct ring_ctl {
    uint64_t magic;        // RING_CTL_MAGIC once the leader has initialised it
    uint32_t slots;        // same-host ranks, one slot each
    uint32_t slot_bytes;   // sizeof(struct ring_slot), checked by every mapper
    char pad_[128 - 16];
    struct ring_slot slot[]; // indexed by the rank's index among its host's ranks
};

// What every rank tells every other at create.
struct ring_peer {
    int node;              // host index
    int staging;           // its window is a staging segment
    char host[64];
    char machine[40];      // the kernel's boot id: ranks that share it share the CPUs
    struct shm_handle win; // its window, for a same-host right neighbour to map
    char uuid[48];         // its device (the device collectives need every rank on one)
    uint64_t dev_bytes;    // (device windows) its arena's size
    unsigned char ipc[DEVICE_IPC_HANDLE_BYTES]; // (device windows) its arena's IPC handle
};


// The job's name of rank q (a sub-ring's ranks are numbered in it).
static int name_(const struct ring_comm *rc, int q) { return rc->world ? rc->world[q] : q; }

// ---- diagnostics ----

static void report_(struct ring_core *core, int peer, int timed_out, double waited_s)
{
    struct ring_comm *rc = (struct ring_comm *)core;
    const char *host = rc->peers[peer].host;
    if (!timed_out) {
        log_warn("collective still waiting for rank %d (host %s) after %.1f s (timeout %.1f s)",
                 name_(rc, peer), host, waited_s, core->timeout_s);
        return;
    }
    // The neighbour may itself be stuck behind someone: name the same-host
    // rank that is furthest behind too, it is usually the one to look at.
    char extra[160] = "";
    int lag = -1;
    uint64_t lag_steps = UINT64_MAX;
    for (int q = 0; q < core->size; q++)
        if (rc->peers[q].node == rc->peers[core->rank].node) {
            uint64_t v = shm_flag_read(&rc->ctl->slot[rc->slot_of[q]].progress);
            if (v < lag_steps)
                lag_steps = v, lag = q;
        }
    if (lag >= 0 && lag != peer && lag_steps < core->progress)
        snprintf(extra, sizeof extra, "; rank %d (host %s) is the furthest behind", name_(rc, lag),
                 rc->peers[lag].host);
    log_error("collective timed out after %.1f s waiting for rank %d (host %s)%s", waited_s,
              name_(rc, peer), host, extra);
}

// ---- bootstrap ----

static int check_(int mpi_rc, const char *call) { return comm_mpi_check(mpi_rc, "ring", call); }

// A segment of this rank's (shm_share.h); returns its descriptor, held until
// every peer has mapped it, or a negative status.
static int create_segment_(const char *what, uint64_t bytes, struct shm_handle *h, void **map)
{
    int fd = shm_share_create(what, bytes, 1, h);
    if (fd < 0) {
        log_error("ring: cannot create the %s segment (%llu bytes): %s", what,
                  (unsigned long long)bytes, status_str(fd));
        return fd;
    }
    int rc = shm_share_map(h, 1, map);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

static void ring_destroy_(comm_t *c);

// Whether this rank's machine runs more of the job's ranks than it has
// cores: its waits must then give up the core quickly (shm_flag.h).
static int oversubscribed_(const struct ring_comm *rc, int n, int me)
{
    int sharing = 0;
    for (int q = 0; q < n; q++)
        sharing += strcmp(rc->peers[q].machine, rc->peers[me].machine) == 0;
    return sharing > ring_cpus_available();
}

// The duplicate communicator and the per-rank tables, agreed on the parent
// communicator (a rank whose duplicate failed has none).
static int setup_(comm_t *c, const struct comm_args *args, struct ring_comm *rc)
{
    const int n = c->size;
    int status = comm_mpi_dup_bounded(c, args->mpi_comm, &rc->mpi, "ring set-up (MPI_Comm_idup)");
    rc->peers = calloc((size_t)n, sizeof *rc->peers);
    rc->order = calloc((size_t)n, sizeof *rc->order);
    rc->pos_of = calloc((size_t)n, sizeof *rc->pos_of);
    rc->slot_of = calloc((size_t)n, sizeof *rc->slot_of);
    if (status == 0 && !(rc->peers && rc->order && rc->pos_of && rc->slot_of))
        status = VGPU_ENOMEM;
    if (status == 0 && args->world_ranks) {
        rc->world = malloc((size_t)n * sizeof *rc->world);
        if (rc->world)
            memcpy(rc->world, args->world_ranks, (size_t)n * sizeof *rc->world);
        status = rc->world ? 0 : VGPU_ENOMEM;
    }
    rc->core.world = rc->world;
    return comm_agree(c, args->mpi_comm, status, "ring set-up");
}

// What this rank's window is, agreed from every rank's device: its CPU
// arena, mapped by its right neighbour; its GPU arena, opened by its right
// neighbour through CUDA IPC (every rank on one GPU); or a host staging
// segment that device buffers are copied through (GPUs otherwise;
// VGPU_RING_STAGING=1 on any device). Sets rc->kind and rc->staging.
static int choose_window_(comm_t *c, const struct comm_args *args, struct ring_comm *rc)
{
    const int n = c->size;
    struct ring_device_fact fact = {.node = args->node_index,
                                    .cuda = !device_host_addressable(rc->dev),
                                    .mig = rc->dev->info.mig || !device_can_ipc(rc->dev),
                                    .mps = rc->dev->info.mps,
                                    .limited = rc->dev->info.client_limit_bytes != 0};
    snprintf(fact.uuid, sizeof fact.uuid, "%s", rc->dev->info.uuid);
    struct ring_device_fact *facts = calloc((size_t)n, sizeof *facts);
    int status = facts ? 0 : VGPU_ENOMEM;
    status = comm_agree(c, rc->mpi, status, "ring devices");
    if (status == 0)
        status = check_(MPI_Allgather(&fact, (int)sizeof fact, MPI_BYTE, facts, (int)sizeof fact,
                                      MPI_BYTE, rc->mpi),
                        "MPI_Allgather");
    const int staging = args->force_staging ? 1 : env_get()->ring_staging;
    rc->kind = status == 0 ? ring_window_kind(facts, n, c->rank, staging)
                           : RING_WINDOW_HOST;
    free(facts);
    if (status < 0)
        return status;
    rc->staging = rc->kind == RING_WINDOW_STAGED;
    return 0;
}

// The piece agreed, this rank's window opened (a staging segment it
// creates: *stage_fd, held until the peers have mapped it), and every
// rank's window shared.
static int share_windows_(comm_t *c, const struct comm_args *args, struct ring_comm *rc,
                          int *stage_fd)
{
    // A staging window is host memory each rank commits: as large as the
    // largest collective the caller declared, within [64 KiB, a piece]
    // (larger collectives pass in pieces). Every rank must cut alike: the
    // smallest wins; without staging anywhere the piece stays 64 MiB (and
    // the bits of every reduction with it).
    uint64_t piece = RING_PIECE_BYTES;
    if (rc->staging && args->largest_bytes) {
        piece = (args->largest_bytes + 4095) & ~(uint64_t)4095;
        piece = piece < RING_MIN_STAGE_BYTES ? RING_MIN_STAGE_BYTES
                : piece > RING_PIECE_BYTES   ? RING_PIECE_BYTES
                                             : piece;
    }
    int status = comm_mpi_min_u64_bounded(c, rc->mpi, &piece, "ring set-up (piece)");
    rc->piece_bytes = piece;
    struct ring_peer mine = {.node = args->node_index, .staging = rc->staging};
    snprintf(mine.host, sizeof mine.host, "%s", args->host ? args->host : "?");
    snprintf(mine.uuid, sizeof mine.uuid, "%s", rc->dev->info.uuid);
    util_machine_id(mine.machine, sizeof mine.machine, mine.host);
    if (status == 0 && rc->staging) {
        rc->stage_bytes = rc->piece_bytes;
        void *map = NULL;
        *stage_fd = create_segment_("vgpu-stage", rc->stage_bytes, &mine.win, &map);
        status = *stage_fd < 0 ? *stage_fd : 0;
        rc->stage = map;
        // Every collective copies through it to and from the device.
        if (status == 0)
            device_pin_host(rc->dev, rc->stage, rc->stage_bytes);
        rc->core.win = rc->stage;
        rc->core.win_bytes = rc->stage_bytes;
    } else if (status == 0 && rc->kind == RING_WINDOW_DEVICE) {
        // ring_window_kind gives it only to devices with IPC (CUDA).
        rc->core.win = rc->dev->arena.base;
        rc->core.win_bytes = rc->dev->arena.cap_bytes;
        rc->core.mem = device_ring_mem(rc->dev);
        mine.dev_bytes = rc->core.win_bytes;
        status = device_ipc_export(rc->dev, mine.ipc);
    } else if (status == 0) {
        rc->core.win = device_host_view(rc->dev, rc->dev->arena.base);
        rc->core.win_bytes = rc->dev->arena.cap_bytes;
        status = device_share(rc->dev, &mine.win);
    }
    status = comm_agree(c, rc->mpi, status, "ring windows");
    if (status == 0)
        status = check_(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, rc->peers,
                                      (int)sizeof mine, MPI_BYTE, rc->mpi),
                        "MPI_Allgather");
    return status;
}

// Ring order: by host, then rank, so the ring crosses each host boundary
// once and every other link is shared memory. Sets rc->order, pos_of,
// slot_of; returns this host's rank count and its lowest rank (*leader).
static int order_ring_(struct ring_comm *rc, int n, int node, int *leader)
{
    for (int q = 0; q < n; q++)
        rc->order[q] = q;
    for (int i = 1; i < n; i++) { // insertion sort: n is small and this runs once
        int q = rc->order[i], j = i;
        while (j > 0 && rc->peers[rc->order[j - 1]].node > rc->peers[q].node) {
            rc->order[j] = rc->order[j - 1];
            j--;
        }
        rc->order[j] = q;
    }
    int local_size = 0;
    *leader = -1;
    for (int i = 0; i < n; i++)
        rc->pos_of[rc->order[i]] = i;
    for (int q = 0; q < n; q++) {
        rc->slot_of[q] = 0;
        for (int q2 = 0; q2 < q; q2++)
            rc->slot_of[q] += rc->peers[q2].node == rc->peers[q].node;
        if (rc->peers[q].node == node) {
            local_size++;
            if (*leader < 0)
                *leader = q;
        }
    }
    return local_size;
}

// The host's control segment: created and initialised by its lowest rank
// before anyone else maps it (the agreement between is the barrier), then
// mapped by the others. A failure to create it is agreed here (a negative
// return); one to map it is returned in *map_status, to be agreed with the
// links' (at "ring mappings").
static int share_control_(comm_t *c, struct ring_comm *rc, int leader, int local_size,
                          int *ctl_fd, int *map_status)
{
    int status = 0;
    rc->ctl_bytes = sizeof(struct ring_ctl) + (size_t)local_size * sizeof(struct ring_slot);
    if (rc->shot.cap_bytes) {
        rc->shot.stride = ring_shot_stride(rc->shot.cap_bytes, c->size);
        rc->shot.buf_bytes = rc->shot.stride / 2;
        rc->ctl_bytes = (rc->ctl_bytes + 4095) & ~(size_t)4095;
        rc->shot_at = rc->ctl_bytes;
        rc->ctl_bytes += (size_t)local_size * rc->shot.stride;
    }
    struct shm_handle ctl_mine = {0};
    if (c->rank == leader) {
        void *map = NULL;
        *ctl_fd = create_segment_("vgpu-ring-ctl", rc->ctl_bytes, &ctl_mine, &map);
        status = *ctl_fd < 0 ? *ctl_fd : 0;
        rc->ctl = map;
        if (status == 0) {
            rc->ctl->slots = (uint32_t)local_size;
            rc->ctl->slot_bytes = sizeof(struct ring_slot);
            rc->ctl->magic = RING_CTL_MAGIC;
        }
    }
    struct shm_handle *ctls = calloc((size_t)c->size, sizeof *ctls);
    if (status == 0 && !ctls)
        status = VGPU_ENOMEM;
    status = comm_agree(c, rc->mpi, status, "ring control segment");
    if (status == 0)
        status = check_(MPI_Allgather(&ctl_mine, (int)sizeof ctl_mine, MPI_BYTE, ctls,
                                      (int)sizeof ctl_mine, MPI_BYTE, rc->mpi),
                        "MPI_Allgather");
    *map_status = 0;
    if (status == 0 && c->rank != leader) {
        void *map = NULL;
        *map_status = shm_share_map(&ctls[leader], 1, &map);
        rc->ctl = map;
        if (*map_status == 0 && (rc->ctl->magic != RING_CTL_MAGIC ||
                                 rc->ctl->slots != (uint32_t)local_size ||
                                 rc->ctl->slot_bytes != sizeof(struct ring_slot))) {
            log_error("ring: rank %d's control segment does not match this build", leader);
            *map_status = VGPU_ECOMM;
        }
    }
    free(ctls);
    return status;
}

// Which all-reduce takes which sizes (ring_algo.c's table), the smallest of
// every rank's (a rank's VGPU_RING_ALGO may differ), and whether the direct
// all-reduce runs: every rank's windows are then mapped writable (map_all_).
// Only jobs on one host with host windows have any but the ring.
static int shot_setup_(comm_t *c, struct ring_comm *rc, int local_size)
{
    struct ring_algo_facts f = {
        .ranks = c->size,
        .one_host = local_size == c->size && rc->kind != RING_WINDOW_DEVICE,
        .oversubscribed = rc->oversubscribed,
        .forced = ring_algo_forced()};
    uint64_t direct = (uint64_t)ring_algo_direct_wanted(&f);
    // Direct first: the sizes depend on whether it runs (everywhere or nowhere).
    int status = comm_mpi_min_u64_bounded(c, rc->mpi, &direct, "ring set-up (latency path)");
    f.direct = (int)direct;
    struct ring_tune tune;
    ring_algo_tune(&tune, &f);
    for (int a = 0; status == 0 && a < RING_ALGO_COUNT; a++) // the ring: what the rest leave
        if (a != RING_ALGO_RING)
            status = comm_mpi_min_u64_bounded(c, rc->mpi, &tune.end_bytes[a],
                                              "ring set-up (latency path)");
    rc->core.tune = tune;
    rc->shot.cap_bytes = ring_algo_scratch_bytes(&tune);
    rc->direct = (int)direct;
    return status;
}

// The direct all-reduce's links (one host: positions are slots): every other
// rank's window mapped writable, this rank's own at its position.
static int map_all_(struct ring_comm *rc)
{
    struct ring_core *core = &rc->core;
    const int n = core->size;
    rc->all = calloc((size_t)n, sizeof *rc->all);
    if (!rc->all)
        return VGPU_ENOMEM;
    for (int q = 0; q < n; q++) {
        struct ring_link *l = &rc->all[q];
        const struct ring_peer *peer = &rc->peers[rc->order[q]];
        *l = (struct ring_link){.rank = rc->order[q], .local = 1,
                                .slot = &rc->ctl->slot[rc->slot_of[rc->order[q]]]};
        if (q == core->pos) {
            l->win = core->win;
            l->win_bytes = core->win_bytes;
            continue;
        }
        void *map = NULL;
        int status = shm_share_map(&peer->win, 1, &map);
        if (status < 0)
            return status;
        l->win = map;
        l->win_bytes = peer->win.bytes;
    }
    core->all = rc->all;
    return 0;
}

// The engine's links: its neighbours, their slots and (same host) the left
// neighbour's window, the only one the ring reads (the direct all-reduce
// maps them all). Returns status, or the
// failure to map.
static int link_(comm_t *c, const struct comm_args *args, struct ring_comm *rc, uint64_t slice,
                 uint64_t msg_bytes, int status)
{
    const int n = c->size, me = c->rank, p = rc->pos_of[me];
    struct ring_core *core = &rc->core;
    core->pos = p;
    core->size = n;
    core->order = rc->order;
    core->rank = me;
    core->left.rank = rc->order[(p + n - 1) % n];
    core->right.rank = rc->order[(p + 1) % n];
    core->left.local = rc->peers[core->left.rank].node == args->node_index;
    core->right.local = rc->peers[core->right.rank].node == args->node_index;
    core->slice_bytes = slice;
    core->mpi = rc->mpi;
    core->timeout_s = c->timeout_s;
    const long spin = env_get()->ring_spin;
    core->spin_count = spin >= 0                           ? (unsigned)spin
                       : rc->oversubscribed ? RING_SPIN_OVERSUBSCRIBED
                                                        : RING_SPIN_DEDICATED;
    const long yield_us = env_get()->ring_yield_us;
    core->yield_s = yield_us >= 0 ? (double)yield_us * 1e-6 : RING_YIELD_S;
    core->report = report_;
    if (status < 0)
        return status;
    core->me = &rc->ctl->slot[rc->slot_of[me]];
    if (rc->shot_at) { // one host: positions, ranks and slots coincide
        rc->shot.slot = rc->ctl->slot;
        rc->shot.scratch = (char *)rc->ctl + rc->shot_at;
        core->shot = &rc->shot;
    }
    if (core->left.local)
        core->left.slot = &rc->ctl->slot[rc->slot_of[core->left.rank]];
    if (core->right.local)
        core->right.slot = &rc->ctl->slot[rc->slot_of[core->right.rank]];
    if (n > 1 && core->left.local && rc->kind == RING_WINDOW_DEVICE) {
        const struct ring_peer *lp = &rc->peers[core->left.rank];
        status = device_ipc_open(rc->dev, lp->ipc, &rc->left_dev);
        core->left.win = rc->left_dev;
        core->left.win_bytes = lp->dev_bytes;
        if (status < 0)
            log_error("ring: cannot open rank %d's GPU arena (CUDA IPC); "
                      "VGPU_RING_STAGING=1 copies through host memory instead",
                      core->left.rank);
    } else if (rc->direct) {
        status = map_all_(rc);
        if (status == 0)
            core->left = rc->all[(p + n - 1) % n];
    } else if (n > 1 && core->left.local) {
        const struct ring_peer *lp = &rc->peers[core->left.rank];
        status = shm_share_map(&lp->win, 0, &rc->left_map);
        rc->left_map_bytes = lp->win.bytes;
        core->left.win = rc->left_map;
        core->left.win_bytes = lp->win.bytes;
    }
    if (status == 0 && (!core->left.local || !core->right.local)) {
        // A chunk: a step's slice and up to 16 elements of 8 bytes more;
        // two of them (one reduced while the next arrives).
        core->landing_bytes = (slice < 128 ? 128 : slice) + 128;
        core->landing = malloc(2 * core->landing_bytes);
        status = core->landing ? ring_core_set_messages(core, msg_bytes) : VGPU_ENOMEM;
    }
    // Steps count from what this host's slots say (0 for a new segment).
    core->progress = 0;
    return status;
}

// Rings of the same ranks beside this one (ring_sub.c): the hierarchical
// all-reduce across hosts of several ranks each; on device windows, a staged
// ring for small all-reduces (unless VGPU_RING_STAGING=0 asks for IPC only).
static int sub_rings_(comm_t *c, const struct comm_args *args, struct ring_comm *rc)
{
    int *nodes = malloc((size_t)c->size * sizeof *nodes);
    int status = comm_agree(c, rc->mpi, nodes ? 0 : VGPU_ENOMEM, "ring set-up (hosts)");
    for (int q = 0; status == 0 && q < c->size; q++)
        nodes[q] = rc->peers[q].node;
    if (status == 0)
        status = ring_hier_create(c, rc->mpi, args, nodes, rc->world, &rc->hier);
    free(nodes);
    if (status == 0 && rc->kind == RING_WINDOW_DEVICE && env_get()->ring_staging != 0)
        status = ring_small_create(c, rc->mpi, args, rc->world, &rc->small, &rc->small_bytes);
    return status;
}

static void *host_view_(void *dev, const void *ptr) { return device_host_view(dev, ptr); }

// Whether this rank would run the device collectives (devcoll_applies),
// every rank of the communicator on its device.
static int devcoll_wanted_(const comm_t *c, const struct ring_comm *rc)
{
    if (!devcoll_applies(devcoll_mode(), device_devcoll(rc->dev) != NULL,
                         (device_caps(rc->dev) & DEVICE_CAP_GPU) != 0, rc->dev->info.mps, c->size))
        return 0;
    for (int q = 0; q < c->size; q++)
        if (rc->peers[q].node != rc->peers[c->rank].node ||
            strcmp(rc->peers[q].uuid, rc->peers[c->rank].uuid) != 0)
            return 0;
    return 1;
}

// The device collectives, where every rank wants them: a window each,
// opened by every peer. A failure anywhere fails the communicator
// everywhere (as the rest of the set-up).
static int devcoll_setup_(comm_t *c, struct ring_comm *rc)
{
    uint64_t want = (uint64_t)devcoll_wanted_(c, rc);
    int status = comm_mpi_min_u64_bounded(c, rc->mpi, &want, "ring set-up (device collectives)");
    if (status < 0 || !want)
        return status;
    // The simulated protocol reaches a CPU device's memory through its host
    // view (the test device's is plain memory); a GPU's exec takes the device.
    const struct devcoll_exec *ex = device_devcoll(rc->dev);
    void *ctx = rc->dev;
    if (ex->on_host) {
        rc->dc_view = (struct devcoll_sim_ctx){host_view_, rc->dev};
        ctx = device_host_addressable(rc->dev) ? &rc->dc_view : NULL;
    }
    status = devcoll_create(ex, ctx, c->rank, c->size, 0, c->timeout_s, &rc->dc);
    struct devcoll_handle mine = {0}, *all = calloc((size_t)c->size, sizeof *all);
    if (status == 0 && !all)
        status = VGPU_ENOMEM;
    if (status == 0)
        devcoll_handle(rc->dc, &mine);
    status = comm_agree(c, rc->mpi, status, "device collectives (windows)");
    if (status == 0)
        status = check_(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine,
                                      MPI_BYTE, rc->mpi),
                        "MPI_Allgather");
    if (status == 0)
        status = comm_agree(c, rc->mpi, devcoll_connect(rc->dc, all),
                            "device collectives (peers' windows)");
    free(all);
    return status;
}

// Every step agrees its outcome with all ranks before the next (a failure
// anywhere fails everywhere, and no rank waits on one that gave up).
static int ring_create_(comm_t *c, const struct comm_args *args)
{
    struct ring_comm *rc = calloc(1, sizeof *rc);
    if (!rc)
        return VGPU_ENOMEM;
    c->impl = rc;
    rc->mpi = MPI_COMM_NULL;
    rc->dev = args->dev;
    int stage_fd = -1, ctl_fd = -1; // segments this rank created, held until mapped
    int status = setup_(c, args, rc);
    // The slice must be the same everywhere (it fixes the step count).
    uint64_t slice = args->slice_bytes ? args->slice_bytes : RING_DEFAULT_SLICE_BYTES;
    slice = slice < 64 ? 64 : slice > (256u << 20) ? (256u << 20) : slice & ~(uint64_t)63;
    if (status == 0)
        status = comm_mpi_min_u64_bounded(c, rc->mpi, &slice, "ring set-up (slice)");
    // Every rank must cut a step into the same messages: the smallest asked
    // for wins (0, one message a step, counts as the largest).
    const long msg_env = env_get()->ring_msg_bytes;
    uint64_t msg_bytes = msg_env < 0 ? RING_NET_MSG_BYTES : msg_env ? (uint64_t)msg_env : UINT64_MAX;
    if (status == 0)
        status = comm_mpi_min_u64_bounded(c, rc->mpi, &msg_bytes, "ring set-up (messages)");
    if (status == 0)
        status = choose_window_(c, args, rc);
    if (status == 0)
        status = share_windows_(c, args, rc, &stage_fd);
    int map_status = 0, leader = -1;
    if (status == 0) {
        const int local_size = order_ring_(rc, c->size, args->node_index, &leader);
        rc->oversubscribed = oversubscribed_(rc, c->size, c->rank);
        status = shot_setup_(c, rc, local_size);
        if (status == 0)
            status = share_control_(c, rc, leader, local_size, &ctl_fd, &map_status);
        // A failure from here on is agreed at "ring mappings", by everyone.
        if (status == 0)
            status = comm_agree(c, rc->mpi,
                                link_(c, args, rc, slice, msg_bytes, map_status),
                                "ring mappings");
    }
    if (ctl_fd >= 0)
        close(ctl_fd);
    if (stage_fd >= 0)
        close(stage_fd);
    if (status == 0)
        status = sub_rings_(c, args, rc);
    if (status == 0)
        status = devcoll_setup_(c, rc);
    if (status < 0)
        ring_destroy_(c);
    return status;
}

static void ring_destroy_(comm_t *c)
{
    struct ring_comm *rc = c->impl;
    if (!rc)
        return;
    ring_hier_destroy(rc->hier); // its sub-rings first: all ranks alike
    comm_destroy(rc->small);
    // The device collectives' windows as the arenas' below: every rank's
    // calls done, the peers' windows closed, agreed, then its own freed.
    if (rc->dc) {
        if (devcoll_sync(rc->dc) != 0)
            rc->core.broken = 1;
        devcoll_close_peers(rc->dc);
        if (!rc->core.broken && rc->mpi != MPI_COMM_NULL)
            comm_agree(c, rc->mpi, 0, "device collectives teardown");
        devcoll_destroy(rc->dc);
    }
    if (rc->left_map)
        munmap(rc->left_map, rc->left_map_bytes);
    for (int q = 0; rc->all && q < rc->core.size; q++)
        if (q != rc->core.pos && rc->all[q].win)
            munmap((void *)rc->all[q].win, rc->all[q].win_bytes);
    free(rc->all);
    // A neighbour's arena is closed here before its owner frees it (freeing
    // an exported allocation still open elsewhere is undefined): everyone
    // closes, then agrees, then goes on to free its own. After a timeout the
    // job is ending anyway and a dead peer would not agree.
    if (rc->kind == RING_WINDOW_DEVICE) {
        device_ipc_close(rc->dev, rc->left_dev);
        if (!rc->core.broken && rc->mpi != MPI_COMM_NULL)
            comm_agree(c, rc->mpi, 0, "ring teardown");
    }
    if (rc->ctl)
        munmap(rc->ctl, rc->ctl_bytes);
    if (rc->stage) {
        device_unpin_host(rc->dev, rc->stage);
        munmap(rc->stage, rc->stage_bytes);
    }
    free(rc->core.landing);
    ring_core_free_messages(&rc->core);
    free(rc->peers);
    free(rc->world);
    free(rc->order);
    free(rc->pos_of);
    free(rc->slot_of);
    // After a timeout a peer may never match what MPI still has in flight:
    // the job is being aborted anyway, so do not risk blocking here.
    if (rc->mpi != MPI_COMM_NULL && !rc->core.broken)
        MPI_Comm_free(&rc->mpi);
    free(rc);
    c->impl = NULL;
}

const struct comm_ops comm_ring_ops = {
    .name = "ring",
    .create = ring_create_,
    .all_reduce = ring_comm_all_reduce,
    .reduce_scatter = ring_comm_reduce_scatter,
    .reduce = ring_comm_reduce,
    .send = ring_comm_send,
    .recv = ring_comm_recv,
    .broadcast = ring_comm_broadcast,
    .all_gather = ring_comm_all_gather,
    .all_to_all = ring_comm_all_to_all,
    .all_reduce_update = ring_comm_all_reduce_update,
    .barrier = ring_comm_barrier,
    .destroy = ring_destroy_,
    .waited = ring_comm_waited,
    .algo = ring_comm_algo,
    .async_error = ring_comm_async_error,
};
