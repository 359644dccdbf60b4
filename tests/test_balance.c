// test_balance.c: bounds, argument checks, proposals, smoothing and hysteresis of the
// dynamic batch balancer, checked against hand-computed splits and an independent optimum.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "balance.h"
#include "rng.h"
#include "status.h"

#define MAX_RANKS 16

// Sums to the batch, every piece within [min_rows, max_rows].
static void assert_valid_split_(const struct balancer *b, const long *c)
{
    long sum = 0;
    for (int r = 0; r < b->nranks; r++) {
        assert_true(c[r] >= b->min_rows);
        assert_true(c[r] <= b->max_rows);
        sum += c[r];
    }
    assert_int_equal(sum, b->global_batch);
}

// The predicted step time of split c by the balancer's current estimates.
static double step_time_(const struct balancer *b, const long *c)
{
    double worst = 0;
    for (int r = 0; r < b->nranks; r++) {
        double t = b->fixed[r] + (double)c[r] / b->rate[r];
        worst = t > worst ? t : worst;
    }
    return worst;
}

// The shortest step any real-valued split within the bounds allows, found
// independently of balance.c: every rank needs at least min_rows (so T >=
// fixed + min_rows / rate), and the ranks must take the batch with c[r] <=
// (T - fixed[r]) * rate[r] and c[r] <= max_rows. Bisection on T.
static double optimum_time_(const struct balancer *b)
{
    double floor_t = 0, hi = 0;
    for (int r = 0; r < b->nranks; r++) {
        double t = b->fixed[r] + (double)b->min_rows / b->rate[r];
        floor_t = t > floor_t ? t : floor_t;
        t = b->fixed[r] + (double)b->max_rows / b->rate[r]; // every rank at max_rows: enough
        hi = t > hi ? t : hi;
    }
    double lo = 0;
    for (int it = 0; it < 200; it++) {
        double mid = 0.5 * (lo + hi), take = 0;
        for (int r = 0; r < b->nranks; r++) {
            double c = (mid - b->fixed[r]) * b->rate[r];
            c = c > 0 ? c : 0;
            take += c < (double)b->max_rows ? c : (double)b->max_rows;
        }
        if (take >= (double)b->global_batch)
            hi = mid;
        else
            lo = mid;
    }
    return hi > floor_t ? hi : floor_t;
}

static void equal_split_(long batch, int nranks, long *c)
{
    for (int r = 0; r < nranks; r++)
        c[r] = batch / nranks + (r < batch % nranks ? 1 : 0);
}

// ---- bounds and arguments ----

static void test_max_rows(void **state)
{
    (void)state;
    assert_int_equal(balance_max_rows(256, 2, NULL), 256);   // 2 * 128, the whole batch
    assert_int_equal(balance_max_rows(256, 4, NULL), 128);   // 2 * 64
    assert_int_equal(balance_max_rows(256, 3, NULL), 172);   // 2 * ceil(256 / 3) = 2 * 86
    assert_int_equal(balance_max_rows(256, 1, NULL), 256);   // capped at the batch
    assert_int_equal(balance_max_rows(10, 3, NULL), 8);      // 2 * ceil(10 / 3)
    assert_int_equal(balance_max_rows(3, 8, NULL), 2);       // 2 * 1
    assert_int_equal(balance_max_rows(1, 8, NULL), 1);       // capped at the batch
    const long big[4] = {179, 25, 26, 26};
    assert_int_equal(balance_max_rows(256, 4, big), 179);    // raised to the largest piece
    const long small[4] = {100, 52, 52, 52};
    assert_int_equal(balance_max_rows(256, 4, small), 128);  // not lowered by it
    const long eq[4] = {64, 64, 64, 64};
    assert_int_equal(balance_max_rows(256, 4, eq), 128);
    assert_int_equal(balance_max_rows(0, 4, NULL), 0);
    assert_int_equal(balance_max_rows(-5, 4, NULL), 0);
    assert_int_equal(balance_max_rows(256, 0, NULL), 0);
    assert_int_equal(balance_max_rows(256, -1, eq), 0);
}

