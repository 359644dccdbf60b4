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

#endif
