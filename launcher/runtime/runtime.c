// runtime.c: bootstrap, config agreement, binding, device, communicator, job table.
#include "runtime_internal.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <unistd.h>

#include "binding.h"
#include "comm_internal.h"
#include "device_internal.h"
#include "env.h"
#include "flight.h"
#include "flight_job.h"
#include "gpu_driver.h"
#include "job_table.h"
#include "log.h"
#include "startup_watch.h"
#include "trace.h"
#include "util.h"

#define MAX_DEVICES 64
#define CUDA_CONTEXT_OVERHEAD BINDING_CUDA_CONTEXT_BYTES
#define NCCL_BUFFER_BUDGET BINDING_NCCL_BUFFER_BYTES

// Used for control-plane waits until the config (comm.timeout_s) is loaded.
#define CONTROL_DEFAULT_TIMEOUT_S 300.0

struct runtime_impl {
    MPI_Comm world;   // the job's ranks: a duplicate of the communicator joined
    MPI_Comm local;   // ranks on this host
    int *local_world; // world rank of each local rank
    // The arrival board, one slot per local rank in host shared memory: the
    // control-plane collectives it has entered and when it last polled one.
    // A rank stopped between collectives leaves its count behind; one
    // stopped inside a collective stops beating. Its host-mates name it.
    MPI_Win board_win;
    struct board_slot *board;        // this rank's slot
    struct board_slot **peer_board;  // [local_size] every local rank's slot
    int library;      // libvgpu's vgpu_init: failed waits return statuses (runtime_join)
};

// A rank in the same collective (or start-up) that has not polled for this
// long is stopped.
#define BOARD_STALE_S 1.0

#define STAGE_NAME_BYTES 96

struct board_slot {
    _Atomic uint64_t entered;  // control-plane collectives entered
    _Atomic uint64_t beat_us;  // last poll inside one, microseconds (util_now_s)
    _Atomic uint32_t stage;    // start-up stages entered (every rank enters the same ones)
    _Atomic uint64_t alive_us; // start-up watcher's last look, microseconds
    char stage_name[STAGE_NAME_BYTES]; // the current one's (a torn read only garbles a message)
};

static const char *const stage_names_[] = {
    [RUNTIME_STAGE_MPI] = "starting MPI (MPI_Init_thread; every rank of the job must start)",
    [RUNTIME_STAGE_JOIN] = "joining the job (hosts, arrival board)",
    [RUNTIME_STAGE_CONFIG] = "agreeing on the config",
    [RUNTIME_STAGE_DEVICES] = "opening the virtual GPUs",
    [RUNTIME_STAGE_CONNECT] = "connecting the collectives",
};

static const char *stage_name_(uint32_t stage)
{
    return stage < sizeof stage_names_ / sizeof stage_names_[0] ? stage_names_[stage] : "?";
}

static void abort_hook_(int exit_code)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    flight_job_event(FLIGHT_EVENT_FATAL, "fatal");
    if (inited && !finalized)
        MPI_Abort(MPI_COMM_WORLD, exit_code);
    exit(exit_code);
}

static MPI_Comm local_(struct runtime *rt) { return ((struct runtime_impl *)rt->impl)->local; }