static void test_init(void **state)
{
    (void)state;
    struct balancer b;
    const long eq2[2] = {128, 128}, short2[2] = {128, 127}, over2[2] = {128, 129};
    assert_int_equal(balance_init(&b, 2, 256, short2), VGPU_EINVAL);
    balance_free(&b); // harmless after a failed init
    assert_int_equal(balance_init(&b, 2, 256, over2), VGPU_EINVAL);
    assert_int_equal(balance_init(&b, 0, 256, eq2), VGPU_EINVAL);
    assert_int_equal(balance_init(&b, -1, 256, eq2), VGPU_EINVAL);
    assert_int_equal(balance_init(&b, 2, 256, NULL), VGPU_EINVAL);
    assert_int_equal(balance_init(&b, 2, 0, eq2), VGPU_EINVAL);
    const long neg[2] = {300, -44}; // sums to 256 but a piece is negative
    assert_int_equal(balance_init(&b, 2, 256, neg), VGPU_EINVAL);
    const long neg3[3] = {-10, 133, 133}; // sums to 256, every piece under max_rows 172
    assert_int_equal(balance_init(&b, 3, 256, neg3), VGPU_EINVAL);
    balance_free(&b);

    // The equal split: a quarter of an equal share as the floor, twice it as the ceiling.
    const long eq4[4] = {64, 64, 64, 64};
    assert_int_equal(balance_init(&b, 4, 256, eq4), 0);
    assert_int_equal(b.nranks, 4);
    assert_int_equal(b.global_batch, 256);
    assert_int_equal(b.min_rows, 16);
    assert_int_equal(b.max_rows, 128);
    assert_memory_equal(b.counts, eq4, sizeof eq4);
    for (int r = 0; r < 4; r++)
        assert_true(b.rate[r] == 0.0); // not measured yet
    balance_free(&b);
    balance_free(&b); // idempotent
    balance_free(NULL);

    // A weighted split with a piece below the usual floor of 32: the floor drops to it.
    const long w2[2] = {254, 2};
    assert_int_equal(balance_init(&b, 2, 256, w2), 0);
    assert_int_equal(b.min_rows, 2);
    assert_int_equal(b.max_rows, 256);
    assert_memory_equal(b.counts, w2, sizeof w2);
    balance_free(&b);

    // A piece above twice the equal share raises the ceiling to it.
    const long w4[4] = {179, 25, 26, 26};
    assert_int_equal(balance_init(&b, 4, 256, w4), 0);
    assert_int_equal(b.max_rows, 179);
    assert_int_equal(b.min_rows, 16);
    assert_memory_equal(b.counts, w4, sizeof w4);
    balance_free(&b);

    // A zero piece (a weight of 0) is allowed as a start; the floor stays 1
    // row so that every rank is measured once balancing moves rows.
    const long z3[3] = {0, 5, 5};
    assert_int_equal(balance_init(&b, 3, 10, z3), 0);
    assert_int_equal(b.min_rows, 1);
    assert_memory_equal(b.counts, z3, sizeof z3);
    balance_free(&b);

    // One rank: the whole batch.
    const long one[1] = {50};
    assert_int_equal(balance_init(&b, 1, 50, one), 0);
    assert_int_equal(b.max_rows, 50);
    assert_int_equal(b.min_rows, 12); // 50 / 4
    balance_free(&b);
}

static void test_adopt(void **state)
{
    (void)state;
    struct balancer b;
    const long eq4[4] = {64, 64, 64, 64};
    assert_int_equal(balance_init(&b, 4, 256, eq4), 0); // bounds [16, 128]
    const long bad_sum[4] = {64, 64, 64, 63}, bad_sum2[4] = {65, 64, 64, 64};
    const long too_big[4] = {129, 43, 42, 42}, too_small[4] = {15, 81, 80, 80};
    const long negative[4] = {-1, 129, 64, 64};
    assert_int_equal(balance_adopt(&b, bad_sum), VGPU_EINVAL);
    assert_int_equal(balance_adopt(&b, bad_sum2), VGPU_EINVAL);
    assert_int_equal(balance_adopt(&b, too_big), VGPU_EINVAL);
    assert_int_equal(balance_adopt(&b, too_small), VGPU_EINVAL);
    assert_int_equal(balance_adopt(&b, negative), VGPU_EINVAL);
    assert_memory_equal(b.counts, eq4, sizeof eq4); // unchanged by every rejection

    const long edge[4] = {128, 16, 16, 96}, mid[4] = {100, 50, 50, 56};
    assert_int_equal(balance_adopt(&b, edge), 0); // both bounds are inclusive
    assert_memory_equal(b.counts, edge, sizeof edge);
    assert_int_equal(balance_adopt(&b, mid), 0);
    assert_memory_equal(b.counts, mid, sizeof mid);
    assert_int_equal(balance_adopt(&b, too_big), VGPU_EINVAL);
    assert_memory_equal(b.counts, mid, sizeof mid);
    balance_free(&b);
}

