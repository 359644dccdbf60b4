// train.c: a training session: set-up in the order the ranks can agree on,
// the synchronous data-parallel loop, and the ways a run ends (done,
// preempted, diverged, verified). The pieces live in train_*.c
// (train_internal.h lists them).
#include "train_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grad_buckets.h"
#include "log.h"
#include "util.h"

// This machine, as a number the ranks compare: util_machine_id's CRC32 (the
// network-namespace hosts of one machine share it, and its cores).
static uint32_t machine_id_(const char *host)
{
    char id[64] = "";
    util_machine_id(id, sizeof id, host);
    return util_crc32(0, id, strlen(id));
}

// What every ending reports: steps, the last training loss, the rate and
// (rank 0) a CRC32 of the parameters.
static int fill_result_(struct trainer *t, struct train_result *res)
{
    const long per_epoch = sampler_batches_per_epoch(&t->sampler);
    res->epochs = (double)sampler_epoch(&t->sampler) +
                  (per_epoch ? (double)sampler_step_in_epoch(&t->sampler) / (double)per_epoch : 0);
    res->epochs = fmin(res->epochs, (double)t->cfg->train.epochs);
    res->steps = t->step;
    res->train_loss = t->report.last_loss;
    res->samples_per_s = t->train_seconds > 0 ? t->samples_done / t->train_seconds : 0;
    const double n = t->clock.steps > 0 ? (double)t->clock.steps : 1;
    struct vgpu_comm_stats comm = {0};
    vgpu_get_comm_stats(t->dev, &comm);
    res->time = (struct step_breakdown){
        .compute_ms = 1e3 * t->clock.compute_s / n,
        .wait_ms = 1e3 * t->clock.wait_s / n,
        .move_ms = 1e3 * fmax(0, t->clock.comm_s - t->clock.wait_s - t->clock.optim_in_comm_s) / n,
        .optim_ms = 1e3 * t->clock.optim_s / n,
        .exposed_ms = 1e3 * fmax(0, t->clock.exposed_s - t->clock.optim_in_comm_s) / n,
        .buckets = t->buckets ? (int)grad_buckets_n(t->buckets) : 0,
        .wait_known = t->clock.wait_known,
        .comm_kib = (double)comm.bytes / 1024.0 / n,
        .machine = machine_id_(vgpu_host_name(t->dev)),
        .cores = (int)sysconf(_SC_NPROCESSORS_ONLN),
        .hosts = vgpu_host_count(t->dev),
    };
    if (t->job->rank != 0)
        return 0;
    const size_t bytes = t->model.param_count * sizeof(float);
    float *host = malloc(bytes);
    if (!host)
        return VGPU_ENOMEM;
    int rc = vgpu_memcpy_dtoh(t->dev, host, t->model.params, bytes);
    if (rc == 0)
        res->params_crc = util_crc32(0, host, bytes);
    free(host);
    return rc;
}

// A signal reached some rank: every rank stops after this step and rank 0
// writes a checkpoint (into checkpoint.dir, or ./checkpoints when unset).
static int stop_for_preemption_(struct trainer *t, struct train_result *res)
{
    const char *dir = t->cfg->checkpoint.dir[0] ? t->cfg->checkpoint.dir : "checkpoints";
    char path[CONFIG_STR_MAX + 64] = "";
    TRY(train_save_checkpoint(t, dir, path, sizeof path));
    (void)fill_result_(t, res); // the checkpoint is what counts: a CRC not taken stays 0
    // Agreed: the stop may be agreed before this rank's own signal arrived.
    const int sig = train_agreed_stop_signal(t->job);
    if (t->job->rank == 0) {
        snprintf(res->checkpoint, sizeof res->checkpoint, "%s", path);
        train_report_preempted(t, path, sig);
    }
    return VGPU_EPREEMPTED;
}

// The test-set evaluation after an epoch (number: 1-based); lr is the last step's.
static int evaluate_epoch_(struct trainer *t, struct train_result *res, long number, double lr)
{
    TRY(train_evaluate(t, res->eval));
    train_report_eval(t, res, number, lr);
    return 0;
}

// Resumed from a checkpoint of a finished run: nothing to train, so evaluate
// what was restored (no training loss to report), as the epoch it is in, or
// the last it finished.
static int evaluate_finished_(struct trainer *t, struct train_result *res, double lr)
{
    const long epoch = sampler_epoch(&t->sampler), in_epoch = sampler_step_in_epoch(&t->sampler);
    const long number = in_epoch > 0 ? epoch + 1 : epoch, epochs = t->cfg->train.epochs;
    if (t->job->rank == 0)
        printf("vgpu_train: nothing left to train at step %ld (epoch %ld of %ld, %ld steps "
               "in all)\n", t->step, number, epochs, t->total_steps);
    return evaluate_epoch_(t, res, number, lr);
}

