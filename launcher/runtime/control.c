// control.c: the control plane: the config agreed (rank 0 reads, everyone
// gets the verdict) and small host-memory collectives on MPI, bounded.
#include "runtime_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "flight.h"
#include "startup_watch.h"
#include "trace.h"
#include "util.h"

// ---- configuration: rank 0 decides, everyone gets the verdict ----

int runtime_load_config(struct runtime *rt, const char *path, const char *const *overrides,
                        int n_overrides, char *err, size_t err_bytes)
{
    struct {
        int rc;
        char msg[1024];
        uint64_t text_bytes; // the file's text that follows, with its NUL (0: none)
    } verdict = {0, "", 0};
    runtime_stage(rt, RUNTIME_STAGE_CONFIG);
    char *text = NULL;
    if (rt->rank == 0 && path)
        verdict.rc = config_read_file(path, &text, verdict.msg, sizeof verdict.msg);
    if (rt->rank == 0 && verdict.rc == 0)
        verdict.rc = config_load_job_text(&rt->cfg, text, path, overrides, n_overrides, 1,
                                          verdict.msg, sizeof verdict.msg);
    verdict.text_bytes = text ? strlen(text) + 1 : 0;
    int rc = runtime_ctl_broadcast(rt, &verdict, sizeof verdict, 0);
    if (rc < 0) {
        snprintf(err, err_bytes, "the config could not be shared (said above)");
        return rc;
    }
    if (verdict.rc) {
        free(text);
        snprintf(err, err_bytes, "%s", verdict.msg);
        return verdict.rc;
    }
    if (verdict.text_bytes && rt->rank != 0 && !(text = malloc(verdict.text_bytes)))
        return runtime_control_failed(rt, VGPU_ENOMEM, "out of memory for the config's text");
    if (verdict.text_bytes &&
        (rc = runtime_ctl_broadcast(rt, text, verdict.text_bytes, 0)) < 0) {
        snprintf(err, err_bytes, "the config could not be shared (said above)");
        return rc; // the broadcast may still be in flight: text stays
    }
    rt->config_text = text;
    if ((rc = runtime_ctl_broadcast(rt, &rt->cfg, sizeof rt->cfg, 0)) < 0) {
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
int runtime_control_failed(struct runtime *rt, int rc, const char *msg)
{
    struct runtime_impl *im = rt->impl;
    if (!im->library)
        FATAL(1, "%s", msg);
    log_error("%s", msg);
    runtime_mpi.stuck = 1;
    return rc;
}

// MPI may hold a request that never finishes: a control-plane wait failed,
// or a collective of the communicator did.
int runtime_mpi_stuck(const struct runtime *rt) { return runtime_mpi.stuck || comm_failed(rt->comm); }

// The bound before the config is read: libvgpu's VGPU_COMM_TIMEOUT_S (it
// has no start-up watch); vgpu_train's watch bounds that stretch already.
static double control_timeout_s_(const struct runtime *rt)
{
    const struct runtime_impl *im = rt->impl;
    if (rt->cfg.comm.timeout_s > 0)
        return rt->cfg.comm.timeout_s;
    return im->library ? runtime_early_timeout_s() : CONTROL_DEFAULT_TIMEOUT_S;
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
        return runtime_control_failed(rt, rc, msg);
    }
    if (rc == VGPU_ECOMM) {
        snprintf(msg, sizeof msg, "control plane: MPI failed in %s", what);
        return runtime_control_failed(rt, rc, msg);
    }
    if (rc == VGPU_ETIMEOUT) {
        char who[512];
        laggards_(rt, who, sizeof who);
        snprintf(msg, sizeof msg, "collective timed out after %.1f s waiting for %s: stopped or "
                 "stuck (control plane: %s; comm.timeout_s = %.1f)", waited, who, what, w.timeout_s);
        return runtime_control_failed(rt, rc, msg);
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
// runtime_control_failed has said).
// `comm` (of n ranks) is the job or the host.
int runtime_ctl_gather(struct runtime *rt, const void *send, void *recv, size_t bytes, MPI_Comm comm,
                       int n)
{
    if (bytes > INT_MAX) // a program error, the same on every rank
        FATAL(1, "runtime_ctl_gather: %zu bytes a rank; at most INT_MAX", bytes);
    MPI_Request req;
    const struct trace_call call = control_enter_(rt, FLIGHT_CTL_GATHER, bytes * (size_t)n);
    const int mpi_rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                      comm, &req);
    return control_wait_(rt, "MPI_Iallgather", mpi_rc, &req, "all-gather", &call);
}

int runtime_ctl_broadcast(struct runtime *rt, void *buf, size_t bytes, int root)
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
int runtime_ctl_all_reduce(struct runtime *rt, const void *send, void *recv, int count,
                           MPI_Datatype type, MPI_Op op, size_t bytes, const char *what)
{
    MPI_Request req;
    const struct trace_call call = control_enter_(rt, FLIGHT_CTL_REDUCE, bytes);
    const int mpi_rc = MPI_Iallreduce(send, recv, count, type, op, runtime_mpi_world(rt), &req);
    return control_wait_(rt, "MPI_Iallreduce", mpi_rc, &req, what, &call);
}

int runtime_ctl_agree_min(struct runtime *rt, int v, int *out)
{
    return runtime_ctl_all_reduce(rt, &v, out, 1, MPI_INT, MPI_MIN, sizeof v, "agreement");
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
    if (runtime_mpi_stuck(rt))
        return VGPU_ECOMM;
    TRY(runtime_ctl_all_reduce(rt, send == recv ? MPI_IN_PLACE : send, recv, (int)count, type, mop,
                        count * comm_dtype_size(t), "reduction"));
    if (op == COMM_AVG)
        comm_divide_host(recv, count, t, rt->size);
    return 0;
}

int runtime_host_broadcast(struct runtime *rt, void *buf, size_t bytes, int root)
{
    if (root < 0 || root >= rt->size || (bytes && !buf))
        return VGPU_EINVAL;
    return runtime_mpi_stuck(rt) ? VGPU_ECOMM : runtime_ctl_broadcast(rt, buf, bytes, root);
}

int runtime_host_all_gather(struct runtime *rt, const void *send, void *recv, size_t bytes)
{
    if (bytes > INT_MAX || (bytes && (!send || !recv)))
        return VGPU_EINVAL;
    return runtime_mpi_stuck(rt) ? VGPU_ECOMM
                      : runtime_ctl_gather(rt, send, recv, bytes, runtime_mpi_world(rt), rt->size);
}
