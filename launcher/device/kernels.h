// kernels.h: the elementwise device math, written once as plain functions of
// an index. The CPU backend calls them in a loop; the CUDA backend calls them
// from one __global__ wrapper each, so the CPU tests test the GPU math too.
#ifndef VGPU_KERNELS_H
#define VGPU_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define KERNEL_FN static inline __host__ __device__
#else
#define KERNEL_FN static inline
#endif

// out[i] = table[codes[i]]: 8-bit samples to values by their 256-entry table.
KERNEL_FN void kernel_decode_u8(size_t i, float *out, const uint8_t *codes, const float *table)
{
    out[i] = table[codes[i]];
}

// out[i] += bias[i % cols], then max(out[i], 0) when relu; i over rows * cols.
// One pass for a hidden layer's bias and activation.
KERNEL_FN void kernel_bias_add(size_t i, float *out, const float *bias, int cols, int relu)
{
    float x = out[i] + bias[i % (size_t)cols];
    out[i] = relu && !(x > 0.0f) ? 0.0f : x; // as x > 0 ? x : 0, NaN included
}

// dbias[c] = sum over rows of dout[r, c]; c over cols. Sums rows in order,
// so the result does not depend on how columns are spread over threads.
KERNEL_FN void kernel_bias_grad(size_t c, float *dbias, const float *dout, int rows, int cols)
{
    float sum = 0.0f;
    for (int r = 0; r < rows; r++)
        sum += dout[(size_t)r * (size_t)cols + c];
    dbias[c] = sum;
}

// Both operands are read unconditionally, so the select compiles without a
// branch: a mispredicted branch per element made this 8% of a CPU step.
KERNEL_FN void kernel_relu_backward(size_t i, float *din, const float *dout, const float *out)
{
    float d = dout[i];
    din[i] = out[i] > 0.0f ? d : 0.0f;
}

// One row of softmax cross-entropy (row over rows). Stable: subtracts the
// row max before exponentiating. stats row: {loss, correct, in top-5}.
// Returns 0, or -1 if the label is out of range (the row is then left as is).
KERNEL_FN int kernel_softmax_xent(size_t row, float *dlogits, float *stats, const float *logits,
                                  const int32_t *labels, int classes, float grad_scale)
{
    const float *z = logits + row * (size_t)classes;
    int32_t y = labels[row];
    if (y < 0 || y >= classes)
        return -1;
    float zmax = z[0], zy = z[y];
    for (int j = 1; j < classes; j++)
        zmax = z[j] > zmax ? z[j] : zmax;
    // Rank of the true class: how many logits beat it (ties count for the
    // earlier index, as argmax picks the first maximum).
    int better = 0;
    for (int j = 0; j < classes; j++)
        better += z[j] > zy || (z[j] == zy && j < y);
    // The exponentials are kept in dlogits (when given) for the gradient:
    // one expf per logit instead of two. Logits are not read after this loop,
    // so dlogits may be the logits buffer itself.
    float *d = dlogits ? dlogits + row * (size_t)classes : NULL;
    float sum = 0.0f;
    for (int j = 0; j < classes; j++) {
        float e = expf(z[j] - zmax);
        if (d)
            d[j] = e;
        sum += e;
    }
    // A row whose loss is not finite (NaN or infinite logits) is wrong: NaN
    // compares false, so it would otherwise rank first.
    float loss = logf(sum) - (zy - zmax);
    int finite = isfinite(loss);
    stats[row * 3 + 0] = loss;
    stats[row * 3 + 1] = finite && better == 0 ? 1.0f : 0.0f;
    stats[row * 3 + 2] = finite && better < 5 ? 1.0f : 0.0f;
    if (d)
        for (int j = 0; j < classes; j++)
            d[j] = (d[j] / sum - (j == y ? 1.0f : 0.0f)) * grad_scale;
    return 0;
}

// y = a * x + b * y.
KERNEL_FN void kernel_axpby(size_t i, float *y, float a, const float *x, float b)
{
    y[i] = a * x[i] + b * y[i];
}

// SGD with momentum (PyTorch's form: v = mu * v + g; p -= lr * v) and L2 decay.
KERNEL_FN void kernel_sgd_step(size_t i, float *param, const float *grad, float *velocity, float lr,
                               float momentum, float weight_decay)
{
    float g = grad[i] + weight_decay * param[i];
    float v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] -= lr * v;
}

