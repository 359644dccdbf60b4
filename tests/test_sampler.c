// test_sampler.c: shuffles, per-rank pieces, epoch tails and resume of the
// data-parallel sampler, checked against direct counting.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sampler.h"
#include "status.h"

#define MAX_RANKS 16

// Every entry of [0, n) exactly once.
static void assert_is_permutation_(const uint32_t *perm, long n)
{
    unsigned char *seen = calloc((size_t)n, 1);
    assert_non_null(seen);
    for (long i = 0; i < n; i++) {
        assert_true(perm[i] < (uint32_t)n);
        assert_int_equal(seen[perm[i]], 0);
        seen[perm[i]] = 1;
    }
    free(seen);
}

// Contiguous, in rank order, summing exactly to global_count.
static void assert_split_covers_(long global_count, int nranks, const long *counts,
                                 const long *offsets)
{
    long at = 0;
    for (int r = 0; r < nranks; r++) {
        assert_true(counts[r] >= 0);
        assert_int_equal(offsets[r], at);
        at += counts[r];
    }
    assert_int_equal(at, global_count);
}

// ---- the permutation ----

static void test_permutation(void **state)
{
    (void)state;
    enum { n = 1000 };
    uint32_t *a = malloc(n * sizeof(uint32_t)), *b = malloc(n * sizeof(uint32_t));
    uint32_t *c = malloc(n * sizeof(uint32_t));
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    sampler_permutation(a, n, 17, 0);
    assert_is_permutation_(a, n);
    sampler_permutation(b, n, 17, 0);
    assert_memory_equal(a, b, n * sizeof(uint32_t));
    sampler_permutation(b, n, 17, 1);
    assert_is_permutation_(b, n);
    assert_memory_not_equal(a, b, n * sizeof(uint32_t));
    sampler_permutation(c, n, 18, 0);
    assert_memory_not_equal(a, c, n * sizeof(uint32_t));
    // It is a shuffle, not a near-identity: few fixed points (about 1 expected).
    long fixed = 0;
    for (long i = 0; i < n; i++)
        fixed += a[i] == (uint32_t)i;
    assert_true(fixed < 10);
    // Each position is uniform over the values: over many epochs, index 0
    // lands in the first half about half the time.
    enum { epochs = 400, m = 10 };
    uint32_t small[m];
    long first_half = 0, fixed_points = 0;
    for (long e = 0; e < epochs; e++) {
        sampler_permutation(small, m, 5, e);
        assert_is_permutation_(small, m);
        for (int i = 0; i < m / 2; i++)
            first_half += small[i] == 0;
        for (int i = 0; i < m; i++)
            fixed_points += small[i] == (uint32_t)i;
    }
    assert_in_range(first_half, epochs / 2 - 60, epochs / 2 + 60); // about 6 sigma
    // A uniform shuffle has one fixed point per permutation on average (a
    // Sattolo-style off-by-one, j < i, would have none).
    assert_in_range(fixed_points, epochs - 120, epochs + 120);
    sampler_permutation(small, 1, 5, 3);
    assert_int_equal(small[0], 0);
    free(a);
    free(b);
    free(c);
}

