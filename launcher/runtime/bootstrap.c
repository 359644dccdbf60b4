// bootstrap.c: a process joins the job (MPI, its host, the arrival board,
// the start-up watch and stages) and leaves it (runtime_close, the abort).
#include "runtime_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "comm_internal.h"
#include "env.h"
#include "flight_job.h"
#include "startup_watch.h"
#include "util.h"

struct runtime_mpi_state runtime_mpi;

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


int runtime_launcher_rank(void)
{
    const int rank = env_get()->launcher_rank;
    return rank > 0 ? rank : 0;
}

double runtime_early_timeout_s(void) { return env_comm_timeout_s(); }

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
    const double bound = runtime_early_timeout_s();
    int rc = comm_mpi_wait(&req, bound, NULL, &waited);
    if (rc == VGPU_ETIMEOUT)
        log_error("vgpu_init: waited %.1f s for the other ranks of the communicator to call "
                  "vgpu_init; not every one did (rank %d is here; bound: VGPU_COMM_TIMEOUT_S, "
                  "else 300 s)", waited, rank);
    else if (rc < 0)
        log_error("vgpu_init: MPI failed while the ranks joined");
    if (rc < 0) {
        *world = MPI_COMM_NULL;
        runtime_mpi.stuck = 1;
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
    const char *record = env_read(BINDING_ENV_PINNED), *now = getenv("CUDA_VISIBLE_DEVICES");
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

// MPI started, or the program's taken (libvgpu in an MPI program: the
// program finalises it), with this process's checks first.
static int start_mpi_(struct runtime *rt, int *argc, char ***argv, const struct runtime_join *join)
{
    // Messages before MPI_Init_thread returns carry the launcher's rank.
    if (env_get()->launcher_rank >= 0)
        log_set_identity(env_get()->launcher_rank, rt->host);
    int provided, already = 0, finalized = 0;
    MPI_Initialized(&already);
    MPI_Finalized(&finalized);
    if (finalized || runtime_mpi.stuck) { // MPI cannot start twice in one process
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
        startup_watch_begin(stage_name_(RUNTIME_STAGE_MPI), runtime_early_timeout_s()) < 0)
        log_warn("cannot start the start-up watch: start-up waits are not bounded");
    // Serialized: a program may call collectives from a thread of its own
    // (vgpu_train's overlapped all-reduces), one thread at a time.
    if (already) {
        MPI_Query_thread(&provided);
        runtime_mpi.ours = 0;
    } else if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "vgpu: MPI_Init_thread failed\n");
        return VGPU_ECOMM;
    } else {
        runtime_mpi.ours = 1;
    }
    runtime_mpi.thread_level = provided;
    if (!join->library)
        log_set_fatal_hook(abort_hook_);
    return 0;
}

// im->world: vgpu's own duplicate of the communicator joined, so its
// traffic (tags, collectives) never meets the program's. A library's MPI
// errors are returned (statuses), not fatal; the communicators made from
// world (and the backends' duplicates) inherit it.
static int join_world_(struct runtime *rt, struct runtime_impl *im, const struct runtime_join *join)
{
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
    if (join->library) {
        const int rc = join_bounded_(given, rt->rank, &im->world);
        if (rc < 0)
            return rc;
        MPI_TRY(MPI_Comm_set_errhandler(im->world, MPI_ERRORS_RETURN));
    } else {
        MPI_TRY(MPI_Comm_dup(given, &im->world));
    }
    return 0;
}

// im->local (this host's ranks), the rank's place on it, and the host's
// index among the job's hosts.
static int find_host_(struct runtime *rt, struct runtime_impl *im)
{
    const char *test_host = env_get()->test_host;
    if (test_host[0]) {
        // Test hook: ranks that name the same host are one host (a cluster
        // of several hosts rehearsed on one machine).
        snprintf(rt->host, sizeof rt->host, "%s", test_host);
        log_set_identity(rt->rank, rt->host);
        char *names = malloc((size_t)rt->size * sizeof rt->host);
        if (!names)
            return VGPU_ENOMEM;
        int rc = MPI_Allgather(rt->host, sizeof rt->host, MPI_CHAR, names, sizeof rt->host,
                               MPI_CHAR, im->world);
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
    return 0;
}

// The arrival board in host shared memory, one slot a local rank, and the
// start-up watch's hooks that read it.
static int open_board_(struct runtime *rt, struct runtime_impl *im)
{
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
    return 0;
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
    // Each step says its own failure: no trace.
    int rc = start_mpi_(rt, argc, argv, join);
    if (rc < 0)
        return rc;
    struct runtime_impl *im = calloc(1, sizeof *im);
    if (!im)
        return VGPU_ENOMEM;
    im->world = im->local = MPI_COMM_NULL;
    im->board_win = MPI_WIN_NULL;
    im->library = join->library;
    rt->impl = im;
    if ((rc = join_world_(rt, im, join)) < 0 || (rc = find_host_(rt, im)) < 0 ||
        (rc = open_board_(rt, im)) < 0)
        return rc;
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

int runtime_close(struct runtime *rt, int exit_code)
{
    startup_watch_end();
    free(rt->config_text);
    rt->config_text = NULL;
    runtime_mpi.stuck = runtime_mpi_stuck(rt); // the communicator's failure outlives it
    if (runtime_mpi.stuck) // peers may be gone: a backend must not wait for them in teardown
        comm_mark_failed(rt->comm);
    comm_destroy(rt->comm);
    rt->comm = NULL;
    device_close(&rt->dev);
    struct runtime_impl *im = rt->impl;
    if (im) {
        // After a failed wait the others may be gone: no collective teardown.
        if (!runtime_mpi.stuck) {
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
    if (!finalized && runtime_mpi.ours && !runtime_mpi.stuck)
        MPI_Finalize();
    runtime_mpi.ours = 0;
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

static const char *thread_level_name_(int level)
{
    return level == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE"
           : level == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED"
                                          : "MPI_THREAD_SERIALIZED";
}

int runtime_collective_thread_ok(void)
{
    int main_thread = 1;
    MPI_Is_thread_main(&main_thread); // any thread may ask
    // A collective off MPI's main thread runs beside the program's compute:
    // its waits leave the core to it (util.h).
    util_waits_beside_compute = !main_thread;
    if (main_thread || runtime_mpi.thread_level >= MPI_THREAD_SERIALIZED)
        return 1;
    log_error("a collective was called from a thread other than MPI's main thread, and MPI "
              "provides only %s: start MPI with MPI_Init_thread(..., MPI_THREAD_SERIALIZED, ...) "
              "to call collectives from other threads",
              thread_level_name_(runtime_mpi.thread_level));
    return 0;
}
