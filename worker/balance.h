// balance.h: dynamic load balancing of each global batch across the ranks.
//
// A synchronous step lasts as long as its slowest rank. When the ranks run at
// different speeds (unequal GPUs, slices of one GPU with other tenants, the
// vCPUs of a virtual machine, which here drift between 1x and 2.4x of each
// other for tenths of a second at a time), moving samples from slow ranks to
// fast ones shortens the step. The gradient is still the mean over the same
// global batch; only which rank sums which samples changes.
//
// The balancer is arithmetic on measurements every rank has (rows computed
// and compute seconds per rank over an interval of steps, summed over the
// ranks by the trainer). One rank proposes a split and every rank adopts the
// proposal it receives, so all agree even if their arithmetic differed.
//
// A rank's step is modelled as fixed[r] + rows / rate[r]: a cost per step
// that does not grow with rows (kernel launches, per-call overheads; measured
// once at start by the trainer) plus a per-row cost. Without the fixed part
// a small share looks slow (its rows per second are low) and the split moves
// toward the right one only over many exchanges.
#ifndef VGPU_BALANCE_H
#define VGPU_BALANCE_H

// Smoothing weight of a new interval's speed against the running estimate.
#define BALANCE_ALPHA 0.5
// A new split must promise a step at least this much shorter (fraction), so
// measurement noise does not move samples back and forth.
#define BALANCE_MIN_GAIN 0.03

struct balancer {
    int nranks;
    long global_batch;
    long min_rows, max_rows; // bounds on a rank's piece of a full batch
    double *rate;            // [nranks] smoothed rows per second of the per-row part; 0 = not measured yet
    double *fixed;           // [nranks] seconds per step that do not grow with rows (0 until set)
    long *counts;            // [nranks] the split in force for a full batch
    double *target;          // [nranks] scratch
};

// The most rows a rank may be given: twice an equal share, or the largest
// piece of the starting split if that is more, and never over the batch.
// Device buffers are sized for it.
long balance_max_rows(long global_batch, int nranks, const long *initial);

// Starts from the split `initial[nranks]` (summing to global_batch; e.g. the
// equal or train.batch_weights split). A rank keeps at least a quarter of an
// equal share so its speed stays measured: lower if the starting split gives
// it less, but at least one row while the batch has a row for every rank.
// Returns 0, VGPU_EINVAL or VGPU_ENOMEM.
int balance_init(struct balancer *b, int nranks, long global_batch, const long *initial);
void balance_free(struct balancer *b);

// Sets every rank's fixed cost per step, seconds[nranks], each finite and
// >= 0. Returns 0 or VGPU_EINVAL (nothing changed).
int balance_set_fixed(struct balancer *b, const double *seconds);

// Takes one interval's measurements (rank r computed rows[r] samples in
// seconds[r] of per-row work, its fixed costs already taken off; ranks without
// a sample keep their estimate) and writes the split it proposes into
// proposal[nranks]: the split that equalises fixed[r] + rows / rate[r] as far
// as [min_rows, max_rows] allow, summing to global_batch. Returns 1 if the
// proposal predicts a step at least BALANCE_MIN_GAIN shorter than the split in
// force; else 0 and proposal is the split in force.
int balance_propose(struct balancer *b, const double *rows, const double *seconds, long *proposal);

// Makes counts[nranks] the split in force. Returns VGPU_EINVAL (and changes
// nothing) unless it sums to global_batch within the bounds.
int balance_adopt(struct balancer *b, const long *counts);

#endif
