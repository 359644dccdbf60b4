// test_half.c: kernels.h's half-precision conversions and reductions (the
// ring's, on the host and on a GPU) against a naive oracle: every float16
// decoded by ldexp, every rounding boundary of both types checked against
// rint() (ties to even) in double, and the edges named one by one.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"

static float from_bits_(uint32_t u) { return kernel_f32_from_bits(u); }

static int f16_is_nan_(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }
static int bf16_is_nan_(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu); }

// ---- the oracle: value arithmetic in double, no bit tricks ----

// What a float16 encodes.
static double f16_value_(uint16_t h)
{
    const int exp = h >> 10 & 0x1f, man = h & 0x3ff;
    const double sign = h & 0x8000u ? -1.0 : 1.0;
    if (exp == 0x1f)
        return man ? NAN : sign * INFINITY;
    return sign * (exp ? ldexp(1024 + man, exp - 25) : ldexp(man, -24));
}

// x rounded to a format with `bits` significant bits, subnormal below
// 2^min_exp and overflowing at 2^max_exp (past the largest finite value by
// half a unit or more); rint() rounds to nearest even.
static double round_oracle_(double x, int bits, int min_exp, int max_exp)
{
    if (isnan(x) || isinf(x) || x == 0)
        return x;
    int e;
    frexp(fabs(x), &e); // |x| in [2^(e-1), 2^e)
    const int unit_exp = (e - 1 < min_exp ? min_exp : e - 1) - (bits - 1);
    const double r = ldexp(rint(ldexp(fabs(x), -unit_exp)), unit_exp);
    const double v = r >= ldexp(1, max_exp) ? INFINITY : r;
    return x < 0 ? -v : v;
}

static double f16_oracle_(double x) { return round_oracle_(x, 11, -14, 16); }
static double bf16_oracle_(double x) { return round_oracle_(x, 8, -126, 128); }

// The rounding of x by kernels.h (decoded) must be the oracle's, sign of
// zero included; NaN must stay NaN. Returns 1 when it is.
static int f16_rounds_right_(float x)
{
    const uint16_t h = kernel_f32_to_f16(x);
    if (isnan(x))
        return f16_is_nan_(h);
    const double want = f16_oracle_(x), got = f16_value_(h);
    return got == want && !signbit(got) == !signbit(x);
}

static int bf16_rounds_right_(float x)
{
    const uint16_t b = kernel_f32_to_bf16(x);
    if (isnan(x))
        return bf16_is_nan_(b);
    const double want = bf16_oracle_(x), got = kernel_bf16_to_f32(b);
    return got == want && !signbit(got) == !signbit(x);
}

// ---- float16 ----

static void test_f16_decode_every_value(void **state)
{
    (void)state;
    int wrong = 0;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        const double want = f16_value_((uint16_t)h);
        const float got = kernel_f16_to_f32((uint16_t)h);
        if (isnan(want) ? !isnan(got) : (got != want || !signbit(got) != !signbit(want))) {
            if (wrong++ < 5)
                print_error("f16 0x%04x decodes to %a, not %a\n", h, (double)got, want);
        }
    }
    assert_int_equal(wrong, 0);
}

// Every float16 converts back to itself; a NaN to a NaN.
static void test_f16_round_trip(void **state)
{
    (void)state;
    int wrong = 0;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        const uint16_t back = kernel_f32_to_f16(kernel_f16_to_f32((uint16_t)h));
        wrong += f16_is_nan_((uint16_t)h) ? !f16_is_nan_(back) : back != h;
    }
    assert_int_equal(wrong, 0);
}