// ---- proposals ----

// Ranks not measured yet. With none measured: no proposal, the split stays.
// With some measured: the others start from the measured ranks' mean speed.
static void test_propose_unmeasured(void **state)
{
    (void)state;
    struct balancer b;
    const long eq4[4] = {64, 64, 64, 64};
    assert_int_equal(balance_init(&b, 4, 256, eq4), 0);
    long prop[4] = {-7, -7, -7, -7};
    const double none[4] = {0, 0, 0, 0}, secs0[4] = {0.5, 0.1, 0.1, 0.1};
    assert_int_equal(balance_propose(&b, none, secs0, prop), 0);
    assert_memory_equal(prop, eq4, sizeof eq4);
    assert_true(b.rate[0] == 0.0);
    // Zero seconds is no measurement either.
    const double rows2[4] = {64, 64, 64, 64}, zero[4] = {0, 0, 0, 0};
    assert_int_equal(balance_propose(&b, rows2, zero, prop), 0);
    assert_memory_equal(prop, eq4, sizeof eq4);
    assert_true(b.rate[0] == 0.0);
    // Rank 3 unmeasured: it is taken at the mean of 128, 640 and 640 rows/s.
    const double rows1[4] = {64, 64, 64, 0}, secs1[4] = {0.5, 0.1, 0.1, 0.1};
    assert_int_equal(balance_propose(&b, rows1, secs1, prop), 1);
    assert_true(fabs(b.rate[3] - 1408.0 / 3) < 1e-9);
    assert_valid_split_(&b, prop);
    assert_true(prop[0] < 64 && prop[3] > 0);
    balance_free(&b);
    assert_int_equal(balance_init(&b, 4, 256, eq4), 0);
    // Once measured, rank 0 (5x slower, as both intervals said) gives work away.
    const double secs3[4] = {0.5, 0.1, 0.1, 0.1};
    assert_int_equal(balance_propose(&b, rows2, secs3, prop), 1);
    assert_valid_split_(&b, prop);
    assert_true(prop[0] < 64);
    assert_int_equal(balance_adopt(&b, prop), 0);
    balance_free(&b);

    // A zero piece whose rank has no measurement: the floor stays 1 row, the
    // rank starts from the measured ranks' mean speed (75) and gets rows, so
    // it is measured from then on: 10 * (75, 50, 100) / 225 -> 3, 2, 5.
    const long z3[3] = {0, 5, 5};
    assert_int_equal(balance_init(&b, 3, 10, z3), 0);
    assert_int_equal(b.min_rows, 1);
    long p3[3];
    const double rows_z[3] = {0, 5, 5}, secs_z[3] = {0, 0.1, 0.05};
    assert_int_equal(balance_propose(&b, rows_z, secs_z, p3), 1);
    assert_int_equal(p3[0], 3);
    assert_int_equal(p3[1], 2);
    assert_int_equal(p3[2], 5);
    assert_int_equal(balance_adopt(&b, p3), 0);
    balance_free(&b);
}

static void test_propose_equal_speeds(void **state)
{
    (void)state;
    struct balancer b;
    const long eq3[3] = {86, 85, 85};
    assert_int_equal(balance_init(&b, 3, 256, eq3), 0);
    long prop[3];
    const double rows[3] = {86, 85, 85}, secs[3] = {0.86, 0.85, 0.85}; // 100 rows/s each
    for (int i = 0; i < 3; i++) {
        assert_int_equal(balance_propose(&b, rows, secs, prop), 0);
        assert_memory_equal(prop, eq3, sizeof eq3);
    }
    assert_float_equal(b.rate[0], 100.0, 1e-9);
    assert_float_equal(b.rate[2], 100.0, 1e-9);
    balance_free(&b);
}

