// sampler.c: epoch shuffles and per-rank batch pieces (see sampler.h for the semantics).
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "status.h"

// The shuffle's rng streams carry this tag in the top byte, apart from the
// synthetic data's streams (dataset.c), so one train.seed can drive both.
#define SAMPLER_STREAM_TAG (0x5Aull << 56)

// ---- split ----

static int weights_valid_(int nranks, const double *weights, int nweights)
{
    if (nweights == 0 || nweights != nranks || !weights)
        return 0;
    double total = 0.0;
    for (int r = 0; r < nranks; r++) {
        if (!isfinite(weights[r]) || weights[r] < 0.0)
            return 0;
        total += weights[r];
    }
    return total > 0.0 && isfinite(total);
}

// The exact share of rank r. Recomputed rather than stored so that the split
// needs no scratch memory; the same expression gives the same bits each time.
static double quota_(long global_count, const double *weights, int r, double total)
{
    return (double)global_count * weights[r] / total;
}

static void split_weighted_(long global_count, int nranks, const double *weights, long *counts,
                            long *taken)
{
    double total = 0.0;
    for (int r = 0; r < nranks; r++)
        total += weights[r];
    long sum = 0;
    for (int r = 0; r < nranks; r++) {
        double q = floor(quota_(global_count, weights, r, total));
        counts[r] = q < 0.0 ? 0 : q > (double)global_count ? global_count : (long)q;
        sum += counts[r];
        taken[r] = 0;
    }
    // Largest remainders get the leftover samples, one each; ties go to the
    // lower rank (strict comparison in rank order). A zero-weight rank never
    // gets one. Rounding error may in principle leave the floors a sample
    // over the total: then the smallest remainders give one back.
    long deficit = global_count - sum;
    while (deficit != 0) {
        int best = -1;
        double best_frac = 0.0;
        for (int r = 0; r < nranks; r++) {
            if (taken[r] || weights[r] == 0.0 || (deficit < 0 && counts[r] == 0))
                continue;
            double q = quota_(global_count, weights, r, total);
            double frac = q - floor(q);
            if (best < 0 || (deficit > 0 ? frac > best_frac : frac <= best_frac)) {
                best = r;
                best_frac = frac;
            }
        }
        if (best < 0) { // every eligible rank had its turn: start another round
            for (int r = 0; r < nranks; r++)
                taken[r] = 0;
            continue;
        }
        taken[best] = 1;
        counts[best] += deficit > 0 ? 1 : -1;
        deficit += deficit > 0 ? -1 : 1;
    }
}

void sampler_split(long global_count, int nranks, const double *weights, int nweights,
                   long *counts, long *offsets)
{
    if (nranks <= 0)
        return;
    if (global_count < 0)
        global_count = 0;
    if (weights_valid_(nranks, weights, nweights)) {
        split_weighted_(global_count, nranks, weights, counts, offsets /* as scratch */);
    } else {
        long base = global_count / nranks, extra = global_count % nranks;
        for (int r = 0; r < nranks; r++)
            counts[r] = base + (r < extra ? 1 : 0);
    }
    long at = 0;
    for (int r = 0; r < nranks; r++) {
        offsets[r] = at;
        at += counts[r];
    }
}

// ---- permutation ----