// Adam (decoupled = 0: L2 decay added to the gradient) or AdamW (decoupled
// decay applied to the parameter), in PyTorch's arrangement: with bias_corr =
// 1 - beta^t, step_size = lr / bias_corr1 and inv_sqrt_bc2 = 1 / sqrt(bias_corr2)
// (kernel_adam_coefs, once per step), an element costs one sqrt and one
// division instead of three divisions and a sqrt.
struct adam_coefs {
    float step_size, inv_sqrt_bc2, lr_decay;
};

KERNEL_FN struct adam_coefs kernel_adam_coefs(float lr, float weight_decay, float bias_corr1,
                                              float bias_corr2)
{
    struct adam_coefs c = {lr / bias_corr1, 1.0f / sqrtf(bias_corr2), lr * weight_decay};
    return c;
}

KERNEL_FN void kernel_adam_step(size_t i, float *param, const float *grad, float *m, float *v,
                                float beta1, float beta2, float eps, float weight_decay,
                                struct adam_coefs c, int decoupled)
{
    float g = grad[i];
    if (!decoupled)
        g += weight_decay * param[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float delta = c.step_size * (mi / (sqrtf(vi) * c.inv_sqrt_bc2 + eps));
    if (decoupled)
        delta += c.lr_decay * param[i];
    param[i] -= delta;
}

// The typed collectives' reduction, the ring's on the host and on a device
// (op: comm.h's enum comm_reduce_op, same numbers, ring_core.c checks them):
// element i of dst = a op b, and where avg_div != 0 (COMM_AVG's last step)
// that sum divided by avg_div (integers: toward zero). Integer sums and products wrap around: they are computed
// unsigned, which is defined. dst may be a.
enum { KERNEL_OP_SUM, KERNEL_OP_AVG, KERNEL_OP_PROD, KERNEL_OP_MIN, KERNEL_OP_MAX };
#define KERNEL_REDUCE_TYPED(NAME, T, U)                                                      \
    KERNEL_FN void NAME(size_t i, T *dst, const T *a, const T *b, int op, int avg_div)       \
    {                                                                                        \
        const T x = a[i], y = b[i];                                                          \
        T r;                                                                                 \
        switch (op) {                                                                        \
        case KERNEL_OP_PROD: r = (T)((U)x * (U)y); break;                                    \
        case KERNEL_OP_MIN: r = y < x ? y : x; break;                                        \
        case KERNEL_OP_MAX: r = y > x ? y : x; break;                                        \
        default: r = (T)((U)x + (U)y); break; /* sum; avg's sum */                           \
        }                                                                                    \
        dst[i] = avg_div ? (T)(r / (T)avg_div) : r;                                          \
    }
KERNEL_REDUCE_TYPED(kernel_reduce_f32, float, float)
KERNEL_REDUCE_TYPED(kernel_reduce_f64, double, double)
KERNEL_REDUCE_TYPED(kernel_reduce_i32, int32_t, uint32_t)
KERNEL_REDUCE_TYPED(kernel_reduce_i64, int64_t, uint64_t)

// ---- half precision: IEEE binary16 ("float16") and bfloat16, as uint16_t ----
// Written as bit manipulation (and one float addition, rounded to nearest
// even on both) so that the host and a GPU give the same bits without
// cuda_fp16.h (memcpy is __host__ __device__ in CUDA).

KERNEL_FN uint32_t kernel_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

KERNEL_FN float kernel_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// cond ? a : b as masks. With a ternary the compiler moves the float work
// of one arm under a branch (it may not speculate float operations), and
// the branch keeps the host loops from vectorising: float16 reductions ran
// at half the speed.
KERNEL_FN uint32_t kernel_pick(int cond, uint32_t a, uint32_t b)
{
    const uint32_t m = 0u - (uint32_t)(cond != 0);
    return (a & m) | (b & ~m);
}

// binary16 -> float: exact (every half is a float).
KERNEL_FN float kernel_f16_to_f32(uint16_t h)
{
    const uint32_t exp = h & 0x7c00u, em = (uint32_t)(h & 0x7fffu) << 13;
    // Subnormal (or zero): the mantissa in units of 2^-24, exact as a float.
    const uint32_t sub = kernel_f32_bits((float)(h & 0x3ffu) * (1.0f / 16777216.0f));
    // Rebias 15 -> 127; infinity and NaN (payload kept) get all exponent bits.
    const uint32_t big = em + (exp == 0x7c00u ? 0x70000000u : 0x38000000u);
    return kernel_f32_from_bits(kernel_pick(exp == 0, sub, big) | (uint32_t)(h & 0x8000u) << 16);
}

// float -> binary16, rounded to nearest even: from the largest half (65504)
// plus half a unit on, infinity; below 2^-14 subnormal; NaN stays NaN
// (quiet, the payload's top bits kept).
KERNEL_FN uint16_t kernel_f32_to_f16(float f)
{
    const uint32_t u = kernel_f32_bits(f);
    const uint32_t sign = u >> 16 & 0x8000u, mag = u & 0x7fffffffu;
    // Normal: rebias 127 -> 15 and keep 10 of 23 bits; adding 0xfff plus the
    // kept bits' last rounds to nearest even (a carry may reach the next
    // exponent, or infinity: both right).
    const uint32_t normal = (mag - 0x38000000u + 0xfffu + (mag >> 13 & 1u)) >> 13;
    // Subnormal: added to 0.5, whose float unit is 2^-24 (binary16's
    // subnormal unit), |f| is rounded to nearest even by the addition
    // itself; the units are what the sum's bits exceed 0.5's by (1024, the
    // smallest normal, when it rounds up to it: its right encoding).
    const uint32_t sub = kernel_f32_bits(kernel_f32_from_bits(mag) + 0.5f) - 0x3f000000u;
    uint32_t h = kernel_pick(mag < 0x38800000u, sub, normal);
    h = kernel_pick(mag >= 0x477ff000u, 0x7c00u, h); // 65520 and up, infinity
    h = kernel_pick(mag > 0x7f800000u, 0x7e00u | (mag >> 13 & 0x3ffu), h);
    return (uint16_t)(sign | h);
}

// bfloat16 is float's upper half: widening is exact.
KERNEL_FN float kernel_bf16_to_f32(uint16_t b) { return kernel_f32_from_bits((uint32_t)b << 16); }

// float -> bfloat16, rounded to nearest even (0x7fff plus the kept bits'
// last; a carry into the exponent is right, up to infinity); NaN stays NaN
// (quiet: its payload may lie wholly in the dropped half).
KERNEL_FN uint16_t kernel_f32_to_bf16(float f)
{
    const uint32_t u = kernel_f32_bits(f);
    const uint32_t rounded = (u + 0x7fffu + (u >> 16 & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? u >> 16 | 0x40u : rounded);
}

// The typed reduction for a half type, as NCCL's per step: both operands to
// float, the operation in float, rounded back to nearest even. Float has
// 24 bits >= 2 x 11 + 2, so rounding its (correctly rounded) sum or product
// once more gives the correctly rounded half: the bits of __hadd/__hmul.
// avg_div: the sum, rounded to the type like every step's, then divided in
// float and rounded again (as comm_divide_host does after a sum). min/max
// keep an operand's bits.
#define KERNEL_REDUCE_HALF(NAME, TO_F32, FROM_F32)                                          \
    KERNEL_FN void NAME(size_t i, uint16_t *dst, const uint16_t *a, const uint16_t *b, int op, \
                        int avg_div)                                                         \
    {                                                                                        \
        const uint16_t p = a[i], q = b[i];                                                   \
        const float x = TO_F32(p), y = TO_F32(q);                                            \
        switch (op) {                                                                        \
        case KERNEL_OP_PROD: dst[i] = FROM_F32(x * y); break;                                \
        case KERNEL_OP_MIN: dst[i] = y < x ? q : p; break;                                   \
        case KERNEL_OP_MAX: dst[i] = y > x ? q : p; break;                                   \
        default: { /* sum; avg's sum */                                                      \
            const uint16_t s = FROM_F32(x + y);                                              \
            dst[i] = avg_div ? FROM_F32(TO_F32(s) / (float)avg_div) : s;                     \
        }                                                                                    \
        }                                                                                    \
    }
KERNEL_REDUCE_HALF(kernel_reduce_f16, kernel_f16_to_f32, kernel_f32_to_f16)
KERNEL_REDUCE_HALF(kernel_reduce_bf16, kernel_bf16_to_f32, kernel_f32_to_bf16)

#endif