// Rank 1 twice as fast: 1/3 and 2/3 of 256 = 85.33 / 170.67.
static void test_propose_two_to_one(void **state)
{
    (void)state;
    struct balancer b;
    const long eq2[2] = {128, 128};
    assert_int_equal(balance_init(&b, 2, 256, eq2), 0);
    long prop[2];
    const double rows[2] = {128, 128}, secs[2] = {0.2, 0.1};
    assert_int_equal(balance_propose(&b, rows, secs, prop), 1);
    assert_float_equal(b.rate[0], 640.0, 1e-9);
    assert_float_equal(b.rate[1], 1280.0, 1e-9);
    assert_valid_split_(&b, prop);
    const double exact[2] = {256.0 / 3, 512.0 / 3};
    for (int r = 0; r < 2; r++)
        assert_true(fabs((double)prop[r] - exact[r]) < 1.0);
    assert_int_equal(prop[0], 85); // largest remainder (.67) gets the leftover row
    assert_int_equal(prop[1], 171);
    assert_true(step_time_(&b, prop) < (1 - BALANCE_MIN_GAIN) * step_time_(&b, eq2));
    assert_memory_equal(b.counts, eq2, sizeof eq2); // proposing does not adopt
    assert_int_equal(balance_adopt(&b, prop), 0);
    assert_memory_equal(b.counts, prop, sizeof prop);

    // Converged: the same speeds, measured on the new split, propose nothing.
    const double rows2[2] = {85, 171}, secs2[2] = {85.0 / 640, 171.0 / 1280};
    long again[2];
    assert_int_equal(balance_propose(&b, rows2, secs2, again), 0);
    assert_memory_equal(again, prop, sizeof prop);
    // And the very same measurements as before propose nothing either.
    assert_int_equal(balance_propose(&b, rows, secs, again), 0);
    assert_memory_equal(again, prop, sizeof prop);
    assert_float_equal(b.rate[0], 640.0, 1e-9);
    assert_float_equal(b.rate[1], 1280.0, 1e-9);
    balance_free(&b);
}

// A new interval weighs BALANCE_ALPHA against the running estimate; a rank
// without a sample keeps its estimate.
static void test_propose_smoothing(void **state)
{
    (void)state;
    struct balancer b;
    const long eq2[2] = {128, 128};
    assert_int_equal(balance_init(&b, 2, 256, eq2), 0);
    long prop[2];
    const double rows[2] = {128, 128}, same[2] = {0.2, 0.2};
    assert_int_equal(balance_propose(&b, rows, same, prop), 0); // 640 / 640
    const double faster[2] = {0.2, 0.1};                        // rank 1 now measures 1280
    assert_int_equal(balance_propose(&b, rows, faster, prop), 1);
    assert_float_equal(b.rate[0], 640.0, 1e-9);
    double want1 = (1 - BALANCE_ALPHA) * 640.0 + BALANCE_ALPHA * 1280.0; // 960
    assert_float_equal(b.rate[1], want1, 1e-9);
    assert_valid_split_(&b, prop);
    double exact0 = 256.0 * 640.0 / (640.0 + want1); // 102.4, not the unsmoothed 85.3
    assert_true(fabs((double)prop[0] - exact0) < 1.0);
    assert_true(fabs((double)prop[1] - (256.0 - exact0)) < 1.0);
    assert_int_equal(balance_adopt(&b, prop), 0);

    // Rank 0 computed no rows this interval (but spent time): its estimate
    // stays, rank 1's moves on.
    const double rows2[2] = {0, 154}, secs2[2] = {0.05, 154.0 / 1280};
    balance_propose(&b, rows2, secs2, prop);
    assert_float_equal(b.rate[0], 640.0, 1e-9);
    assert_float_equal(b.rate[1], (1 - BALANCE_ALPHA) * want1 + BALANCE_ALPHA * 1280.0, 1e-9);
    assert_valid_split_(&b, prop);

    // A non-finite speed (rows over a vanishing time) is no sample either.
    const double rows3[2] = {1e300, 10}, secs3[2] = {1e-300, 0.01};
    double keep0 = b.rate[0];
    balance_propose(&b, rows3, secs3, prop);
    assert_float_equal(b.rate[0], keep0, 1e-9);
    assert_true(isfinite(b.rate[1]) && b.rate[1] > 0);
    assert_valid_split_(&b, prop);
    balance_free(&b);
}

