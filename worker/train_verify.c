// train_verify.c: --verify: after a short run rank 0 replays the same global
// batches on its one device, from the same initial parameters, through the
// same code, and compares the result with the distributed one per tensor.
#include "train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

static void replay_free_(struct trainer *t, struct replay *r)
{
    free(r->leaves);
    free(r->stats);
    if (r->parts)
        vgpu_free(t->dev, r->parts);
    sampler_free(&r->sampler);
    optim_free(&r->opt, t->dev);
    model_free(&r->model, t->dev);
}

// The next global batch of a one-rank sampler, across epoch ends.
static int next_batch_(struct sampler *s, struct batch_slice *b)
{
    int more = sampler_next(s, 0, b);
    if (more == 0) {
        sampler_set_position(s, sampler_epoch(s) + 1, 0);
        more = sampler_next(s, 0, b);
    }
    return more == 1 ? 0 : more < 0 ? more : VGPU_EINVAL;
}

// Replays the run's t->step global batches on one device from the same
// initial parameters and data order, into ref_params (host).
static int replay_(struct trainer *t, float *ref_params)
{
    const struct train_config *cfg = t->cfg;
    struct replay r = {0};
    struct batch_slice b;
    int rc;
    TRY_GOTO(model_init(&r.model, t->dev, cfg, &t->data->train, (int)t->mode->replay_rows(cfg)),
             rc, out);
    TRY_GOTO(optim_init(&r.opt, t->dev, cfg, r.model.param_count), rc, out);
    TRY_GOTO(sampler_init(&r.sampler, t->data->train.count, cfg->train.batch_size,
                          cfg->train.drop_last, (uint64_t)cfg->train.seed, 1, NULL, 0), rc, out);
    sampler_set_shuffle(&r.sampler, cfg->train.shuffle);
    char err[512];
    if ((rc = train_initial_params(cfg, &r.model, ref_params, err, sizeof err)) < 0) {
        log_error("%s", err); // the file changed since the run read it
        goto out;
    }
    TRY_GOTO(vgpu_memcpy_htod(t->dev, r.model.params, ref_params,
                              r.model.param_count * sizeof(float)), rc, out);
    for (long step = 0; step < t->step; step++) {
        TRY_GOTO(next_batch_(&r.sampler, &b), rc, out);
        TRY_GOTO(t->mode->replay_gradient(t, &r, &b), rc, out);
        TRY_GOTO(optim_step(&r.opt, t->dev, r.model.params, r.model.grads,
                            (float)optim_lr_at(cfg, step, t->total_steps)), rc, out);
    }
    rc = vgpu_memcpy_dtoh(t->dev, ref_params, r.model.params, r.model.param_count * sizeof(float));
out:
    replay_free_(t, &r);
    return rc;
}

// Compares tensor `index` of the model in both runs and prints its row.
// Returns whether it passes; *rel is its max difference relative to its scale.
static int compare_tensor_(const struct trainer *t, const float *dist, const float *ref, int index,
                           double *rel)
{
    struct model_tensor tensor;
    model_tensor(&t->model, index, &tensor);
    const size_t at = tensor.offset;
    const size_t n = tensor.dims[0] * (tensor.n_dims == 2 ? tensor.dims[1] : 1);
    double max_abs = 0, max_ref = 0;
    size_t differing = 0;
    for (size_t i = at; i < at + n; i++) {
        double d = fabs((double)dist[i] - (double)ref[i]);
        max_abs = d > max_abs ? d : max_abs;
        max_ref = fabs(ref[i]) > max_ref ? fabs(ref[i]) : max_ref;
        differing += memcmp(&dist[i], &ref[i], sizeof(float)) != 0;
    }
    // Relative to the tensor's scale: elementwise ratios blow up on weights
    // that happen to sit near zero.
    *rel = max_ref > 0 ? max_abs / max_ref : max_abs;
    const int ok = t->mode->bitwise ? differing == 0 : *rel <= t->cfg->verify.rtol;
    char shape[32];
    model_tensor_shape(&tensor, shape, sizeof shape);
    printf("  %-14s %-10s %13.3g %13.3g %9zu  %s\n", tensor.name, shape, max_abs, *rel, differing,
           ok ? "ok" : "FAILED");
    return ok;
}

// Rank 0: the table of every tensor and the verdict line.
static int compare_(struct trainer *t, struct train_result *res, const float *dist,
                    const float *ref, double replay_s)
{
    const int exact = t->mode->bitwise;
    printf("verify: %d rank%s (%s) against one device replaying the same %ld global batches "
           "(%.1f s); %s\n",
           t->job->size, t->job->size > 1 ? "s" : "", vgpu_backend(t->job->v), t->step,
           replay_s, exact ? "deterministic mode: must be bitwise identical" : "tolerance verify.rtol");
    printf("  %-14s %-10s %13s %13s %9s  %s\n", "tensor", "shape", "max_abs_diff", "max_rel_diff",
           "differing", "result");
    double worst = 0;
    int failed = 0;
    for (int i = 0; i < model_tensor_count(&t->model); i++) {
        double rel;
        failed += !compare_tensor_(t, dist, ref, i, &rel);
        worst = rel > worst ? rel : worst;
    }
    res->verify_max_rel = worst;
    if (failed)
        printf("vgpu_train: verify FAILED: %d tensor%s %s\n", failed, failed > 1 ? "s" : "",
               exact ? "not bitwise identical" : "over verify.rtol");
    else if (exact)
        printf("vgpu_train: verify passed: bitwise identical to the single-device run\n");
    else
        printf("vgpu_train: verify passed: max_rel_diff %.3g <= verify.rtol %.3g\n", worst,
               t->cfg->verify.rtol);
    fflush(stdout);
    return failed ? VGPU_EMISMATCH : 0;
}

// Rank 0: the distributed run's parameters against the one-device replay.
static int replay_and_compare_(struct trainer *t, struct train_result *res)
{
    const size_t np = t->model.param_count;
    float *dist = malloc(np * sizeof(float)), *ref = malloc(np * sizeof(float));
    int rc = !dist || !ref ? VGPU_ENOMEM : 0;
    if (rc < 0)
        goto out;
    TRY_GOTO(vgpu_memcpy_dtoh(t->dev, dist, t->model.params, np * sizeof(float)), rc, out);
    const double t0 = util_now_s();
    TRY_GOTO(replay_(t, ref), rc, out);
    rc = compare_(t, res, dist, ref, util_now_s() - t0); // a mismatch is a result, not a trace
out:
    free(dist);
    free(ref);
    return rc;
}

int train_verify(struct trainer *t, struct train_result *res)
{
    return job_agree_min(t->job, t->job->rank == 0 ? replay_and_compare_(t, res) : 0);
}
