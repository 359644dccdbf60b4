// vgpu_ops.c: vgpu_train's kernels (trainer/vgpu/vgpu_ops.h, exported under
// VGPU_PRIVATE_0, not installed) on the math module (math_ops.h: CPU loops
// and BLAS, or CUDA kernels and cuBLAS), and vgpu_ext.h's deterministic
// all-reduce on the communicator's tree. Argument checks here.
#include <vgpu/vgpu_ops.h>

#include <math.h>

#include "status.h"
#include "math_ops.h"
#include "vgpu_internal.h"

// ---- kernels ----

_Static_assert(VGPU_XENT_STATS == XENT_STATS, "the public xent stats are device.h's");

int vgpu_gemm(vgpu_t *v, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, const float *b, float beta, float *c)
{
    device_t *d = api_device(v);
    return d ? math_gemm(d, trans_a, trans_b, m, n, k, alpha, a, b, beta, c) : VGPU_EINVAL;
}

int vgpu_decode_u8(vgpu_t *v, float *out, const uint8_t *codes, const float *table, size_t n)
{
    device_t *d = api_device(v);
    return d ? math_decode_u8(d, out, codes, table, n) : VGPU_EINVAL;
}

int vgpu_bias_add(vgpu_t *v, float *out, const float *bias, int rows, int cols, int relu)
{
    device_t *d = api_device(v);
    return d ? math_bias_add(d, out, bias, rows, cols, relu) : VGPU_EINVAL;
}

int vgpu_bias_grad(vgpu_t *v, float *dbias, const float *dout, int rows, int cols)
{
    device_t *d = api_device(v);
    return d ? math_bias_grad(d, dbias, dout, rows, cols) : VGPU_EINVAL;
}

int vgpu_relu_backward(vgpu_t *v, float *din, const float *dout, const float *out, size_t n)
{
    device_t *d = api_device(v);
    return d ? math_relu_backward(d, din, dout, out, n) : VGPU_EINVAL;
}

int vgpu_softmax_xent(vgpu_t *v, float *dlogits, float *stats, const float *logits,
                      const int32_t *labels, int rows, int classes, float grad_scale)
{
    device_t *d = api_device(v);
    return d ? math_softmax_xent(d, dlogits, stats, logits, labels, rows, classes, grad_scale)
             : VGPU_EINVAL;
}

int vgpu_axpby(vgpu_t *v, float *y, float a, const float *x, float b, size_t n)
{
    device_t *d = api_device(v);
    return d ? math_axpby(d, y, a, x, b, n) : VGPU_EINVAL;
}

int vgpu_sgd_step(vgpu_t *v, float *param, const float *grad, float *velocity, size_t n,
                  float lr, float momentum, float weight_decay)
{
    device_t *d = api_device(v);
    return d ? math_sgd_step(d, param, grad, velocity, n, lr, momentum, weight_decay)
             : VGPU_EINVAL;
}

int vgpu_adam_step(vgpu_t *v, float *param, const float *grad, float *m, float *var, size_t n,
                   const struct vgpu_adam *adam)
{
    device_t *d = api_device(v);
    if (!d || !adam || adam->step < 1)
        return VGPU_EINVAL;
    // 1 - beta^t in double, as PyTorch does (the float beta itself is exact).
    const double c1 = 1.0 - pow(adam->beta1, (double)adam->step);
    const double c2 = 1.0 - pow(adam->beta2, (double)adam->step);
    return math_adam_step(d, param, grad, m, var, n, adam->lr, adam->beta1, adam->beta2,
                            adam->eps, adam->weight_decay, (float)c1, (float)c2, adam->decoupled);
}

// ---- the deterministic all-reduce ----

int vgpu_all_reduce_tree(const float *parts, const int *parts_per_rank, float *out, size_t count,
                         vgpu_t *v)
{
    comm_t *c = api_comm(v);
    return c && parts_per_rank ? comm_all_reduce_tree(c, parts, parts_per_rank, out, count)
                               : VGPU_EINVAL;
}

size_t vgpu_tree_scratch_bytes(int nranks, int max_parts_per_rank, size_t count)
{
    return (size_t)comm_tree_scratch_bytes(nranks, max_parts_per_rank, count);
}

int vgpu_tree_sum(vgpu_t *v, float *const *leaves, int n, size_t count)
{
    device_t *d = api_device(v);
    return d && leaves && n > 0 ? comm_tree_sum(d, leaves, n, count) : VGPU_EINVAL;
}
