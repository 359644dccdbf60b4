// vnccl_types.c: NCCL's twelve element types and its reductions, on the
// host, over the collectives' element math (device/kernels.h: the types
// libvgpu's own collectives share, and their half-precision conversions).
// fp8 is new here: each step in float, rounded to nearest even and
// saturated at the type's largest finite value, as cuda_fp8's conversions
// with __NV_SATFINITE.
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "vnccl.h"

KERNEL_REDUCE_TYPED(reduce_i8_, int8_t, uint8_t)
KERNEL_REDUCE_TYPED(reduce_u8_, uint8_t, uint8_t)
KERNEL_REDUCE_TYPED(reduce_u32_, uint32_t, uint32_t)
KERNEL_REDUCE_TYPED(reduce_u64_, uint64_t, uint64_t)

size_t vnccl_type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

const char *vnccl_type_name(ncclDataType_t t)
{
    static const char *const names[ncclNumTypes] = {
        "ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
        "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3",
        "ncclFloat8e5m2"};
    return (unsigned)t < ncclNumTypes ? names[t] : "an unknown type";
}

const char *vnccl_op_name(ncclRedOp_t op)
{
    static const char *const names[ncclNumOps] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin",
                                                  "ncclAvg"};
    return (unsigned)op < ncclNumOps ? names[op] : "a premultiplied sum";
}

// ---- fp8: E4M3 (bias 7, no infinities, NaN S.1111.111, largest 448) and
// E5M2 (bias 15, IEEE-like, largest 57344) ----
struct fp8_format {
    int man_bits, bias;
    uint8_t max_code; // the largest finite magnitude's code
    int has_inf;
};
static const struct fp8_format E4M3_ = {3, 7, 0x7e, 0};
static const struct fp8_format E5M2_ = {2, 15, 0x7b, 1};

static float fp8_to_f32_(uint8_t c, const struct fp8_format *f)
{
    const int exp_bits = 7 - f->man_bits;
    const int e = c >> f->man_bits & ((1 << exp_bits) - 1);
    const int m = c & ((1 << f->man_bits) - 1);
    const float sign = c & 0x80 ? -1.0f : 1.0f;
    if (e == (1 << exp_bits) - 1 && (f->has_inf || m == (1 << f->man_bits) - 1)) {
        if (f->has_inf && m == 0)
            return sign * INFINITY;
        return NAN;
    }
    if (e == 0)
        return sign * ldexpf((float)m, 1 - f->bias - f->man_bits);
    return sign * ldexpf((float)(m | 1 << f->man_bits), e - f->bias - f->man_bits);
}

// Nearest even; beyond the largest finite value (infinity too) the largest.
static uint8_t fp8_from_f32_(float x, const struct fp8_format *f)
{
    if (isnan(x))
        return 0x7f;
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    const double a = fabs((double)x);
    const double max = fp8_to_f32_(f->max_code, f);
    if (a >= max)
        return sign | f->max_code;
    int ex;
    frexp(a, &ex); // a = fr * 2^ex, fr in [0.5, 1)
    int e = ex - 1;
    const int emin = 1 - f->bias;
    if (a == 0 || e < emin) // subnormal: units of 2^(emin - man_bits), code = units
        return sign | (uint8_t)rint(ldexp(a, f->man_bits - emin));
    double m = rint(ldexp(a, f->man_bits - e)); // in [2^man_bits, 2^(man_bits + 1)]
    if (m == (double)(2 << f->man_bits)) {
        m /= 2;
        e++;
    }
    const unsigned code = (unsigned)(e + f->bias) << f->man_bits | ((unsigned)m - (1u << f->man_bits));
    return sign | (uint8_t)(code > f->max_code ? f->max_code : code);
}

