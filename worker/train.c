// train.c: the synchronous data-parallel training loop.
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "log.h"
#include "optim.h"
#include "sampler.h"
#include "util.h"

// ---- data ----

int train_load_data(const struct config *cfg, struct train_data *data, char *err, size_t err_bytes)
{
    memset(data, 0, sizeof *data);
    const struct config *c = cfg;
    int rc = 0;
    if (strcmp(c->data.dataset, "synthetic")) {
        rc = dataset_load_dir(&data->train, &data->test, c->data.path, err, err_bytes);
        if (rc == 0) {
            snprintf(data->source, sizeof data->source, "%s from %.100s", c->data.dataset, c->data.path);
        } else if (rc == -ENOENT && c->data.fallback_synthetic) {
            log_warn("%s; using the synthetic dataset instead (data.fallback_synthetic = true; "
                     "install dataset-fashion-mnist or set data.path)", err);
        } else {
            return rc;
        }
    }
    if (!data->train.count) {
        int features = (int)c->data.synthetic_features;
        TRY(dataset_make_synthetic(&data->train, c->data.synthetic_train, features, 10,
                                   (uint64_t)c->train.seed, 0));
        TRY(dataset_make_synthetic(&data->test, c->data.synthetic_test, features, 10,
                                   (uint64_t)c->train.seed, 1));
        snprintf(data->source, sizeof data->source, "synthetic (%ld train, %ld test, %d features)",
                 data->train.count, data->test.count, features);
    }
    if (c->data.train_limit > 0)
        dataset_truncate(&data->train, c->data.train_limit);
    if (c->data.standardize)
        dataset_standardize(&data->train, &data->test);
    return 0;
}

void train_free_data(struct train_data *data)
{
    dataset_free(&data->train);
    dataset_free(&data->test);
}

int train_model_dims(const struct config *cfg, const struct train_data *data, int *dims, int *n_dims)
{
    int n = 0;
    dims[n++] = data->train.features;
    for (int i = 0; i < cfg->model.hidden.count; i++) {
        if (n >= MLP_MAX_DIMS - 1)
            return VGPU_EINVAL;
        dims[n++] = (int)cfg->model.hidden.v[i];
    }
    dims[n++] = data->train.classes;
    *n_dims = n;
    return 0;
}

int train_max_rows(const struct config *cfg, int nranks)
{
    long counts[1024], offsets[1024];
    if (nranks > 1024) // the split is only needed for its maximum
        return (int)cfg->train.batch_size;
    sampler_split(cfg->train.batch_size, nranks, cfg->train.batch_weights.v,
                  cfg->train.batch_weights.count, counts, offsets);
    long most = 1;
    for (int r = 0; r < nranks; r++)
        most = counts[r] > most ? counts[r] : most;
    // Evaluation reuses the buffers in chunks; at least 256 rows keeps it quick.
    return (int)(most > 256 ? most : 256);
}

uint64_t train_device_bytes(const struct config *cfg, const struct train_data *data, int nranks)
{
    int dims[MLP_MAX_DIMS], n;
    struct mlp layout;
    if (train_model_dims(cfg, data, dims, &n) < 0 ||
        mlp_layout(&layout, dims, n, train_max_rows(cfg, nranks)) < 0)
        return 0;
    return mlp_device_bytes(&layout, optim_state_per_param(cfg->train.optimizer));
}

// ---- the loop ----

struct trainer {
    struct runtime *rt;
    device_t *dev;
    const struct config *cfg;
    struct train_data *data;
    struct mlp model;
    struct optimizer opt;
    struct sampler sampler;
    float *host_rows;          // staging for one piece of a batch [max_rows, features]
    int32_t *host_labels;      // [max_rows]
    float *host_stats;         // [max_rows, XENT_STATS]
    FILE *metrics;
    long step, total_steps;
    double window[3];          // loss sum, correct, samples since the last log line
    double last_loss;          // mean loss of the last logged window (all ranks)
    double train_seconds;      // time in the training loop proper
    double samples_done;       // global samples trained on
    int live;                  // progress bar on a terminal
};

