// ref.c: the host oracle of nccl_api_test: NCCL's types, the contract's
// rank-order reductions, inputs and comparison.
//
// The reduction contract (vgpu's libnccl.so.2, issue 44): result =
// (((x0 op x1) op x2) ... op x_{N-1}). Integers wrap (sum, product);
// float16 / bfloat16 / fp8 take each step in float and round back to the
// type (nearest even; fp8 saturating at its largest finite value); float32
// in float, float64 in double. ncclAvg, as NCCL computes it: integers, the
// sum (as above) divided by N toward zero; floating types, a pre-multiplied
// sum with the scalar 1/N rounded to the type (fp8: to a half). Pre-multiplied
// sum: the sum of (scalar_r * x_r), each product rounded to the type.
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// ---- types ----

size_t ref_type_size(ncclDataType_t type)
{
    switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *ref_type_name(ncclDataType_t type)
{
    static const char *const names[] = {"int8",    "uint8",    "int32",   "uint32",
                                        "int64",   "uint64",   "float16", "float32",
                                        "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
    return (unsigned)type < ncclNumTypes ? names[type] : "bad-type";
}

const char *ref_op_name(int op)
{
    static const char *const names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
    return op >= 0 && op < REF_NUM_OPS ? names[op] : "bad-op";
}

static int is_int_(ncclDataType_t t)
{
    return t <= ncclUint64;
}
static int is_signed_int_(ncclDataType_t t)
{
    return t == ncclInt8 || t == ncclInt32 || t == ncclInt64;
}

// ---- small floats: one encoder and decoder for half, bfloat16 and fp8 ----

struct mini_fmt {
    int ebits, mbits, bias;
    double max_finite;
    int saturate; // overflow gives the largest finite value, not inf
    int has_inf;  // the all-ones exponent is inf / NaN (not e4m3)
    uint32_t max_code, inf_code, nan_code;
};

static const struct mini_fmt fmt_half = {5, 10, 15, 65504.0, 0, 1, 0x7BFF, 0x7C00, 0x7E00};
static const struct mini_fmt fmt_bf16 = {8,      7,      127,   3.38953138925153547590e38, 0, 1,
                                         0x7F7F, 0x7F80, 0x7FC0};
static const struct mini_fmt fmt_e4m3 = {4, 3, 7, 448.0, 1, 0, 0x7E, 0x7E, 0x7F};
static const struct mini_fmt fmt_e5m2 = {5, 2, 15, 57344.0, 1, 1, 0x7B, 0x7C, 0x7E};

static uint32_t mini_encode_(const struct mini_fmt *f, float v)
{
    uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
    if (isnan(v))
        return f->nan_code;
    double a = fabs((double)v);
    if (a == 0)
        return sign;
    if (isinf(a))
        return sign | (f->saturate ? f->max_code : f->inf_code);
    int e2;
    frexp(a, &e2);
    int e = e2 - 1; // a = 1.m * 2^e
    if (e < 1 - f->bias)
        e = 1 - f->bias;                     // subnormal: the smallest normal's scale
    double q = rint(ldexp(a, f->mbits - e)); // nearest even (default rounding mode)
    if (q >= ldexp(1.0, f->mbits + 1)) {
        q = ldexp(1.0, f->mbits);
        e++;
    }
    if (ldexp(q, e - f->mbits) > f->max_finite)
        return sign | (f->saturate ? f->max_code : f->inf_code);
    uint32_t one = 1u << f->mbits;
    if (q < one) // subnormal (exponent field 0)
        return sign | (uint32_t)q;
    return sign | (uint32_t)(e + f->bias) << f->mbits | ((uint32_t)q - one);
}

static float mini_decode_(const struct mini_fmt *f, uint32_t bits)
{
    uint32_t emask = (1u << f->ebits) - 1, mmask = (1u << f->mbits) - 1;
    uint32_t exp = bits >> f->mbits & emask, mant = bits & mmask;
    int neg = bits >> (f->ebits + f->mbits) & 1;
    double v;
    if (!f->has_inf && exp == emask && mant == mmask)
        v = NAN;
    else if (f->has_inf && exp == emask)
        v = mant ? NAN : INFINITY;
    else if (exp == 0)
        v = ldexp((double)mant, 1 - f->bias - f->mbits);
    else
        v = ldexp((double)(mant | (1u << f->mbits)), (int)exp - f->bias - f->mbits);
    return (float)(neg ? -v : v);
}

uint16_t ref_float_to_half(float v)
{
    return (uint16_t)mini_encode_(&fmt_half, v);
}
float ref_half_to_float(uint16_t bits)
{
    return mini_decode_(&fmt_half, bits);
}
uint16_t ref_float_to_bf16(float v)
{
    return (uint16_t)mini_encode_(&fmt_bf16, v);
}
float ref_bf16_to_float(uint16_t bits)
{
    return mini_decode_(&fmt_bf16, bits);
}
uint8_t ref_float_to_e4m3(float v)
{
    return (uint8_t)mini_encode_(&fmt_e4m3, v);
}
float ref_e4m3_to_float(uint8_t bits)
{
    return mini_decode_(&fmt_e4m3, bits);
}
uint8_t ref_float_to_e5m2(float v)
{
    return (uint8_t)mini_encode_(&fmt_e5m2, v);
}
float ref_e5m2_to_float(uint8_t bits)
{
    return mini_decode_(&fmt_e5m2, bits);
}

// ---- element access ----

// The integer element i, sign- or zero-extended to 64 bits.
static uint64_t load_int_(const void *buf, ncclDataType_t t, size_t i)
{
    switch (t) {
    case ncclInt8: return (uint64_t)(int64_t)((const int8_t *)buf)[i];
    case ncclUint8: return ((const uint8_t *)buf)[i];
    case ncclInt32: return (uint64_t)(int64_t)((const int32_t *)buf)[i];
    case ncclUint32: return ((const uint32_t *)buf)[i];
    case ncclInt64: return (uint64_t)((const int64_t *)buf)[i];
    default: return ((const uint64_t *)buf)[i];
    }
}

static void store_int_(void *buf, ncclDataType_t t, size_t i, uint64_t v)
{
    switch (t) {
    case ncclInt8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)v; break;
    case ncclUint8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)v; break;
    case ncclUint32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case ncclInt64: ((int64_t *)buf)[i] = (int64_t)v; break;
    default: ((uint64_t *)buf)[i] = v; break;
    }
}