// What a step is followed by, at its step count (besides the stop-signal
// vote every PREEMPT_CHECK_STEPS).
struct step_duties {
    int log;          // a progress line
    int save;         // a checkpoint
    int check;        // a replica check
};

static struct step_duties duties_at_(const struct trainer *t, long step)
{
    const struct train_config *cfg = t->cfg;
    const long check_every = cfg->train.check_replicas_every;
    return (struct step_duties){
        .log = step % cfg->train.log_every == 0,
        .save = cfg->checkpoint.dir[0] && cfg->checkpoint.every_steps &&
                step % cfg->checkpoint.every_steps == 0,
        .check = check_every && step % check_every == 0,
    };
}

// The steps of one epoch (or of what is left of it, or up to max_steps).
// Returns 1 when the epoch's batches ran out, 0 when the run's steps did, or
// a negative status: a failure, or a verdict every rank shares and that is
// already reported (VGPU_EPREEMPTED after the checkpoint, VGPU_EMISMATCH
// after a failed replica check).
static int train_epoch_(struct trainer *t, struct train_result *res, long epoch, double *lr)
{
    struct job *job = t->job;
    struct batch_slice b;
    char path[CONFIG_STR_MAX + 64];
    double t0 = util_now_s();
    int more = 0;
    while (t->step < t->total_steps && (more = sampler_next(&t->sampler, job->rank, &b)) == 1) {
        *lr = optim_lr_at(t->cfg, t->step, t->total_steps);
        vgpu_mark_step(t->dev, t->step + 1); // the step under way, 1-based, as progress lines count
        const uint64_t span = vgpu_span_begin();
        TRY(t->mode->step(t, &b, (float)*lr));
        vgpu_span_end(t->dev, vgpu_span_step, span, t->step + 1, 0);
        t->step++;
        t->samples_done += (double)b.global_count;
        TRY(train_maybe_perturb(t));
        inject_after_step(&t->inject, job->rank, t->step);
        // Every rank learns of a signal that reached any of them, at the same
        // step: an extra synchronisation, so every few steps only.
        if (t->step % PREEMPT_CHECK_STEPS == 0) {
            int stop = train_exchange(t);
            TRY(stop);
            if (stop) {
                t->train_seconds += util_now_s() - t0;
                return stop_for_preemption_(t, res);
            }
        }
        const struct step_duties due = duties_at_(t, t->step);
        if (!due.log && !due.save && !due.check)
            continue;
        t->train_seconds += util_now_s() - t0;
        int rc = due.check ? train_check_replicas(t) : 0;
        if (rc < 0)
            return rc;
        if (due.log)
            TRY(train_log_progress(t, epoch, *lr, 0));
        if (due.save)
            TRY(train_save_checkpoint(t, t->cfg->checkpoint.dir, path, sizeof path));
        t0 = util_now_s();
    }
    t->train_seconds += util_now_s() - t0;
    TRY(more);
    return more == 0;
}

// Steps the run takes: its epochs' batches, or train.max_steps if fewer.
static long run_steps_(const struct trainer *t)
{
    const struct train_config *cfg = t->cfg;
    const long steps = cfg->train.epochs * sampler_batches_per_epoch(&t->sampler);
    return cfg->train.max_steps && cfg->train.max_steps < steps ? cfg->train.max_steps : steps;
}

void train_move_to(struct trainer *t, long step, long epoch, long step_in_epoch)
{
    t->step = step;
    sampler_set_position(&t->sampler, epoch, step_in_epoch);
}