// A 2% speed difference is noise: below BALANCE_MIN_GAIN, nothing moves.
static void test_propose_hysteresis(void **state)
{
    (void)state;
    struct balancer b;
    const long eq2[2] = {128, 128};
    assert_int_equal(balance_init(&b, 2, 256, eq2), 0);
    long prop[2];
    const double rows[2] = {128, 128}, secs[2] = {1.28, 1.28 / 1.02};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(balance_propose(&b, rows, secs, prop), 0);
        assert_memory_equal(prop, eq2, sizeof eq2);
    }
    balance_free(&b);

    // 4 ranks, one 2% slow: still nothing.
    const long eq4[4] = {64, 64, 64, 64};
    assert_int_equal(balance_init(&b, 4, 256, eq4), 0);
    long prop4[4];
    const double rows4[4] = {64, 64, 64, 64}, secs4[4] = {0.102, 0.1, 0.1, 0.1};
    assert_int_equal(balance_propose(&b, rows4, secs4, prop4), 0);
    assert_memory_equal(prop4, eq4, sizeof eq4);
    // 10% slow: worth moving.
    const double secs5[4] = {0.11, 0.1, 0.1, 0.1};
    balance_free(&b);
    assert_int_equal(balance_init(&b, 4, 256, eq4), 0);
    assert_int_equal(balance_propose(&b, rows4, secs5, prop4), 1);
    assert_valid_split_(&b, prop4);
    assert_true(prop4[0] < 64);
    assert_int_equal(balance_adopt(&b, prop4), 0);
    balance_free(&b);
}

// Extreme speed ratios: the slow rank keeps min_rows, the fast one at most max_rows.
static void test_propose_clamped(void **state)
{
    (void)state;
    struct balancer b;
    const long eq2[2] = {128, 128};
    assert_int_equal(balance_init(&b, 2, 256, eq2), 0); // bounds [32, 256]
    long prop[2];
    const double rows[2] = {128, 128}, secs[2] = {10.0, 0.1}; // 100x
    assert_int_equal(balance_propose(&b, rows, secs, prop), 1);
    assert_valid_split_(&b, prop);
    assert_int_equal(prop[0], 32);
    assert_int_equal(prop[1], 224);
    assert_int_equal(balance_adopt(&b, prop), 0);
    balance_free(&b);

    // 4 ranks, bounds [16, 128]: one fast rank takes no more than 128, one
    // very slow rank no less than 16, the two others share the rest.
    const long eq4[4] = {64, 64, 64, 64};
    assert_int_equal(balance_init(&b, 4, 256, eq4), 0);
    long p4[4];
    const double rows4[4] = {64, 64, 64, 64}, secs4[4] = {0.01, 10.0, 0.1, 0.1};
    assert_int_equal(balance_propose(&b, rows4, secs4, p4), 1);
    assert_valid_split_(&b, p4);
    assert_int_equal(p4[0], 128);
    assert_int_equal(p4[1], 16);
    assert_int_equal(p4[2] + p4[3], 112);
    assert_true(labs(p4[2] - p4[3]) <= 1);
    assert_int_equal(balance_adopt(&b, p4), 0);
    balance_free(&b);

    // The reverse: three very slow ranks at the floor, the fast one capped;
    // a weighted start whose tiny piece lowered the floor to 2.
    const long w2[2] = {254, 2};
    assert_int_equal(balance_init(&b, 2, 256, w2), 0);
    const double rows_w[2] = {254, 2}, secs_w[2] = {0.1, 10.0}; // rank 1 ~12700x slower
    assert_int_equal(balance_propose(&b, rows_w, secs_w, prop), 0); // already at the floor
    assert_memory_equal(prop, w2, sizeof w2);
    const double secs_w2[2] = {0.1, 0.001}; // now rank 1 is fast: 2000 rows/s vs 2540
    // Smoothed: rank 1 = 0.5 * 0.2 + 0.5 * 2000 ~ 1000 rows/s.
    assert_int_equal(balance_propose(&b, rows_w, secs_w2, prop), 1);
    assert_valid_split_(&b, prop);
    double exact1 = 256.0 * b.rate[1] / (b.rate[0] + b.rate[1]);
    assert_true(fabs((double)prop[1] - exact1) < 1.0);
    assert_int_equal(balance_adopt(&b, prop), 0);
    balance_free(&b);

    // 16 ranks, bounds [4, 32]: 7 ranks 10x faster than 9 others. Their
    // proportional shares (32.4 and 3.24) cross both bounds, and the bounds
    // alone (7 * 32 + 9 * 4 = 260) over-fill the batch: the fast ranks give
    // the 4 rows back, the slow ones keep the floor that sets the step time.
    long eq16[16], p16[16];
    double rows16[16], secs16[16];
    for (int r = 0; r < 16; r++) {
        eq16[r] = 16;
        rows16[r] = 16;
        secs16[r] = r < 7 ? 1.6 : 16.0;
    }
    assert_int_equal(balance_init(&b, 16, 256, eq16), 0);
    assert_int_equal(b.min_rows, 4);
    assert_int_equal(b.max_rows, 32);
    assert_int_equal(balance_propose(&b, rows16, secs16, p16), 1);
    assert_valid_split_(&b, p16);
    long fast = 0;
    for (int r = 0; r < 16; r++) {
        if (r < 7) {
            assert_in_range(p16[r], 31, 32);
            fast += p16[r];
        } else {
            assert_int_equal(p16[r], 4);
        }
    }
    assert_int_equal(fast, 220);
    assert_float_equal(step_time_(&b, p16), 4.0, 1e-12);
    assert_int_equal(balance_adopt(&b, p16), 0);
    balance_free(&b);
}

