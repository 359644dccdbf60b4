// train_checkpoint.c: a run's checkpoints: rank 0 claims checkpoint.dir and
// writes the replica's parameters, optimizer state and position there; a
// resumed run restores them on every rank, whatever the rank count that
// wrote them.
#include "train_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "log.h"
#include "util.h"

int train_claim_checkpoint_dir(struct trainer *t)
{
    const char *dir = t->cfg->checkpoint.dir;
    if (!dir[0])
        return 0;
    char err[512];
    int removed = 0;
    t->ckpt.lock = checkpoint_claim_dir(dir, &removed, err, sizeof err);
    if (t->ckpt.lock < 0) {
        log_error("%s", err);
        return VGPU_ECONFIG;
    }
    if (removed)
        log_warn("removed %d unfinished checkpoint file%s (*.tmp.*) that a run which died "
                 "while saving left in %s", removed, removed == 1 ? "" : "s", dir);
    return 0;
}

void train_checkpoint_free(struct trainer *t)
{
    if (t->ckpt.lock >= 0)
        close(t->ckpt.lock);
    t->ckpt.lock = -1;
}

_Static_assert(MODEL_MAX_SHAPE <= CKPT_MAX_LAYERS, "a checkpoint records a model's shape");

// The checkpoint header of this run's model, optimizer and seed; position
// fields are left for the caller.
static struct ckpt_meta meta_of_(const struct trainer *t)
{
    struct ckpt_meta m = {.n_dims = t->model.n_shape,
                          .param_count = (int64_t)t->model.param_count,
                          .opt_state_count = (int64_t)t->opt.state_count,
                          .seed = (uint64_t)t->cfg->train.seed,
                          .global_batch = t->cfg->train.batch_size};
    for (int i = 0; i < t->model.n_shape; i++)
        m.dims[i] = t->model.shape[i];
    snprintf(m.optimizer, sizeof m.optimizer, "%s",
             train_config_enum_name("train", "optimizer", t->cfg->train.optimizer));
    return m;
}

// Rank 0: copies the state off the device and writes it. Returns 0 or a
// status, with a message in err.
static int write_(struct trainer *t, const char *dir, char *path, size_t path_bytes, char *err,
                  size_t err_bytes)
{
    const size_t np = t->model.param_count, ns = t->opt.state_count;
    struct ckpt_meta meta = meta_of_(t);
    meta.step = t->step;
    meta.epoch = sampler_epoch(&t->sampler);
    meta.step_in_epoch = sampler_step_in_epoch(&t->sampler);
    meta.nranks = t->job->size;
    meta.total_steps = t->total_steps;
    float *params = malloc(np * sizeof(float)), *state = malloc((ns ? ns : 1) * sizeof(float));
    int rc = VGPU_ENOMEM;
    if (!params || !state)
        goto out;
    TRY_GOTO(vgpu_memcpy_dtoh(t->dev, params, t->model.params, np * sizeof(float)), rc, out);
    TRY_GOTO(vgpu_memcpy_dtoh(t->dev, state, t->opt.state, ns * sizeof(float)), rc, out);
    TRY_GOTO(checkpoint_make_dir(dir, err, err_bytes), rc, out);
    TRY_GOTO(checkpoint_path(dir, t->step, path, path_bytes), rc, out);
    rc = checkpoint_save(path, &meta, params, state, err, err_bytes);
    const long keep = t->cfg->checkpoint.keep_last;
    if (rc == 0 && keep > 0) {
        const int pruned = checkpoint_prune(dir, (int)keep);
        if (pruned < 0) // the new checkpoint is whole: a warning, not a failure
            log_warn("checkpoint.keep_last = %ld: cannot remove older checkpoints in %s: %s", keep,
                     dir, status_str(pruned));
    }
out:
    free(params);
    free(state);
    return rc;
}

// A resumed run with another horizon (train.epochs or train.max_steps
// changed) follows another learning-rate schedule from here on: say what
// that does to the rate, so a jump up is not a surprise.
static void warn_if_schedule_moved_(const struct trainer *t, int64_t written_total)
{
    if (t->job->rank != 0 || written_total <= 0 || written_total == t->total_steps ||
        t->step <= 0)
        return;
    const double was = optim_lr_at(t->cfg, t->step, (long)written_total);
    const double now = optim_lr_at(t->cfg, t->step, t->total_steps);
    if (was == now)
        return; // a schedule that does not depend on the horizon
    log_warn("the checkpoint's run was to take %lld steps, this one takes %ld: the %s "
             "learning-rate schedule is rescaled, so the rate at step %ld is %.3g, not %.3g",
             (long long)written_total, t->total_steps,
             train_config_enum_name("train", "schedule", t->cfg->train.schedule), t->step + 1, now,
             was);
}

int train_save_checkpoint(struct trainer *t, const char *dir, char *path, size_t path_bytes)
{
    vgpu_mark_phase(t->dev, vgpu_phase_checkpoint);
    const uint64_t span = vgpu_span_begin();
    if (t->mode->gather_state)
        TRY(t->mode->gather_state(t));
    int rc = 0;
    if (t->job->rank == 0) {
        char err[512] = "";
        rc = write_(t, dir, path, path_bytes, err, sizeof err);
        if (rc < 0)
            log_error("checkpoint not written: %s", err[0] ? err : status_str(rc));
    }
    rc = job_agree_min(t->job, rc < 0 ? rc : 0);
    vgpu_span_end(t->dev, vgpu_span_checkpoint, span, t->step, 0);
    return rc;
}

