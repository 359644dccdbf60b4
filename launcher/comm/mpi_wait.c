// mpi_wait.c: MPI waits with a bound, shared by the backends and the
// runtime: a request waited for within comm.timeout_s (a warning at half
// of it), an MPI failure said, strided types, and the bounded exchanges
// (a communicator's duplicate, a minimum, an agreement) whose buffers
// outlive a timed-out wait.
#include "comm_internal.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "flight.h"
#include "log.h"
#include "util.h"


int comm_mpi_wait(MPI_Request *req, double timeout_s, const struct comm_wait_hooks *hooks,
                  double *waited_s)
{
    struct util_wait_clock clock;
    util_wait_clock_start(&clock);
    double waited = 0;
    int warned = 0;
    for (unsigned polls = 0;; polls++) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            if (waited_s)
                *waited_s = waited;
            return VGPU_ECOMM;
        }
        if (done) {
            if (polls)
                flight_resumed();
            break;
        }
        waited = util_wait_clock_waited(&clock);
        if (hooks && hooks->on_poll)
            hooks->on_poll(hooks->arg, clock.last_s);
        if (waited >= timeout_s / 2 && !warned) {
            if (hooks && hooks->on_half)
                hooks->on_half(hooks->arg, waited);
            warned = 1;
        }
        if (waited >= timeout_s) {
            if (waited_s)
                *waited_s = waited;
            return VGPU_ETIMEOUT;
        }
        // Spin briefly (the usual case is microseconds), then sleep so that
        // oversubscribed ranks leave the core to the ones still computing.
        if (polls == 0)
            flight_waiting(-1); // for whom, MPI does not say
        if (util_waits_beside_compute && polls < 2000) {
            nanosleep(&(struct timespec){0, UTIL_BESIDE_NAP_NS}, NULL);
        } else if (polls < 200) {
            sched_yield();
        } else {
            struct timespec nap = {0, polls < 2000 ? 50000 : 1000000};
            nanosleep(&nap, NULL);
        }
    }
    if (waited_s)
        *waited_s = waited;
    return 0;
}

struct bounded_what {
    const char *what;
    double timeout_s;
};

static void warn_waiting_(void *arg, double waited)
{
    const struct bounded_what *w = arg;
    log_warn("collective (%s) still waiting for another rank after %.1f s (timeout %.1f s)",
             w->what, waited, w->timeout_s);
}

int comm_mpi_wait_bounded(comm_t *c, MPI_Request *req, const char *what)
{
    struct bounded_what w = {what, c->timeout_s};
    struct comm_wait_hooks hooks = {.on_half = warn_waiting_, .arg = &w};
    double waited = 0;
    int rc = comm_mpi_wait(req, c->timeout_s, &hooks, &waited);
    if (rc == VGPU_ECOMM)
        log_error("%s: MPI failed", what);
    else if (rc == VGPU_ETIMEOUT)
        log_error("collective timed out after %.1f s in %s: a rank stopped or died "
                  "(comm.timeout_s = %.1f)", waited, what, c->timeout_s);
    return rc;
}

int comm_mpi_check(int mpi_rc, const char *backend, const char *call)
{
    if (mpi_rc == MPI_SUCCESS)
        return 0;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", mpi_rc);
    log_error("%s backend: %s failed: %s", backend, call, msg);
    return VGPU_ECOMM;
}

int comm_mpi_strided_type(const char *backend, size_t len, size_t stride, MPI_Datatype *out)
{
    MPI_Datatype block;
    TRY(comm_mpi_check(MPI_Type_contiguous((int)len, MPI_BYTE, &block), backend,
                       "MPI_Type_contiguous"));
    int rc = comm_mpi_check(MPI_Type_create_resized(block, 0, (MPI_Aint)stride, out), backend,
                            "MPI_Type_create_resized");
    MPI_Type_free(&block); // a type built from it keeps what it needs
    if (rc == 0 && (rc = comm_mpi_check(MPI_Type_commit(out), backend, "MPI_Type_commit")) < 0)
        MPI_Type_free(out);
    return rc;
}

