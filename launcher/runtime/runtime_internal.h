// runtime_internal.h: the runtime's MPI side, shared by its files
// (bootstrap.c: joining and leaving the job; control.c: the control plane;
// runtime.c: devices, binding and the communicator; runtime_trace.c: the
// timeline). Programs never see it.
#ifndef VGPU_RUNTIME_INTERNAL_H
#define VGPU_RUNTIME_INTERNAL_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdint.h>

#include "log.h"
#include "runtime.h"

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

// Whether runtime_bootstrap started MPI (and runtime_close finalises it),
// and whether a failed wait left MPI with requests that will never finish
// (then it is neither finalised nor joined again). One a process.
struct runtime_mpi_state {
    int ours, stuck;
    int thread_level;       // what MPI provides (MPI_THREAD_*)
};
extern struct runtime_mpi_state runtime_mpi;

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

// The job's ranks: vgpu's own duplicate of the communicator it joined
// (MPI_COMM_WORLD, or the one given to vgpu_init), so that its messages and
// collectives never meet the program's.
MPI_Comm runtime_mpi_world(const struct runtime *rt);
// This host's ranks.
static inline MPI_Comm runtime_mpi_local(const struct runtime *rt)
{
    return ((const struct runtime_impl *)rt->impl)->local;
}

// The start-up bound before the config is read: VGPU_COMM_TIMEOUT_S, the
// environment's comm.timeout_s, when it is a valid one.
double runtime_early_timeout_s(void);

// A control-plane failure (a wait that timed out or failed, no memory for
// an exchange): vgpu_train's mode ends the job here with msg; library mode
// says it and returns rc, and from then on MPI is left alone (a request may
// never finish): runtime_mpi_stuck is 1, as it is after a collective of the
// communicator timed out or met an MPI failure (comm_failed).
int runtime_control_failed(struct runtime *rt, int rc, const char *msg);
int runtime_mpi_stuck(const struct runtime *rt);

// The control plane's collectives (control.c), as statuses: 0, or a failure
// runtime_control_failed has said. `comm` (of n ranks) is the job or the host.
int runtime_ctl_gather(struct runtime *rt, const void *send, void *recv, size_t bytes, MPI_Comm comm,
                       int n);
int runtime_ctl_broadcast(struct runtime *rt, void *buf, size_t bytes, int root);
// recv = op over the ranks of count elements of send (MPI_IN_PLACE allowed),
// for collective `what`.
int runtime_ctl_all_reduce(struct runtime *rt, const void *send, void *recv, int count,
                           MPI_Datatype type, MPI_Op op, size_t bytes, const char *what);
int runtime_ctl_agree_min(struct runtime *rt, int v, int *out);

#endif
