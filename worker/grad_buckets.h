// grad_buckets.h: the gradient's all-reduce overlapped with the backward
// pass (train.bucket_mb). The gradient is cut into buckets of fixed
// positions; a thread of its own all-reduces each bucket, highest first, as
// soon as the pass tells that its floats are final (struct grads_ready),
// while the pass computes the layers below. Every rank cuts the same buckets
// and reduces them in the same order, whenever its own pass gets there, so
// the ranks' collectives match whatever the timing.
#ifndef VGPU_GRAD_BUCKETS_H
#define VGPU_GRAD_BUCKETS_H

#include <stddef.h>

#include <vgpu/vgpu.h>
#include <vgpu/vgpu_ext.h>

#include "model.h"

#define GRAD_BUCKET_ALIGN 64 // floats: every bucket starts 256-byte aligned (the top one may
                             // end short)

struct grad_buckets;

// The buckets of a gradient of `count` floats at most `bucket_floats` each
// (rounded up to GRAD_BUCKET_ALIGN): bucket k is [k * size, min(count,
// (k + 1) * size)), reduced from the highest k down. Returns how many (0 for
// count 0).
size_t grad_buckets_count_for(size_t count, size_t bucket_floats, size_t *size);

// Starts the exchange's thread for grads[count] (device) of rank v, in
// buckets of about bucket_floats. Returns 0, or a status (said).
int grad_buckets_open(struct grad_buckets **out, vgpu_t *v, float *grads, size_t count,
                      size_t bucket_floats);
// Stops the thread; after grad_buckets_finish (no exchange in flight). NULL: no-op.
void grad_buckets_close(struct grad_buckets *b);

// A step's exchange: the hook to pass to the backward pass (it tells the
// thread which buckets are final). Every grad_buckets_begin is followed by
// grad_buckets_finish, whatever the pass returned, so that every rank
// issues every bucket.
const struct grads_ready *grad_buckets_begin(struct grad_buckets *b);
// After the pass: marks the whole gradient final and waits until every
// bucket is all-reduced. *waited_s: how long this took (the communication
// the pass did not hide). Returns 0, or the first collective's failure.
int grad_buckets_finish(struct grad_buckets *b, double *waited_s);

// The buckets a step (grad_buckets_count_for's count).
size_t grad_buckets_n(const struct grad_buckets *b);

#endif