// MPI failures in start-up: said, and returned as VGPU_ECOMM.
#define MPI_TRY(call)                                                          \
    do {                                                                       \
        int mpi_rc_ = (call);                                                  \
        if (mpi_rc_ != MPI_SUCCESS) {                                          \
            char mpi_msg_[MPI_MAX_ERROR_STRING];                               \
            int mpi_len_ = 0;                                                  \
            MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                    \
            log_error("%s failed: %s", #call, mpi_msg_);                       \
            return VGPU_ECOMM;                                                 \
        }                                                                      \
    } while (0)

int runtime_launcher_rank(void)
{
    const int rank = env_get()->launcher_rank;
    return rank > 0 ? rank : 0;
}

// The start-up bound before the config is read: VGPU_COMM_TIMEOUT_S, the
// environment's comm.timeout_s, when it is a valid one.
static double early_timeout_s_(void)
{
    const char *v = getenv("VGPU_COMM_TIMEOUT_S");
    char *end = NULL;
    double t = v ? strtod(v, &end) : 0;
    return v && end != v && !*end && t >= 0.1 && t <= 86400 ? t : CONTROL_DEFAULT_TIMEOUT_S;
}

static void watch_beat_(void *arg)
{
    struct runtime_impl *im = ((struct runtime *)arg)->impl;
    atomic_store(&im->board->alive_us, (uint64_t)(util_now_s() * 1e6));
}

// For the start-up watch: the host-mates this rank waits for, and where.
static void watch_describe_(void *arg, char *buf, size_t bytes)
{
    struct runtime *rt = arg;
    struct runtime_impl *im = rt->impl;
    const uint32_t mine = atomic_load(&im->board->stage);
    const double now = util_now_s();
    size_t len = 0;
    buf[0] = '\0';
    for (int q = 0; q < rt->local_size && len + 160 < bytes; q++) {
        if (q == rt->local_rank)
            continue;
        const uint32_t stage = atomic_load(&im->peer_board[q]->stage);
        const double alive = (double)atomic_load(&im->peer_board[q]->alive_us) * 1e-6;
        char name[STAGE_NAME_BYTES];
        memcpy(name, im->peer_board[q]->stage_name, sizeof name);
        name[sizeof name - 1] = '\0';
        if (now - alive > BOARD_STALE_S)
            len += (size_t)snprintf(buf + len, bytes - len, "%srank %d (host %s) is stopped (in '%s')",
                                    len ? "; " : "", im->local_world[q], rt->host, name);
        else if (stage < mine)
            len += (size_t)snprintf(buf + len, bytes - len, "%srank %d (host %s) is still in '%s'",
                                    len ? "; " : "", im->local_world[q], rt->host, name);
    }
    if (!len && rt->node_count > 1)
        snprintf(buf, bytes, "every rank on %s is running and here or further: a rank on another host",
                 rt->host);
}

// Whether runtime_bootstrap started MPI (and runtime_close finalises it),
// and whether a wait of a failed vgpu_init left MPI with requests that will
// never finish (then it is neither finalised nor joined again).
static int mpi_ours_, mpi_stuck_;

// libvgpu's join: vgpu's duplicate of the program's communicator, made
// only when every rank of it has called vgpu_init, bounded by the early
// bound: a rank that never calls it makes each of the others return
// VGPU_ETIMEOUT instead of blocking for ever in the communicator splits that
// follow (they have no nonblocking form). Who is missing, MPI cannot say.
static int join_bounded_(MPI_Comm given, int rank, MPI_Comm *world)
{
    MPI_Request req;
    MPI_TRY(MPI_Comm_idup(given, world, &req));
    double waited = 0;
    const double bound = early_timeout_s_();
    int rc = comm_mpi_wait(&req, bound, NULL, &waited);
    if (rc == VGPU_ETIMEOUT)
        log_error("vgpu_init: waited %.1f s for the other ranks of the communicator to call "
                  "vgpu_init; not every one did (rank %d is here; bound: VGPU_COMM_TIMEOUT_S, "
                  "else 300 s)", waited, rank);
    else if (rc < 0)
        log_error("vgpu_init: MPI failed while the ranks joined");
    if (rc < 0) {
        *world = MPI_COMM_NULL;
        mpi_stuck_ = 1;
    }
    return rc;
}

// Under vgpurun, vgpurun-rank pinned this rank's CUDA_VISIBLE_DEVICES for
// programs that know nothing of vgpu. A vgpu program binds itself, once,
// with every rank's view and its config: it takes back the launcher's value
// before anything starts CUDA (a program that started CUDA before vgpu_init
// keeps the pin, and binding then follows it).
static void unpin_visible_devices_(void)
{
    const char *record = getenv(BINDING_ENV_PINNED), *now = getenv("CUDA_VISIBLE_DEVICES");
    const char *bar = record ? strchr(record, '|') : NULL;
    if (bar && now && strlen(now) == (size_t)(bar - record) && !strncmp(now, record, strlen(now))) {
        if (!strcmp(bar + 1, "unset"))
            unsetenv("CUDA_VISIBLE_DEVICES");
        else if (bar[1] == '=')
            setenv("CUDA_VISIBLE_DEVICES", bar + 2, 1);
    } // else changed since the pin (a wrapper's own choice): it stands
    if (record)
        unsetenv(BINDING_ENV_PINNED);
}

int runtime_bootstrap(struct runtime *rt, int *argc, char ***argv, const struct runtime_join *join)
{
    static const struct runtime_join defaults;
    if (!join)
        join = &defaults;
    unpin_visible_devices_();
    memset(rt, 0, sizeof *rt);
    if (gethostname(rt->host, sizeof rt->host) != 0)
        snprintf(rt->host, sizeof rt->host, "unknown");
    rt->host[sizeof rt->host - 1] = '\0';
    // Messages before MPI_Init_thread returns carry the launcher's rank.
    if (env_get()->launcher_rank >= 0)
        log_set_identity(env_get()->launcher_rank, rt->host);
    int provided, already = 0, finalized = 0;
    MPI_Initialized(&already);
    MPI_Finalized(&finalized);
    if (finalized || mpi_stuck_) { // MPI cannot start twice in one process
        fprintf(stderr, "vgpu: %s: this process cannot join a job again (one vgpu_init per "
                        "process)\n", finalized ? "MPI was finalised in this process"
                                                : "an earlier vgpu_init failed waiting for its peers");
        return VGPU_EINVAL;
    }
    if (join->mpi_comm && !already) {
        fprintf(stderr, "vgpu: a communicator to join was given, but MPI is not initialised\n");
        return VGPU_EINVAL;
    }
    // libvgpu's start-up is not watched: the watch ends the process, which
    // a library must not do. Its waits return statuses instead.
    if (!join->library &&
        startup_watch_begin(stage_name_(RUNTIME_STAGE_MPI), early_timeout_s_()) < 0)
        log_warn("cannot start the start-up watch: start-up waits are not bounded");
    if (already) { // the program's MPI (libvgpu in an MPI program): it finalises it
        MPI_Query_thread(&provided);
        mpi_ours_ = 0;
    } else if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "vgpu: MPI_Init_thread failed\n");
        return VGPU_ECOMM;
    } else {
        mpi_ours_ = 1;
    }
    if (!join->library)
        log_set_fatal_hook(abort_hook_);
    struct runtime_impl *im = calloc(1, sizeof *im);
    if (!im)
        return VGPU_ENOMEM;
    im->world = im->local = MPI_COMM_NULL;
    im->board_win = MPI_WIN_NULL;
    im->library = join->library;
    rt->impl = im;
    const MPI_Comm given = join->mpi_comm ? *(const MPI_Comm *)join->mpi_comm : MPI_COMM_WORLD;
    int inter = 0;
    if (given == MPI_COMM_NULL || MPI_Comm_test_inter(given, &inter) != MPI_SUCCESS || inter) {
        fprintf(stderr, "vgpu: the communicator to join is %s: give an intracommunicator of "
                        "the job's ranks\n", given == MPI_COMM_NULL ? "MPI_COMM_NULL"
                                                                    : "an intercommunicator");
        return VGPU_EINVAL;
    }
    MPI_TRY(MPI_Comm_rank(given, &rt->rank));
    MPI_TRY(MPI_Comm_size(given, &rt->size));
    log_set_identity(rt->rank, rt->host);
    rt->launched = env_get()->under_launcher;
    startup_watch_stage(stage_name_(RUNTIME_STAGE_JOIN));
    // vgpu's own traffic (tags, collectives) never meets the program's. A
    // library's MPI errors are returned (statuses), not fatal; the
    // communicators made from world (and the backends' duplicates) inherit it.
    if (join->library) {
        const int rc = join_bounded_(given, rt->rank, &im->world);
        if (rc < 0)
            return rc;
        MPI_TRY(MPI_Comm_set_errhandler(im->world, MPI_ERRORS_RETURN));
    } else {
        MPI_TRY(MPI_Comm_dup(given, &im->world));
    }
    int rc;

    const char *test_host = env_get()->test_host;
    if (test_host[0]) {
        // Test hook: ranks that name the same host are one host (a cluster
        // of several hosts rehearsed on one machine).
        snprintf(rt->host, sizeof rt->host, "%s", test_host);
        log_set_identity(rt->rank, rt->host);
        char *names = malloc((size_t)rt->size * sizeof rt->host);
        if (!names)
            return VGPU_ENOMEM;
        rc = MPI_Allgather(rt->host, sizeof rt->host, MPI_CHAR, names, sizeof rt->host, MPI_CHAR,
                           im->world);
        int color = 0;
        while (rc == MPI_SUCCESS && strcmp(names + (size_t)color * sizeof rt->host, rt->host) != 0)
            color++;
        free(names);
        MPI_TRY(rc);
        MPI_TRY(MPI_Comm_split(im->world, color, rt->rank, &im->local));
    } else {
        MPI_TRY(MPI_Comm_split_type(im->world, MPI_COMM_TYPE_SHARED, rt->rank, MPI_INFO_NULL,
                                    &im->local));
    }
    MPI_TRY(MPI_Comm_rank(im->local, &rt->local_rank));
    MPI_TRY(MPI_Comm_size(im->local, &rt->local_size));
    // Host index: rank among the hosts' first ranks, shared with the host.
    MPI_Comm leaders;
    MPI_TRY(MPI_Comm_split(im->world, rt->local_rank == 0 ? 0 : MPI_UNDEFINED, rt->rank,
                           &leaders));
    if (rt->local_rank == 0) {
        MPI_Comm_rank(leaders, &rt->node_index);
        MPI_Comm_size(leaders, &rt->node_count);
        MPI_Comm_free(&leaders);
    }
    int node[2] = {rt->node_index, rt->node_count};
    MPI_TRY(MPI_Bcast(node, 2, MPI_INT, 0, im->local));
    rt->node_index = node[0];
    rt->node_count = node[1];

    im->local_world = malloc((size_t)rt->local_size * sizeof *im->local_world);
    im->peer_board = malloc((size_t)rt->local_size * sizeof *im->peer_board);
    if (!im->local_world || !im->peer_board)
        return VGPU_ENOMEM;
    MPI_TRY(MPI_Allgather(&rt->rank, 1, MPI_INT, im->local_world, 1, MPI_INT, im->local));
    void *mine = NULL;
    MPI_TRY(MPI_Win_allocate_shared(sizeof(struct board_slot), 1, MPI_INFO_NULL, im->local,
                                    &mine, &im->board_win));
    im->board = mine;
    atomic_store(&im->board->entered, 0);
    atomic_store(&im->board->beat_us, 0);
    for (int q = 0; q < rt->local_size; q++) {
        MPI_Aint bytes;
        int unit;
        void *slot;
        MPI_TRY(MPI_Win_shared_query(im->board_win, q, &bytes, &unit, &slot));
        im->peer_board[q] = slot;
    }
    struct startup_watch_hooks hooks = {.beat = watch_beat_, .describe = watch_describe_,
                                        .arg = rt};
    atomic_store(&im->board->stage, 0);
    runtime_stage_named(rt, stage_name_(RUNTIME_STAGE_JOIN));
    watch_beat_(rt);
    startup_watch_set_hooks(&hooks);
    if (flight_job_join(im->world, im->local, rt->rank, rt->size, rt->host) < 0)
        log_warn("flight recorder: host-mates cannot read this rank's ring");
    MPI_TRY(MPI_Barrier(im->local));
    return 0;
}

