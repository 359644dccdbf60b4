// train_balance.c: train.balance = dynamic in a run: each rank's fixed cost
// per step, measured at warm-up, and the periodic exchange of speeds and
// splits (which also carries the stop-signal vote). The policy itself is
// balance.c's (pure).
#include "train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "preempt.h"

int train_balance_prepare(struct trainer *t)
{
    struct trainer_balance *b = &t->balance;
    const struct train_config *cfg = t->cfg;
    // train_config_validate rules out dynamic balance in deterministic mode.
    b->on = cfg->train.balance == BALANCE_DYNAMIC;
    if (!b->on)
        return 0;
    const int n = t->job->size;
    long counts[TRAIN_MAX_RANKS], offsets[TRAIN_MAX_RANKS];
    sampler_split(cfg->train.batch_size, n, cfg->train.batch_weights.v,
                  cfg->train.batch_weights.count, counts, offsets);
    TRY(balance_init(&b->balancer, n, cfg->train.batch_size, counts));
    b->exchange = calloc(2 + 3 * (size_t)n, sizeof *b->exchange);
    b->proposal = calloc((size_t)n, sizeof *b->proposal);
    b->rows_total = calloc((size_t)n, sizeof *b->rows_total);
    if (!b->exchange || !b->proposal || !b->rows_total)
        return VGPU_ENOMEM;
    // The sampler takes its weights from the split in force from now on: set
    // them once here, so adopting a split never needs an allocation.
    for (int r = 0; r < n; r++)
        b->exchange[r] = (double)counts[r];
    return sampler_set_weights(&t->sampler, b->exchange, n);
}

void train_balance_free(struct trainer *t)
{
    struct trainer_balance *b = &t->balance;
    if (!b->on)
        return;
    balance_free(&b->balancer);
    free(b->exchange);
    free(b->proposal);
    free(b->rows_total);
}

void train_balance_count(struct trainer *t, double seconds, long rows)
{
    struct trainer_balance *b = &t->balance;
    b->busy_s += seconds;
    b->busy_rows += (double)rows;
    b->busy_steps++;
}

// One step's compute on training samples first[0..rows), timed as a step's is.
static int timed_pass_(struct trainer *t, const uint32_t *first, long rows, double *seconds)
{
    double stats[MODEL_MAX_STATS] = {0};
    return train_compute_rows(t, first, rows, 1.0f, NULL, stats, 1, seconds);
}

// The compute per step that does not grow with rows (launches, per-call
// overheads), read off the line through the best of three timed passes at
// `rows` (the equal share) and at a quarter of them. Kept to three quarters of the
// smaller pass, so noise cannot claim all of a step.
int train_balance_measure(struct trainer *t, const uint32_t *first, long rows)
{
    struct trainer_balance *b = &t->balance;
    double fixed = 0;
    const long small = rows / 4;
    if (small >= 1) {
        double best[2] = {INFINITY, INFINITY};
        for (int rep = 0; rep < 3; rep++)
            for (int k = 0; k < 2; k++) {
                double s;
                TRY(timed_pass_(t, first, k ? small : rows, &s));
                best[k] = fmin(best[k], s);
            }
        const double per_row = (best[0] - best[1]) / (double)(rows - small);
        const double f = best[1] - per_row * (double)small;
        fixed = f > 0 ? fmin(f, 0.75 * best[1]) : 0;
    }
    const int n = t->job->size;
    memset(b->exchange, 0, (size_t)n * sizeof *b->exchange);
    b->exchange[t->job->rank] = fixed;
    job_sum_doubles(t->job, b->exchange, n);
    b->fixed_s = fixed;
    return balance_set_fixed(&b->balancer, b->exchange);
}

// Under dynamic balance one control-plane sum carries the stop-signal vote,
// each rank's compute time and rows since the last exchange, and the split
// rank 0 announces, which every rank adopts for the following steps; rank 0
// then proposes the next split from the speeds. Slots: [0] signals, [1 + r]
// rank r's seconds, [1 + N + r] its rows, [1 + 2N + r] the announced split,
// [1 + 3N] 1 if there is one. Each slot has one contributor, so the sums are
// exact.
int train_exchange(struct trainer *t)
{
    struct trainer_balance *b = &t->balance;
    if (!b->on) {
        int verdict = job_agree_min(t->job, preempt_requested() ? VGPU_EPREEMPTED : 0);
        return verdict == VGPU_EPREEMPTED ? 1 : verdict;
    }
    const int n = t->job->size, me = t->job->rank;
    double *x = b->exchange, *seconds = x + 1, *rows = x + 1 + n, *split = x + 1 + 2 * n;
    const int slots = 2 + 3 * n;
    memset(x, 0, (size_t)slots * sizeof *x);
    x[0] = preempt_requested() ? 1 : 0;
    // The per-row part of the compute: each step's fixed cost comes off (at
    // least a quarter of the time stays, in case the fixed cost was measured high).
    seconds[me] = fmax(b->busy_s - (double)b->busy_steps * b->fixed_s, 0.25 * b->busy_s);
    rows[me] = b->busy_rows;
    if (me == 0 && b->proposing) {
        for (int r = 0; r < n; r++)
            split[r] = (double)b->proposal[r];
        split[n] = 1;
    }
    b->busy_s = b->busy_rows = 0;
    b->busy_steps = 0;
    job_sum_doubles(t->job, x, slots);
    if (split[n] > 0) {
        long counts[TRAIN_MAX_RANKS];
        for (int r = 0; r < n; r++)
            counts[r] = (long)split[r];
        // Same numbers and bounds on every rank: all adopt, or none.
        if (balance_adopt(&b->balancer, counts) == 0)
            TRY(sampler_set_weights(&t->sampler, split, n));
    }
    if (me == 0) {
        for (int r = 0; r < n; r++)
            b->rows_total[r] += rows[r];
        b->proposing = balance_propose(&b->balancer, rows, seconds, b->proposal);
    }
    return x[0] > 0;
}