static void reduce_fp8_(uint8_t *acc, const uint8_t *x, size_t n, const struct fp8_format *f,
                        ncclRedOp_t op, int last_div)
{
    for (size_t i = 0; i < n; i++) {
        const float a = fp8_to_f32_(acc[i], f), b = fp8_to_f32_(x[i], f);
        switch (op) {
        case ncclProd: acc[i] = fp8_from_f32_(a * b, f); break;
        case ncclMax: acc[i] = b > a ? x[i] : acc[i]; break;
        case ncclMin: acc[i] = b < a ? x[i] : acc[i]; break;
        default: acc[i] = fp8_from_f32_(a + b, f); break;
        }
        if (last_div)
            acc[i] = fp8_from_f32_(fp8_to_f32_(acc[i], f) / (float)last_div, f);
    }
}

// NCCL's operation numbers as kernels.h's.
static int kernel_op_(ncclRedOp_t op)
{
    switch (op) {
    case ncclProd: return KERNEL_OP_PROD;
    case ncclMax: return KERNEL_OP_MAX;
    case ncclMin: return KERNEL_OP_MIN;
    default: return KERNEL_OP_SUM; // sum, avg's sum, premultiplied sums
    }
}

// One loop a reduction, its operation a constant, so the element function's
// switch folds away and the loop vectorises (a switch per element kept
// float sums at a fraction of the memory's speed).
#define REDUCE_OP_LOOP_(FN, T, OP, DIV)                                         \
    for (size_t i = 0; i < n; i++)                                              \
        FN(i, (T *)acc, (const T *)acc, (const T *)x, OP, DIV)
#define REDUCE_LOOP_(FN, T)                                                     \
    do {                                                                        \
        if (last_div) { /* avg's last step: the sum, then the division */      \
            REDUCE_OP_LOOP_(FN, T, KERNEL_OP_SUM, last_div);                    \
            break;                                                              \
        }                                                                       \
        switch (kop) {                                                          \
        case KERNEL_OP_PROD: REDUCE_OP_LOOP_(FN, T, KERNEL_OP_PROD, 0); break;  \
        case KERNEL_OP_MIN: REDUCE_OP_LOOP_(FN, T, KERNEL_OP_MIN, 0); break;    \
        case KERNEL_OP_MAX: REDUCE_OP_LOOP_(FN, T, KERNEL_OP_MAX, 0); break;    \
        default: REDUCE_OP_LOOP_(FN, T, KERNEL_OP_SUM, 0); break;               \
        }                                                                       \
    } while (0)

void vnccl_reduce(void *acc, const void *x, size_t n, ncclDataType_t t, ncclRedOp_t op,
                  int last_div)
{
    const int kop = kernel_op_(op);
    switch (t) {
    case ncclInt8: REDUCE_LOOP_(reduce_i8_, int8_t); break;
    case ncclUint8: REDUCE_LOOP_(reduce_u8_, uint8_t); break;
    case ncclInt32: REDUCE_LOOP_(kernel_reduce_i32, int32_t); break;
    case ncclUint32: REDUCE_LOOP_(reduce_u32_, uint32_t); break;
    case ncclInt64: REDUCE_LOOP_(kernel_reduce_i64, int64_t); break;
    case ncclUint64: REDUCE_LOOP_(reduce_u64_, uint64_t); break;
    case ncclFloat16: REDUCE_LOOP_(kernel_reduce_f16, uint16_t); break;
    case ncclFloat32: REDUCE_LOOP_(kernel_reduce_f32, float); break;
    case ncclFloat64: REDUCE_LOOP_(kernel_reduce_f64, double); break;
    case ncclBfloat16: REDUCE_LOOP_(kernel_reduce_bf16, uint16_t); break;
    case ncclFloat8e4m3: reduce_fp8_(acc, x, n, &E4M3_, op, last_div); break;
    case ncclFloat8e5m2: reduce_fp8_(acc, x, n, &E5M2_, op, last_div); break;
    default: break;
    }
}

