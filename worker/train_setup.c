// train_setup.c: a training run's set-up and teardown: the data, each rank's
// own preparation (buffers, files, initial parameters), then in lockstep the
// initial broadcast and the warm-up.
#include "train_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostmem.h"
#include "log.h"
#include "util.h"

// Text: data.path's bytes (fortunes' directory by default) as sequences, the
// last data.val_fraction of them the test set.
static int load_text_(const struct train_config *c, uint64_t limit, const char *limit_name,
                      struct train_data *data, char *err, size_t err_bytes)
{
    const char *path = train_data_path(c);
    int rc = dataset_load_text(&data->train, &data->test, path, train_text_context(c),
                               c->data.val_fraction, limit, limit_name, err, err_bytes);
    if (rc == -ENOENT && !strcmp(path, TRAIN_DEFAULT_TEXT_PATH)) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        util_errorf(err, err_bytes, rc,
                    "%s (install the Debian package " TRAIN_TEXT_PACKAGE
                    ", or set data.path to a text file or directory)",
                    why);
    }
    return rc;
}

int train_load_data(const struct train_config *cfg, int ranks_on_host, struct train_data *data,
                    char *err, size_t err_bytes)
{
    memset(data, 0, sizeof *data);
    const struct train_config *c = cfg;
    // Each rank loads its own copy: a rank's share of the host's memory
    // bounds what a dataset may take (the IDX claims, the synthetic size).
    const uint64_t avail = hostmem_available();
    const uint64_t share = avail / (uint64_t)(ranks_on_host > 0 ? ranks_on_host : 1);
    char have[32], each[32];
    util_format_bytes(avail, have, sizeof have);
    util_format_bytes(share, each, sizeof each);
    if (c->data.dataset != DATASET_SYNTHETIC) {
        uint64_t limit = c->data.max_bytes;
        char limit_name[160] = "data.max_bytes";
        if (!limit || share < limit) {
            limit = share;
            snprintf(limit_name, sizeof limit_name,
                     "a rank's share of the host's memory: %s available for %d ranks", have,
                     ranks_on_host);
        }
        int rc = c->data.dataset == DATASET_TEXT
                     ? load_text_(c, limit, limit_name, data, err, err_bytes)
                     : dataset_load_dir_bounded(&data->train, &data->test, c->data.path, limit,
                                                limit_name, err, err_bytes);
        if (rc == 0) {
            snprintf(data->source, sizeof data->source, "%s from %.100s",
                     train_config_enum_name("data", "dataset", c->data.dataset),
                     train_data_path(c));
            data->name = train_config_enum_name("data", "dataset", c->data.dataset);
        } else if (rc == -ENOENT && c->data.fallback_synthetic &&
                   c->data.dataset != DATASET_TEXT &&
                   !strcmp(c->data.path, TRAIN_DEFAULT_DATA_PATH)) {
            // Only the default place: a path the user named must hold the data.
            snprintf(data->fallback, sizeof data->fallback,
                     "%.400s; using the synthetic dataset instead (data.fallback_synthetic = true; "
                     "install dataset-fashion-mnist or set data.path)", err);
        } else {
            return rc;
        }
    }
    if (!data->train.count) {
        int features = (int)c->data.synthetic_features;
        // Values are floats, plus a label each (and the class means).
        const double need = (double)(c->data.synthetic_train + c->data.synthetic_test) *
                                ((double)features * sizeof(float) + sizeof(int32_t)) +
                            10.0 * features * sizeof(float);
        char needs[32];
        util_format_bytes(need < 1.8e19 ? (uint64_t)need : UINT64_MAX, needs, sizeof needs);
        if (need > (double)share)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "the synthetic set (%ld + %ld samples x %d features) takes %s a "
                               "rank; each of the %d ranks on this host has %s of the %s "
                               "available: lower data.synthetic_train, synthetic_test or "
                               "synthetic_features, or run fewer ranks a host",
                               c->data.synthetic_train, c->data.synthetic_test, features, needs,
                               ranks_on_host, each, have);
        int rc = dataset_make_synthetic(&data->train, c->data.synthetic_train, features, 10,
                                        (uint64_t)c->train.seed, 0);
        if (rc == 0)
            rc = dataset_make_synthetic(&data->test, c->data.synthetic_test, features, 10,
                                        (uint64_t)c->train.seed, 1);
        if (rc < 0) {
            train_free_data(data);
            return util_errorf(err, err_bytes, rc, "cannot make the synthetic set (%s a rank): %s",
                               needs, status_str(rc));
        }
        snprintf(data->source, sizeof data->source, "synthetic (%ld train, %ld test, %d features)",
                 data->train.count, data->test.count, features);
        data->name = "synthetic";
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

// Rank 0's files: the checkpoint directory (made now rather than after the
// training it was to keep) and the metrics CSV. Bad paths are bad input.
static int open_files_(struct trainer *t)
{
    int rc = train_claim_checkpoint_dir(t);
    if (rc < 0)
        return rc;
    return t->opts->metrics_path
               ? train_open_metrics(t, t->opts->metrics_path, t->opts->resume_path != NULL)
               : 0;
}

// ---- initial parameters ----

// Reads exactly `bytes` of fd into out; err names path.
static int read_exactly_(int fd, const char *path, void *out, size_t bytes, char *err,
                         size_t err_bytes)
{
    size_t got = 0;
    while (got < bytes) {
        const ssize_t n = read(fd, (char *)out + got, bytes - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               n < 0 ? "model.init_file %s: read failed at byte %zu: %s"
                                     : "model.init_file %s: ended at byte %zu (%s)",
                               path, got, n < 0 ? strerror(errno) : "changed while read?");
        got += (size_t)n;
    }
    return 0;
}

// model.init_file into host[count]: exactly count float32s, little-endian
// (the byte order checkpoints use), every one finite.
static int read_init_file_(const char *path, float *host, size_t count, char *err,
                           size_t err_bytes)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "model.init_file %s: cannot open: %s",
                           path, strerror(errno));
    const size_t want = count * sizeof(float);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = util_errorf(err, err_bytes, VGPU_ECONFIG, "model.init_file %s: cannot stat: %s",
                         path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = util_errorf(err, err_bytes, VGPU_ECONFIG,
                         "model.init_file %s: not a regular file", path);
    else if ((uint64_t)st.st_size != (uint64_t)want)
        rc = util_errorf(err, err_bytes, VGPU_ECONFIG,
                         "model.init_file %s: %lld bytes, but the model's %zu parameters take "
                         "%zu (float32 each, little-endian, in the model's flat layout)",
                         path, (long long)st.st_size, count, want);
    else
        rc = read_exactly_(fd, path, host, want, err, err_bytes);
    close(fd);
    if (rc < 0)
        return rc;
    size_t bad = 0, first = 0;
    const unsigned char *b = (const unsigned char *)host;
    for (size_t i = 0; i < count; i++) { // in place: element i's bytes become element i
        const uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                           (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24;
        memcpy(&host[i], &u, sizeof u);
        if (!isfinite(host[i]) && bad++ == 0)
            first = i;
    }
    if (bad)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "model.init_file %s: %zu of %zu parameters are NaN or infinite (the "
                           "first at index %zu)", path, bad, count, first);
    return 0;
}