// Copies rows [first, first+count) of `indices` from ds into the model's
// input and label buffers on the device.
static int load_rows_(struct trainer *t, const struct dataset *ds, const uint32_t *indices,
                      long count)
{
    size_t f = (size_t)ds->features;
    for (long i = 0; i < count; i++) {
        uint32_t idx = indices[i];
        memcpy(t->host_rows + (size_t)i * f, ds->images + (size_t)idx * f, f * sizeof(float));
        t->host_labels[i] = ds->labels[idx];
    }
    TRY(device_copy_to_device(t->dev, t->model.acts[0], t->host_rows, (size_t)count * f * sizeof(float)));
    TRY(device_copy_to_device(t->dev, t->model.labels, t->host_labels, (size_t)count * sizeof(int32_t)));
    return 0;
}

// Sums the stats of `rows` samples into acc[0..2] (loss, correct, top5).
static int add_stats_(struct trainer *t, long rows, double *acc)
{
    if (rows <= 0)
        return 0;
    TRY(device_copy_to_host(t->dev, t->host_stats, t->model.stats, (size_t)rows * XENT_STATS * sizeof(float)));
    for (long i = 0; i < rows; i++)
        for (int k = 0; k < XENT_STATS; k++)
            acc[k] += t->host_stats[i * XENT_STATS + k];
    return 0;
}

// Test-set evaluation: each rank a contiguous shard, sums reduced over ranks.
static int evaluate_(struct trainer *t, double *loss, double *acc, double *top5)
{
    const struct dataset *ds = &t->data->test;
    long n = ds->count, size = t->rt->size, rank = t->rt->rank;
    long first = n * rank / size, last = n * (rank + 1) / size;
    double sums[4] = {0, 0, 0, 0}; // loss, correct, top5, samples
    uint32_t *idx = malloc((size_t)t->model.max_rows * sizeof *idx);
    if (!idx)
        return VGPU_ENOMEM;
    int rc = 0;
    for (long at = first; at < last && rc == 0; at += t->model.max_rows) {
        long rows = last - at < t->model.max_rows ? last - at : t->model.max_rows;
        for (long i = 0; i < rows; i++)
            idx[i] = (uint32_t)(at + i);
        double s[3] = {0, 0, 0};
        if ((rc = load_rows_(t, ds, idx, rows)) || (rc = mlp_forward(&t->model, t->dev, (int)rows)) ||
            (rc = mlp_eval_stats(&t->model, t->dev, (int)rows)) || (rc = add_stats_(t, rows, s)))
            break;
        sums[0] += s[0], sums[1] += s[1], sums[2] += s[2], sums[3] += (double)rows;
    }
    free(idx);
    TRY(rc);
    runtime_sum_doubles(t->rt, sums, 4);
    *loss = sums[0] / sums[3];
    *acc = sums[1] / sums[3];
    *top5 = sums[2] / sums[3];
    return 0;
}

static int save_checkpoint_(struct trainer *t)
{
    const struct config *cfg = t->cfg;
    int rc = 0;
    char err[512] = "", path[CONFIG_STR_MAX + 64];
    if (t->rt->rank == 0) {
        size_t np = t->model.param_count, ns = t->opt.state_count;
        float *params = malloc(np * sizeof(float)), *state = malloc((ns ? ns : 1) * sizeof(float));
        struct ckpt_meta meta = {.n_dims = t->model.n_dims, .param_count = (int64_t)np,
                                 .opt_state_count = (int64_t)ns, .step = t->step,
                                 .epoch = sampler_epoch(&t->sampler),
                                 .step_in_epoch = sampler_step_in_epoch(&t->sampler),
                                 .seed = (uint64_t)cfg->train.seed,
                                 .global_batch = cfg->train.batch_size, .nranks = t->rt->size};
        for (int i = 0; i < t->model.n_dims; i++)
            meta.dims[i] = t->model.dims[i];
        snprintf(meta.optimizer, sizeof meta.optimizer, "%s", cfg->train.optimizer);
        if (!params || !state)
            rc = VGPU_ENOMEM;
        if (!rc)
            rc = device_copy_to_host(t->dev, params, t->model.params, np * sizeof(float));
        if (!rc)
            rc = device_copy_to_host(t->dev, state, t->opt.state, ns * sizeof(float));
        if (!rc && mkdir(cfg->checkpoint.dir, 0755) && errno != EEXIST) {
            rc = -errno;
            snprintf(err, sizeof err, "cannot create checkpoint.dir %s: %s", cfg->checkpoint.dir,
                     strerror(errno));
        }
        if (!rc && (rc = checkpoint_path(cfg->checkpoint.dir, t->step, path, sizeof path)) == 0)
            rc = checkpoint_save(path, &meta, params, state, err, sizeof err);
        if (rc)
            log_error("checkpoint not written: %s", err[0] ? err : status_str(rc));
        free(params);
        free(state);
    }
    return runtime_agree_min(t->rt, rc < 0 ? rc : 0);
}