int vnccl_avg_divides(ncclDataType_t t)
{
    return t == ncclInt8 || t == ncclUint8 || t == ncclInt32 || t == ncclUint32 ||
           t == ncclInt64 || t == ncclUint64;
}

void vnccl_scale_avg(void *x, size_t n, ncclDataType_t t, int nranks)
{
    unsigned char scalar[8];
    const double inv = 1.0 / nranks;
    switch (t) {
    case ncclFloat16: {
        uint16_t s = kernel_f32_to_f16((float)inv); // NCCL's __float2half(float(1.0/nRanks))
        memcpy(scalar, &s, sizeof s);
        break;
    }
    case ncclBfloat16: {
        uint16_t s = kernel_f32_to_bf16((float)inv);
        memcpy(scalar, &s, sizeof s);
        break;
    }
    case ncclFloat32: {
        float s = (float)inv;
        memcpy(scalar, &s, sizeof s);
        break;
    }
    case ncclFloat64: memcpy(scalar, &inv, sizeof inv); break;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: { // the scalar as a half (an fp8 1/3 would be 3% off), each product rounded once
        const struct fp8_format *f = t == ncclFloat8e4m3 ? &E4M3_ : &E5M2_;
        const float s = kernel_f16_to_f32(kernel_f32_to_f16((float)inv));
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)x)[i] = fp8_from_f32_(s * fp8_to_f32_(((uint8_t *)x)[i], f), f);
        return;
    }
    default: return; // integers divide the sum instead
    }
    vnccl_scale(x, n, t, scalar);
}

#define SCALE_INT_(T, U)                                                        \
    do {                                                                        \
        T s;                                                                    \
        memcpy(&s, scalar, sizeof s);                                           \
        for (size_t i = 0; i < n; i++)                                          \
            ((T *)x)[i] = (T)((U)s * (U)((T *)x)[i]);                           \
    } while (0)
#define SCALE_HALF_(TO, FROM)                                                   \
    do {                                                                        \
        uint16_t s;                                                             \
        memcpy(&s, scalar, sizeof s);                                           \
        const float sf = TO(s);                                                 \
        for (size_t i = 0; i < n; i++)                                          \
            ((uint16_t *)x)[i] = FROM(sf * TO(((uint16_t *)x)[i]));             \
    } while (0)

void vnccl_scale(void *x, size_t n, ncclDataType_t t, const void *scalar)
{
    switch (t) {
    case ncclInt8: SCALE_INT_(int8_t, uint8_t); break;
    case ncclUint8: SCALE_INT_(uint8_t, uint8_t); break;
    case ncclInt32: SCALE_INT_(int32_t, uint32_t); break;
    case ncclUint32: SCALE_INT_(uint32_t, uint32_t); break;
    case ncclInt64: SCALE_INT_(int64_t, uint64_t); break;
    case ncclUint64: SCALE_INT_(uint64_t, uint64_t); break;
    case ncclFloat16: SCALE_HALF_(kernel_f16_to_f32, kernel_f32_to_f16); break;
    case ncclBfloat16: SCALE_HALF_(kernel_bf16_to_f32, kernel_f32_to_bf16); break;
    case ncclFloat32: {
        float s;
        memcpy(&s, scalar, sizeof s);
        for (size_t i = 0; i < n; i++)
            ((float *)x)[i] *= s;
        break;
    }
    case ncclFloat64: {
        double s;
        memcpy(&s, scalar, sizeof s);
        for (size_t i = 0; i < n; i++)
            ((double *)x)[i] *= s;
        break;
    }
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: {
        const struct fp8_format *f = t == ncclFloat8e4m3 ? &E4M3_ : &E5M2_;
        const float s = fp8_to_f32_(*(const uint8_t *)scalar, f);
        for (size_t i = 0; i < n; i++)
            ((uint8_t *)x)[i] = fp8_from_f32_(s * fp8_to_f32_(((uint8_t *)x)[i], f), f);
        break;
    }
    default: break;
    }
}