MPI_Comm runtime_mpi_world(const struct runtime *rt)
{
    return ((const struct runtime_impl *)rt->impl)->world;
}

void runtime_stage_named(struct runtime *rt, const char *name)
{
    struct runtime_impl *im = rt->impl;
    if (im && im->board) {
        snprintf(im->board->stage_name, sizeof im->board->stage_name, "%s", name);
        atomic_fetch_add(&im->board->stage, 1);
    }
    startup_watch_stage(name);
}

void runtime_stage(struct runtime *rt, enum runtime_stage stage)
{
    runtime_stage_named(rt, stage_name_((uint32_t)stage));
}

void runtime_started(struct runtime *rt)
{
    (void)rt;
    startup_watch_end();
}

// ---- configuration: rank 0 decides, everyone gets the verdict ----

static int ctl_broadcast_(struct runtime *rt, void *buf, size_t bytes, int root);

int runtime_load_config(struct runtime *rt, const char *path, const char *const *overrides,
                        int n_overrides, char *err, size_t err_bytes)
{
    struct {
        int rc;
        char msg[1024];
    } verdict = {0, ""};
    runtime_stage(rt, RUNTIME_STAGE_CONFIG);
    if (rt->rank == 0)
        verdict.rc = config_load_job(&rt->cfg, path, overrides, n_overrides, verdict.msg,
                                     sizeof verdict.msg);
    int rc = ctl_broadcast_(rt, &verdict, sizeof verdict, 0);
    if (rc < 0) {
        snprintf(err, err_bytes, "the config could not be shared (said above)");
        return rc;
    }
    if (verdict.rc) {
        snprintf(err, err_bytes, "%s", verdict.msg);
        return verdict.rc;
    }
    if ((rc = ctl_broadcast_(rt, &rt->cfg, sizeof rt->cfg, 0)) < 0) {
        snprintf(err, err_bytes, "the config could not be shared (said above)");
        return rc;
    }
    startup_watch_set_bound(rt->cfg.comm.timeout_s);
    return 0;
}

// ---- control plane ----
//
// Small host-memory collectives on MPI. A rank that is stopped (SIGSTOP, a
// debugger, a swapped-out node) must not leave the others waiting forever:
// each collective is started nonblocking and waited for with the bound of
// comm.timeout_s, a warning at half of it naming the host-mates that have
// not arrived, then the job ends naming them.

// Same-host ranks that are behind (not yet in this collective) or silent in
// it, as "rank 2 (host h), rank 3 (host h)"; when none, the straggler is on
// another host.
static void laggards_(struct runtime *rt, char *buf, size_t bytes)
{
    struct runtime_impl *im = rt->impl;
    const uint64_t mine = atomic_load(&im->board->entered);
    const double now = util_now_s();
    size_t len = 0;
    buf[0] = '\0';
    for (int q = 0; q < rt->local_size && len + 64 < bytes; q++) {
        if (q == rt->local_rank) // waiting here: never the one behind
            continue;
        const uint64_t entered = atomic_load(&im->peer_board[q]->entered);
        const double beat = (double)atomic_load(&im->peer_board[q]->beat_us) * 1e-6;
        if (entered < mine || (entered == mine && now - beat > BOARD_STALE_S))
            len += (size_t)snprintf(buf + len, bytes - len, "%srank %d (host %s)", len ? ", " : "",
                                    im->local_world[q], rt->host);
    }
    if (!len)
        snprintf(buf, bytes, "a rank on another host (every rank on %s is here)", rt->host);
}

struct control_wait {
    struct runtime *rt;
    const char *what;
    double timeout_s;
};

static void beat_(void *arg, double now)
{
    const struct control_wait *w = arg;
    struct runtime_impl *im = w->rt->impl;
    atomic_store(&im->board->beat_us, (uint64_t)(now * 1e6));
}

static void warn_laggards_(void *arg, double waited)
{
    const struct control_wait *w = arg;
    char who[512];
    laggards_(w->rt, who, sizeof who);
    log_warn("collective (control plane: %s) still waiting for %s after %.1f s "
             "(timeout %.1f s)", w->what, who, waited, w->timeout_s);
}