void sampler_permutation(uint32_t *perm, long n, uint64_t seed, long epoch)
{
    rng_t r;
    rng_init(&r, seed, SAMPLER_STREAM_TAG | (uint64_t)epoch);
    for (long i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    // Fisher-Yates from the top: integer-only, so every rank and every
    // machine gets the same bits.
    for (long i = n - 1; i > 0; i--) {
        uint32_t j = rng_below(&r, (uint32_t)(i + 1));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

// ---- sampler ----

int sampler_init(struct sampler *s, long n_samples, long global_batch, int drop_last,
                 uint64_t seed, int nranks, const double *weights, int nweights)
{
    memset(s, 0, sizeof(*s));
    s->perm_epoch = -1;
    if (n_samples < 1 || (unsigned long)n_samples > UINT32_MAX || global_batch < 1 || nranks < 1)
        return VGPU_EINVAL;
    if (drop_last && global_batch > n_samples)
        return VGPU_EINVAL;
    if (nweights != 0 && !weights_valid_(nranks, weights, nweights))
        return VGPU_EINVAL;
    s->n_samples = n_samples;
    s->global_batch = global_batch;
    s->drop_last = drop_last ? 1 : 0;
    s->seed = seed;
    s->shuffle = 1;
    s->nranks = nranks;
    s->perm = malloc((size_t)n_samples * sizeof(*s->perm));
    s->counts = malloc((size_t)nranks * sizeof(*s->counts));
    s->offsets = malloc((size_t)nranks * sizeof(*s->offsets));
    if (nweights) {
        s->weights = malloc((size_t)nranks * sizeof(*s->weights));
        if (s->weights)
            memcpy(s->weights, weights, (size_t)nranks * sizeof(*s->weights));
    }
    if (!s->perm || !s->counts || !s->offsets || (nweights && !s->weights)) {
        sampler_free(s);
        return VGPU_ENOMEM;
    }
    return 0;
}

void sampler_set_shuffle(struct sampler *s, int shuffle)
{
    s->shuffle = shuffle ? 1 : 0;
    s->perm_epoch = -1; // the order held may be the other one
}

int sampler_set_weights(struct sampler *s, const double *weights, int nweights)
{
    if (nweights == 0) {
        free(s->weights);
        s->weights = NULL;
        return 0;
    }
    if (!weights_valid_(s->nranks, weights, nweights))
        return VGPU_EINVAL;
    if (!s->weights && !(s->weights = malloc((size_t)s->nranks * sizeof(*s->weights))))
        return VGPU_ENOMEM;
    memcpy(s->weights, weights, (size_t)s->nranks * sizeof(*s->weights));
    return 0;
}

void sampler_free(struct sampler *s)
{
    if (!s)
        return;
    free(s->perm);
    free(s->counts);
    free(s->offsets);
    free(s->weights);
    s->perm = NULL;
    s->counts = s->offsets = NULL;
    s->weights = NULL;
    s->perm_epoch = -1;
}

long sampler_batches_per_epoch(const struct sampler *s)
{
    if (s->global_batch < 1)
        return 0;
    if (s->drop_last)
        return s->n_samples / s->global_batch;
    return (s->n_samples + s->global_batch - 1) / s->global_batch;
}

void sampler_set_position(struct sampler *s, long epoch, long step_in_epoch)
{
    s->epoch = epoch < 0 ? 0 : epoch;
    s->step = step_in_epoch < 0 ? 0 : step_in_epoch;
}

long sampler_epoch(const struct sampler *s) { return s->epoch; }

long sampler_step_in_epoch(const struct sampler *s) { return s->step; }

int sampler_next(struct sampler *s, int rank, struct batch_slice *out)
{
    if (rank < 0 || rank >= s->nranks || !s->perm)
        return VGPU_EINVAL;
    if (s->step >= sampler_batches_per_epoch(s))
        return 0;
    if (s->perm_epoch != s->epoch) {
        if (s->shuffle)
            sampler_permutation(s->perm, s->n_samples, s->seed, s->epoch);
        else
            for (long i = 0; i < s->n_samples; i++)
                s->perm[i] = (uint32_t)i;
        s->perm_epoch = s->epoch;
    }
    long start = s->step * s->global_batch;
    long left = s->n_samples - start;
    long global_count = left < s->global_batch ? left : s->global_batch;
    sampler_split(global_count, s->nranks, s->weights, s->weights ? s->nranks : 0, s->counts,
                  s->offsets);
    out->global_count = global_count;
    out->offset = s->offsets[rank];
    out->count = s->counts[rank];
    out->indices = s->perm + start;
    out->epoch = s->epoch;
    out->step_in_epoch = s->step;
    s->step++;
    return 1;
}
