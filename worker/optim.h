// optim.h: optimizers (SGD with momentum, Adam, AdamW) and learning-rate
// schedules (constant, step, cosine; linear warm-up), on device memory.
#ifndef VGPU_OPTIM_H
#define VGPU_OPTIM_H

#include <stddef.h>

#include "train_config.h"
#include <vgpu/vgpu.h>

struct optimizer {
    enum optim_kind kind;
    size_t n;               // parameters, floats
    float *state;           // device: SGD velocity [n]; Adam m [n] then v [n]
    size_t state_count;     // floats in state
    long t;                 // steps taken (Adam bias correction)
    float momentum, weight_decay, beta1, beta2, eps;
    float clip;             // train.grad_clip: the gradient's largest global norm; 0: none
    float *norm_sq;         // device: one float past the state, the clip's sum of squares
                            // (the last optim_clip's; optim_last_norm reads it)
};

// Floats of optimizer state per parameter for an optimizer (config.h's enum).
int optim_state_per_param(enum optim_kind kind);

// Allocates zeroed state for n parameters. VGPU_EINVAL for an unknown kind.
int optim_init(struct optimizer *o, vgpu_t *dev, const struct train_config *cfg, size_t n);
void optim_free(struct optimizer *o, vgpu_t *dev);

// One update of params from grads (both device, [n]) with learning rate lr,
// after clipping grads by their norm when train.grad_clip is set (below).
int optim_step(struct optimizer *o, vgpu_t *dev, float *params, float *grads, float lr);

// As torch.nn.utils.clip_grad_norm_: grads (the whole summed gradient, every
// rank the same bits) scaled by clip / (norm + 1e-6) when that is below 1,
// norm the L2 norm of all n (summed in double in a fixed order, so the same
// on every rank and run). All on the device: the host neither copies the
// norm nor waits for it (optim_last_norm does, where it is reported). No-op
// when clip is 0.
int optim_clip(struct optimizer *o, vgpu_t *dev, float *grads);

// The gradient norm the last optim_clip measured (clipped or not) into
// *norm: 0 when train.grad_clip is 0 or before the first. Copies it from the
// device (a wait for the stream): for reports, not every step. 0 or the
// copy's status.
int optim_last_norm(const struct optimizer *o, vgpu_t *dev, double *norm);

// The same step in pieces, for a sharded update (without clipping, which
// needs the whole gradient first): optim_begin_step once per
// step, then optim_update_range on ranges [first, first + count) that
// together cover what this rank updates (params and grads are the whole
// buffers; the ranges index into them and into the state). The result on
// each element is the same as optim_step's.
void optim_begin_step(struct optimizer *o);
int optim_update_range(struct optimizer *o, vgpu_t *dev, float *params, const float *grads,
                       float lr, size_t first, size_t count);

// The per-parameter state arrays ([n] floats each: SGD velocity; Adam m, v)
// into arrays[0..]; returns how many (at most 2).
int optim_state_arrays(const struct optimizer *o, float **arrays);

// Learning rate for 0-based `step` of `total_steps`: linear warm-up over
// train.warmup_steps, then constant, step decay or cosine to 0.
double optim_lr_at(const struct train_config *cfg, long step, long total_steps);

#endif
