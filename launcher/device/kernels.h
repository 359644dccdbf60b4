// kernels.h: the collectives' element math (typed reductions, half-precision
// conversions), written once as plain functions of an index: the ring's host
// loops call them, and so do its CUDA kernels, so the CPU tests test the
// GPU's arithmetic too. KERNEL_FN is how device math is written everywhere
// (the model's operations: math/math_ops.h).
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
        dst[i] = avg_div ? (T)(r / avg_div) : r; /* in int at least: a byte type holds no N */ \
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