// What training sees over many epochs is a uniform shuffle: 2400 epochs of a
// 4-sample data set, read through sampler_next one batch an epoch, give each
// of the 4! = 24 orders about 100 times (within 50: 5 sigma; the seed is
// fixed, so this passes or fails the same way every run). A shuffle that
// ignores the epoch (here or in sampler_next) gives one order; one that is
// skipped, stops before the swap at i = 1 or draws j from a range other
// than [0, i] gives only some of the orders, or some far too often.
static void test_epoch_orders_uniform(void **state)
{
    (void)state;
    enum { n = 4, epochs = 2400, orders = 24, codes = n * n * n * n };
    long count[codes] = {0}; // by the order read as a base-n number
    struct sampler s;
    struct batch_slice b;
    assert_int_equal(sampler_init(&s, n, n, 1, 2024, 1, NULL, 0), 0);
    for (long e = 0; e < epochs; e++) {
        sampler_set_position(&s, e, 0);
        assert_int_equal(sampler_next(&s, 0, &b), 1);
        assert_int_equal(b.epoch, e);
        assert_int_equal(b.global_count, n);
        assert_is_permutation_(b.indices, n);
        long code = 0;
        for (int i = 0; i < n; i++)
            code = code * n + b.indices[i];
        count[code]++;
        assert_int_equal(sampler_next(&s, 0, &b), 0); // one batch an epoch
    }
    long seen = 0;
    for (long c = 0; c < codes; c++) {
        if (!count[c])
            continue;
        seen++;
        assert_in_range(count[c], epochs / orders - 50, epochs / orders + 50);
    }
    assert_int_equal(seen, orders);
    sampler_free(&s);
}

// ---- split ----

static void test_split_equal(void **state)
{
    (void)state;
    long counts[MAX_RANKS], offsets[MAX_RANKS];
    sampler_split(10, 4, NULL, 0, counts, offsets);
    const long want[4] = {3, 3, 2, 2};
    for (int r = 0; r < 4; r++)
        assert_int_equal(counts[r], want[r]);
    assert_split_covers_(10, 4, counts, offsets);
    for (long g = 0; g <= 40; g++)
        for (int n = 1; n <= MAX_RANKS; n++) {
            sampler_split(g, n, NULL, 0, counts, offsets);
            assert_split_covers_(g, n, counts, offsets);
            for (int r = 1; r < n; r++) // lower ranks get the extra, sizes within 1
                assert_true(counts[r - 1] == counts[r] || counts[r - 1] == counts[r] + 1);
        }
    // More ranks than samples: the high ranks get empty pieces.
    sampler_split(3, 5, NULL, 0, counts, offsets);
    const long few[5] = {1, 1, 1, 0, 0};
    for (int r = 0; r < 5; r++)
        assert_int_equal(counts[r], few[r]);
    assert_split_covers_(3, 5, counts, offsets);
}

static void test_split_weighted(void **state)
{
    (void)state;
    long counts[MAX_RANKS], offsets[MAX_RANKS];
    const double w82[2] = {0.8, 0.2};
    sampler_split(256, 2, w82, 2, counts, offsets);
    assert_int_equal(counts[0], 205); // 204.8 + the one leftover (largest remainder .8)
    assert_int_equal(counts[1], 51);  // 51.2
    assert_split_covers_(256, 2, counts, offsets);

    // Ties in the remainder go to the lower rank: 3 equal weights, 4 samples.
    const double w111[3] = {1, 1, 1};
    sampler_split(4, 3, w111, 3, counts, offsets);
    assert_int_equal(counts[0], 2);
    assert_int_equal(counts[1], 1);
    assert_int_equal(counts[2], 1);

    // Largest remainder, not lowest rank: 0.1/0.3/0.6 of 7 = 0.7, 2.1, 4.2.
    const double w136[3] = {0.1, 0.3, 0.6};
    sampler_split(7, 3, w136, 3, counts, offsets);
    assert_int_equal(counts[0], 1);
    assert_int_equal(counts[1], 2);
    assert_int_equal(counts[2], 4);

    // A zero weight gets nothing; unnormalised weights work the same.
    const double w0[3] = {2, 0, 6};
    sampler_split(9, 3, w0, 3, counts, offsets);
    assert_int_equal(counts[1], 0);
    assert_int_equal(counts[0], 2); // 2.25 -> 2
    assert_int_equal(counts[2], 7); // 6.75 -> 7
    assert_split_covers_(9, 3, counts, offsets);

    // Sums stay exact and every piece stays within 1 of its exact quota.
    const double wodd[5] = {0.37, 1.9, 0.01, 3.3, 0.42};
    double total = 0.37 + 1.9 + 0.01 + 3.3 + 0.42;
    for (long g = 0; g <= 600; g++) {
        sampler_split(g, 5, wodd, 5, counts, offsets);
        assert_split_covers_(g, 5, counts, offsets);
        for (int r = 0; r < 5; r++) {
            double quota = (double)g * wodd[r] / total;
            assert_true(counts[r] > quota - 1.0 && counts[r] < quota + 1.0);
        }
    }

    // Invalid weights (wrong count, negative, all zero) fall back to equal.
    const double neg[2] = {-1, 3}, zero[2] = {0, 0};
    sampler_split(5, 2, neg, 2, counts, offsets);
    assert_int_equal(counts[0], 3);
    sampler_split(5, 2, zero, 2, counts, offsets);
    assert_int_equal(counts[0], 3);
    sampler_split(5, 2, w82, 1, counts, offsets);
    assert_int_equal(counts[0], 3);
}