// Fixed costs per step: equal devices whose steps cost 2 ms plus 0.1 ms a row
// look unequal by rows per second at a 58/6 split (rank 1 seems 4x slower);
// with the fixed cost known, the first proposal is the equal split. Unequal
// fixed costs: the rank with 1 ms more per step gets 5 rows fewer.
static void test_propose_fixed_costs(void **state)
{
    (void)state;
    struct balancer b;
    const long skew[2] = {58, 6};
    const double per_row = 1e-4, fix = 2e-3;
    const double rows[2] = {58, 6};
    // What the trainer passes: the per-row part of the time.
    const double busy[2] = {58 * per_row, 6 * per_row};
    long prop[2];
    assert_int_equal(balance_init(&b, 2, 64, skew), 0);
    const double bad[2] = {-1, 0}, nan2[2] = {NAN, 0}, fixed[2] = {fix, fix};
    assert_int_equal(balance_set_fixed(&b, bad), VGPU_EINVAL);
    assert_int_equal(balance_set_fixed(&b, nan2), VGPU_EINVAL);
    assert_true(b.fixed[0] == 0 && b.fixed[1] == 0);
    // Without it: the whole time counted per row, rank 1 looks slow.
    const double whole[2] = {fix + 58 * per_row, fix + 6 * per_row};
    assert_int_equal(balance_propose(&b, rows, whole, prop), 1);
    assert_true(prop[1] < 20);
    balance_free(&b);
    // With it: equal.
    assert_int_equal(balance_init(&b, 2, 64, skew), 0);
    assert_int_equal(balance_set_fixed(&b, fixed), 0);
    assert_int_equal(balance_propose(&b, rows, busy, prop), 1);
    assert_int_equal(prop[0], 32);
    assert_int_equal(prop[1], 32);
    assert_float_equal(step_time_(&b, prop), fix + 32 * per_row, 1e-12);
    assert_int_equal(balance_adopt(&b, prop), 0);
    // Unequal fixed costs, equal speeds: 1 ms is 10 rows' time, split 5/5.
    const double fixed2[2] = {fix + 1e-3, fix};
    assert_int_equal(balance_set_fixed(&b, fixed2), 0);
    const double rows2[2] = {32, 32}, busy2[2] = {32 * per_row, 32 * per_row};
    assert_int_equal(balance_propose(&b, rows2, busy2, prop), 1);
    assert_int_equal(prop[0], 27);
    assert_int_equal(prop[1], 37);
    balance_free(&b);
}

