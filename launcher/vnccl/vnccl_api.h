// vnccl_api.h: what the API's files share.
#ifndef VGPU_VNCCL_API_H
#define VGPU_VNCCL_API_H

#include "vnccl.h"

// NCCL's library exports each function twice: ncclX and pncclX (the name a
// profiler interposes on). Ours are one function under both names.
#define VNCCL_PROFILING_NAME(name) extern __typeof__(name) p##name __attribute__((alias(#name)));

// A live communicator, its non-blocking creation ended, neither failed,
// revoked nor finalized: ncclSuccess, or the status to return (said).
ncclResult_t vnccl_check_comm(struct ncclComm *c, const char *what);

#endif