// Each pair of neighbouring float16s: their midpoint (a tie) and the floats
// on either side of it, subnormals and the overflow edge included; then a
// sweep across all floats.
static void test_f16_rounding_against_oracle(void **state)
{
    (void)state;
    int wrong = 0;
    for (uint32_t h = 0; h < 0x7c00u; h++)
        for (int neg = 0; neg < 2; neg++) {
            const double lo = f16_value_((uint16_t)h);
            const double hi = h + 1 < 0x7c00u ? f16_value_((uint16_t)(h + 1)) : 65536.0;
            const float mid = (float)((lo + hi) / 2); // exact: 12 bits
            const float probes[] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
            for (int k = 0; k < 3; k++) {
                const float x = neg ? -probes[k] : probes[k];
                if (!f16_rounds_right_(x) && wrong++ < 5)
                    print_error("f16(%a) = 0x%04x\n", (double)x, kernel_f32_to_f16(x));
            }
        }
    for (uint64_t u = 0; u <= 0xffffffffu; u += 251) {
        const float x = from_bits_((uint32_t)u);
        if (!f16_rounds_right_(x) && wrong++ < 10)
            print_error("f16(%a) = 0x%04x\n", (double)x, kernel_f32_to_f16(x));
    }
    assert_int_equal(wrong, 0);
}

static void test_f16_edges(void **state)
{
    (void)state;
    static const struct {
        float x;
        uint16_t want;
    } cases[] = {
        {1.0f, 0x3c00},          {-2.0f, 0xc000},         {0.0f, 0x0000},
        {-0.0f, 0x8000},         {0x1.002p0f, 0x3c00},    // 1 + 2^-11: tie, to even (down)
        {0x1.006p0f, 0x3c02},    // 1 + 3 x 2^-11: tie, to even (up)
        {0x1.0021p0f, 0x3c01},   // just past the tie
        {65504.0f, 0x7bff},      {65519.0f, 0x7bff},      {65520.0f, 0x7c00}, // tie: to inf
        {1e10f, 0x7c00},         {-1e10f, 0xfc00},        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},     {0x1p-14f, 0x0400},      // smallest normal
        {0x1.ff8p-15f, 0x03ff},  // largest subnormal
        {0x1.ffcp-15f, 0x0400},  // tie between them: to the (even) normal
        {0x1p-24f, 0x0001},      // smallest subnormal
        {0x1p-25f, 0x0000},      // half of it: tie, to even zero
        {-0x1p-25f, 0x8000},     {0x1.000002p-25f, 0x0001}, // just past: up
        {0x1.8p-24f, 0x0002},    // 1.5 units: tie, to even
        {0x1p-30f, 0x0000},      {0x1p-149f, 0x0000},     // float subnormal
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const uint16_t got = kernel_f32_to_f16(cases[k].x);
        if (got != cases[k].want)
            fail_msg("f16(%a) = 0x%04x, want 0x%04x", (double)cases[k].x, got, cases[k].want);
    }
    // NaN stays NaN, quiet, sign kept, even when its payload is all in the
    // bits float16 drops.
    assert_true(f16_is_nan_(kernel_f32_to_f16(NAN)));
    assert_true(f16_is_nan_(kernel_f32_to_f16(from_bits_(0x7f800001u))));
    assert_int_equal(kernel_f32_to_f16(from_bits_(0xff800001u)) & 0xfe00u, 0xfe00u);
    assert_true(isnan(kernel_f16_to_f32(0x7c01)));
    assert_true(isinf(kernel_f16_to_f32(0xfc00)) && kernel_f16_to_f32(0xfc00) < 0);
}

// ---- bfloat16 ----

static void test_bf16_round_trip(void **state)
{
    (void)state;
    int wrong = 0;
    for (uint32_t b = 0; b <= 0xffffu; b++) {
        const float x = kernel_bf16_to_f32((uint16_t)b);
        wrong += kernel_f32_bits(x) != b << 16; // widening is exact
        const uint16_t back = kernel_f32_to_bf16(x);
        wrong += bf16_is_nan_((uint16_t)b) ? !bf16_is_nan_(back) : back != b;
    }
    assert_int_equal(wrong, 0);
}