// An agreement's buffers. After a timeout the reduction is still in flight
// (it cannot be cancelled) and a late rank may complete it, so they must stay
// valid until the process ends: they are kept on a list, never freed (and
// reachable, for leak checkers). The job ends after a timeout anyway.
struct agree_vote {
    int mine, worst;
    struct agree_vote *next;
};
static struct agree_vote *stranded_votes_;

// A bounded exchange that timed out is still in flight (MPI cannot cancel
// it) and a late rank may complete it: what it writes to must outlive the
// call. Such cells are kept here, never freed (and reachable, for leak
// checkers); the job ends after a timeout anyway.
struct stranded_cell {
    MPI_Comm comm;
    uint64_t value;
    struct stranded_cell *next;
};
static struct stranded_cell *stranded_cells_;

static void strand_(struct stranded_cell *cell)
{
    cell->next = stranded_cells_;
    stranded_cells_ = cell;
}

// The bounded wait of a request on a cell's buffers, started with status
// `started`: a start that failed frees the cell; a wait that failed strands
// it (the request may complete late); on success the caller reads the cell,
// then frees it.
static int wait_or_strand_(comm_t *c, struct stranded_cell *cell, int started, MPI_Request *req,
                           const char *what)
{
    if (started < 0) {
        free(cell);
        return started;
    }
    const int rc = comm_mpi_wait_bounded(c, req, what);
    if (rc < 0)
        strand_(cell);
    return rc;
}

int comm_mpi_dup_bounded(comm_t *c, MPI_Comm parent, MPI_Comm *out, const char *what)
{
    *out = MPI_COMM_NULL;
    struct stranded_cell *cell = calloc(1, sizeof *cell);
    if (!cell)
        return VGPU_ENOMEM;
    MPI_Request req;
    const int rc = wait_or_strand_(
        c, cell,
        comm_mpi_check(MPI_Comm_idup(parent, &cell->comm, &req), c->ops->name, "MPI_Comm_idup"),
        &req, what);
    if (rc == 0) {
        *out = cell->comm;
        free(cell);
    }
    return rc;
}

int comm_mpi_min_u64_bounded(comm_t *c, MPI_Comm mpi, uint64_t *value, const char *what)
{
    struct stranded_cell *cell = calloc(1, sizeof *cell);
    if (!cell)
        return VGPU_ENOMEM;
    cell->value = *value;
    MPI_Request req;
    const int rc = wait_or_strand_(
        c, cell,
        comm_mpi_check(MPI_Iallreduce(MPI_IN_PLACE, &cell->value, 1, MPI_UINT64_T, MPI_MIN, mpi, &req),
                       c->ops->name, "MPI_Iallreduce"),
        &req, what);
    if (rc == 0) {
        *value = cell->value;
        free(cell);
    }
    return rc;
}

int comm_agree(comm_t *c, MPI_Comm mpi, int rc, const char *what)
{
    struct agree_vote *v = calloc(1, sizeof *v);
    if (!v)
        return rc < 0 ? rc : VGPU_ENOMEM;
    v->mine = v->worst = rc;
    MPI_Request req;
    int wait_rc =
        comm_mpi_check(MPI_Iallreduce(&v->mine, &v->worst, 1, MPI_INT, MPI_MIN, mpi, &req),
                       c->ops->name, "MPI_Iallreduce");
    if (wait_rc == 0 && (wait_rc = comm_mpi_wait_bounded(c, &req, what)) < 0) {
        v->next = stranded_votes_;
        stranded_votes_ = v;
        return rc < 0 ? rc : wait_rc;
    }
    const int worst = v->worst;
    free(v);
    return rc < 0 ? rc : wait_rc < 0 ? wait_rc : worst < 0 ? VGPU_ECOMM : 0;
}