// A float type's element i (not float64) as a float.
static float load_f_(const void *buf, ncclDataType_t t, size_t i)
{
    switch (t) {
    case ncclFloat16: return ref_half_to_float(((const uint16_t *)buf)[i]);
    case ncclBfloat16: return ref_bf16_to_float(((const uint16_t *)buf)[i]);
    case ncclFloat8e4m3: return ref_e4m3_to_float(((const uint8_t *)buf)[i]);
    case ncclFloat8e5m2: return ref_e5m2_to_float(((const uint8_t *)buf)[i]);
    default: return ((const float *)buf)[i];
    }
}

static void store_f_(void *buf, ncclDataType_t t, size_t i, float v)
{
    switch (t) {
    case ncclFloat16: ((uint16_t *)buf)[i] = ref_float_to_half(v); break;
    case ncclBfloat16: ((uint16_t *)buf)[i] = ref_float_to_bf16(v); break;
    case ncclFloat8e4m3: ((uint8_t *)buf)[i] = ref_float_to_e4m3(v); break;
    case ncclFloat8e5m2: ((uint8_t *)buf)[i] = ref_float_to_e5m2(v); break;
    default: ((float *)buf)[i] = v; break;
    }
}

// v rounded to the float type t and back (float32: itself).
static float round_to_(ncclDataType_t t, float v)
{
    unsigned char tmp[4];
    store_f_(tmp, t, 0, v);
    return load_f_(tmp, t, 0);
}

void ref_store(void *buf, ncclDataType_t t, size_t i, double v)
{
    if (is_int_(t))
        store_int_(buf, t, i, v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v);
    else if (t == ncclFloat64)
        ((double *)buf)[i] = v;
    else
        store_f_(buf, t, i, (float)v);
}

double ref_load(const void *buf, ncclDataType_t t, size_t i)
{
    if (is_signed_int_(t))
        return (double)(int64_t)load_int_(buf, t, i);
    if (is_int_(t))
        return (double)load_int_(buf, t, i);
    if (t == ncclFloat64)
        return ((const double *)buf)[i];
    return load_f_(buf, t, i);
}

uint32_t ref_hash(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t h =
        a * 0x9E3779B1u ^ (b + 0x7F4A7C15u) * 0x85EBCA77u ^ (c + 0x165667B1u) * 0xC2B2AE3Du;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return h;
}

void ref_fill(void *buf, ncclDataType_t t, int op, int rank, size_t count, unsigned seed)
{
    int fp8 = t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
    int is_unsigned = t == ncclUint8 || t == ncclUint32 || t == ncclUint64;
    for (size_t i = 0; i < count; i++) {
        uint32_t h = ref_hash((uint32_t)rank, (uint32_t)i, seed);
        double v;
        if (op == ncclProd) {
            static const double prod_vals[] = {-1, 1, 2};
            v = is_unsigned ? (double)(1 + h % 2) : prod_vals[h % 3];
        } else if (fp8) {
            v = (double)(int)(h % 3) - 1;
        } else {
            v = is_unsigned ? (double)(h % 4) : (double)(int)(h % 7) - 3;
        }
        ref_store(buf, t, i, v);
    }
}

