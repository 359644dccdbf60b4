// test_vnccl_types.c: vgpu's NCCL's element math (launcher/vnccl/vnccl_types.c)
// at its edges: an integer average over more ranks than the type holds, fp8's
// round trip, nearest-even rounding, saturation and NaN.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vnccl.h"

// One element through acc = acc op x (last_div as the reduction's last step).
static uint8_t reduce_u8_(ncclDataType_t t, uint8_t acc, uint8_t x, ncclRedOp_t op, int div)
{
    vnccl_reduce(&acc, &x, 1, t, op, div);
    return acc;
}

static void integer_average_beyond_the_type(void **state)
{
    (void)state;
    // 256 ranks of uint8: the divisor does not fit the type (it was 0: SIGFPE).
    assert_int_equal(reduce_u8_(ncclUint8, 200, 55, ncclAvg, 256), 0); // 255 / 256
    uint8_t acc = 255, x = 255;                                          // 510 wraps to 254
    vnccl_reduce(&acc, &x, 1, ncclUint8, ncclAvg, 2);
    assert_int_equal(acc, 127);
    // 128 ranks of int8: -128 / 128 = -1 (the divisor was -128 as an int8: +1).
    int8_t a = -100, b = -28;
    vnccl_reduce(&a, &b, 1, ncclInt8, ncclAvg, 128);
    assert_int_equal(a, -1);
    int8_t c = 100, d = 27; // 127 / 200 toward zero
    vnccl_reduce(&c, &d, 1, ncclInt8, ncclAvg, 200);
    assert_int_equal(c, 0);
}

// x + 0 in fp8: the code's value re-encoded.
static uint8_t fp8_again_(ncclDataType_t t, uint8_t code)
{
    return reduce_u8_(t, code, 0, ncclSum, 0);
}

static void fp8_round_trip(void **state)
{
    (void)state;
    for (int code = 0; code < 256; code++) {
        const int e4m3_nan = (code & 0x7f) == 0x7f;
        const int e5m2_special = (code & 0x7c) == 0x7c; // infinities and NaNs
        if (!e4m3_nan && code != 0x80) // -0 + 0 is +0
            assert_int_equal(fp8_again_(ncclFloat8e4m3, (uint8_t)code), code);
        if (!e5m2_special && code != 0x80)
            assert_int_equal(fp8_again_(ncclFloat8e5m2, (uint8_t)code), code);
    }
}

static void fp8_rounding_and_limits(void **state)
{
    (void)state;
    // E4M3: 448 (0x7e) is the largest; 448 + 448 saturates there, as does -(...).
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0x7e, 0x7e, ncclSum, 0), 0x7e);
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0xfe, 0xfe, ncclSum, 0), 0xfe);
    // E5M2: 57344 (0x7b) + 57344 saturates at 0x7b (not infinity, 0x7c).
    assert_int_equal(reduce_u8_(ncclFloat8e5m2, 0x7b, 0x7b, ncclSum, 0), 0x7b);
    // NaN stays NaN.
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0x7f, 0x38, ncclSum, 0) & 0x7f, 0x7f);
    // E4M3 1.0 is 0x38; 1 + 1/16 (0x30 is 0.5... use codes): 1.0 + 0.0625 lies halfway
    // between 1.0 (0x38) and 1.125 (0x39): nearest even keeps 1.0.
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0x38, 0x18, ncclSum, 0), 0x38); // 0x18 = 1/16
    // 1.125 + 1/16 lies halfway between 1.125 (0x39) and 1.25 (0x3a): even is 0x3a.
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0x39, 0x18, ncclSum, 0), 0x3a);
    // Subnormals: the smallest (2^-9, 0x01) plus itself is 0x02, exactly.
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0x01, 0x01, ncclSum, 0), 0x02);
    // Products: 2 * 3 = 6 (E4M3 0x40 = 2, 0x44 = 3, 0x4c = 6).
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0x40, 0x44, ncclProd, 0), 0x4c);
    // Min and max keep an operand's bits.
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0x40, 0xc0, ncclMin, 0), 0xc0);
    assert_int_equal(reduce_u8_(ncclFloat8e4m3, 0x40, 0xc0, ncclMax, 0), 0x40);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(integer_average_beyond_the_type),
        cmocka_unit_test(fp8_round_trip),
        cmocka_unit_test(fp8_rounding_and_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
