// allreduce_perf_values.c: vgpu_allreduce_perf's data (allreduce_perf_values.h):
// small integers whose reduction is exact in any order, so that every
// element's expected value is known for every type and operation.
#include "allreduce_perf_values.h"

#include <math.h>
#include <string.h>

// ---- the values: exact in any order of reduction ----

static uint32_t f32_bits_(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

// float -> IEEE binary16, rounded to nearest even (the device's rounding).
static uint16_t to_f16_(float f)
{
    const uint32_t u = f32_bits_(f), sign = u >> 16 & 0x8000u, mag = u & 0x7fffffffu;
    if (mag > 0x7f800000u) // NaN, kept quiet
        return (uint16_t)(sign | 0x7e00u | (mag >> 13 & 0x3ffu));
    if (mag >= 0x477ff000u) // 65520 and up: infinity
        return (uint16_t)(sign | 0x7c00u);
    if (mag >= 0x38800000u) // normal: rebias 127 -> 15, keep 10 bits, round to even
        return (uint16_t)(sign | (mag - 0x38000000u + 0xfffu + (mag >> 13 & 1u)) >> 13);
    float a; // subnormal: in units of 2^-24 (exact scaling), rounded to even
    memcpy(&a, &mag, sizeof a);
    return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
}

// float -> bfloat16 (float's upper half), rounded to nearest even.
static uint16_t to_bf16_(float f)
{
    const uint32_t u = f32_bits_(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(u >> 16 | 0x40u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

// Element i of buf (type t, host memory) = v.
static void put_(void *buf, size_t i, vgpu_datatype_t t, int64_t v)
{
    switch (t) {
    case vgpu_float32: ((float *)buf)[i] = (float)v; break;
    case vgpu_float64: ((double *)buf)[i] = (double)v; break;
    case vgpu_int32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case vgpu_int64: ((int64_t *)buf)[i] = v; break;
    case vgpu_float16: ((uint16_t *)buf)[i] = to_f16_((float)v); break;
    case vgpu_bfloat16: ((uint16_t *)buf)[i] = to_bf16_((float)v); break;
    }
}

// Small integers: their sum is exact in any order, so each element's
// expected value is known exactly (products: 1s and 2s, exact to 2^24).
static float value_(int rank, size_t i) { return (float)((rank * 7 + i) % 13); }

// The half types: 0..2, so every partial sum stays an integer bfloat16
// holds exactly (8 significant bits: up to 256) for up to 128 ranks;
// products of 1s and 2s are powers of two (float16 overflows to infinity
// past 2^15, and so does the expected value).
static int64_t typed_value_(int rank, size_t i, vgpu_op_t op, vgpu_datatype_t t)
{
    if (op == vgpu_prod)
        return (int64_t)((rank + i) % 2 + 1);
    const int half = t == vgpu_float16 || t == vgpu_bfloat16;
    return (int64_t)((rank * 7 + i) % (half ? 3 : 13));
}

void perf_fill(void *buf, size_t count, int rank, vgpu_datatype_t t, vgpu_op_t op)
{
    for (size_t i = 0; i < count; i++)
        put_(buf, i, t, typed_value_(rank, i, op, t));
}

int perf_right(const void *buf, size_t i, int size, vgpu_datatype_t t, vgpu_op_t op)
{
    int64_t acc = typed_value_(0, i, op, t);
    for (int q = 1; q < size; q++) {
        const int64_t v = typed_value_(q, i, op, t);
        acc = op == vgpu_prod ? acc * v
            : op == vgpu_min  ? (v < acc ? v : acc)
            : op == vgpu_max  ? (v > acc ? v : acc)
                                 : acc + v;
    }
    const int avg = op == vgpu_avg;
    switch (t) {
    case vgpu_float32:
        return ((const float *)buf)[i] == (avg ? (float)acc / (float)size : (float)acc);
    case vgpu_float64:
        return ((const double *)buf)[i] == (avg ? (double)acc / (double)size : (double)acc);
    case vgpu_int32:
        return ((const int32_t *)buf)[i] == (int32_t)(avg ? acc / size : acc);
    case vgpu_float16: // the exact sum, divided in float and rounded (the avg step)
        return ((const uint16_t *)buf)[i] == to_f16_(avg ? (float)acc / (float)size : (float)acc);
    case vgpu_bfloat16:
        return ((const uint16_t *)buf)[i] == to_bf16_(avg ? (float)acc / (float)size : (float)acc);
    default:
        return ((const int64_t *)buf)[i] == (avg ? acc / size : acc);
    }
}

// ---- the deterministic all-reduce's partials ----

float perf_expected_tree(int partials, size_t i)
{
    float sum = 0;
    for (int q = 0; q < partials; q++)
        sum += value_(q, i);
    return sum;
}

int perf_tree_parts(int tree, int r, int size) { return tree / size + (r < tree % size); }

void perf_tree_fill(int tree, int rank, int size, float *host, size_t count)
{
    int first = 0;
    for (int r = 0; r < rank; r++)
        first += perf_tree_parts(tree, r, size);
    for (int k = 0; k < perf_tree_parts(tree, rank, size); k++)
        for (size_t i = 0; i < count; i++)
            host[(size_t)k * count + i] = value_(first + k, i);
}