int train_initial_params(const struct train_config *cfg, const struct model *m, float *host,
                         char *err, size_t err_bytes)
{
    if (cfg->model.init_file[0])
        return read_init_file_(cfg->model.init_file, host, m->param_count, err, err_bytes);
    model_init_params(m, host, (uint64_t)cfg->train.seed);
    return 0;
}

// Identical replicas: rank 0 draws or reads the initial parameters
// (trainer_start broadcasts them).
static int init_params_(struct trainer *t)
{
    float *host = malloc(t->model.param_count * sizeof(float));
    if (!host)
        return VGPU_ENOMEM;
    char err[512];
    int rc = train_initial_params(t->cfg, &t->model, host, err, sizeof err);
    if (rc < 0)
        log_error("%s", err); // bad input, said in one line: no trace
    else
        TRY_GOTO(vgpu_memcpy_htod(t->dev, t->model.params, host,
                                  t->model.param_count * sizeof(float)),
                 rc, out);
out:
    free(host);
    return rc;
}

// The sampler; a split it refuses is bad input, explained by rank 0.
static int init_sampler_(struct trainer *t)
{
    const struct train_config *cfg = t->cfg;
    const struct job *job = t->job;
    int rc = sampler_init(&t->sampler, t->data->train.count, cfg->train.batch_size,
                          cfg->train.drop_last, (uint64_t)cfg->train.seed, job->size,
                          cfg->train.batch_weights.v, cfg->train.batch_weights.count);
    if (rc == 0)
        sampler_set_shuffle(&t->sampler, cfg->train.shuffle);
    if (rc == 0 || rc == VGPU_ENOMEM)
        return rc;
    const long samples = t->data->train.count, batch = cfg->train.batch_size;
    const int weights = cfg->train.batch_weights.count;
    if (job->rank != 0)
        return VGPU_ECONFIG;
    if (weights && weights != job->size)
        log_error("train.batch_weights has %d weights for %d ranks: give one per rank", weights,
                  job->size);
    else if (cfg->train.drop_last && batch > samples)
        log_error("train.batch_size = %ld is larger than the %ld training samples, so with "
                  "train.drop_last = true an epoch holds no batch: lower it, or set "
                  "train.drop_last = false", batch, samples);
    else
        log_error("cannot sample batches: train.batch_size = %ld, %ld training samples, %d "
                  "ranks, %d batch weights", batch, samples, job->size, weights);
    return VGPU_ECONFIG;
}