// ---- sampler ----

static void test_init_errors(void **state)
{
    (void)state;
    struct sampler s;
    const double w[2] = {1, 1};
    assert_int_equal(sampler_init(&s, 0, 4, 0, 1, 1, NULL, 0), VGPU_EINVAL);
    assert_int_equal(sampler_init(&s, 10, 0, 0, 1, 1, NULL, 0), VGPU_EINVAL);
    assert_int_equal(sampler_init(&s, 10, 4, 0, 1, 0, NULL, 0), VGPU_EINVAL);
    assert_int_equal(sampler_init(&s, 10, 4, 0, 1, 3, w, 2), VGPU_EINVAL); // nweights != nranks
    const double bad[2] = {1, -1};
    assert_int_equal(sampler_init(&s, 10, 4, 0, 1, 2, bad, 2), VGPU_EINVAL);
    // A batch bigger than the data set: no batch at all with drop_last ...
    assert_int_equal(sampler_init(&s, 10, 11, 1, 1, 2, NULL, 0), VGPU_EINVAL);
    sampler_free(&s);
    // ... one short batch without.
    assert_int_equal(sampler_init(&s, 10, 11, 0, 1, 2, NULL, 0), 0);
    assert_int_equal(sampler_batches_per_epoch(&s), 1);
    struct batch_slice b;
    assert_int_equal(sampler_next(&s, 0, &b), 1);
    assert_int_equal(b.global_count, 10);
    assert_int_equal(sampler_next(&s, 0, &b), 0);
    assert_int_equal(sampler_next(&s, 2, &b), VGPU_EINVAL);
    assert_int_equal(sampler_next(&s, -1, &b), VGPU_EINVAL);
    sampler_free(&s);
    sampler_free(&s);
    sampler_free(NULL);
}

// One sampler per "rank", all driven through one epoch: every rank sees the
// same global batch; the pieces are disjoint and cover it; over the epoch the
// batches cover the permutation in order.
static void run_epoch_(long n, long batch, int drop_last, int nranks, const double *weights,
                       int nweights, long want_batches, long want_tail)
{
    struct sampler s[MAX_RANKS];
    for (int r = 0; r < nranks; r++)
        assert_int_equal(sampler_init(&s[r], n, batch, drop_last, 99, nranks, weights, nweights),
                         0);
    assert_int_equal(sampler_batches_per_epoch(&s[0]), want_batches);
    uint32_t *perm = malloc((size_t)n * sizeof(uint32_t));
    unsigned char *used = calloc((size_t)n, 1);
    assert_non_null(perm);
    assert_non_null(used);
    sampler_permutation(perm, n, 99, 0);
    long at = 0, batches = 0;
    for (;;) {
        struct batch_slice b[MAX_RANKS];
        int more = sampler_next(&s[0], 0, &b[0]);
        for (int r = 1; r < nranks; r++)
            assert_int_equal(sampler_next(&s[r], r, &b[r]), more);
        if (!more)
            break;
        assert_int_equal(b[0].step_in_epoch, batches);
        assert_int_equal(b[0].epoch, 0);
        long covered = 0;
        for (int r = 0; r < nranks; r++) {
            // The divisor is the global batch on every rank, whatever its piece.
            assert_int_equal(b[r].global_count, b[0].global_count);
            assert_memory_equal(b[r].indices, b[0].indices,
                                (size_t)b[0].global_count * sizeof(uint32_t));
            assert_int_equal(b[r].offset, covered);
            covered += b[r].count;
            for (long k = b[r].offset; k < b[r].offset + b[r].count; k++) {
                uint32_t idx = b[r].indices[k];
                assert_int_equal(used[idx], 0); // disjoint across ranks and batches
                used[idx] = 1;
            }
        }
        assert_int_equal(covered, b[0].global_count);
        assert_memory_equal(b[0].indices, perm + at, (size_t)b[0].global_count * sizeof(uint32_t));
        at += b[0].global_count;
        batches++;
        long last = batches == want_batches;
        assert_int_equal(b[0].global_count, last && want_tail ? want_tail : batch);
    }
    assert_int_equal(batches, want_batches);
    long used_count = 0;
    for (long i = 0; i < n; i++)
        used_count += used[i];
    assert_int_equal(used_count, drop_last ? (n / batch) * batch : n);
    for (int r = 0; r < nranks; r++)
        sampler_free(&s[r]);
    free(perm);
    free(used);
}