// A control-plane failure: vgpu_train's job ends here (the others could not
// go on without this rank); libvgpu says it and returns it, and MPI, with a
// request that will never finish, is not used again.
static int control_failed_(struct runtime *rt, int rc, const char *msg)
{
    struct runtime_impl *im = rt->impl;
    if (!im->library)
        FATAL(1, "%s", msg);
    log_error("%s", msg);
    mpi_stuck_ = 1;
    return rc;
}

int runtime_control_failed(struct runtime *rt, int rc, const char *msg)
{
    return control_failed_(rt, rc, msg);
}

// MPI may hold a request that never finishes: a control-plane wait failed,
// or a collective of the communicator did.
static int stuck_(const struct runtime *rt) { return mpi_stuck_ || comm_failed(rt->comm); }

int runtime_mpi_stuck(const struct runtime *rt) { return stuck_(rt); }

// The bound before the config is read: libvgpu's VGPU_COMM_TIMEOUT_S (it
// has no start-up watch); vgpu_train's watch bounds that stretch already.
static double control_timeout_s_(const struct runtime *rt)
{
    const struct runtime_impl *im = rt->impl;
    if (rt->cfg.comm.timeout_s > 0)
        return rt->cfg.comm.timeout_s;
    return im->library ? early_timeout_s_() : CONTROL_DEFAULT_TIMEOUT_S;
}

// Waits for the request that `mpi_call` (its name) started with result
// mpi_rc, for collective `what`.
static int control_wait_(struct runtime *rt, const char *mpi_call, int mpi_rc, MPI_Request *req,
                         const char *what, const struct trace_call *call)
{
    struct control_wait w = {rt, what, control_timeout_s_(rt)};
    struct comm_wait_hooks hooks = {.on_poll = beat_, .on_half = warn_laggards_, .arg = &w};
    double waited = 0;
    int rc = mpi_rc == MPI_SUCCESS ? comm_mpi_wait(req, w.timeout_s, &hooks, &waited) : VGPU_ECOMM;
    trace_call_end(call, TRACE_CONTROL, rc);
    char msg[1024];
    if (mpi_rc != MPI_SUCCESS) {
        char mpi_msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(mpi_rc, mpi_msg, &len);
        snprintf(msg, sizeof msg, "control plane: %s failed in %s: %s", mpi_call, what, mpi_msg);
        return control_failed_(rt, rc, msg);
    }
    if (rc == VGPU_ECOMM) {
        snprintf(msg, sizeof msg, "control plane: MPI failed in %s", what);
        return control_failed_(rt, rc, msg);
    }
    if (rc == VGPU_ETIMEOUT) {
        char who[512];
        laggards_(rt, who, sizeof who);
        snprintf(msg, sizeof msg, "collective timed out after %.1f s waiting for %s: stopped or "
                 "stuck (control plane: %s; comm.timeout_s = %.1f)", waited, who, what, w.timeout_s);
        return control_failed_(rt, rc, msg);
    }
    return rc;
}

// Marks this rank's arrival at the next control-plane collective.
static struct trace_call control_enter_(struct runtime *rt, enum flight_kind kind, size_t bytes)
{
    struct runtime_impl *im = rt->impl;
    atomic_store(&im->board->beat_us, (uint64_t)(util_now_s() * 1e6));
    atomic_fetch_add(&im->board->entered, 1);
    return trace_call_begin(kind, bytes);
}

// The control plane's collectives, as statuses (0, or a failure
// control_failed_ has said).
// `comm` (of n ranks) is the job or the host.
static int ctl_gather_(struct runtime *rt, const void *send, void *recv, size_t bytes, MPI_Comm comm,
                       int n)
{
    if (bytes > INT_MAX) // a program error, the same on every rank
        FATAL(1, "runtime_gather_all: %zu bytes a rank; at most INT_MAX", bytes);
    MPI_Request req;
    const struct trace_call call = control_enter_(rt, FLIGHT_CTL_GATHER, bytes * (size_t)n);
    const int mpi_rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                      comm, &req);
    return control_wait_(rt, "MPI_Iallgather", mpi_rc, &req, "all-gather", &call);
}

static int ctl_broadcast_(struct runtime *rt, void *buf, size_t bytes, int root)
{
    // MPI counts are ints: pieces of at most 1 GiB (a replica check's state
    // can be larger).
    const size_t piece = (size_t)1 << 30;
    size_t done = 0;
    do {
        const size_t len = bytes - done < piece ? bytes - done : piece;
        MPI_Request req;
        const struct trace_call call = control_enter_(rt, FLIGHT_CTL_BROADCAST, len);
        const int mpi_rc = MPI_Ibcast((char *)buf + done, (int)len, MPI_BYTE, root,
                                      runtime_mpi_world(rt), &req);
        TRY(control_wait_(rt, "MPI_Ibcast", mpi_rc, &req, "broadcast", &call));
        done += len;
    } while (done < bytes);
    return 0;
}

// recv = op over the ranks of count elements of send (MPI_IN_PLACE allowed),
// for collective `what`.
static int ctl_all_reduce_(struct runtime *rt, const void *send, void *recv, int count,
                           MPI_Datatype type, MPI_Op op, size_t bytes, const char *what)
{
    MPI_Request req;
    const struct trace_call call = control_enter_(rt, FLIGHT_CTL_REDUCE, bytes);
    const int mpi_rc = MPI_Iallreduce(send, recv, count, type, op, runtime_mpi_world(rt), &req);
    return control_wait_(rt, "MPI_Iallreduce", mpi_rc, &req, what, &call);
}

static int ctl_agree_min_(struct runtime *rt, int v, int *out)
{
    return ctl_all_reduce_(rt, &v, out, 1, MPI_INT, MPI_MIN, sizeof v, "agreement");
}

static int ctl_reduce_doubles_(struct runtime *rt, double *values, int count, MPI_Op op)
{
    return ctl_all_reduce_(rt, MPI_IN_PLACE, values, count, MPI_DOUBLE, op,
                           (size_t)count * sizeof *values, "reduction");
}

static MPI_Datatype host_type_(enum comm_dtype t)
{
    switch (t) {
    case COMM_FLOAT32: return MPI_FLOAT;
    case COMM_FLOAT64: return MPI_DOUBLE;
    case COMM_INT32: return MPI_INT32_T;
    case COMM_INT64: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
    }
}

static MPI_Op host_op_(enum comm_reduce_op op)
{
    switch (op) {
    case COMM_SUM:
    case COMM_AVG: return MPI_SUM; // then divided
    case COMM_PROD: return MPI_PROD;
    case COMM_MIN: return MPI_MIN;
    case COMM_MAX: return MPI_MAX;
    default: return MPI_OP_NULL;
    }
}