// ---- the reduction ----

static uint64_t int_step_(ncclDataType_t t, int op, uint64_t a, uint64_t b)
{
    int s = is_signed_int_(t);
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return s ? ((int64_t)a > (int64_t)b ? a : b) : (a > b ? a : b);
    case ncclMin: return s ? ((int64_t)a < (int64_t)b ? a : b) : (a < b ? a : b);
    default: return a + b; // sum, avg's sum, premul's sum
    }
}

// The type's wrap: v truncated to its width and extended back.
static uint64_t int_wrap_(ncclDataType_t t, uint64_t v)
{
    uint64_t tmp;
    store_int_(&tmp, t, 0, v);
    return load_int_(&tmp, t, 0);
}

static void reduce_int_(void *out, const void *const *in, int n, size_t count, ncclDataType_t t,
                        int op, const double *scalars)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t acc = 0;
        for (int r = 0; r < n; r++) {
            uint64_t x = load_int_(in[r], t, i);
            if (op == REF_PREMUL) {
                double sv = scalars[r];
                uint64_t s = sv < 0 ? (uint64_t)(int64_t)sv : (uint64_t)sv;
                x = int_wrap_(t, s * x);
            }
            acc = r == 0 ? x : int_wrap_(t, int_step_(t, op, acc, x));
        }
        if (op == ncclAvg)
            acc = is_signed_int_(t) ? (uint64_t)((int64_t)acc / n) : acc / (uint64_t)n;
        store_int_(out, t, i, acc);
    }
}

static float float_step_(int op, float a, float b)
{
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a + b;
    }
}

static double double_step_(int op, double a, double b)
{
    switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return a + b;
    }
}

static void reduce_double_(double *out, const void *const *in, int n, size_t count, int op,
                           const double *scalars)
{
    for (size_t i = 0; i < count; i++) {
        double acc = 0;
        for (int r = 0; r < n; r++) {
            double x = ((const double *)in[r])[i];
            if (op == REF_PREMUL)
                x = scalars[r] * x;
            else if (op == ncclAvg)
                x = (1.0 / n) * x;
            acc = r == 0 ? x : double_step_(op, acc, x);
        }
        out[i] = acc;
    }
}

static void reduce_float_(void *out, const void *const *in, int n, size_t count, ncclDataType_t t,
                          int op, const double *scalars)
{
    const int fp8 = t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
    const float inv = round_to_(fp8 ? ncclFloat16 : t, (float)(1.0 / n)); // avg's scalar
    for (size_t i = 0; i < count; i++) {
        float acc = 0;
        for (int r = 0; r < n; r++) {
            float x = load_f_(in[r], t, i);
            if (op == REF_PREMUL)
                x = round_to_(t, (float)scalars[r] * x);
            else if (op == ncclAvg)
                x = round_to_(t, inv * x);
            acc = r == 0 ? x : round_to_(t, float_step_(op, acc, x));
        }
        store_f_(out, t, i, acc);
    }
}

void ref_reduce(void *out, const void *const *in, int nranks, size_t count, ncclDataType_t type,
                int op, const double *scalars)
{
    if (is_int_(type))
        reduce_int_(out, in, nranks, count, type, op, scalars);
    else if (type == ncclFloat64)
        reduce_double_(out, in, nranks, count, op, scalars);
    else
        reduce_float_(out, in, nranks, count, type, op, scalars);
}

// ---- comparison ----

static uint64_t bits_of_(const void *buf, size_t size, size_t i)
{
    uint64_t v = 0;
    memcpy(&v, (const unsigned char *)buf + i * size, size);
    return v;
}

size_t ref_compare(const void *got, const void *want, size_t count, ncclDataType_t type, char *why,
                   size_t why_bytes)
{
    size_t size = ref_type_size(type), wrong = 0;
    for (size_t i = 0; i < count; i++) {
        if (memcmp((const char *)got + i * size, (const char *)want + i * size, size) == 0)
            continue;
        if (wrong++ == 0 && why)
            snprintf(why, why_bytes, "element %zu: got %.9g (0x%llx), want %.9g (0x%llx)", i,
                     ref_load(got, type, i), (unsigned long long)bits_of_(got, size, i),
                     ref_load(want, type, i), (unsigned long long)bits_of_(want, size, i));
    }
    return wrong;
}