// What rank 0 read, for every rank.
struct resume_header {
    int rc;                // 0, or why the checkpoint cannot be used
    char err[512];         // rank 0's message when rc < 0
    char path[4096];       // the checkpoint read (--resume DIR: the newest valid one)
    struct ckpt_meta meta; // the checkpoint's header
};

// Rank 0, --resume DIR: loads the newest checkpoint in dir that passes
// checkpoint_load's checks, saying which newer ones it passed over and why.
// Sets *path_out to the one taken (buf holds it).
static int load_newest_(const char *dir, struct resume_header *hdr, float **params, float **state,
                        char *buf, size_t buf_bytes)
{
    int64_t *steps;
    int n;
    int rc = checkpoint_list(dir, &steps, &n);
    if (rc < 0)
        return util_errorf(hdr->err, sizeof hdr->err, rc, "%s: cannot read the directory: %s",
                           dir, status_str(rc));
    if (n == 0)
        rc = util_errorf(hdr->err, sizeof hdr->err, VGPU_ECONFIG,
                         "%s holds no checkpoint (ckpt-<step>.bin)", dir);
    for (int i = 0; i < n; i++) {
        rc = checkpoint_path(dir, steps[i], buf, buf_bytes);
        if (rc == 0)
            rc = checkpoint_load(buf, &hdr->meta, params, state, hdr->err, sizeof hdr->err);
        if (rc == 0 || rc == VGPU_ENOMEM)
            break;
        if (i + 1 < n)
            log_warn("--resume %s: passing over %s", dir, hdr->err);
        else
            snprintf(hdr->err, sizeof hdr->err, "%s: no valid checkpoint among %d (the oldest: "
                     "see above)", dir, n);
    }
    free(steps);
    return rc;
}

// Rank 0: reads the file (the newest valid one of a directory), checks it
// fits this run, copies its state to the device. Sets hdr->path.
static void load_(struct trainer *t, const char *path, struct resume_header *hdr)
{
    float *params = NULL, *state = NULL;
    struct stat st;
    snprintf(hdr->path, sizeof hdr->path, "%s", path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        hdr->rc = load_newest_(path, hdr, &params, &state, hdr->path, sizeof hdr->path);
    else
        hdr->rc = checkpoint_load(path, &hdr->meta, &params, &state, hdr->err, sizeof hdr->err);
    if (hdr->rc == 0) {
        struct ckpt_meta want = meta_of_(t);
        hdr->rc = checkpoint_check_compatible(&hdr->meta, &want, hdr->err, sizeof hdr->err);
    }
    const long batches = sampler_batches_per_epoch(&t->sampler);
    if (hdr->rc == 0 && hdr->meta.step_in_epoch > batches)
        hdr->rc = util_errorf(hdr->err, sizeof hdr->err, VGPU_ECONFIG,
                              "%s is at batch %lld of its epoch and this run's epochs have %ld "
                              "batches (another data set or train_limit?)",
                              hdr->path, (long long)hdr->meta.step_in_epoch, batches);
    if (hdr->rc == 0)
        hdr->rc = vgpu_memcpy_htod(t->dev, t->model.params, params,
                                   t->model.param_count * sizeof(float));
    if (hdr->rc == 0 && t->opt.state_count)
        hdr->rc = vgpu_memcpy_htod(t->dev, t->opt.state, state,
                                   t->opt.state_count * sizeof(float));
    free(params);
    free(state);
}

// Rank 0 reads the checkpoint; parameters and optimizer state reach the other
// ranks through the communicator, the position through the control plane.
int train_resume(struct trainer *t, const char *path)
{
    struct resume_header hdr = {0};
    if (t->job->rank == 0)
        load_(t, path, &hdr);
    job_broadcast(t->job, &hdr, sizeof hdr, 0);
    if (hdr.rc) {
        if (t->job->rank == 0)
            log_error("cannot resume: %s", hdr.err);
        // A bad --resume path is bad input (exit 2), as a damaged or
        // mismatched file is; other errors (EIO) stay what they are.
        const int bad_path = hdr.rc == -ENOENT || hdr.rc == -EISDIR || hdr.rc == -ENOTDIR ||
                             hdr.rc == -EACCES;
        return bad_path ? VGPU_ECONFIG : hdr.rc;
    }
    TRY(vgpu_broadcast(t->model.params, t->model.params, t->model.param_count, vgpu_float32, 0,
                       t->job->v));
    TRY(vgpu_broadcast(t->opt.state, t->opt.state, t->opt.state_count, vgpu_float32, 0,
                       t->job->v));
    t->opt.t = hdr.meta.step;
    // At an epoch's last step the checkpoint precedes that epoch's
    // evaluation (checkpoints are written right after their step): the
    // resumed run does it, as everything after the checkpoint.
    train_move_to(t, (long)hdr.meta.step, (long)hdr.meta.epoch, (long)hdr.meta.step_in_epoch);
    if (t->job->rank == 0)
        printf("vgpu_train: resumed from %s at step %lld (epoch %lld, batch %lld; written by %d ranks)\n",
               hdr.path, (long long)hdr.meta.step, (long long)hdr.meta.epoch + 1,
               (long long)hdr.meta.step_in_epoch, hdr.meta.nranks);
    train_metrics_resumed(t, (long)hdr.meta.epoch);
    warn_if_schedule_moved_(t, hdr.meta.total_steps);
    return 0;
}
