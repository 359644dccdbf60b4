// absent.c: what the NCCL backend answers in a build without NCCL: no
// backend and no library (version 0).
#include "comm_internal.h"

const struct comm_ops *comm_nccl_backend(void) { return NULL; }
int comm_nccl_runtime_version(void) { return 0; }
