// absent.c: the CUDA math in a build without CUDA: none (the entries answer
// VGPU_EUNSUPPORTED; no CUDA device opens there anyway).
#include "math_ops.h"

const struct math_ops *math_cuda_ops(void) { return NULL; }