int runtime_host_all_reduce(struct runtime *rt, const void *send, void *recv, size_t count,
                            enum comm_dtype t, enum comm_reduce_op op)
{
    const MPI_Datatype type = host_type_(t);
    const MPI_Op mop = host_op_(op);
    if (type == MPI_DATATYPE_NULL || mop == MPI_OP_NULL || count > INT_MAX ||
        (count && (!send || !recv)))
        return VGPU_EINVAL;
    if (stuck_(rt))
        return VGPU_ECOMM;
    TRY(ctl_all_reduce_(rt, send == recv ? MPI_IN_PLACE : send, recv, (int)count, type, mop,
                        count * comm_dtype_size(t), "reduction"));
    if (op == COMM_AVG)
        comm_divide_host(recv, count, t, rt->size);
    return 0;
}

int runtime_host_broadcast(struct runtime *rt, void *buf, size_t bytes, int root)
{
    if (root < 0 || root >= rt->size || (bytes && !buf))
        return VGPU_EINVAL;
    return stuck_(rt) ? VGPU_ECOMM : ctl_broadcast_(rt, buf, bytes, root);
}

int runtime_host_all_gather(struct runtime *rt, const void *send, void *recv, size_t bytes)
{
    if (bytes > INT_MAX || (bytes && (!send || !recv)))
        return VGPU_EINVAL;
    return stuck_(rt) ? VGPU_ECOMM
                      : ctl_gather_(rt, send, recv, bytes, runtime_mpi_world(rt), rt->size);
}

// The helpers of runtime.h: in vgpu_train's mode a failure never returns
// (control_failed_); libvgpu does not call them after vgpu_init.
static void control_must_(int rc)
{
    if (rc < 0)
        FATAL(1, "control plane failed (said above)");
}

void runtime_gather_all(struct runtime *rt, const void *send, void *recv, size_t bytes)
{
    control_must_(ctl_gather_(rt, send, recv, bytes, runtime_mpi_world(rt), rt->size));
}

void runtime_broadcast(struct runtime *rt, void *buf, size_t bytes, int root)
{
    control_must_(ctl_broadcast_(rt, buf, bytes, root));
}

int runtime_agree_min(struct runtime *rt, int v)
{
    int out = 0;
    control_must_(ctl_agree_min_(rt, v, &out));
    return out;
}

void runtime_sum_doubles(struct runtime *rt, double *values, int count)
{
    control_must_(ctl_reduce_doubles_(rt, values, count, MPI_SUM));
}

void runtime_max_doubles(struct runtime *rt, double *values, int count)
{
    control_must_(ctl_reduce_doubles_(rt, values, count, MPI_MAX));
}

void runtime_barrier(struct runtime *rt)
{
    MPI_Request req;
    const struct trace_call call = control_enter_(rt, FLIGHT_CTL_BARRIER, 0);
    const int mpi_rc = MPI_Ibarrier(runtime_mpi_world(rt), &req);
    control_must_(control_wait_(rt, "MPI_Ibarrier", mpi_rc, &req, "barrier", &call));
}

// ---- devices ----

// What one rank found: its own visible devices, as it sees them (its
// CUDA_VISIBLE_DEVICES, a scheduler's per-task binding, one MIG instance).
struct scan_ {
    int rc;        // 0, or why its GPUs cannot be used (msg says)
    int count;     // GPUs it sees
    int mps;       // it is an MPS client
    char msg[256];
    struct device_info devs[MAX_DEVICES];
};

// The host's devices: every rank scans what it sees, the host's ranks share
// their lists, and the union (by UUID, in the order the ranks list them,
// PROHIBITED devices left out) is what binding places ranks on, with each
// rank's view as a mask. Fills host->devs/ndev/visible/mps and *mine (this
// rank's scan). Returns 0 (GPUs), 1 (no GPU: the CPU stands in), 2 (CPU
// asked for), or a negative status with a message in err (the same on every
// rank of the host).
struct host_devices {
    struct device_info devs[MAX_DEVICES];
    int ndev;
    uint64_t *visible; // [local_size]
    int mps;
};

static int discover_(struct runtime *rt, struct host_devices *host, struct scan_ *mine, char *err,
                     size_t err_bytes)
{
    const enum device_kind want = rt->cfg.devices.kind;
    memset(mine, 0, sizeof *mine);
    if (want == DEVICE_KIND_CPU) {
        int n = 0;
        int rc = device_discover(DEVICE_KIND_CPU, host->devs, MAX_DEVICES, &n, err, err_bytes);
        host->ndev = n;
        return rc < 0 ? rc : 2;
    }
    mine->rc = device_discover(DEVICE_KIND_CUDA, mine->devs, MAX_DEVICES, &mine->count, mine->msg,
                               sizeof mine->msg);
    const struct gpu_driver *drv = gpu_driver();
    mine->mps = drv && drv->mps_active();
    struct scan_ *all = malloc((size_t)rt->local_size * sizeof *all);
    if (!all)
        return control_failed_(rt, VGPU_ENOMEM, "out of memory for the host's device lists");
    int rc = ctl_gather_(rt, mine, all, sizeof *mine, local_(rt), rt->local_size);
    if (rc < 0) // the gather may still be in flight: its buffers stay (the caller's too)
        return rc;
    int seeing = 0;
    for (int q = 0; q < rt->local_size && rc == 0; q++) {
        if (all[q].rc == VGPU_EUNSUPPORTED)
            continue; // no GPU support built: as no GPU
        if (all[q].rc < 0)
            rc = util_errorf(err, err_bytes, all[q].rc, "local rank %d: %s", q, all[q].msg);
        seeing += all[q].count > 0;
        host->mps |= all[q].mps;
    }
    host->ndev = 0;
    for (int q = 0; q < rt->local_size && rc == 0; q++) {
        host->visible[q] = 0;
        for (int i = 0; i < all[q].count; i++) {
            const struct device_info *d = &all[q].devs[i];
            if (d->compute_mode == GPU_MODE_PROHIBITED) {
                if (q == 0 && rt->local_rank == 0)
                    log_warn("%s (%s) is in PROHIBITED compute mode: left out", d->uuid, d->name);
                continue; // as good as absent
            }
            int u = 0;
            while (u < host->ndev && strcmp(host->devs[u].uuid, d->uuid) != 0)
                u++;
            if (u == host->ndev && host->ndev < MAX_DEVICES)
                host->devs[host->ndev++] = *d;
            if (u < 64)
                host->visible[q] |= 1ull << u;
        }
    }
    if (rc == 0 && seeing && seeing < rt->local_size)
        rc = util_errorf(err, err_bytes, VGPU_ECONFIG,
                         "%d of the %d ranks on %s see no GPU while the others do (each rank's "
                         "CUDA_VISIBLE_DEVICES, or the scheduler's per-task binding, decides): "
                         "give every rank a GPU, or set devices.kind = cpu",
                         rt->local_size - seeing, rt->local_size, rt->host);
    const int prohibited_only = rc == 0 && seeing && host->ndev == 0;
    free(all);
    if (rc < 0)
        return rc;
    if (host->ndev > 0) {
        for (int i = 0; i < host->ndev; i++)
            host->devs[i].index = i; // the host's numbering; ordinals stay per rank
        return 0;
    }
    if (want == DEVICE_KIND_CUDA && mine->rc == VGPU_EUNSUPPORTED)
        return util_errorf(err, err_bytes, VGPU_ENODEV,
                           "devices.kind = cuda, but this vgpu was built without CUDA (rebuild "
                           "with -DVGPU_CUDA=ON) or use devices.kind = auto|cpu");
    if (want == DEVICE_KIND_CUDA)
        return util_errorf(err, err_bytes, VGPU_ENODEV,
                           prohibited_only
                               ? "devices.kind = cuda, but every GPU on %s is in PROHIBITED compute "
                                 "mode (nvidia-smi -q | grep 'Compute Mode'); use devices.kind = auto|cpu"
                               : "devices.kind = cuda, but no CUDA GPU is visible on %s "
                                 "(CUDA_VISIBLE_DEVICES, driver?); use devices.kind = auto|cpu",
                           rt->host);
    int n = 0;
    rc = device_discover(DEVICE_KIND_CPU, host->devs, MAX_DEVICES, &n, err, err_bytes);
    host->ndev = n;
    for (int q = 0; q < rt->local_size; q++)
        host->visible[q] = 1;
    return rc < 0 ? rc : 1;
}

