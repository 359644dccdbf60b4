// balance.c: dynamic split of each global batch by measured rank speed (see balance.h).
#include "balance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

long balance_max_rows(long global_batch, int nranks, const long *initial)
{
    if (global_batch < 1 || nranks < 1)
        return 0;
    long equal = (global_batch + nranks - 1) / nranks, most = 2 * equal;
    for (int r = 0; initial && r < nranks; r++)
        most = initial[r] > most ? initial[r] : most;
    return most < global_batch ? most : global_batch;
}

int balance_init(struct balancer *b, int nranks, long global_batch, const long *initial)
{
    memset(b, 0, sizeof *b);
    if (nranks < 1 || global_batch < 1 || !initial)
        return VGPU_EINVAL;
    b->nranks = nranks;
    b->global_batch = global_batch;
    b->max_rows = balance_max_rows(global_batch, nranks, initial);
    b->min_rows = (global_batch + nranks - 1) / nranks / 4;
    b->rate = calloc((size_t)nranks, sizeof *b->rate);
    b->fixed = calloc((size_t)nranks, sizeof *b->fixed);
    b->counts = calloc((size_t)nranks, sizeof *b->counts);
    b->target = calloc((size_t)nranks, sizeof *b->target);
    if (!b->rate || !b->fixed || !b->counts || !b->target) {
        balance_free(b);
        return VGPU_ENOMEM;
    }
    // The starting split may sit below the floor (a weight of 0.01): lower
    // it, but keep every rank at least one row when the batch allows, or a
    // rank left with none could never be measured again.
    long sum = 0, least = global_batch;
    for (int r = 0; r < nranks; r++) {
        least = initial[r] < least ? initial[r] : least;
        sum += initial[r];
    }
    b->min_rows = least < b->min_rows ? least : b->min_rows;
    if (b->min_rows < 1 && global_batch >= nranks)
        b->min_rows = 1;
    if (least < 0 || sum != global_batch) {
        balance_free(b);
        return VGPU_EINVAL;
    }
    memcpy(b->counts, initial, (size_t)nranks * sizeof *initial); // may hold a 0 piece
    return 0;
}

void balance_free(struct balancer *b)
{
    if (!b)
        return;
    free(b->rate);
    free(b->fixed);
    free(b->counts);
    free(b->target);
    b->rate = b->fixed = b->target = NULL;
    b->counts = NULL;
}

int balance_set_fixed(struct balancer *b, const double *seconds)
{
    for (int r = 0; r < b->nranks; r++)
        if (!(seconds[r] >= 0) || !isfinite(seconds[r]))
            return VGPU_EINVAL;
    memcpy(b->fixed, seconds, (size_t)b->nranks * sizeof *seconds);
    return 0;
}

int balance_adopt(struct balancer *b, const long *counts)
{
    long sum = 0;
    for (int r = 0; r < b->nranks; r++) {
        if (counts[r] < b->min_rows || counts[r] > b->max_rows)
            return VGPU_EINVAL;
        sum += counts[r];
    }
    if (sum != b->global_batch)
        return VGPU_EINVAL;
    memcpy(b->counts, counts, (size_t)b->nranks * sizeof *counts);
    return 0;
}

// How long a step of split `c` takes by the current estimates: the slowest rank's time.
static double step_time_(const struct balancer *b, const long *c)
{
    double worst = 0;
    for (int r = 0; r < b->nranks; r++)
        worst = fmax(worst, b->fixed[r] + (double)c[r] / b->rate[r]);
    return worst;
}

// Real-valued shares that give the free ranks one step time T (x[r] =
// (T - fixed[r]) * rate[r], summing to what the held ranks leave), within
// [min_rows, max_rows] (water-filling): a rank pushed over a bound is held at
// it and the others share what is left, until no free rank crosses a bound.
// Without fixed costs the shares are proportional to the rates.
static void shares_(struct balancer *b, double *x)
{
    const int n = b->nranks;
    char *held = calloc((size_t)n, 1);
    for (int round = 0; round <= n; round++) {
        double left = (double)b->global_batch, rates = 0, fixed_rows = 0;
        for (int r = 0; r < n; r++) {
            if (held && held[r]) {
                left -= x[r];
            } else {
                rates += b->rate[r];
                fixed_rows += b->fixed[r] * b->rate[r]; // rows rank r could do in its fixed time
            }
        }
        if (rates <= 0)
            break;
        int over = 0, under = 0;
        for (int r = 0; r < n; r++) {
            if (held && held[r])
                continue;
            x[r] = (left + fixed_rows) * b->rate[r] / rates - b->fixed[r] * b->rate[r];
            over |= x[r] > (double)b->max_rows;
            under |= x[r] < (double)b->min_rows;
        }
        if (!held || (!over && !under))
            break;
        // Hold the ranks over the top first (the rows they give up raise the
        // others' shares), then, once none is over, those under the floor.
        for (int r = 0; r < n; r++) {
            if (held[r])
                continue;
            if (over && x[r] > (double)b->max_rows) {
                x[r] = (double)b->max_rows;
                held[r] = 1;
            } else if (!over && x[r] < (double)b->min_rows) {
                x[r] = (double)b->min_rows;
                held[r] = 1;
            }
        }
    }
    free(held);
}

// Whole rows from the real shares x: floors within the bounds, then single
// rows to the largest remainders (or from the smallest) until the sum is exact.
static void round_(const struct balancer *b, const double *x, long *c)
{
    const int n = b->nranks;
    long sum = 0;
    for (int r = 0; r < n; r++) {
        double f = floor(x[r]);
        c[r] = f < (double)b->min_rows ? b->min_rows : f > (double)b->max_rows ? b->max_rows : (long)f;
        sum += c[r];
    }
    for (long diff = b->global_batch - sum; diff != 0; diff += diff > 0 ? -1 : 1) {
        int best = -1;
        for (int r = 0; r < n; r++) {
            int room = diff > 0 ? c[r] < b->max_rows : c[r] > b->min_rows;
            double rem = x[r] - (double)c[r], best_rem = best < 0 ? 0 : x[best] - (double)c[best];
            if (room && (best < 0 || (diff > 0 ? rem > best_rem : rem < best_rem)))
                best = r;
        }
        if (best < 0) // cannot happen: n * min_rows <= global_batch <= n * max_rows
            break;
        c[best] += diff > 0 ? 1 : -1;
    }
}

int balance_propose(struct balancer *b, const double *rows, const double *seconds, long *proposal)
{
    const int n = b->nranks;
    memcpy(proposal, b->counts, (size_t)n * sizeof *proposal);
    int known = 0;
    double known_sum = 0;
    for (int r = 0; r < n; r++) {
        if (rows[r] > 0 && seconds[r] > 0 && isfinite(rows[r] / seconds[r])) {
            double now = rows[r] / seconds[r];
            b->rate[r] = b->rate[r] > 0 ? (1 - BALANCE_ALPHA) * b->rate[r] + BALANCE_ALPHA * now : now;
        }
        known += b->rate[r] > 0;
        known_sum += b->rate[r];
    }
    if (known == 0)
        return 0;
    // A rank never measured (it had no rows) starts from the others' mean, so
    // it gets rows and is measured from then on.
    for (int r = 0; r < n && known < n; r++)
        if (!(b->rate[r] > 0))
            b->rate[r] = known_sum / known;
    shares_(b, b->target);
    round_(b, b->target, proposal);
    if (step_time_(b, proposal) < (1 - BALANCE_MIN_GAIN) * step_time_(b, b->counts))
        return 1;
    memcpy(proposal, b->counts, (size_t)n * sizeof *proposal);
    return 0;
}