static int train_loop_(struct trainer *t, struct train_result *res)
{
    const struct train_config *cfg = t->cfg;
    double lr = t->step > 0 ? optim_lr_at(cfg, t->step - 1, t->total_steps) : 0; // a resumed run's
    long epoch = sampler_epoch(&t->sampler);
    t->start_step = t->step;
    inject_plan_make(&t->inject, t->env, t->job->rank, t->start_step, t->total_steps);
    if (epoch >= cfg->train.epochs || t->step >= t->total_steps)
        TRY(evaluate_finished_(t, res, lr));
    while (epoch < cfg->train.epochs && t->step < t->total_steps) {
        int ran_out = train_epoch_(t, res, epoch, &lr);
        if (ran_out < 0)
            return ran_out;
        // The epoch ended unless max_steps cut it short.
        int ended = ran_out ||
                    sampler_step_in_epoch(&t->sampler) >= sampler_batches_per_epoch(&t->sampler);
        if (ended) {
            epoch++;
            sampler_set_position(&t->sampler, epoch, 0);
        }
        TRY(train_log_progress(t, epoch - ended, lr, 1));
        TRY(evaluate_epoch_(t, res, epoch - ended + 1, lr));
    }
    if (cfg->train.check_replicas_every || t->opts->verify) {
        int rc = train_check_replicas(t);
        if (rc < 0) // a verdict every rank shares, already reported
            return rc;
    }
    if (cfg->checkpoint.dir[0] && !t->opts->verify) {
        char path[CONFIG_STR_MAX + 64];
        TRY(train_save_checkpoint(t, cfg->checkpoint.dir, path, sizeof path));
        if (t->job->rank == 0)
            snprintf(res->checkpoint, sizeof res->checkpoint, "%s", path);
    }
    if (t->job->rank == 0 && t->balance.on)
        train_describe_split(t, res->split, sizeof res->split);
    return fill_result_(t, res);
}

void train_test_pause(const char *stage, int rank)
{
    const struct train_env *env = train_env_get();
    if (strcmp(env->pause_stage, stage) != 0)
        return;
    if (rank == 0) {
        fprintf(stderr, "vgpu_train: test pause at %s for %.1f s\n", stage, env->pause_s);
        fflush(stderr);
    }
    struct timespec pause = {(time_t)env->pause_s,
                             (long)((env->pause_s - (double)(time_t)env->pause_s) * 1e9)};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
}

int train_run(struct job *job, struct train_data *data, const struct train_options *opts,
              struct train_result *result)
{
    struct trainer t = {
        .job = job, .dev = job->v, .cfg = &job->cfg, .opts = opts, .data = data,
        .env = train_env_get(),
        .mode = job->cfg.train.deterministic ? &train_step_deterministic : &train_step_normal,
        .report = {.last_loss = NAN},
        .ckpt = {.lock = -1},
    };
    memset(result, 0, sizeof *result);
    result->data = data->name;
    result->metrics = model_metrics_for(&job->cfg);
    // Not measured until an evaluation runs (a run preempted before its first
    // epoch ends reports nan, not 0).
    result->train_loss = NAN;
    for (int i = 0; i < MODEL_MAX_METRICS; i++)
        result->eval[i] = NAN;
    vgpu_startup_stage(job->v, "setting up the model");
    train_test_pause("open", job->rank);
    int rc = trainer_prepare(&t);
    rc = job_agree_min(job, rc < 0 ? rc : train_stop_vote());
    // Past this point the ranks are in lockstep: a failure on one rank would
    // leave the others waiting in the next collective, so it ends the job.
    // Agreed verdicts (a bad checkpoint, divergence, preemption) do not.
    if (rc == 0)
        t.total_steps = run_steps_(&t);
    vgpu_startup_stage(job->v, "the warm-up step");
    if (rc == 0 && (rc = trainer_start(&t)) < 0)
        FATAL(1, "training set-up failed: %s", status_str(rc));
    if (rc == 0 && opts->resume_path)
        rc = train_resume(&t, opts->resume_path); // same verdict on every rank
    // The last start-up milestone: a stop asked for during set-up or warm-up.
    if (rc == 0) {
        train_test_pause("warmup", job->rank);
        rc = job_agree_min(job, train_stop_vote());
    }
    vgpu_startup_done(job->v); // from here every wait is a collective's, bounded itself
    if (rc == VGPU_EPREEMPTED)
        train_report_early_stop(job);
    if (rc == 0) {
        rc = train_loop_(&t, result);
        result->steps = t.step;
        if (rc == 0 && opts->verify)
            rc = train_verify(&t, result);
        else if (rc == 0)
            rc = train_sample(&t); // not after --verify's replay (the model is the replay's)
        if (rc < 0 && rc != VGPU_EMISMATCH && rc != VGPU_EPREEMPTED)
            FATAL(1, "training failed: %s", status_str(rc));
    }
    // Lost metrics rows fail a run that otherwise went well (every rank
    // exits 1), not one with a stronger verdict (preempted, diverged).
    const int metrics_rc = job_agree_min(job, train_close_metrics(&t));
    if (rc == 0)
        rc = metrics_rc;
    trainer_free(&t);
    return rc;
}