// rank 0's job table (job_table.h), from the rows of every rank.
static void print_job_table_(const struct runtime *rt, const struct job_row *rows,
                             const char *backend, uint64_t need_bytes)
{
    char from_env[512];
    config_describe_env(from_env, sizeof from_env);
    const struct job_table_facts facts = {.hosts = rt->node_count,
                                          .simulated = rt->simulated,
                                          .backend = backend,
                                          .backend_reason = rt->backend_reason,
                                          .need_bytes = need_bytes,
                                          .from_env = from_env};
    job_table_print(stdout, rows, rt->size, &facts);
}

// This rank's view of what decides NCCL; the job's is the minimum of every
// rank's (ctl_all_reduce_ over NCCL_FACTS_INTS_ ints).
struct nccl_facts_ {
    int built;          // this binary has the NCCL backend
    int version;        // NCCL loaded here (0 = none)
    int multi_rank_env; // NCCL_MULTI_RANK_GPU_ENABLE=1
    int max_ctas_set;   // NCCL_MAX_CTAS is set
};
#define NCCL_FACTS_INTS_ ((int)(sizeof(struct nccl_facts_) / sizeof(int)))

static struct nccl_facts_ nccl_facts_local_(void)
{
    const int test_version = env_get()->test_nccl_version; // VGPU_TEST_NCCL_VERSION
    struct nccl_facts_ f = {
        .version = test_version >= 0 ? test_version : comm_nccl_runtime_version(),
        .multi_rank_env = env_get()->nccl_multi_rank_gpu,
        .max_ctas_set = getenv("NCCL_MAX_CTAS") != NULL,
        .built = comm_nccl_backend() != NULL,
    };
    return f;
}

// Where the ranks' NCCL differs (missing or older on some), the backend
// line names a rank with the lowest, on which the job's choice turned.
static void name_rank_without_nccl_(const struct job_row *rows, int n,
                                    const struct comm_choice_facts *f, char *why, size_t why_bytes)
{
    if (!f->nccl_built || !f->all_cuda || f->mig)
        return;
    int lowest = 0, others = 0, highest = 0;
    for (int r = 0; r < n; r++) {
        if (rows[r].nccl_version < rows[lowest].nccl_version)
            lowest = r;
        highest = rows[r].nccl_version > highest ? rows[r].nccl_version : highest;
    }
    for (int r = 0; r < n; r++)
        others += rows[r].nccl_version == rows[lowest].nccl_version;
    const size_t len = strlen(why);
    if (highest == rows[lowest].nccl_version || len >= why_bytes)
        return; // every rank alike: the reason says it all
    snprintf(why + len, why_bytes - len, " on %d of %d ranks, e.g. rank %d (host %s; NCCL %d.%d "
             "elsewhere)", others, n, lowest, rows[lowest].host, highest / 10000,
             highest % 10000 / 100);
}

// Every rank reports its status; all return the worst, so no rank goes on
// alone (a failed rank's message is already printed by that rank).
// (A control-plane failure is the verdict too: libvgpu returns it.)
static int agree_worst_(struct runtime *rt, int rc)
{
    if (stuck_(rt)) // a wait failed: no rank can be asked again
        return rc < 0 ? rc : VGPU_ECOMM;
    int worst = 0;
    const int ctl = ctl_agree_min_(rt, rc < 0 ? rc : 0, &worst);
    return ctl < 0 ? ctl : worst;
}