// Rank 0 reads the checkpoint; parameters and optimizer state reach the
// other ranks through the communicator, the position through the control plane.
static int resume_(struct trainer *t, const char *path)
{
    struct {
        int rc;
        char err[512];
        struct ckpt_meta meta;
    } hdr = {0};
    float *params = NULL, *state = NULL;
    if (t->rt->rank == 0) {
        hdr.rc = checkpoint_load(path, &hdr.meta, &params, &state, hdr.err, sizeof hdr.err);
        if (!hdr.rc) {
            struct ckpt_meta want = {.n_dims = t->model.n_dims,
                                     .param_count = (int64_t)t->model.param_count,
                                     .opt_state_count = (int64_t)t->opt.state_count,
                                     .global_batch = t->cfg->train.batch_size};
            for (int i = 0; i < t->model.n_dims; i++)
                want.dims[i] = t->model.dims[i];
            snprintf(want.optimizer, sizeof want.optimizer, "%s", t->cfg->train.optimizer);
            hdr.rc = checkpoint_check_compatible(&hdr.meta, &want, hdr.err, sizeof hdr.err);
        }
        if (!hdr.rc) {
            hdr.rc = device_copy_to_device(t->dev, t->model.params, params,
                                           t->model.param_count * sizeof(float));
            if (!hdr.rc && t->opt.state_count)
                hdr.rc = device_copy_to_device(t->dev, t->opt.state, state,
                                               t->opt.state_count * sizeof(float));
        }
        free(params);
        free(state);
    }
    runtime_broadcast(t->rt, &hdr, sizeof hdr, 0);
    if (hdr.rc) {
        if (t->rt->rank == 0)
            log_error("cannot resume: %s", hdr.err);
        return hdr.rc;
    }
    TRY(comm_broadcast(t->rt->comm, t->model.params, t->model.param_count * sizeof(float), 0));
    TRY(comm_broadcast(t->rt->comm, t->opt.state, t->opt.state_count * sizeof(float), 0));
    t->step = hdr.meta.step;
    t->opt.t = hdr.meta.step;
    sampler_set_position(&t->sampler, hdr.meta.epoch, hdr.meta.step_in_epoch);
    if (t->rt->rank == 0)
        printf("vgpu_train: resumed from %s at step %lld (epoch %lld, batch %lld; written by %d ranks)\n",
               path, (long long)hdr.meta.step, (long long)hdr.meta.epoch + 1,
               (long long)hdr.meta.step_in_epoch, hdr.meta.nranks);
    return 0;
}

static void log_progress_(struct trainer *t, long epoch, double lr, int final, int quiet)
{
    double sums[3] = {t->window[0], t->window[1], t->window[2]};
    runtime_sum_doubles(t->rt, sums, 3);
    memset(t->window, 0, sizeof t->window);
    if (sums[2] == 0)
        return;
    double loss = sums[0] / sums[2], acc = sums[1] / sums[2];
    double sps = t->train_seconds > 0 ? t->samples_done / t->train_seconds : 0;
    t->last_loss = loss;
    if (t->rt->rank != 0 || quiet)
        return;
    if (t->metrics)
        fprintf(t->metrics, "train,%ld,%ld,%.6g,%.6f,%.6f,,%.1f,%.3f\n", epoch + 1, t->step, lr, loss,
                acc, sps, t->train_seconds);
    if (t->live) {
        int width = 30, done = (int)(width * t->step / (t->total_steps ? t->total_steps : 1));
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < done ? '#' : '.';
        bar[width] = '\0';
        printf("\r[%s] epoch %ld step %ld/%ld loss %.4f acc %.3f %.0f samples/s%s", bar, epoch + 1,
               t->step, t->total_steps, loss, acc, sps, final ? "\n" : "");
    } else {
        printf("epoch %3ld  step %6ld/%-6ld  loss %.4f  acc %.4f  lr %.3g  %8.0f samples/s\n",
               epoch + 1, t->step, t->total_steps, loss, acc, lr, sps);
    }
    fflush(stdout);
}