static void test_epoch_equal_ranks(void **state)
{
    (void)state;
    run_epoch_(100, 32, 1, 4, NULL, 0, 3, 0);   // tail of 4 dropped
    run_epoch_(100, 32, 0, 4, NULL, 0, 4, 4);   // tail of 4 kept: one sample per rank
    run_epoch_(96, 32, 1, 4, NULL, 0, 3, 0);    // no tail either way
    run_epoch_(96, 32, 0, 4, NULL, 0, 3, 0);
    run_epoch_(101, 25, 0, 3, NULL, 0, 5, 1);   // tail of 1: ranks 1, 2 get nothing
    run_epoch_(7, 3, 0, 5, NULL, 0, 3, 1);      // more ranks than samples per batch
    run_epoch_(50, 50, 1, 1, NULL, 0, 1, 0);    // one rank, one batch
}

static void test_epoch_weighted(void **state)
{
    (void)state;
    const double w[2] = {0.8, 0.2};
    run_epoch_(1000, 256, 0, 2, w, 2, 4, 232);
    run_epoch_(1000, 256, 1, 2, w, 2, 3, 0);
    const double w3[3] = {1, 0, 3};
    run_epoch_(333, 10, 0, 3, w3, 3, 34, 3);

    // The 0.8/0.2 pieces of a full batch and of the tail.
    struct sampler s;
    struct batch_slice b;
    assert_int_equal(sampler_init(&s, 1000, 256, 0, 1, 2, w, 2), 0);
    assert_int_equal(sampler_next(&s, 1, &b), 1);
    assert_int_equal(b.global_count, 256);
    assert_int_equal(b.offset, 205);
    assert_int_equal(b.count, 51);
    sampler_set_position(&s, 0, 3);
    assert_int_equal(sampler_next(&s, 0, &b), 1);
    assert_int_equal(b.global_count, 232); // 185.6 / 46.4
    assert_int_equal(b.offset, 0);
    assert_int_equal(b.count, 186);
    sampler_free(&s);
}

static void test_epochs_differ(void **state)
{
    (void)state;
    struct sampler s;
    struct batch_slice b;
    assert_int_equal(sampler_init(&s, 64, 64, 1, 3, 1, NULL, 0), 0);
    assert_int_equal(sampler_next(&s, 0, &b), 1);
    uint32_t first[64];
    memcpy(first, b.indices, sizeof(first));
    assert_is_permutation_(first, 64);
    assert_int_equal(sampler_next(&s, 0, &b), 0); // end of epoch 0
    assert_int_equal(sampler_next(&s, 0, &b), 0); // and it stays there
    sampler_set_position(&s, 1, 0);
    assert_int_equal(sampler_next(&s, 0, &b), 1);
    assert_int_equal(b.epoch, 1);
    assert_is_permutation_(b.indices, 64);
    assert_memory_not_equal(first, b.indices, sizeof(first));
    sampler_free(&s);
}

