// sampler.h: data-parallel batch sampling: an epoch-seeded shuffle (or the
// file order) that every rank computes identically, each global batch split
// into disjoint per-rank pieces.
#ifndef VGPU_SAMPLER_H
#define VGPU_SAMPLER_H

#include <stdint.h>

// One rank's view of one global batch.
struct batch_slice {
    long global_count;       // samples in this global batch: the gradient divisor on every rank
    long offset, count;      // this rank's piece: batch positions [offset, offset + count);
                             // count may be 0
    const uint32_t *indices; // dataset indices of the WHOLE global batch (global_count entries);
                             // owned by the sampler, valid until its next call
    long epoch;              // epoch the batch belongs to
    long step_in_epoch;      // 0-based batch index within the epoch
};

// Caller-owned; fields are private to sampler.c (read them through the functions).
struct sampler {
    long n_samples;     // dataset size, samples (< 2^32: indices are uint32_t)
    long global_batch;  // samples per full global batch
    int drop_last;      // 1: drop the incomplete last batch of an epoch
    uint64_t seed;      // shuffle seed (train.seed)
    int shuffle;        // 1: each epoch a permutation of (seed, epoch); 0: file order
    int nranks;         // ranks sharing each batch
    double *weights;    // [nranks] shares of each batch, owned; NULL = equal split
    long epoch;         // current position: epoch ...
    long step;          // ... and batches of it already handed out
    long perm_epoch;    // epoch whose permutation `perm` holds; -1 = none yet
    uint32_t *perm;     // [n_samples] the dataset indices of perm_epoch, in order, owned
    long *counts;       // [nranks] scratch: piece sizes of the current batch, owned
    long *offsets;      // [nranks] scratch: piece starts of the current batch, owned
};

// Prepares s for a dataset of n_samples. weights[nweights]: per-rank shares
// (>= 0, finite, not all 0); nweights 0 means an equal split, otherwise it
// must equal nranks. Returns 0; VGPU_EINVAL for bad arguments, including
// global_batch > n_samples with drop_last (an epoch would hold no batch);
// VGPU_ENOMEM. Starts at epoch 0, step 0. On error s needs no sampler_free
// (calling it is harmless).
int sampler_init(struct sampler *s, long n_samples, long global_batch, int drop_last,
                 uint64_t seed, int nranks, const double *weights, int nweights);

// shuffle 1 (sampler_init's choice): each epoch takes the rows in the order
// of sampler_permutation(seed, epoch); 0: in file order, every epoch (batch
// i of an epoch is rows [i*B, (i+1)*B)), so that a program outside can
// reproduce the data order. Every rank must make the same call before its
// first sampler_next.
void sampler_set_shuffle(struct sampler *s, int shuffle);

// Replaces the per-rank shares from the next batch on (same rules as
// sampler_init's weights; nweights 0 = equal split). Every rank must make the
// same call at the same step. Returns 0, VGPU_EINVAL or VGPU_ENOMEM (then the
// shares are unchanged).
int sampler_set_weights(struct sampler *s, const double *weights, int nweights);

// Releases what sampler_init allocated; NULL-safe and idempotent.
void sampler_free(struct sampler *s);

// Global batches per epoch: floor(n / B) with drop_last, else ceil(n / B).
long sampler_batches_per_epoch(const struct sampler *s);

// Moves to batch `step_in_epoch` of `epoch` (for resume; the order depends
// only on (seed, epoch) and the shuffle, so the rank count may differ from
// the run that saved the position). A step at or past the end makes the next
// sampler_next return 0.
void sampler_set_position(struct sampler *s, long epoch, long step_in_epoch);

// The position the next sampler_next call starts from (what a checkpoint stores).
long sampler_epoch(const struct sampler *s);
long sampler_step_in_epoch(const struct sampler *s);

// Hands out the next global batch and rank `rank`'s piece of it: returns 1
// and fills *out; 0 at the end of the epoch (then call
// sampler_set_position(s, epoch + 1, 0)); VGPU_EINVAL for a rank outside
// [0, nranks). Every rank must make the same sequence of calls.
int sampler_next(struct sampler *s, int rank, struct batch_slice *out);

// The dataset-index permutation of `epoch`: a pure function of (seed, epoch),
// Fisher-Yates driven by rng_below on a stream derived from the epoch.
// perm holds n entries. Exposed for tests and tools.
void sampler_permutation(uint32_t *perm, long n, uint64_t seed, long epoch);

// Splits global_count samples over nranks into contiguous pieces: counts[r]
// samples starting at offsets[r], in rank order, summing exactly to
// global_count. nweights 0 (or invalid weights: wrong count, negative, not
// finite, all zero): equal split, sizes differing by at most 1, lower ranks
// getting the extra. Otherwise proportional to weights by the largest-remainder
// method, ties going to the lower rank. Pure and deterministic.
void sampler_split(long global_count, int nranks, const double *weights, int nweights,
                   long *counts, long *offsets);

#endif
