// runtime_internal.h: the runtime's MPI side, for the launcher's own files
// (runtime.c, runtime_trace.c). The worker never sees it.
#ifndef VGPU_RUNTIME_INTERNAL_H
#define VGPU_RUNTIME_INTERNAL_H

#include <mpi.h>

#include "runtime.h"

// The job's ranks: vgpu's own duplicate of the communicator it joined
// (MPI_COMM_WORLD, or the one given to vgpu_init), so that its messages and
// collectives never meet the program's.
MPI_Comm runtime_mpi_world(const struct runtime *rt);

// A control-plane failure (a wait that timed out or failed, no memory for
// an exchange): vgpu_train's mode ends the job here with msg; library mode
// says it and returns rc, and from then on MPI is left alone (a request may
// never finish): runtime_mpi_stuck is 1, as it is after a collective of the
// communicator timed out or met an MPI failure (comm_failed).
int runtime_control_failed(struct runtime *rt, int rc, const char *msg);
int runtime_mpi_stuck(const struct runtime *rt);

#endif