// Resuming at (epoch, step) gives the batches an uninterrupted run gives,
// even with a different rank count (the global batches do not depend on it).
static void test_resume(void **state)
{
    (void)state;
    enum { n = 500, batch = 64 };
    struct sampler full, resumed;
    assert_int_equal(sampler_init(&full, n, batch, 0, 77, 2, NULL, 0), 0);
    assert_int_equal(sampler_init(&resumed, n, batch, 0, 77, 3, NULL, 0), 0);
    long per_epoch = sampler_batches_per_epoch(&full);
    assert_int_equal(per_epoch, 8);
    struct batch_slice b, c;
    long epoch = 0, seen = 0;
    // Run the full sampler through epochs 0..2, and compare from (1, 5) on.
    for (;;) {
        int more = sampler_next(&full, 1, &b);
        if (!more) {
            if (++epoch == 3)
                break;
            sampler_set_position(&full, epoch, 0);
            continue;
        }
        if (epoch == 1 && b.step_in_epoch == 5) {
            sampler_set_position(&resumed, 1, 5);
            assert_int_equal(sampler_epoch(&resumed), 1);
            assert_int_equal(sampler_step_in_epoch(&resumed), 5);
        }
        if (epoch > 1 || (epoch == 1 && b.step_in_epoch >= 5)) {
            int more2 = sampler_next(&resumed, 2, &c);
            if (!more2) {
                sampler_set_position(&resumed, sampler_epoch(&resumed) + 1, 0);
                more2 = sampler_next(&resumed, 2, &c);
            }
            assert_int_equal(more2, 1);
            assert_int_equal(c.epoch, b.epoch);
            assert_int_equal(c.step_in_epoch, b.step_in_epoch);
            assert_int_equal(c.global_count, b.global_count);
            assert_memory_equal(c.indices, b.indices, (size_t)b.global_count * sizeof(uint32_t));
            seen++;
        }
    }
    assert_int_equal(seen, 3 + 8);
    // Past the end of an epoch: nothing more until the next one.
    sampler_set_position(&resumed, 0, 99);
    assert_int_equal(sampler_next(&resumed, 0, &c), 0);
    sampler_free(&full);
    sampler_free(&resumed);
}

// Changing the shares mid-epoch: full batches and the epoch tail follow the
// new weights from the next batch on; nweights 0 goes back to equal; invalid
// weights are refused and change nothing.
// train.shuffle = false: every epoch batch i is rows [i*B, (i+1)*B) in
// file order, each rank's piece the contiguous part of it; the tail batch
// without drop_last; a resume mid-epoch on another rank count hands out the
// same rows; switching the shuffle back on gives the seeded permutation.
static void test_file_order(void **state)
{
    (void)state;
    enum { n = 103, batch = 10 };
    struct sampler s, resumed;
    assert_int_equal(sampler_init(&s, n, batch, 0, 77, 3, NULL, 0), 0);
    sampler_set_shuffle(&s, 0);
    struct batch_slice b, c;
    for (long epoch = 0; epoch < 3; epoch++) {
        sampler_set_position(&s, epoch, 0);
        long i = 0;
        for (; sampler_next(&s, 1, &b) == 1; i++) {
            assert_int_equal(b.epoch, epoch);
            assert_int_equal(b.step_in_epoch, i);
            assert_int_equal(b.global_count, i < n / batch ? batch : n % batch);
            for (long k = 0; k < b.global_count; k++)
                assert_int_equal(b.indices[k], (uint32_t)(i * batch + k));
            // Rank 1 of 3: the rows after rank 0's ceil(count / 3).
            assert_int_equal(b.offset, (b.global_count + 2) / 3);
        }
        assert_int_equal(i, (n + batch - 1) / batch);
    }
    // Resumed at batch 4 of epoch 1 on 2 ranks: the same rows on.
    assert_int_equal(sampler_init(&resumed, n, batch, 1, 77, 2, NULL, 0), 0);
    sampler_set_shuffle(&resumed, 0);
    sampler_set_position(&resumed, 1, 4);
    assert_int_equal(sampler_next(&resumed, 0, &c), 1);
    assert_int_equal(c.step_in_epoch, 4);
    for (long k = 0; k < batch; k++)
        assert_int_equal(c.indices[k], (uint32_t)(40 + k));
    // The shuffle back on: the seeded permutation, not the file order kept.
    uint32_t *perm = malloc(n * sizeof(uint32_t));
    assert_non_null(perm);
    sampler_permutation(perm, n, 77, 1);
    sampler_set_shuffle(&resumed, 1);
    sampler_set_position(&resumed, 1, 0);
    assert_int_equal(sampler_next(&resumed, 0, &c), 1);
    assert_memory_equal(c.indices, perm, batch * sizeof(uint32_t));
    free(perm);
    sampler_free(&s);
    sampler_free(&resumed);
}

