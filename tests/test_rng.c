// test_rng.c: Philox4x32-10 against the known-answer vectors of its authors'
// reference implementation (Random123's kat_vectors), and the stream
// properties the trainer relies on: positions are pure functions of
// (seed, stream, counter), streams differ, and the derived draws stay in range.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rng.h"

// Random123 lists a philox4x32 vector as ctr[0..3], key[0..1], expected[0..3].
// rng_philox_block takes ctr as (hi, lo) 64-bit words: lo = ctr[1]:ctr[0],
// hi = ctr[3]:ctr[2]; the key as key[1]:key[0].
struct kat {
    uint32_t ctr[4], key[2], expected[4];
};

static const struct kat kats_[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, // digits of pi
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

static uint64_t join_(uint32_t hi, uint32_t lo) { return (uint64_t)hi << 32 | lo; }

static void test_philox_matches_the_reference_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof kats_ / sizeof kats_[0]; i++) {
        const struct kat *k = &kats_[i];
        uint32_t out[4];
        rng_philox_block(join_(k->key[1], k->key[0]), join_(k->ctr[3], k->ctr[2]),
                         join_(k->ctr[1], k->ctr[0]), out);
        for (int w = 0; w < 4; w++)
            assert_int_equal(out[w], k->expected[w]);
    }
}

static void test_stream_is_a_function_of_seed_stream_and_position(void **state)
{
    (void)state;
    rng_t a, b, other_stream, other_seed;
    rng_init(&a, 42, 3);
    rng_init(&b, 42, 3);
    rng_init(&other_stream, 42, 4);
    rng_init(&other_seed, 43, 3);
    uint32_t first[16];
    int same_stream = 0, same_seed = 0;
    for (int i = 0; i < 16; i++) {
        first[i] = rng_next_u32(&a);
        assert_int_equal(first[i], rng_next_u32(&b));
        same_stream += first[i] == rng_next_u32(&other_stream);
        same_seed += first[i] == rng_next_u32(&other_seed);
    }
    assert_int_equal(same_stream, 0);
    assert_int_equal(same_seed, 0);

    // Draws are the words of consecutive blocks: word i of the stream is word
    // i % 4 of block i / 4, so a saved (seed, counter) resumes exactly.
    uint32_t block[4];
    for (uint64_t blk = 0; blk < 4; blk++) {
        rng_philox_block(a.seed, 0, blk, block);
        assert_memory_equal(block, first + 4 * blk, sizeof block);
    }
    rng_t resumed = {.seed = a.seed, .counter = 2, .buf_used = 4};
    assert_int_equal(rng_next_u32(&resumed), first[8]);
}

static void test_derived_draws_stay_in_range(void **state)
{
    (void)state;
    rng_t r;
    rng_init(&r, 7, 0);
    int below_counts[5] = {0};
    double sum = 0, sum_sq = 0;
    const int n = 20000;
    for (int i = 0; i < n; i++) {
        float u = rng_uniform(&r);
        assert_true(u >= 0.0f && u < 1.0f);
        uint32_t k = rng_below(&r, 5);
        assert_true(k < 5);
        below_counts[k]++;
        float z = rng_normal(&r);
        sum += z;
        sum_sq += (double)z * z;
    }
    // Loose bounds (many standard errors wide): a broken transform or a
    // constant stream fails them, noise does not.
    for (int k = 0; k < 5; k++)
        assert_true(below_counts[k] > n / 5 - 600 && below_counts[k] < n / 5 + 600);
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    assert_true(mean > -0.05 && mean < 0.05);
    assert_true(var > 0.9 && var < 1.1);
    assert_int_equal(rng_below(&r, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_matches_the_reference_vectors),
        cmocka_unit_test(test_stream_is_a_function_of_seed_stream_and_position),
        cmocka_unit_test(test_derived_draws_stay_in_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