int runtime_open(struct runtime *rt, const struct runtime_open_args *args)
{
    const struct config *cfg = &rt->cfg;
    char err[1024] = "";
    if (stuck_(rt)) // a wait failed before: no rank can be asked again
        return VGPU_ECOMM;

    // 1. Discover (every rank what it sees; the host shares it) and bind
    // (every rank of a host from the same inputs).
    runtime_stage(rt, RUNTIME_STAGE_DEVICES);
    struct host_devices *host = calloc(1, sizeof *host);
    struct scan_ *scan = calloc(1, sizeof *scan);
    uint64_t *visible = calloc((size_t)rt->local_size, sizeof *visible);
    if (!host || !scan || !visible) {
        free(host);
        free(scan);
        free(visible);
        return control_failed_(rt, VGPU_ENOMEM, "out of memory for device discovery");
    }
    host->visible = visible;
    int rc = discover_(rt, host, scan, err, sizeof err);
    int fell_back = rc == 1;
    if (rc >= 0 && fell_back && rt->rank == 0 && !args->quiet)
        printf("vgpu: no CUDA GPU visible: using CPU-simulated virtual GPUs\n");

    // What decides NCCL, agreed before anything depends on it (the caps
    // leave NCCL's room; the backend choice): a rank that differs (NCCL
    // missing on some nodes, a variable set on one) must not build another
    // backend than its peers and hang in set-up.
    // (A wait that failed in discovery leaves MPI alone: no more collectives.
    // The facts are static: a wait that times out leaves its reduction in
    // flight, and a late rank may still write to them.)
    const struct nccl_facts_ nccl_here = nccl_facts_local_();
    static struct nccl_facts_ nf;
    nf = nccl_here;
    const int nf_rc = rc < 0 && stuck_(rt)
                          ? rc
                          : ctl_all_reduce_(rt, MPI_IN_PLACE, &nf, NCCL_FACTS_INTS_, MPI_INT,
                                            MPI_MIN, sizeof nf, "agreement (NCCL)");
    if (nf_rc < 0) { // MPI is left alone now; scan may be a pending gather's buffer
        free(host);
        free(visible);
        return nf_rc;
    }
    // Where NCCL may run (and with how many ranks a GPU), the automatic
    // caps leave its buffers room. This host's view: MIG here rules it out.
    const int requested = cfg->comm.backend;
    int host_mig = 0;
    for (int i = 0; i < host->ndev; i++)
        host_mig |= host->devs[i].mig;
    const struct comm_choice_facts may = {.nccl_built = nf.built, .nccl_version = nf.version,
                                          .all_cuda = rc == 0, .multi_rank_env = nf.multi_rank_env,
                                          .max_ctas_set = nf.max_ctas_set, .mps = host->mps,
                                          .mig = host_mig, .all_to_all = args->tree_all_reduce,
                                          .staged = rc == 0};
    const int nccl_ranks = requested == BACKEND_AUTO || requested == BACKEND_NCCL
                               ? comm_nccl_ranks_per_gpu(&may)
                               : 0;
    // Free memory no one could tell (no NVML): said once a host.
    for (int i = 0; rc == 0 && rt->local_rank == 0 && i < host->ndev; i++)
        if (host->devs[i].free_unknown) {
            log_warn("NVML (libnvidia-ml.so.1) is not available: free GPU memory is unknown, so "
                     "the caps assume each GPU's whole memory is free");
            break;
        }

    struct binding *bind = calloc((size_t)rt->local_size, sizeof *bind);
    if (!bind && rc >= 0)
        rc = util_errorf(err, sizeof err, VGPU_ENOMEM, "out of memory for the binding");
    const struct device_info *devs = host->devs;
    int cuda = rc == 0;
    struct binding_request req = {
        .local_size = rt->local_size,
        .ndevices = host->ndev,
        .devices = devs,
        .ranks_per_device = cfg->devices.ranks_per_device,
        .memory_limit = cfg->devices.memory_limit,
        .memory_fraction = cfg->devices.memory_fraction,
        .map = cfg->devices.map.count ? cfg->devices.map.v : NULL,
        .map_count = cfg->devices.map.count,
        .overhead_bytes = cuda ? CUDA_CONTEXT_OVERHEAD : 0,
        .backend_extra_bytes = nccl_ranks ? NCCL_BUFFER_BUDGET : 0,
        .backend_max_ranks = nccl_ranks,
        .min_bytes = args->min_bytes,
        .visible = cuda ? visible : NULL,
        .mps = host->mps,
    };
    if (rc >= 0)
        rc = binding_compute(&req, bind, err, sizeof err);
    if (rc < 0) {
        if (rt->local_rank == 0 && err[0])
            log_error("%s", err);
        free(bind);
        free(host);
        free(scan);
        free(visible);
        return agree_worst_(rt, rc);
    }
    struct binding mine = bind[rt->local_rank];
    free(bind);
    // This rank opens the bound device by its own ordinal for it.
    struct device_info my_dev = devs[mine.device];
    for (int i = 0; cuda && i < scan->count; i++)
        if (!strcmp(scan->devs[i].uuid, my_dev.uuid))
            my_dev.index = scan->devs[i].index;
    const int host_index = mine.device;
    const int host_mps = host->mps && cuda;
    const int host_ndev = host->ndev;
    // CUDA shows a process one MIG instance: ranks that were given none of
    // their own all land on the first one.
    if (cuda && my_dev.mig && mine.ranks_on_device > 1 && rt->local_rank == 0 && !args->quiet)
        log_warn("%d ranks share MIG instance %s: CUDA shows a process one MIG instance, so "
                 "give each rank its own (CUDA_VISIBLE_DEVICES=MIG-... a rank, as Slurm's MIG "
                 "gres does) to use the others",
                 mine.ranks_on_device, my_dev.uuid);
    rt->simulated = my_dev.simulated;
    free(host);
    free(scan);
    free(visible);

    // 2. This rank's virtual GPU.
    long threads = cfg->devices.cpu_threads;
    if (args->one_blas_thread) {
        if (threads > 1 && rt->rank == 0)
            log_warn("devices.cpu_threads = %ld ignored: this job needs one BLAS thread "
                     "(bitwise-reproducible GEMMs)", threads);
        threads = 1;
    } else if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores / rt->local_size > 1 ? cores / rt->local_size : 1;
    }
    // A plan opens nothing: it shows what would be opened.
    const int plan_only = args->plan_only || env_get()->plan;
    rc = plan_only ? 0
                         : device_open(&rt->dev, &my_dev, rt->rank, rt->host, mine.cap_bytes,
                                       (int)threads);
    if ((rc = agree_worst_(rt, rc)) < 0) {
        if (rt->dev.ops)
            device_close(&rt->dev);
        // A cap the device cannot hold (the rank said how much it has) is
        // the configuration's to change: devices.memory_limit or the ranks.
        return rc == VGPU_EDEVMEM ? VGPU_ECONFIG : rc;
    }

    // 3. Who shares a physical device decides the collective backend.
    struct job_row row = {.rank = rt->rank, .local_rank = rt->local_rank,
                          .node_index = rt->node_index, .device_index = host_index,
                          .ranks_on_device = mine.ranks_on_device,
                          .cap_bytes = mine.cap_bytes / ARENA_ALIGN * ARENA_ALIGN,
                          .mps = host_mps, .mig = my_dev.mig,
                          .nccl_version = nccl_here.version,
                          .host_devices = host_ndev};
    snprintf(row.host, sizeof row.host, "%s", rt->host);
    snprintf(row.pci_bus_id, sizeof row.pci_bus_id, "%s", my_dev.pci_bus_id);
    row.kind = my_dev.kind;
    snprintf(row.name, sizeof row.name, "%s", my_dev.name);
    snprintf(row.uuid, sizeof row.uuid, "%s", my_dev.uuid);
    struct job_row *rows = malloc((size_t)rt->size * sizeof *rows);
    if (!rows) {
        device_close(&rt->dev);
        return control_failed_(rt, VGPU_ENOMEM, "out of memory for the job table");
    }
    if ((rc = ctl_gather_(rt, &row, rows, sizeof row, runtime_mpi_world(rt), rt->size)) < 0) {
        free(rows);
        device_close(&rt->dev);
        return rc;
    }
    rt->physical_devices = job_table_count_devices(rows, rt->size, 1);
    int all_cuda = 1;
    for (int r = 0; r < rt->size; r++)
        all_cuda &= rows[r].kind == DEVICE_KIND_CUDA;
    struct comm_choice_facts facts = {
        .nccl_built = nf.built,
        .nccl_version = nf.version,
        .all_cuda = all_cuda,
        .max_ranks_per_gpu = 1,
        .multi_rank_env = nf.multi_rank_env,
        .max_ctas_set = nf.max_ctas_set,
        .all_to_all = args->tree_all_reduce,
    };
    for (int r = 0; r < rt->size; r++) {
        facts.max_ranks_per_gpu = rows[r].ranks_on_device > facts.max_ranks_per_gpu
                                      ? rows[r].ranks_on_device
                                      : facts.max_ranks_per_gpu;
        facts.mps |= rows[r].mps;
        facts.mig |= rows[r].mig;
        facts.staged |= rows[r].kind == DEVICE_KIND_CUDA;
    }
    facts.staged |= env_get()->ring_staging; // the same on every rank: launchers export it
    const char *chosen = NULL;
    rc = comm_choose_backend(config_enum_name("comm", "backend", cfg->comm.backend), &facts,
                             &chosen, rt->backend_reason, sizeof rt->backend_reason);
    if (rc < 0 || strcmp(chosen, "nccl") != 0) // NCCL not taken: maybe for one rank's NCCL
        name_rank_without_nccl_(rows, rt->size, &facts, rt->backend_reason,
                                sizeof rt->backend_reason);
    if (rc < 0) {
        if (rt->rank == 0)
            log_error("%s", rt->backend_reason); // names comm.backend itself
        free(rows);
        device_close(&rt->dev);
        return agree_worst_(rt, rc);
    }
    // NCCL allocates its buffers after the arena and outside the cap: an
    // explicit cap near free memory would pass binding and then fail in
    // ncclCommInitRank. Check the room now, with the numbers.
    if (!strcmp(chosen, "nccl")) {
        const struct binding nb = {.device = host_index,
                                   .ranks_on_device = mine.ranks_on_device,
                                   .cap_bytes = mine.cap_bytes};
        rc = binding_check_headroom(&nb, &my_dev, CUDA_CONTEXT_OVERHEAD, NCCL_BUFFER_BUDGET,
                                    "NCCL buffers", err, sizeof err);
        // The first rank whose device is short says so, for all.
        int first = INT_MAX;
        const int ctl = ctl_agree_min_(rt, rc < 0 ? rt->rank : INT_MAX, &first);
        if (ctl == 0 && first == rt->rank)
            log_error("%s", err);
        if ((rc = ctl < 0 ? ctl : agree_worst_(rt, rc)) < 0) {
            free(rows);
            device_close(&rt->dev);
            return rc;
        }
    }
    if (plan_only) {
        if (rt->rank == 0)
            print_job_table_(rt, rows, chosen, args->min_bytes);
        free(rows);
        rt->planned = 1;
        return 0;
    }
    // Simulated GPUs do their math on the CPU: NCCL cannot drive them.
    if (rt->simulated && !strcmp(chosen, "nccl")) {
        size_t len = strlen(rt->backend_reason);
        snprintf(rt->backend_reason + len, sizeof rt->backend_reason - len,
                 "; the GPUs are simulated, so the ring stands in for NCCL");
        chosen = "ring";
    }

    // 4. Connect. Same-host peers map each other's arenas (memfds, no names:
    // shm_share.h), so no death, here or later, leaves memory behind.
    runtime_stage(rt, RUNTIME_STAGE_CONNECT);
    struct comm_args cargs = {
        .mpi_comm = runtime_mpi_world(rt),
        .dev = &rt->dev,
        .timeout_s = cfg->comm.timeout_s,
        .slice_bytes = cfg->comm.slice_bytes,
        .largest_bytes = args->largest_collective_bytes,
        .node_index = rt->node_index,
        .host = rt->host,
    };
    rc = comm_create(&rt->comm, comm_find_ops(chosen), &cargs);
    if (rc == VGPU_ETIMEOUT) // a set-up wait failed: no rank can be asked again
        mpi_stuck_ = 1;
    rc = agree_worst_(rt, rc);
    if (rc < 0) {
        if (rt->rank == 0)
            log_error("could not connect the %s communicator", chosen);
        free(rows);
        comm_destroy(rt->comm);
        rt->comm = NULL;
        device_close(&rt->dev);
        return rc;
    }
    if (rt->rank == 0 && !args->quiet)
        print_job_table_(rt, rows, comm_backend_name(rt->comm), args->min_bytes);
    free(rows);
    return 0;
}