static void test_set_weights(void **state)
{
    (void)state;
    struct sampler s[2];
    struct batch_slice b[2];
    for (int r = 0; r < 2; r++)
        assert_int_equal(sampler_init(&s[r], 1000, 256, 0, 5, 2, NULL, 0), 0);
    // Batch 0 under the equal split.
    for (int r = 0; r < 2; r++) {
        assert_int_equal(sampler_next(&s[r], r, &b[r]), 1);
        assert_int_equal(b[r].count, 128);
        assert_int_equal(b[r].offset, 128 * r);
    }
    const double w[2] = {200, 56};
    for (int r = 0; r < 2; r++)
        assert_int_equal(sampler_set_weights(&s[r], w, 2), 0);
    // Batch 1: 200 / 56, contiguous.
    for (int r = 0; r < 2; r++)
        assert_int_equal(sampler_next(&s[r], r, &b[r]), 1);
    assert_int_equal(b[0].step_in_epoch, 1);
    assert_int_equal(b[0].global_count, 256);
    assert_int_equal(b[0].offset, 0);
    assert_int_equal(b[0].count, 200);
    assert_int_equal(b[1].offset, 200);
    assert_int_equal(b[1].count, 56);

    // Invalid weights: refused, the 200 / 56 split stays in force.
    const double neg[2] = {300, -44}, zero[2] = {0, 0}, nan2[2] = {NAN, 1};
    const double three[3] = {1, 1, 1};
    for (int r = 0; r < 2; r++) {
        assert_int_equal(sampler_set_weights(&s[r], neg, 2), VGPU_EINVAL);
        assert_int_equal(sampler_set_weights(&s[r], zero, 2), VGPU_EINVAL);
        assert_int_equal(sampler_set_weights(&s[r], nan2, 2), VGPU_EINVAL);
        assert_int_equal(sampler_set_weights(&s[r], three, 3), VGPU_EINVAL);
        assert_int_equal(sampler_set_weights(&s[r], w, 1), VGPU_EINVAL);
        assert_int_equal(sampler_set_weights(&s[r], NULL, 2), VGPU_EINVAL);
    }
    for (int r = 0; r < 2; r++)
        assert_int_equal(sampler_next(&s[r], r, &b[r]), 1);
    assert_int_equal(b[0].step_in_epoch, 2);
    assert_int_equal(b[0].count, 200);
    assert_int_equal(b[1].offset, 200);
    assert_int_equal(b[1].count, 56);

    // The epoch tail (1000 - 3 * 256 = 232) is split 200:56 too: 181.25 / 50.75.
    for (int r = 0; r < 2; r++)
        assert_int_equal(sampler_next(&s[r], r, &b[r]), 1);
    assert_int_equal(b[0].step_in_epoch, 3);
    assert_int_equal(b[0].global_count, 232);
    assert_int_equal(b[0].offset, 0);
    assert_int_equal(b[0].count, 181);
    assert_int_equal(b[1].offset, 181);
    assert_int_equal(b[1].count, 51);
    assert_int_equal(b[0].count + b[1].count, b[0].global_count);
    for (int r = 0; r < 2; r++)
        assert_int_equal(sampler_next(&s[r], r, &b[r]), 0);

    // nweights 0: back to the equal split, from the next epoch's first batch.
    for (int r = 0; r < 2; r++) {
        assert_int_equal(sampler_set_weights(&s[r], NULL, 0), 0);
        sampler_set_position(&s[r], 1, 0);
        assert_int_equal(sampler_next(&s[r], r, &b[r]), 1);
        assert_int_equal(b[r].epoch, 1);
        assert_int_equal(b[r].count, 128);
        assert_int_equal(b[r].offset, 128 * r);
    }
    // Weights on a sampler that started weighted replace the old ones.
    for (int r = 0; r < 2; r++)
        sampler_free(&s[r]);
    const double w82[2] = {0.8, 0.2};
    assert_int_equal(sampler_init(&s[0], 1000, 256, 0, 5, 2, w82, 2), 0);
    assert_int_equal(sampler_next(&s[0], 0, &b[0]), 1);
    assert_int_equal(b[0].count, 205);
    assert_int_equal(sampler_set_weights(&s[0], w, 2), 0);
    assert_int_equal(sampler_next(&s[0], 1, &b[1]), 1);
    assert_int_equal(b[1].offset, 200);
    assert_int_equal(b[1].count, 56);
    assert_int_equal(sampler_set_weights(&s[0], zero, 2), VGPU_EINVAL);
    assert_int_equal(sampler_next(&s[0], 1, &b[1]), 1);
    assert_int_equal(b[1].count, 56);
    sampler_free(&s[0]);
    sampler_free(&s[0]);

    // Pieces stay disjoint and cover the epoch while the weights change every
    // batch (one sampler per rank, all making the same calls).
    struct sampler t[3];
    for (int r = 0; r < 3; r++)
        assert_int_equal(sampler_init(&t[r], 777, 50, 0, 9, 3, NULL, 0), 0);
    unsigned char seen[777] = {0};
    long total = 0;
    for (long step = 0;; step++) {
        const double wv[3] = {1 + step % 3, (double)(step % 2), 0.5 + (double)(step % 5)};
        struct batch_slice p[3];
        int more = 0;
        for (int r = 0; r < 3; r++) {
            assert_int_equal(sampler_set_weights(&t[r], wv, 3), 0);
            more = sampler_next(&t[r], r, &p[r]);
        }
        if (!more)
            break;
        long at = 0;
        for (int r = 0; r < 3; r++) {
            assert_int_equal(p[r].step_in_epoch, step);
            assert_int_equal(p[r].offset, at);
            if (wv[1] == 0 && r == 1)
                assert_int_equal(p[r].count, 0);
            for (long k = p[r].offset; k < p[r].offset + p[r].count; k++) {
                assert_int_equal(seen[p[r].indices[k]], 0);
                seen[p[r].indices[k]] = 1;
            }
            at += p[r].count;
        }
        assert_int_equal(at, p[0].global_count);
        total += at;
    }
    assert_int_equal(total, 777);
    for (int r = 0; r < 3; r++)
        sampler_free(&t[r]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permutation),
        cmocka_unit_test(test_epoch_orders_uniform),
        cmocka_unit_test(test_split_equal),
        cmocka_unit_test(test_split_weighted),
        cmocka_unit_test(test_init_errors),
        cmocka_unit_test(test_epoch_equal_ranks),
        cmocka_unit_test(test_epoch_weighted),
        cmocka_unit_test(test_epochs_differ),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_file_order),
        cmocka_unit_test(test_set_weights),
    };
    return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