static void test_bf16_rounding_against_oracle(void **state)
{
    (void)state;
    int wrong = 0;
    for (uint32_t b = 0; b < 0x7f80u; b++)
        for (int neg = 0; neg < 2; neg++) {
            const uint32_t mid_bits = b << 16 | 0x8000u; // halfway to the next
            const float mid = from_bits_(mid_bits);
            const float probes[] = {mid, from_bits_(mid_bits - 1), from_bits_(mid_bits + 1)};
            for (int k = 0; k < 3; k++) {
                const float x = neg ? -probes[k] : probes[k];
                if (!bf16_rounds_right_(x) && wrong++ < 5)
                    print_error("bf16(%a) = 0x%04x\n", (double)x, kernel_f32_to_bf16(x));
            }
        }
    for (uint64_t u = 0; u <= 0xffffffffu; u += 251) {
        const float x = from_bits_((uint32_t)u);
        if (!bf16_rounds_right_(x) && wrong++ < 10)
            print_error("bf16(%a) = 0x%04x\n", (double)x, kernel_f32_to_bf16(x));
    }
    assert_int_equal(wrong, 0);
}

static void test_bf16_edges(void **state)
{
    (void)state;
    static const struct {
        uint32_t x; // float bits
        uint16_t want;
    } cases[] = {
        {0x3f800000u, 0x3f80}, // 1
        {0x3f808000u, 0x3f80}, // 1 + 2^-8: tie, to even (down)
        {0x3f818000u, 0x3f82}, // 1 + 3 x 2^-8: tie, to even (up)
        {0x3f808001u, 0x3f81}, // just past the tie
        {0x80000000u, 0x8000}, // -0
        {0x7f7fffffu, 0x7f80}, // FLT_MAX: past the largest bfloat16's half unit: inf
        {0x7f7f7fffu, 0x7f7f}, // just below that half unit
        {0xff800000u, 0xff80}, // -inf
        {0x00010000u, 0x0001}, // smallest bfloat16 subnormal
        {0x00008000u, 0x0000}, // half of it: tie, to even zero
        {0x00018000u, 0x0002}, // 1.5 units: tie, to even
        {0x007fffffu, 0x0080}, // largest float subnormal: up to the smallest normal
        {0x7fc00000u, 0x7fc0}, // quiet NaN
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const uint16_t got = kernel_f32_to_bf16(from_bits_(cases[k].x));
        if (got != cases[k].want)
            fail_msg("bf16(0x%08x) = 0x%04x, want 0x%04x", cases[k].x, got, cases[k].want);
    }
    // A NaN whose payload lies only in the dropped half: truncation would
    // make it infinity.
    assert_true(bf16_is_nan_(kernel_f32_to_bf16(from_bits_(0x7f800001u))));
    assert_true(bf16_is_nan_(kernel_f32_to_bf16(from_bits_(0xff80ffffu))));
}

// ---- the reductions (the ring's step; mpi's user operations) ----

static uint16_t f16_(float x) { return kernel_f32_to_f16(x); }
static uint16_t bf16_(float x) { return kernel_f32_to_bf16(x); }

// One element a op b through kernel_reduce_f16 (f16 = 1) or _bf16, decoded.
static float reduce1_(int f16, float a, float b, int op, int avg_div)
{
    uint16_t x = f16 ? f16_(a) : bf16_(a), y = f16 ? f16_(b) : bf16_(b), d;
    if (f16)
        kernel_reduce_f16(0, &d, &x, &y, op, avg_div);
    else
        kernel_reduce_bf16(0, &d, &x, &y, op, avg_div);
    return f16 ? kernel_f16_to_f32(d) : kernel_bf16_to_f32(d);
}