static void trainer_free_(struct trainer *t)
{
    sampler_free(&t->sampler);
    optim_free(&t->opt, t->dev);
    mlp_free(&t->model, t->dev);
    free(t->host_rows);
    free(t->host_labels);
    free(t->host_stats);
    if (t->metrics)
        fclose(t->metrics);
}

static int trainer_init_(struct trainer *t, const struct train_options *opts)
{
    const struct config *cfg = t->cfg;
    struct runtime *rt = t->rt;
    int dims[MLP_MAX_DIMS], n_dims;
    TRY(train_model_dims(cfg, t->data, dims, &n_dims));
    int max_rows = train_max_rows(cfg, rt->size);
    TRY(mlp_init(&t->model, t->dev, dims, n_dims, max_rows));
    TRY(optim_init(&t->opt, t->dev, cfg, t->model.param_count));
    size_t f = (size_t)t->data->train.features;
    t->host_rows = malloc((size_t)max_rows * f * sizeof(float));
    t->host_labels = malloc((size_t)max_rows * sizeof(int32_t));
    t->host_stats = malloc((size_t)max_rows * XENT_STATS * sizeof(float));
    if (!t->host_rows || !t->host_labels || !t->host_stats)
        return VGPU_ENOMEM;
    if (rt->rank == 0 && opts->metrics_path) {
        t->metrics = fopen(opts->metrics_path, "w");
        if (!t->metrics) {
            log_error("cannot write metrics to %s: %s", opts->metrics_path, strerror(errno));
            return -errno;
        }
        fprintf(t->metrics, "kind,epoch,step,lr,loss,accuracy,top5,samples_per_s,elapsed_s\n");
    }
    // Identical replicas: rank 0 draws the initial parameters, all receive them.
    if (rt->rank == 0) {
        float *host = malloc(t->model.param_count * sizeof(float));
        if (!host)
            return VGPU_ENOMEM;
        mlp_init_params_host(&t->model, host, (uint64_t)cfg->train.seed);
        int rc = device_copy_to_device(t->dev, t->model.params, host,
                                       t->model.param_count * sizeof(float));
        free(host);
        TRY(rc);
    }
    TRY(comm_broadcast(rt->comm, t->model.params, t->model.param_count * sizeof(float), 0));
    int rc = sampler_init(&t->sampler, t->data->train.count, cfg->train.batch_size,
                          cfg->train.drop_last, (uint64_t)cfg->train.seed, rt->size,
                          cfg->train.batch_weights.v, cfg->train.batch_weights.count);
    if (rc < 0) {
        if (rt->rank == 0)
            log_error("cannot sample batches: train.batch_size = %ld with %ld training samples, "
                      "%d ranks, %d batch weights (train.batch_weights needs one weight per rank)",
                      cfg->train.batch_size, t->data->train.count, rt->size,
                      cfg->train.batch_weights.count);
        return VGPU_ECONFIG;
    }
    t->total_steps = cfg->train.epochs * sampler_batches_per_epoch(&t->sampler);
    if (cfg->train.max_steps && cfg->train.max_steps < t->total_steps)
        t->total_steps = cfg->train.max_steps;
    // Under mpirun a rank's stdout is a pseudo-terminal even when the user's
    // is a pipe, so the bar is opt-in there (VGPU_PROGRESS=bar).
    const char *progress = getenv("VGPU_PROGRESS");
    int under_launcher = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK");
    t->live = rt->rank == 0 && !opts->quiet &&
              (progress ? !strcmp(progress, "bar")
                        : isatty(STDOUT_FILENO) && !under_launcher);
    return 0;
}