// Settings that run, but not as their user likely meant: said once, by rank 0.
static void warn_about_settings_(const struct trainer *t)
{
    const struct train_config *cfg = t->cfg;
    const int n = t->job->size;
    if (cfg->train.deterministic) {
        int per_rank[TRAIN_MAX_RANKS], idle = 0;
        train_micro_split(cfg, n, per_rank);
        for (int r = 0; r < n; r++)
            idle += per_rank[r] == 0;
        if (cfg->train.micro_batches > cfg->train.batch_size)
            log_warn("train.micro_batches = %ld is more than train.batch_size = %ld: %ld "
                     "micro-batches have no rows (lower micro_batches)",
                     cfg->train.micro_batches, cfg->train.batch_size,
                     cfg->train.micro_batches - cfg->train.batch_size);
        if (idle)
            log_warn("%d of %d ranks get no micro-batch (train.micro_batches = %ld): they only "
                     "wait; raise train.micro_batches to at least the rank count",
                     idle, n, cfg->train.micro_batches);
    } else {
        int idle = 0;
        for (int r = 0; r < n; r++)
            idle += train_rank_rows(cfg, n, r) == 0;
        if (idle)
            log_warn("%d of %d ranks get no rows of a batch of %ld (train.batch_size): they "
                     "only wait; raise train.batch_size to at least the rank count",
                     idle, n, cfg->train.batch_size);
    }
    if (cfg->checkpoint.every_steps && !cfg->checkpoint.dir[0])
        log_warn("checkpoint.every_steps = %ld writes nothing: checkpoint.dir is empty",
                 cfg->checkpoint.every_steps);
}

int trainer_prepare(struct trainer *t)
{
    const struct train_config *cfg = t->cfg;
    struct job *job = t->job;
    if (job->size > TRAIN_MAX_RANKS) {
        if (job->rank == 0)
            log_error("%d ranks: this build trains with at most %d", job->size, TRAIN_MAX_RANKS);
        return VGPU_ECONFIG;
    }
    const int max_rows = train_max_rows(cfg, job->size, dataset_label_width(&t->data->train));
    TRY(model_init(&t->model, t->dev, cfg, &t->data->train, max_rows));
    TRY(optim_init(&t->opt, t->dev, cfg, t->model.param_count));
    TRY(train_staging_prepare(t, max_rows));
    if (t->mode->prepare)
        TRY(t->mode->prepare(t));
    if (job->rank == 0) {
        warn_about_settings_(t);
        TRY(open_files_(t));
        const int rc = init_params_(t); // traces its own failures but bad input
        if (rc < 0)
            return rc;
    }
    TRY(init_sampler_(t));
    TRY(train_report_prepare(t));
    return train_balance_prepare(t);
}

// One forward and backward pass on the first training samples with this
// rank's step shapes, through the same input path as a step, and one
// gradient all-reduce, before the clock starts: the one-time costs (GEMM
// kernels generated for each shape, first touch of buffers, the collective's
// first connection; about 0.1 s on CPU devices) belong to start-up, as a
// GPU's warm-up does, not to the training rate. Parameters are untouched and
// every step overwrites the gradient. Under dynamic balance the ranks then
// measure and share their fixed costs per step.
static int warm_up_(struct trainer *t)
{
    struct model *m = &t->model;
    long rows = train_rank_rows(t->cfg, t->job->size, t->job->rank);
    rows = rows < t->data->train.count ? rows : t->data->train.count;
    // Every rank measures its fixed cost at the equal share (within the
    // staging, which holds twice it): a rank that starts with a few rows
    // would read it off noise, and a fixed cost read as none makes the rank
    // look slow for good.
    long probe = (t->cfg->train.batch_size + t->job->size - 1) / t->job->size;
    probe = probe < t->data->train.count ? probe : t->data->train.count;
    const long n_first = rows > probe ? rows : probe;
    uint32_t *first = malloc((size_t)(n_first > 0 ? n_first : 1) * sizeof *first);
    if (!first)
        return VGPU_ENOMEM;
    for (long i = 0; i < n_first; i++)
        first[i] = (uint32_t)i;
    double stats[MODEL_MAX_STATS] = {0}, seconds;
    int rc = 0;
    if (rows > 0)
        TRY_GOTO(train_compute_rows(t, first, rows, 1.0f, NULL, stats, 1, &seconds), rc, out);
    TRY_GOTO(vgpu_all_reduce(m->grads, m->grads, m->param_count, vgpu_float32, vgpu_sum,
                             t->job->v),
             rc, out);
    if (t->balance.on)
        rc = train_balance_measure(t, first, probe);
out:
    free(first);
    return rc;
}

int trainer_start(struct trainer *t)
{
    TRY(vgpu_broadcast(t->model.params, t->model.params, t->model.param_count, vgpu_float32, 0,
                       t->job->v));
    TRY(warm_up_(t));
    return 0;
}

void trainer_free(struct trainer *t)
{
    train_balance_free(t);
    train_report_free(t);
    sampler_free(&t->sampler);
    optim_free(&t->opt, t->dev);
    train_step_free(t);
    model_free(&t->model, t->dev);
    train_checkpoint_free(t);
}