static void test_reduce_f16(void **state)
{
    (void)state;
    assert_true(reduce1_(1, 3, 4, KERNEL_OP_SUM, 0) == 7);
    assert_true(reduce1_(1, 2048, 1, KERNEL_OP_SUM, 0) == 2048); // 2049: tie, to even
    assert_true(reduce1_(1, 2048, 3, KERNEL_OP_SUM, 0) == 2052); // 2051: tie, to even
    assert_true(reduce1_(1, 2048, 5, KERNEL_OP_SUM, 0) == 2052); // 2053: tie, to even
    assert_true(reduce1_(1, 65504, 16, KERNEL_OP_SUM, 0) == INFINITY); // 65520: tie, to inf
    assert_true(reduce1_(1, 65504, 8, KERNEL_OP_SUM, 0) == 65504);
    assert_true(reduce1_(1, 256, 256, KERNEL_OP_PROD, 0) == INFINITY);
    assert_true(reduce1_(1, -3, 5, KERNEL_OP_PROD, 0) == -15);
    assert_true(reduce1_(1, 0x1p-24f, 0x1p-1f, KERNEL_OP_PROD, 0) == 0); // 2^-25: tie, to 0
    assert_true(reduce1_(1, -3, 5, KERNEL_OP_MIN, 0) == -3);
    assert_true(reduce1_(1, -3, 5, KERNEL_OP_MAX, 0) == 5);
    // avg's last step: the sum in the type, then / avg_div in float, rounded.
    assert_true(reduce1_(1, 3, 4, KERNEL_OP_AVG, 2) == 3.5f);
    assert_true(reduce1_(1, 3, 4, KERNEL_OP_AVG, 3) == (float)f16_oracle_(7.0f / 3.0f));
    assert_true(reduce1_(1, 2044, 5, KERNEL_OP_AVG, 3) == 682.5f); // 2048 / 3, not 2049 / 3
    assert_true(isnan(reduce1_(1, NAN, 1, KERNEL_OP_SUM, 0)));
    assert_true(isnan(reduce1_(1, INFINITY, -INFINITY, KERNEL_OP_SUM, 0)));
    // In place (dst == a), over a row.
    uint16_t a[3] = {f16_(1), f16_(2), f16_(-1)}, b[3] = {f16_(0.5f), f16_(2), f16_(1)};
    for (size_t i = 0; i < 3; i++)
        kernel_reduce_f16(i, a, a, b, KERNEL_OP_SUM, 0);
    assert_true(kernel_f16_to_f32(a[0]) == 1.5f && kernel_f16_to_f32(a[1]) == 4 &&
                kernel_f16_to_f32(a[2]) == 0);
}

static void test_reduce_bf16(void **state)
{
    (void)state;
    assert_true(reduce1_(0, 3, 4, KERNEL_OP_SUM, 0) == 7);
    assert_true(reduce1_(0, 256, 1, KERNEL_OP_SUM, 0) == 256); // 257: tie, to even
    assert_true(reduce1_(0, 256, 3, KERNEL_OP_SUM, 0) == 260); // 259: tie, to even
    assert_true(reduce1_(0, 0x1p127f, 0x1p127f, KERNEL_OP_SUM, 0) == INFINITY);
    assert_true(reduce1_(0, 0x1p100f, 0x1p100f, KERNEL_OP_PROD, 0) == INFINITY);
    assert_true(reduce1_(0, -7, 9, KERNEL_OP_PROD, 0) == -63);
    assert_true(reduce1_(0, -7, 9, KERNEL_OP_MIN, 0) == -7);
    assert_true(reduce1_(0, -7, 9, KERNEL_OP_MAX, 0) == 9);
    assert_true(reduce1_(0, 3, 4, KERNEL_OP_AVG, 3) == (float)bf16_oracle_(7.0f / 3.0f));
    assert_true(isnan(reduce1_(0, NAN, 1, KERNEL_OP_PROD, 0)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_decode_every_value),
        cmocka_unit_test(test_f16_round_trip),
        cmocka_unit_test(test_f16_rounding_against_oracle),
        cmocka_unit_test(test_f16_edges),
        cmocka_unit_test(test_bf16_round_trip),
        cmocka_unit_test(test_bf16_rounding_against_oracle),
        cmocka_unit_test(test_bf16_edges),
        cmocka_unit_test(test_reduce_f16),
        cmocka_unit_test(test_reduce_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