static int train_loop_(struct trainer *t, const struct train_options *opts, struct train_result *res)
{
    const struct config *cfg = t->cfg;
    struct runtime *rt = t->rt;
    struct batch_slice b;
    double lr = 0;
    long epoch = sampler_epoch(&t->sampler);
    while (epoch < cfg->train.epochs && t->step < t->total_steps) {
        double t0 = util_now_s();
        int more = 0;
        while (t->step < t->total_steps && (more = sampler_next(&t->sampler, rt->rank, &b)) == 1) {
            TRY(device_zero(t->dev, t->model.grads, t->model.param_count * sizeof(float)));
            TRY(load_rows_(t, &t->data->train, b.indices + b.offset, b.count));
            TRY(mlp_forward(&t->model, t->dev, (int)b.count));
            TRY(mlp_backward(&t->model, t->dev, (int)b.count, 1.0f / (float)b.global_count));
            double st[XENT_STATS] = {0, 0, 0};
            TRY(add_stats_(t, b.count, st));
            t->window[0] += st[0];
            t->window[1] += st[1];
            t->window[2] += (double)b.count;
            // Each rank's gradient is already divided by the global batch, so
            // the sum over ranks is the mean over the global batch.
            TRY(comm_all_reduce(rt->comm, t->model.grads, t->model.grads, t->model.param_count, COMM_SUM));
            lr = optim_lr_at(cfg, t->step, t->total_steps);
            TRY(optim_step(&t->opt, t->dev, t->model.params, t->model.grads, (float)lr));
            t->step++;
            t->samples_done += (double)b.global_count;
            int log_now = t->step % cfg->train.log_every == 0;
            if (log_now || (cfg->checkpoint.dir[0] && cfg->checkpoint.every_steps &&
                            t->step % cfg->checkpoint.every_steps == 0)) {
                t->train_seconds += util_now_s() - t0;
                if (log_now)
                    log_progress_(t, epoch, lr, 0, opts->quiet);
                if (cfg->checkpoint.dir[0] && cfg->checkpoint.every_steps &&
                    t->step % cfg->checkpoint.every_steps == 0)
                    TRY(save_checkpoint_(t));
                t0 = util_now_s();
            }
        }
        TRY(more < 0 ? more : 0);
        t->train_seconds += util_now_s() - t0;
        // The epoch ended unless max_steps cut it short.
        int ended = more == 0 ||
                    sampler_step_in_epoch(&t->sampler) >= sampler_batches_per_epoch(&t->sampler);
        if (ended) {
            epoch++;
            sampler_set_position(&t->sampler, epoch, 0);
        }
        log_progress_(t, epoch - ended, lr, 1, opts->quiet);
        TRY(evaluate_(t, &res->test_loss, &res->test_acc, &res->test_top5));
        res->epochs = epoch;
        if (rt->rank == 0) {
            if (!opts->quiet)
                printf("eval  epoch %3ld  test_loss %.4f  test_acc %.4f  top5 %.4f\n",
                       epoch - ended + 1, res->test_loss, res->test_acc, res->test_top5);
            if (t->metrics)
                fprintf(t->metrics, "eval,%ld,%ld,%.6g,%.6f,%.6f,%.6f,,%.3f\n", epoch - ended + 1,
                        t->step, lr, res->test_loss, res->test_acc, res->test_top5, t->train_seconds);
            fflush(stdout);
        }
    }
    if (cfg->checkpoint.dir[0])
        TRY(save_checkpoint_(t));
    res->steps = t->step;
    res->train_loss = t->last_loss;
    res->samples_per_s = t->train_seconds > 0 ? t->samples_done / t->train_seconds : 0;
    if (rt->rank == 0) {
        float *host = malloc(t->model.param_count * sizeof(float));
        if (!host)
            return VGPU_ENOMEM;
        int rc = device_copy_to_host(t->dev, host, t->model.params, t->model.param_count * sizeof(float));
        res->params_crc = util_crc32(0, host, t->model.param_count * sizeof(float));
        free(host);
        TRY(rc);
    }
    return 0;
}

int train_run(struct runtime *rt, struct train_data *data, const struct train_options *opts,
              struct train_result *result)
{
    struct trainer t = {.rt = rt, .dev = &rt->dev, .cfg = &rt->cfg, .data = data};
    memset(result, 0, sizeof *result);
    int rc = trainer_init_(&t, opts);
    rc = runtime_agree_min(rt, rc < 0 ? rc : 0);
    if (rc == 0 && opts->resume_path)
        rc = resume_(&t, opts->resume_path); // same verdict on every rank
    if (rc == 0) {
        rc = train_loop_(&t, opts, result);
        // Past set-up the ranks are in lockstep: a failure on one rank would
        // leave the others waiting in the next collective, so end the job.
        if (rc < 0)
            FATAL(1, "training failed: %s", status_str(rc));
    }
    trainer_free_(&t);
    return rc;
}