int runtime_close(struct runtime *rt, int exit_code)
{
    startup_watch_end();
    mpi_stuck_ = stuck_(rt); // the communicator's failure outlives it
    if (mpi_stuck_) // peers may be gone: a backend must not wait for them in teardown
        comm_mark_failed(rt->comm);
    comm_destroy(rt->comm);
    rt->comm = NULL;
    device_close(&rt->dev);
    struct runtime_impl *im = rt->impl;
    if (im) {
        // After a failed wait the others may be gone: no collective teardown.
        if (!mpi_stuck_) {
            flight_job_leave();
            if (im->board_win != MPI_WIN_NULL)
                MPI_Win_free(&im->board_win);
            if (im->local != MPI_COMM_NULL)
                MPI_Comm_free(&im->local);
            if (im->world != MPI_COMM_NULL)
                MPI_Comm_free(&im->world);
        }
        free(im->local_world);
        free(im->peer_board);
        free(im);
        rt->impl = NULL;
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && mpi_ours_ && !mpi_stuck_)
        MPI_Finalize();
    mpi_ours_ = 0;
    return exit_code;
}

void runtime_on_signal(int sig)
{
    const char *name = sig == SIGUSR2 ? "SIGUSR2" : sig == SIGTERM ? "SIGTERM"
                     : sig == SIGINT  ? "SIGINT"  : sig == SIGUSR1 ? "SIGUSR1" : "signal";
    flight_job_event(sig == SIGUSR2 ? FLIGHT_EVENT_INSPECT : FLIGHT_EVENT_STOP, name);
}

void runtime_abort(struct runtime *rt, int exit_code)
{
    (void)rt;
    abort_hook_(exit_code);
    exit(exit_code);
}