// Many random balancers, speeds and starting splits: every proposal is a
// valid split, a returned one is within a row per rank of the optimum and
// beats the split in force by BALANCE_MIN_GAIN, and a refusal only happens
// when the split in force is already close to the optimum.
static void test_propose_random(void **state)
{
    (void)state;
    rng_t rng;
    rng_init(&rng, 12345, 7);
    long returned = 0, refused = 0;
    for (int trial = 0; trial < 2000; trial++) {
        long batch = 1 + (long)rng_below(&rng, 1000);
        int nranks = 1 + (int)rng_below(&rng, 8);
        if (trial % 10 == 9) // now and then past 8 ranks
            nranks = 1 + (int)rng_below(&rng, MAX_RANKS);
        long init[MAX_RANKS];
        equal_split_(batch, nranks, init);
        if (trial % 2 && nranks > 1) { // a random composition: weighted start
            long left = batch;
            for (int r = 0; r < nranks - 1; r++) {
                init[r] = (long)rng_below(&rng, (uint32_t)(left + 1));
                init[r] = init[r] > 2 * batch / nranks + 3 ? left / 2 : init[r];
                left -= init[r];
            }
            init[nranks - 1] = left;
        }
        struct balancer b;
        assert_int_equal(balance_init(&b, nranks, batch, init), 0);
        assert_int_equal(b.max_rows, balance_max_rows(batch, nranks, init));
        assert_memory_equal(b.counts, init, (size_t)nranks * sizeof *init);
        double speed[MAX_RANKS], fixed[MAX_RANKS] = {0};
        for (int r = 0; r < nranks; r++) // 1 .. 100 rows per ms, log-uniform-ish
            speed[r] = pow(100.0, (double)rng_below(&rng, 1u << 20) / (1u << 20));
        if (trial % 3 == 1) { // fixed costs per step, 0 .. 50 ms
            for (int r = 0; r < nranks; r++)
                fixed[r] = 0.05 * (double)rng_below(&rng, 1000) / 1000.0;
            assert_int_equal(balance_set_fixed(&b, fixed), 0);
        }
        for (int interval = 0; interval < 6; interval++) {
            double rows[MAX_RANKS], secs[MAX_RANKS];
            for (int r = 0; r < nranks; r++) {
                double drift = 0.8 + 0.4 * (double)rng_below(&rng, 1000) / 1000.0;
                rows[r] = 1.0 + (double)rng_below(&rng, 4096);
                secs[r] = rows[r] / (speed[r] * drift * 1000.0);
            }
            long before[MAX_RANKS], prop[MAX_RANKS];
            memcpy(before, b.counts, (size_t)nranks * sizeof *before);
            int got = balance_propose(&b, rows, secs, prop);
            assert_true(got == 0 || got == 1);
            if (got) // a refusal returns the split in force, which may start below the floor
                assert_valid_split_(&b, prop);
            for (int r = 0; r < nranks; r++)
                assert_true(b.rate[r] > 0 && isfinite(b.rate[r]));
            double opt = optimum_time_(&b), slack = 0;
            for (int r = 0; r < nranks; r++)
                slack = fmax(slack, 1.0 / b.rate[r]);
            if (got) {
                returned++;
                // Each piece within one row of what the optimum allows it
                // (or at the floor, where a fixed cost leaves it no time).
                for (int r = 0; r < nranks; r++)
                    assert_true(prop[r] == b.min_rows ||
                                (double)prop[r] <=
                                    (opt - b.fixed[r]) * b.rate[r] * (1 + 1e-9) + 1.0 + 1e-9);
                assert_true(step_time_(&b, prop) <= opt + slack + 1e-9 * opt);
                assert_true(step_time_(&b, prop) <
                            (1 - BALANCE_MIN_GAIN) * step_time_(&b, before));
                assert_memory_equal(b.counts, before, (size_t)nranks * sizeof *before);
                assert_int_equal(balance_adopt(&b, prop), 0);
                assert_memory_equal(b.counts, prop, (size_t)nranks * sizeof *prop);
            } else {
                refused++;
                assert_memory_equal(prop, before, (size_t)nranks * sizeof *prop);
                // Refused: the split in force is within the gain threshold of
                // a proposal that is within a row per rank of the optimum.
                assert_true(step_time_(&b, before) * (1 - BALANCE_MIN_GAIN) <=
                            (opt + slack) * (1 + 1e-9));
            }
        }
        balance_free(&b);
    }
    // The random speeds exercised both outcomes, many times.
    assert_true(returned > 500);
    assert_true(refused > 500);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_rows),
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_adopt),
        cmocka_unit_test(test_propose_unmeasured),
        cmocka_unit_test(test_propose_equal_speeds),
        cmocka_unit_test(test_propose_two_to_one),
        cmocka_unit_test(test_propose_smoothing),
        cmocka_unit_test(test_propose_hysteresis),
        cmocka_unit_test(test_propose_clamped),
        cmocka_unit_test(test_propose_fixed_costs),
        cmocka_unit_test(test_propose_random),
    };
    return cmocka_run_group_tests_name("balance", tests, NULL, NULL);
}
