// optim.c: optimizer updates and learning-rate schedules.
#include "optim.h"

#include <math.h>
#include <string.h>

#include <vgpu/vgpu_math.h>

#include "job.h"
#include "log.h"

int optim_state_per_param(enum optim_kind kind) { return kind == OPTIM_SGD ? 1 : 2; }

int optim_init(struct optimizer *o, vgpu_t *dev, const struct train_config *cfg, size_t n)
{
    memset(o, 0, sizeof *o);
    o->kind = cfg->train.optimizer;
    if (o->kind != OPTIM_SGD && o->kind != OPTIM_ADAM && o->kind != OPTIM_ADAMW)
        return VGPU_EINVAL;
    o->n = n;
    o->momentum = (float)cfg->train.momentum;
    o->weight_decay = (float)cfg->train.weight_decay;
    o->beta1 = (float)cfg->train.beta1;
    o->beta2 = (float)cfg->train.beta2;
    o->eps = (float)cfg->train.eps;
    o->clip = (float)cfg->train.grad_clip;
    o->state_count = n * (size_t)optim_state_per_param(o->kind);
    TRY(job_alloc_floats(dev, o->state_count + 1, &o->state)); // + the clip's scalar
    o->norm_sq = o->state + o->state_count;
    return 0;
}

void optim_free(struct optimizer *o, vgpu_t *dev)
{
    if (o && o->state && dev)
        vgpu_free(dev, o->state);
    if (o)
        o->state = NULL;
}

void optim_begin_step(struct optimizer *o) { o->t++; }

int optim_update_range(struct optimizer *o, vgpu_t *dev, float *params, const float *grads,
                       float lr, size_t first, size_t count)
{
    if (first > o->n || count > o->n - first)
        return VGPU_EINVAL;
    device_t *d = vgpu_math_device(dev);
    if (o->kind == OPTIM_SGD)
        return math_sgd_step(d, params + first, grads + first, o->state + first, count, lr,
                             o->momentum, o->weight_decay);
    if (o->t < 1) // Adam's bias corrections count steps from 1
        return VGPU_EINVAL;
    // 1 - beta^t in double, as PyTorch does (the float beta itself is exact).
    const double corr1 = 1.0 - pow(o->beta1, (double)o->t);
    const double corr2 = 1.0 - pow(o->beta2, (double)o->t);
    return math_adam_step(d, params + first, grads + first, o->state + first,
                          o->state + o->n + first, count, lr, o->beta1, o->beta2, o->eps,
                          o->weight_decay, (float)corr1, (float)corr2, o->kind == OPTIM_ADAMW);
}

int optim_clip(struct optimizer *o, vgpu_t *dev, float *grads)
{
    if (o->clip <= 0)
        return 0;
    device_t *d = vgpu_math_device(dev);
    TRY(math_sum_squares(d, o->norm_sq, grads, o->n));
    return math_clip_by_norm(d, grads, o->norm_sq, o->clip, o->n);
}

int optim_last_norm(const struct optimizer *o, vgpu_t *dev, double *norm)
{
    *norm = 0;
    if (o->clip <= 0)
        return 0;
    float sum_sq; // 0 until the first optim_clip: the state starts zeroed
    TRY(vgpu_memcpy_dtoh(dev, &sum_sq, o->norm_sq, sizeof sum_sq));
    *norm = sqrtf(sum_sq); // as math_clip_by_norm's (kernel_clip_coef)
    return 0;
}

int optim_step(struct optimizer *o, vgpu_t *dev, float *params, float *grads, float lr)
{
    TRY(optim_clip(o, dev, grads));
    optim_begin_step(o);
    return optim_update_range(o, dev, params, grads, lr, 0, o->n);
}

int optim_state_arrays(const struct optimizer *o, float **arrays)
{
    int k = 0;
    for (size_t at = 0; at < o->state_count; at += o->n)
        arrays[k++] = o->state + at;
    return k;
}

double optim_lr_at(const struct train_config *cfg, long step, long total_steps)
{
    double lr = cfg->train.lr;
    long warm = cfg->train.warmup_steps;
    if (step < warm)
        return lr * (double)(step + 1) / (double)warm;
    long s = step - warm, span = total_steps - warm;
    if (cfg->train.schedule == SCHEDULE_STEP)
        return lr * pow(cfg->train.step_gamma, (double)(s / cfg->train.step_every));
    if (cfg->train.schedule == SCHEDULE_COSINE) {
        if (span <= 0)
            return lr;
        double progress = (double)s / (double)span;
        if (progress > 1.0)
            progress = 1.0;
        return lr * 0.5 * (1.0 + cos(3.14159265358979323846 * progress));
    }
    return lr;
}
