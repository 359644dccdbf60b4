// train.c: the synchronous data-parallel training loop.
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "balance.h"
#include "checkpoint.h"
#include "log.h"
#include "optim.h"
#include "preempt.h"
#include "sampler.h"
#include "util.h"

// ---- data ----

int train_load_data(const struct config *cfg, struct train_data *data, char *err, size_t err_bytes)
{
    memset(data, 0, sizeof *data);
    const struct config *c = cfg;
    int rc = 0;
    if (c->data.dataset != DATASET_SYNTHETIC) {
        rc = dataset_load_dir(&data->train, &data->test, c->data.path, err, err_bytes);
        if (rc == 0) {
            snprintf(data->source, sizeof data->source, "%s from %.100s",
                     config_enum_name("data", "dataset", c->data.dataset), c->data.path);
        } else if (rc == -ENOENT && c->data.fallback_synthetic) {
            snprintf(data->fallback, sizeof data->fallback,
                     "%.400s; using the synthetic dataset instead (data.fallback_synthetic = true; "
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

// Rows of one micro-batch in deterministic mode (the largest of the M pieces).
static long micro_rows_(const struct config *cfg)
{
    return (cfg->train.batch_size + cfg->train.micro_batches - 1) / cfg->train.micro_batches;
}

// Micro-batches rank r computes in deterministic mode: M split over the ranks
// like samples are (equal, or by train.batch_weights). Fills per_rank[nranks].
static void micro_split_(const struct config *cfg, int nranks, int *per_rank)
{
    long counts[TRAIN_MAX_RANKS], offsets[TRAIN_MAX_RANKS];
    sampler_split(cfg->train.micro_batches, nranks, cfg->train.batch_weights.v,
                  cfg->train.batch_weights.count, counts, offsets);
    for (int r = 0; r < nranks; r++)
        per_rank[r] = (int)counts[r];
}

int train_max_rows(const struct config *cfg, int nranks)
{
    long most = 1;
    if (cfg->train.deterministic) {
        most = micro_rows_(cfg);
    } else if (nranks > TRAIN_MAX_RANKS) { // the split is only needed for its maximum
        most = cfg->train.batch_size;
    } else {
        long counts[TRAIN_MAX_RANKS], offsets[TRAIN_MAX_RANKS];
        sampler_split(cfg->train.batch_size, nranks, cfg->train.batch_weights.v,
                      cfg->train.batch_weights.count, counts, offsets);
        for (int r = 0; r < nranks; r++)
            most = counts[r] > most ? counts[r] : most;
        if (cfg->train.balance == BALANCE_DYNAMIC)
            most = balance_max_rows(cfg->train.batch_size, nranks, counts);
    }
    // Evaluation runs in chunks of EVAL_CHUNK rows through the same buffers.
    return (int)(most > EVAL_CHUNK ? most : EVAL_CHUNK);
}

// Rows of the batch staging: a step's piece or an evaluation chunk, and
// whole global batches for the verify replay.
static long staging_rows_(const struct config *cfg, int max_rows, int verify)
{
    return verify && cfg->train.batch_size > max_rows ? cfg->train.batch_size : max_rows;
}

uint64_t train_device_bytes(const struct config *cfg, const struct train_data *data, int nranks,
                            int verify)
{
    int dims[MLP_MAX_DIMS], n;
    struct mlp layout;
    if (nranks > TRAIN_MAX_RANKS || train_model_dims(cfg, data, dims, &n) < 0 ||
        mlp_layout(&layout, dims, n, train_max_rows(cfg, nranks)) < 0)
        return 0;
    const int state = optim_state_per_param(cfg->train.optimizer);
    const uint64_t param_bytes = layout.param_count * sizeof(float);
    uint64_t bytes = mlp_device_bytes(&layout, state);
    if (data->train.codes) // dev_codes and dev_lut
        bytes += (uint64_t)staging_rows_(cfg, layout.max_rows, verify) * (uint64_t)dims[0] +
                 ARENA_ALIGN + sizeof data->train.lut + ARENA_ALIGN;
    if (cfg->train.deterministic) {
        int per_rank[TRAIN_MAX_RANKS], most = 0;
        micro_split_(cfg, nranks, per_rank);
        for (int r = 0; r < nranks; r++)
            most = per_rank[r] > most ? per_rank[r] : most;
        bytes += (uint64_t)most * param_bytes + ARENA_ALIGN +
                 comm_tree_scratch_bytes(nranks, most, layout.param_count) + ARENA_ALIGN;
    }
    if (verify) { // rank 0's single-device replay: a second model and optimizer
        struct mlp ref;
        long rows = cfg->train.deterministic ? micro_rows_(cfg) : cfg->train.batch_size;
        if (mlp_layout(&ref, dims, n, (int)rows) < 0)
            return 0;
        bytes += mlp_device_bytes(&ref, state);
        if (cfg->train.deterministic)
            bytes += (uint64_t)cfg->train.micro_batches * param_bytes + ARENA_ALIGN;
    }
    return bytes;
}

// ---- the loop ----

// Steps between the ranks' agreement on a pending SIGTERM/SIGINT (a step is
// milliseconds; a scheduler's grace period is seconds).
#define PREEMPT_CHECK_STEPS 10

struct trainer {
    struct runtime *rt;
    device_t *dev;
    const struct config *cfg;
    struct train_data *data;
    struct mlp model;
    struct optimizer opt;
    struct sampler sampler;
    // Staging for one piece of a batch, [host_rows_cap, features]: float
    // values, or for coded sets their 8-bit codes, which cross to the device
    // (dev_codes) and are decoded there by the table in dev_lut.
    float *host_rows;
    uint8_t *host_codes;
    uint8_t *dev_codes;
    float *dev_lut;            // device: [256], the table of lut_set
    const struct dataset *lut_set;
    int32_t *host_labels;      // [host_rows_cap]
    float *host_stats;         // [host_rows_cap, XENT_STATS]
    long host_rows_cap;
    FILE *metrics;
    long step, total_steps;
    double window[3];          // loss sum, correct, samples since the last log line
    double last_loss;          // mean loss of the last logged window (all ranks)
    int warned_nonfinite;      // rank 0 said the loss went NaN / infinite
    double train_seconds;      // time in the training loop proper
    double samples_done;       // global samples trained on
    int live;                  // progress bar on a terminal
    // deterministic mode
    int parts_per_rank[TRAIN_MAX_RANKS]; // micro-batches each rank computes
    int first_part;            // this rank's first micro-batch
    float *parts;              // device: this rank's micro-batch gradients [parts, param_count]
    double *micro_stats;       // [micro_batches, XENT_STATS]
    // train.balance = dynamic (normal mode)
    int balancing;
    struct balancer bal;       // the split in force; rank 0 also estimates speeds
    double busy_s, busy_rows;  // this rank's compute time and rows since the last exchange
    long busy_steps;           // and steps
    double fixed_s;            // this rank's compute per step that does not grow with rows
    double *exchange;          // [2 + 3 * ranks] the exchange's slots
    long *proposal;            // rank 0: split to announce at the next exchange [ranks]
    int proposing;             // rank 0: proposal holds a new split
    double *rows_total;        // rank 0: rows each rank computed in this run [ranks]
    double *log_slots;         // [3 + ranks] a progress line's sums and peak memories
    // test-only: perturb one rank's parameters at one step (VGPU_TEST_PERTURB=RANK@STEP)
    int perturb_rank;
    long perturb_step;
    // test-only: one rank's compute lasts `slow_factor` times as long, standing
    // in for a slower device (VGPU_TEST_SLOW=RANK:FACTOR)
    int slow_rank;
    double slow_factor;
};

// Copies rows `indices[0..count)` of ds into model m's input and label
// buffers on the device.
static int load_rows_(struct trainer *t, struct mlp *m, const struct dataset *ds,
                      const uint32_t *indices, long count)
{
    const size_t values = (size_t)count * (size_t)ds->features;
    if (ds->codes) {
        if (t->lut_set != ds) { // the test set's table after the train set's, or back
            TRY(device_copy_to_device(t->dev, t->dev_lut, ds->lut, sizeof ds->lut));
            t->lut_set = ds;
        }
        dataset_gather_codes(ds, indices, count, t->host_codes);
        TRY(device_copy_to_device(t->dev, t->dev_codes, t->host_codes, values));
        TRY(device_decode_u8(t->dev, m->acts[0], t->dev_codes, t->dev_lut, values));
    } else {
        dataset_gather(ds, indices, count, t->host_rows);
        TRY(device_copy_to_device(t->dev, m->acts[0], t->host_rows, values * sizeof(float)));
    }
    for (long i = 0; i < count; i++)
        t->host_labels[i] = ds->labels[indices[i]];
    TRY(device_copy_to_device(t->dev, m->labels, t->host_labels, (size_t)count * sizeof(int32_t)));
    return 0;
}

// Sums the stats of `rows` samples of model m into acc[0..2] (loss, correct,
// top5), row by row in order.
static int add_stats_(struct trainer *t, struct mlp *m, long rows, double *acc)
{
    if (rows <= 0)
        return 0;
    TRY(device_copy_to_host(t->dev, t->host_stats, m->stats, (size_t)rows * XENT_STATS * sizeof(float)));
    for (long i = 0; i < rows; i++)
        for (int k = 0; k < XENT_STATS; k++)
            acc[k] += t->host_stats[i * XENT_STATS + k];
    return 0;
}

// Test-set evaluation in fixed chunks of EVAL_CHUNK rows, chunk j on rank
// j % N. Each chunk's sums land in their own slot (the other ranks add zeros,
// which is exact) and are added in chunk order, so the result has the same
// bits for any rank count.
static int evaluate_(struct trainer *t, double *loss, double *acc, double *top5)
{
    const struct dataset *ds = &t->data->test;
    const long chunks = (ds->count + EVAL_CHUNK - 1) / EVAL_CHUNK;
    double *slots = calloc((size_t)(chunks ? chunks : 1) * 3, sizeof *slots);
    uint32_t *idx = malloc(EVAL_CHUNK * sizeof *idx);
    int rc = !slots || !idx ? VGPU_ENOMEM : 0;
    for (long j = t->rt->rank; rc == 0 && j < chunks; j += t->rt->size) {
        long at = j * EVAL_CHUNK, rows = ds->count - at < EVAL_CHUNK ? ds->count - at : EVAL_CHUNK;
        for (long i = 0; i < rows; i++)
            idx[i] = (uint32_t)(at + i);
        if ((rc = load_rows_(t, &t->model, ds, idx, rows)) == 0 &&
            (rc = mlp_forward(&t->model, t->dev, (int)rows)) == 0 &&
            (rc = mlp_eval_stats(&t->model, t->dev, (int)rows)) == 0)
            rc = add_stats_(t, &t->model, rows, slots + 3 * j);
    }
    free(idx);
    if (rc == 0)
        runtime_sum_doubles(t->rt, slots, (int)(3 * chunks));
    double sums[3] = {0, 0, 0};
    for (long j = 0; rc == 0 && j < chunks; j++)
        for (int k = 0; k < 3; k++)
            sums[k] += slots[3 * j + k];
    free(slots);
    TRY(rc);
    double n = ds->count ? (double)ds->count : 1;
    *loss = sums[0] / n;
    *acc = sums[1] / n;
    *top5 = sums[2] / n;
    return 0;
}

// ---- one step's gradient ----

// The sharded update's callback: this rank's optimizer step on one range.
struct shard_update {
    struct trainer *t;
    float lr;
};

static int update_shard_(void *arg, size_t first, size_t count)
{
    struct shard_update *u = arg;
    struct trainer *t = u->t;
    return optim_update_range(&t->opt, t->dev, t->model.params, t->model.grads, u->lr, first,
                              count);
}

// VGPU_TEST_SLOW: the slowed rank sleeps (factor - 1) times what its compute took.
static void maybe_slow_(const struct trainer *t, double start)
{
    if (t->slow_rank != t->rt->rank || t->slow_factor <= 1)
        return;
    double extra = (t->slow_factor - 1) * (util_now_s() - start);
    struct timespec ts = {(time_t)extra, (long)((extra - floor(extra)) * 1e9)};
    nanosleep(&ts, NULL);
}

// This rank's compute of one step on training samples indices[0..count):
// forward, backward (the gradient of the loss sum times grad_scale, written
// to m->grads; zeros for no rows) and the stats, added into acc. With
// `timed`, it waits for the device (on an asynchronous device: the work done,
// not its launch), applies the test-only slowdown and sets *seconds.
static int compute_rows_(struct trainer *t, const uint32_t *indices, long count, float grad_scale,
                         double *acc, int timed, double *seconds)
{
    struct mlp *m = &t->model;
    const double start = util_now_s();
    if (count > 0) {
        TRY(load_rows_(t, m, &t->data->train, indices, count));
        TRY(mlp_forward(m, t->dev, (int)count));
    }
    TRY(mlp_backward(m, t->dev, (int)count, grad_scale));
    TRY(add_stats_(t, m, count, acc));
    if (!timed)
        return 0;
    TRY(device_sync(t->dev));
    maybe_slow_(t, start);
    *seconds = util_now_s() - start;
    return 0;
}

// Normal mode: this rank's piece of the batch in one pass, then the
// gradients are summed over the ranks with the optimizer step sharded into
// the all-reduce: every rank updates only the ranges of the summed gradient
// it completes, and the updated parameters are all-gathered (each rank runs
// 1/N of the optimizer; the result is the same as a full update everywhere).
// Each rank's gradient is already divided by the global batch, so the sum is
// the mean over the global batch.
static int step_normal_(struct trainer *t, const struct batch_slice *b, float lr, double *stats)
{
    struct mlp *m = &t->model;
    // This rank's compute, timed before any wait for the others.
    double seconds = 0;
    TRY(compute_rows_(t, b->indices + b->offset, b->count, 1.0f / (float)b->global_count, stats,
                      t->balancing || t->slow_rank == t->rt->rank, &seconds));
    if (t->balancing) {
        t->busy_s += seconds;
        t->busy_rows += (double)b->count;
        t->busy_steps++;
    }
    if (!t->cfg->train.shard_optimizer) {
        TRY(comm_all_reduce(t->rt->comm, m->grads, m->grads, m->param_count, COMM_SUM));
        return optim_step(&t->opt, t->dev, m->params, m->grads, lr);
    }
    optim_begin_step(&t->opt);
    struct shard_update u = {t, lr};
    return comm_all_reduce_update(t->rt->comm, m->grads, m->params, m->param_count, update_shard_,
                                  &u);
}

// After sharded steps each rank's optimizer state is current only in its own
// ranges: the same collective with zero gradients and no update all-gathers
// those ranges, so that checkpoints and replica checks see the full state.
// (Backends without the sharded form keep the full state everywhere: then
// this changes nothing.)
static int noop_update_(void *arg, size_t first, size_t count)
{
    (void)arg, (void)first, (void)count;
    return 0;
}

static int gather_optimizer_state_(struct trainer *t)
{
    if (t->cfg->train.deterministic || !t->cfg->train.shard_optimizer) // full steps everywhere
        return 0;
    float *arrays[2];
    int k = optim_state_arrays(&t->opt, arrays);
    for (int i = 0; i < k; i++) {
        TRY(device_zero(t->dev, t->model.grads, t->model.param_count * sizeof(float)));
        TRY(comm_all_reduce_update(t->rt->comm, t->model.grads, arrays[i], t->model.param_count,
                                   noop_update_, NULL));
    }
    return 0;
}

// Deterministic mode, the part every rank count shares: the global batch is
// cut into train.micro_batches pieces by position alone; the gradient of
// micro-batches [first, first + n) goes each into its own buffer parts[k]
// (computed by the same code with the same shapes on any rank), and its stats
// into micro_stats[m].
static int micro_gradients_(struct trainer *t, struct mlp *m, const struct batch_slice *b,
                            int first, int n, float *parts, double *micro_stats)
{
    const long M = t->cfg->train.micro_batches;
    long *rows = malloc(2 * (size_t)M * sizeof *rows);
    if (!rows)
        return VGPU_ENOMEM;
    long *offsets = rows + M;
    sampler_split(b->global_count, (int)M, NULL, 0, rows, offsets);
    float *const grads = m->grads;
    int rc = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        const int mb = first + k;
        // The model writes its gradient wherever m->grads points.
        m->grads = parts + (size_t)k * m->param_count;
        if (rows[mb] > 0 &&
            (rc = load_rows_(t, m, &t->data->train, b->indices + offsets[mb], rows[mb])) == 0)
            rc = mlp_forward(m, t->dev, (int)rows[mb]);
        if (rc == 0 &&
            (rc = mlp_backward(m, t->dev, (int)rows[mb], 1.0f / (float)b->global_count)) == 0)
            rc = add_stats_(t, m, rows[mb], micro_stats + XENT_STATS * mb);
    }
    m->grads = grads;
    free(rows);
    return rc;
}

static int gradient_deterministic_(struct trainer *t, const struct batch_slice *b, double *stats)
{
    struct mlp *m = &t->model;
    const long M = t->cfg->train.micro_batches;
    const int mine = t->parts_per_rank[t->rt->rank];
    memset(t->micro_stats, 0, (size_t)M * XENT_STATS * sizeof(double));
    TRY(micro_gradients_(t, m, b, t->first_part, mine, t->parts, t->micro_stats));
    TRY(comm_all_reduce_tree(t->rt->comm, t->parts, t->parts_per_rank, m->grads, m->param_count));
    // Stats: each micro-batch's slot is filled by one rank only (exact sums),
    // then added in micro-batch order; rank 0 keeps the total for the window.
    TRY(runtime_sum_doubles(t->rt, t->micro_stats, (int)(M * XENT_STATS)));
    if (t->rt->rank == 0)
        for (long mb = 0; mb < M; mb++)
            for (int k = 0; k < XENT_STATS; k++)
                stats[k] += t->micro_stats[mb * XENT_STATS + k];
    return 0;
}

// ---- replica consistency ----

// Names parameter `index` of model m, e.g. "layer1.weight[12,5]".
static void describe_param_(const struct mlp *m, size_t index, char *buf, size_t bytes)
{
    for (int l = 0; l < m->n_layers; l++) {
        const size_t w = m->w_offset[l], bias = m->b_offset[l];
        const size_t out = (size_t)m->dims[l + 1];
        if (index >= w && index < w + (size_t)m->dims[l] * out) {
            snprintf(buf, bytes, "layer%d.weight[%zu,%zu]", l, (index - w) / out, (index - w) % out);
            return;
        }
        if (index >= bias && index < bias + out) {
            snprintf(buf, bytes, "layer%d.bias[%zu]", l, index - bias);
            return;
        }
    }
    snprintf(buf, bytes, "parameter %zu", index);
}

// Copies this rank's parameters then optimizer state into one host array.
static float *replica_state_(struct trainer *t, size_t *count)
{
    const size_t np = t->model.param_count, ns = t->opt.state_count;
    float *host = malloc((np + ns + 1) * sizeof(float));
    if (!host)
        return NULL;
    if (device_copy_to_host(t->dev, host, t->model.params, np * sizeof(float)) < 0 ||
        (ns && device_copy_to_host(t->dev, host + np, t->opt.state, ns * sizeof(float)) < 0)) {
        free(host);
        return NULL;
    }
    *count = np + ns;
    return host;
}

// Every rank hashes its parameters and optimizer state; all hashes must equal
// rank 0's. On a mismatch rank 0's state is broadcast, each diverged rank
// finds its first differing value, and rank 0 names them all. Returns 0 or
// VGPU_EMISMATCH on every rank.
static int check_replicas_(struct trainer *t)
{
    struct runtime *rt = t->rt;
    TRY(gather_optimizer_state_(t));
    size_t count = 0;
    float *mine = replica_state_(t, &count);
    uint64_t *hashes = malloc((size_t)rt->size * sizeof *hashes);
    // One verdict on the allocations, so no rank gathers while another has
    // given up.
    int rc = runtime_agree_min(rt, mine && hashes ? 0 : VGPU_ENOMEM);
    if (rc < 0) {
        free(hashes);
        free(mine);
        return rc;
    }
    uint64_t hash = util_hash64(0, mine, count * sizeof(float));
    runtime_gather_all(rt, &hash, hashes, sizeof hash);
    int diverged = 0;
    for (int r = 1; r < rt->size; r++)
        diverged += hashes[r] != hashes[0];
    free(hashes);
    if (!diverged) {
        free(mine);
        return 0;
    }

    struct difference {
        int64_t index;     // first differing value; -1 = none
        float mine, ref;
    } d = {-1, 0, 0}, *all = malloc((size_t)rt->size * sizeof d);
    float *ref = malloc(count * sizeof(float));
    if (!all || !ref)
        FATAL(1, "out of memory while reporting diverged replicas");
    if (rt->rank == 0)
        memcpy(ref, mine, count * sizeof(float));
    runtime_broadcast(rt, ref, count * sizeof(float), 0);
    for (size_t i = 0; i < count; i++)
        if (memcmp(&mine[i], &ref[i], sizeof(float))) {
            d = (struct difference){(int64_t)i, mine[i], ref[i]};
            break;
        }
    runtime_gather_all(rt, &d, all, sizeof d);
    if (rt->rank == 0) {
        char ranks[256] = "";
        for (int r = 1; r < rt->size; r++)
            if (all[r].index >= 0)
                snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), "%s%d",
                         ranks[0] ? ", " : "", r);
        log_error("replica check at step %ld: rank%s %s diverged from rank 0", t->step,
                  strchr(ranks, ',') ? "s" : "", ranks);
        for (int r = 1; r < rt->size; r++) {
            if (all[r].index < 0)
                continue;
            const size_t np = t->model.param_count, i = (size_t)all[r].index;
            char name[96];
            describe_param_(&t->model, i < np ? i : (i - np) % np, name, sizeof name);
            log_error("  rank %d: first difference in %s%s (flat index %lld): %.9g on rank %d, "
                      "%.9g on rank 0", r, i < np ? "" : "the optimizer state of ", name,
                      (long long)i, all[r].mine, r, all[r].ref);
        }
    }
    free(all);
    free(ref);
    free(mine);
    return VGPU_EMISMATCH;
}

// Test-only fault: VGPU_TEST_PERTURB=RANK@STEP nudges one parameter of RANK
// after STEP, so tests can check that the replica check catches it.
static int maybe_perturb_(struct trainer *t)
{
    if (t->perturb_rank != t->rt->rank || t->perturb_step != t->step)
        return 0;
    const size_t i = t->model.param_count / 2;
    float v;
    TRY(device_copy_to_host(t->dev, &v, t->model.params + i, sizeof v));
    v += 1e-3f;
    log_warn("VGPU_TEST_PERTURB: perturbing parameter %zu at step %ld", i, t->step);
    return device_copy_to_device(t->dev, t->model.params + i, &v, sizeof v);
}

// ---- checkpoints ----

static int save_checkpoint_(struct trainer *t, const char *dir, char *path, size_t path_bytes)
{
    const struct config *cfg = t->cfg;
    TRY(gather_optimizer_state_(t));
    int rc = 0;
    char err[512] = "";
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
        snprintf(meta.optimizer, sizeof meta.optimizer, "%s",
                 config_enum_name("train", "optimizer", cfg->train.optimizer));
        if (!params || !state)
            rc = VGPU_ENOMEM;
        if (!rc)
            rc = device_copy_to_host(t->dev, params, t->model.params, np * sizeof(float));
        if (!rc)
            rc = device_copy_to_host(t->dev, state, t->opt.state, ns * sizeof(float));
        if (!rc)
            rc = checkpoint_make_dir(dir, err, sizeof err);
        if (!rc && (rc = checkpoint_path(dir, t->step, path, path_bytes)) == 0)
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
                                     .global_batch = t->cfg->train.batch_size,
                                     .seed = (uint64_t)t->cfg->train.seed};
            for (int i = 0; i < t->model.n_dims; i++)
                want.dims[i] = t->model.dims[i];
            snprintf(want.optimizer, sizeof want.optimizer, "%s",
                     config_enum_name("train", "optimizer", t->cfg->train.optimizer));
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
        // A bad --resume path is bad input (exit 2), as a damaged or
        // mismatched file is; other errors (EIO) stay what they are.
        const int bad_path = hdr.rc == -ENOENT || hdr.rc == -EISDIR || hdr.rc == -ENOTDIR ||
                             hdr.rc == -EACCES;
        return bad_path ? VGPU_ECONFIG : hdr.rc;
    }
    TRY(comm_broadcast(t->rt->comm, t->model.params, t->model.param_count * sizeof(float), 0));
    TRY(comm_broadcast(t->rt->comm, t->opt.state, t->opt.state_count * sizeof(float), 0));
    t->step = hdr.meta.step;
    t->opt.t = hdr.meta.step;
    // At an epoch's last step the checkpoint precedes that epoch's
    // evaluation (checkpoints are written right after their step): the
    // resumed run does it, as everything after the checkpoint.
    sampler_set_position(&t->sampler, (long)hdr.meta.epoch, (long)hdr.meta.step_in_epoch);
    if (t->rt->rank == 0)
        printf("vgpu_train: resumed from %s at step %lld (epoch %lld, batch %lld; written by %d ranks)\n",
               path, (long long)hdr.meta.step, (long long)hdr.meta.epoch + 1,
               (long long)hdr.meta.step_in_epoch, hdr.meta.nranks);
    return 0;
}

// Per-rank values for a log line, each times `scale` in format `fmt` (one
// double): "a,b,c" for up to 8 ranks, else "lo..hi".
static void format_ranks_(char *buf, size_t bytes, const double *v, int n, double scale,
                          const char *fmt)
{
    char one[64];
    buf[0] = '\0';
    if (n > 8) {
        double lo = v[0], hi = v[0];
        for (int r = 1; r < n; r++)
            lo = fmin(lo, v[r]), hi = fmax(hi, v[r]);
        snprintf(one, sizeof one, fmt, hi * scale);
        int len = snprintf(buf, bytes, fmt, lo * scale);
        if (len >= 0 && (size_t)len < bytes)
            snprintf(buf + len, bytes - (size_t)len, "..%s", one);
        return;
    }
    for (int r = 0, len = 0; r < n && len >= 0 && (size_t)len < bytes; r++) {
        snprintf(one, sizeof one, fmt, v[r] * scale);
        len += snprintf(buf + len, bytes - (size_t)len, "%s%s", r ? "," : "", one);
    }
}

#define MIB_ (1.0 / (1024.0 * 1024.0))

void train_format_mem(char *buf, size_t bytes, const double *peak_bytes, int n)
{
    if (n <= 8) {
        format_ranks_(buf, bytes, peak_bytes, n, MIB_, "%.1fM");
        return;
    }
    int at = 0;
    for (int r = 1; r < n; r++)
        at = peak_bytes[r] > peak_bytes[at] ? r : at;
    snprintf(buf, bytes, "max %.1fM (rank %d)", peak_bytes[at] * MIB_, at);
}

// A collective: every rank's window sums and its peak device memory (slot
// 3 + rank) reach rank 0, which prints the progress line.
static void log_progress_(struct trainer *t, long epoch, double lr, int final, int quiet)
{
    const int n = t->rt->size;
    double *sums = t->log_slots;
    memset(sums, 0, (3 + (size_t)n) * sizeof *sums);
    memcpy(sums, t->window, sizeof t->window);
    sums[3 + t->rt->rank] = (double)t->dev->arena.stats.peak_bytes;
    runtime_sum_doubles(t->rt, sums, 3 + n);
    memset(t->window, 0, sizeof t->window);
    if (sums[2] == 0)
        return;
    double loss = sums[0] / sums[2], acc = sums[1] / sums[2];
    double sps = t->train_seconds > 0 ? t->samples_done / t->train_seconds : 0;
    t->last_loss = loss;
    if (t->rt->rank != 0)
        return;
    if (!isfinite(loss) && !t->warned_nonfinite) {
        t->warned_nonfinite = 1;
        log_warn("training loss is %g at step %ld: the model diverged (a lower train.lr or more "
                 "train.warmup_steps may help)", loss, t->step);
    }
    if (t->metrics) { // flushed per row: a killed run keeps what it logged
        fprintf(t->metrics, "train,%ld,%ld,%.6g,%.6f,%.6f,,%.1f,%.3f\n", epoch + 1, t->step, lr, loss,
                acc, sps, t->train_seconds);
        fflush(t->metrics);
    }
    if (quiet)
        return;
    char mem[256], split[160] = "";
    train_format_mem(mem, sizeof mem, sums + 3, n);
    if (t->balancing) { // the memory slots are formatted: reuse them for the split
        for (int r = 0; r < n; r++)
            sums[3 + r] = (double)t->bal.counts[r];
        memcpy(split, "  split ", 9);
        format_ranks_(split + 8, sizeof split - 8, sums + 3, n, 1.0, "%.0f");
    }
    if (t->live) {
        int width = 30, done = (int)(width * t->step / (t->total_steps ? t->total_steps : 1));
        char bar[64];
        for (int i = 0; i < width; i++)
            bar[i] = i < done ? '#' : '.';
        bar[width] = '\0';
        printf("\r[%s] epoch %ld step %ld/%ld loss %.4f acc %.3f %.0f samples/s mem %s%s", bar,
               epoch + 1, t->step, t->total_steps, loss, acc, sps, mem, final ? "\n" : "");
    } else {
        printf("epoch %3ld  step %6ld/%-6ld  loss %.4f  acc %.4f  lr %.3g  %8.0f samples/s  mem %s%s\n",
               epoch + 1, t->step, t->total_steps, loss, acc, lr, sps, mem, split);
    }
    fflush(stdout);
}

static void trainer_free_(struct trainer *t)
{
    balance_free(&t->bal);
    free(t->exchange);
    free(t->proposal);
    free(t->rows_total);
    free(t->log_slots);
    sampler_free(&t->sampler);
    optim_free(&t->opt, t->dev);
    if (t->parts)
        device_free(t->dev, t->parts);
    if (t->dev_lut)
        device_free(t->dev, t->dev_lut);
    if (t->dev_codes)
        device_free(t->dev, t->dev_codes);
    mlp_free(&t->model, t->dev);
    free(t->host_rows);
    free(t->host_codes);
    free(t->host_labels);
    free(t->host_stats);
    free(t->micro_stats);
    if (t->metrics)
        fclose(t->metrics);
}

// One step's compute on training samples first[0..rows), timed as a step's is.
static int timed_pass_(struct trainer *t, const uint32_t *first, long rows, double *seconds)
{
    double stats[XENT_STATS] = {0};
    return compute_rows_(t, first, rows, 1.0f, stats, 1, seconds);
}

// Dynamic balance: this rank's compute per step that does not grow with rows
// (launches, per-call overheads), read off the line through the best of three
// timed passes at its rows and at a quarter of them. Kept to three quarters
// of the smaller pass, so noise cannot claim all of a step.
static int measure_fixed_(struct trainer *t, const uint32_t *first, long rows, double *fixed)
{
    *fixed = 0;
    const long small = rows / 4;
    if (small < 1)
        return 0;
    double best[2] = {INFINITY, INFINITY};
    for (int rep = 0; rep < 3; rep++)
        for (int k = 0; k < 2; k++) {
            double s;
            TRY(timed_pass_(t, first, k ? small : rows, &s));
            best[k] = fmin(best[k], s);
        }
    const double per_row = (best[0] - best[1]) / (double)(rows - small);
    const double f = best[1] - per_row * (double)small;
    *fixed = f > 0 ? fmin(f, 0.75 * best[1]) : 0;
    return 0;
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
    const struct config *cfg = t->cfg;
    struct mlp *m = &t->model;
    long rows;
    if (cfg->train.deterministic) {
        rows = micro_rows_(cfg);
    } else {
        long counts[TRAIN_MAX_RANKS], offsets[TRAIN_MAX_RANKS];
        sampler_split(cfg->train.batch_size, t->rt->size, cfg->train.batch_weights.v,
                      cfg->train.batch_weights.count, counts, offsets);
        rows = counts[t->rt->rank];
    }
    rows = rows < t->data->train.count ? rows : t->data->train.count;
    uint32_t *first = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *first);
    if (!first)
        return VGPU_ENOMEM;
    for (long i = 0; i < rows; i++)
        first[i] = (uint32_t)i;
    double seconds, fixed = 0;
    int rc = rows > 0 ? timed_pass_(t, first, rows, &seconds) : 0;
    if (rc == 0 && t->balancing && rows > 0)
        rc = measure_fixed_(t, first, rows, &fixed);
    free(first);
    TRY(rc);
    TRY(comm_all_reduce(t->rt->comm, m->grads, m->grads, m->param_count, COMM_SUM));
    if (!t->balancing)
        return 0;
    const int n = t->rt->size;
    memset(t->exchange, 0, (size_t)n * sizeof *t->exchange);
    t->exchange[t->rt->rank] = fixed;
    TRY(runtime_sum_doubles(t->rt, t->exchange, n));
    t->fixed_s = fixed;
    return balance_set_fixed(&t->bal, t->exchange);
}

// Set-up that each rank does alone (checks, allocations, rank 0's files and
// initial parameters): no collectives, so a failure on one rank can be agreed
// on by all (train_run) before any of them waits for the others.
static int trainer_prepare_(struct trainer *t, const struct train_options *opts)
{
    const struct config *cfg = t->cfg;
    struct runtime *rt = t->rt;
    if (rt->size > TRAIN_MAX_RANKS) {
        if (rt->rank == 0)
            log_error("%d ranks: this build trains with at most %d", rt->size, TRAIN_MAX_RANKS);
        return VGPU_ECONFIG;
    }
    if (cfg->train.deterministic && strcmp(t->dev->info.kind, "cpu")) {
        if (rt->rank == 0)
            log_error("train.deterministic = true needs CPU devices (devices.kind = cpu); "
                      "this job has %s devices", t->dev->info.kind);
        return VGPU_ECONFIG;
    }
    int dims[MLP_MAX_DIMS], n_dims;
    TRY(train_model_dims(cfg, t->data, dims, &n_dims));
    int max_rows = train_max_rows(cfg, rt->size);
    TRY(mlp_init(&t->model, t->dev, dims, n_dims, max_rows));
    TRY(optim_init(&t->opt, t->dev, cfg, t->model.param_count));
    size_t f = (size_t)t->data->train.features;
    t->host_rows_cap = staging_rows_(cfg, max_rows, opts->verify);
    const size_t values = (size_t)t->host_rows_cap * f;
    if (t->data->train.codes) {
        t->host_codes = malloc(values);
        TRY(device_alloc(t->dev, values, (void **)&t->dev_codes));
        TRY(device_alloc(t->dev, sizeof t->data->train.lut, (void **)&t->dev_lut));
    } else {
        t->host_rows = malloc(values * sizeof(float));
    }
    t->host_labels = malloc((size_t)t->host_rows_cap * sizeof(int32_t));
    t->host_stats = malloc((size_t)t->host_rows_cap * XENT_STATS * sizeof(float));
    if (!(t->host_rows || t->host_codes) || !t->host_labels || !t->host_stats)
        return VGPU_ENOMEM;
    if (cfg->train.deterministic) {
        micro_split_(cfg, rt->size, t->parts_per_rank);
        for (int r = 0; r < rt->rank; r++)
            t->first_part += t->parts_per_rank[r];
        int mine = t->parts_per_rank[rt->rank];
        TRY(device_alloc_floats(t->dev, (size_t)(mine ? mine : 1) * t->model.param_count, &t->parts));
        t->micro_stats = calloc((size_t)cfg->train.micro_batches * XENT_STATS, sizeof(double));
        if (!t->micro_stats)
            return VGPU_ENOMEM;
        if (rt->rank == 0 && cfg->train.micro_batches % rt->size && !cfg->train.batch_weights.count)
            log_warn("train.micro_batches = %ld is not a multiple of %d ranks: results stay exact, "
                     "but some ranks compute more micro-batches than others",
                     cfg->train.micro_batches, rt->size);
    }
    // A checkpoint directory that cannot be made is bad input, found now
    // rather than after the training it was to keep.
    if (rt->rank == 0 && cfg->checkpoint.dir[0]) {
        char err[512];
        if (checkpoint_make_dir(cfg->checkpoint.dir, err, sizeof err) < 0) {
            log_error("%s", err);
            return VGPU_ECONFIG;
        }
    }
    if (rt->rank == 0 && opts->metrics_path) {
        t->metrics = fopen(opts->metrics_path, "w");
        if (!t->metrics) {
            log_error("cannot write metrics to %s: %s", opts->metrics_path, strerror(errno));
            return VGPU_ECONFIG; // a bad --metrics path: exit 2, as other bad input
        }
        fprintf(t->metrics, "kind,epoch,step,lr,loss,accuracy,top5,samples_per_s,elapsed_s\n");
        fflush(t->metrics);
    }
    // Identical replicas: rank 0 draws the initial parameters (trainer_start_
    // broadcasts them).
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
    int rc = sampler_init(&t->sampler, t->data->train.count, cfg->train.batch_size,
                          cfg->train.drop_last, (uint64_t)cfg->train.seed, rt->size,
                          cfg->train.batch_weights.v, cfg->train.batch_weights.count);
    if (rc < 0) {
        const long samples = t->data->train.count, batch = cfg->train.batch_size;
        const int weights = cfg->train.batch_weights.count;
        if (rc == VGPU_ENOMEM)
            return rc;
        if (rt->rank != 0)
            return VGPU_ECONFIG;
        if (weights && weights != rt->size)
            log_error("train.batch_weights has %d weights for %d ranks: give one per rank", weights,
                      rt->size);
        else if (cfg->train.drop_last && batch > samples)
            log_error("train.batch_size = %ld is larger than the %ld training samples, so with "
                      "train.drop_last = true an epoch holds no batch: lower it, or set "
                      "train.drop_last = false", batch, samples);
        else
            log_error("cannot sample batches: train.batch_size = %ld, %ld training samples, %d "
                      "ranks, %d batch weights", batch, samples, rt->size, weights);
        return VGPU_ECONFIG;
    }
    if (!(t->log_slots = calloc(3 + (size_t)rt->size, sizeof *t->log_slots)))
        return VGPU_ENOMEM;
    t->balancing = !cfg->train.deterministic && cfg->train.balance == BALANCE_DYNAMIC;
    if (t->balancing) {
        const size_t n = (size_t)rt->size;
        long counts[TRAIN_MAX_RANKS], offsets[TRAIN_MAX_RANKS];
        sampler_split(cfg->train.batch_size, rt->size, cfg->train.batch_weights.v,
                      cfg->train.batch_weights.count, counts, offsets);
        TRY(balance_init(&t->bal, rt->size, cfg->train.batch_size, counts));
        t->exchange = calloc(2 + 3 * n, sizeof *t->exchange);
        t->proposal = calloc(n, sizeof *t->proposal);
        t->rows_total = calloc(n, sizeof *t->rows_total);
        if (!t->exchange || !t->proposal || !t->rows_total)
            return VGPU_ENOMEM;
        // The sampler takes its weights from the split in force from now on:
        // set them once here, so adopting a split never needs an allocation.
        for (size_t r = 0; r < n; r++)
            t->exchange[r] = (double)counts[r];
        TRY(sampler_set_weights(&t->sampler, t->exchange, (int)n));
    }
    return 0;
}

// Set-up in lockstep, once every rank has prepared: the initial parameters
// reach every replica, and the warm-up runs.
static int trainer_start_(struct trainer *t, const struct train_options *opts)
{
    const struct config *cfg = t->cfg;
    struct runtime *rt = t->rt;
    TRY(comm_broadcast(rt->comm, t->model.params, t->model.param_count * sizeof(float), 0));
    t->total_steps = cfg->train.epochs * sampler_batches_per_epoch(&t->sampler);
    if (cfg->train.max_steps && cfg->train.max_steps < t->total_steps)
        t->total_steps = cfg->train.max_steps;
    t->perturb_rank = -1;
    const char *perturb = getenv("VGPU_TEST_PERTURB");
    if (perturb && sscanf(perturb, "%d@%ld", &t->perturb_rank, &t->perturb_step) != 2)
        t->perturb_rank = -1;
    t->slow_rank = -1;
    const char *slow = getenv("VGPU_TEST_SLOW");
    if (slow && sscanf(slow, "%d:%lf", &t->slow_rank, &t->slow_factor) != 2)
        t->slow_rank = -1;
    TRY(warm_up_(t));
    TRY(preempt_install());
    // Under mpirun a rank's stdout is a pseudo-terminal even when the user's
    // is a pipe, so the bar is opt-in there (VGPU_PROGRESS=bar).
    const char *progress = getenv("VGPU_PROGRESS");
    int under_launcher = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK");
    t->live = rt->rank == 0 && !opts->quiet &&
              (progress ? !strcmp(progress, "bar")
                        : isatty(STDOUT_FILENO) && !under_launcher);
    return 0;
}

// A signal reached some rank: every rank stops after this step and rank 0
// writes a checkpoint (into checkpoint.dir, or ./checkpoints when unset).
// What every ending reports: steps, the last training loss, the rate and
// (rank 0) a CRC32 of the parameters.
static int fill_result_(struct trainer *t, struct train_result *res)
{
    res->steps = t->step;
    res->train_loss = t->last_loss;
    res->samples_per_s = t->train_seconds > 0 ? t->samples_done / t->train_seconds : 0;
    if (t->rt->rank != 0)
        return 0;
    const size_t bytes = t->model.param_count * sizeof(float);
    float *host = malloc(bytes);
    if (!host)
        return VGPU_ENOMEM;
    int rc = device_copy_to_host(t->dev, host, t->model.params, bytes);
    if (rc == 0)
        res->params_crc = util_crc32(0, host, bytes);
    free(host);
    return rc;
}

static int stop_for_preemption_(struct trainer *t, struct train_result *res)
{
    const char *dir = t->cfg->checkpoint.dir[0] ? t->cfg->checkpoint.dir : "checkpoints";
    char path[CONFIG_STR_MAX + 64] = "";
    TRY(save_checkpoint_(t, dir, path, sizeof path));
    (void)fill_result_(t, res); // the checkpoint is what counts: a CRC not taken stays 0
    if (t->rt->rank == 0) {
        snprintf(res->checkpoint, sizeof res->checkpoint, "%s", path);
        printf("vgpu_train: preempted at step %ld (signal %s); checkpoint %s; resumable: "
               "--resume %s\n", t->step, preempt_signal_name(), path, path);
        fflush(stdout);
    }
    return VGPU_EPREEMPTED;
}

// Every PREEMPT_CHECK_STEPS steps the ranks learn whether any of them got a
// stop signal. Under train.balance = dynamic the same control-plane sum also
// carries each rank's compute time and rows since the last exchange, and the
// split rank 0 announces, which every rank adopts for the following steps;
// rank 0 then proposes the next split from the speeds. Slots: [0] signals,
// [1 + r] rank r's seconds, [1 + N + r] its rows, [1 + 2N + r] the announced
// split, [1 + 3N] 1 if there is one. Each slot has one contributor, so the
// sums are exact. Returns 1 to stop for preemption, 0 to go on, or a negative
// status.
static int exchange_(struct trainer *t)
{
    if (!t->balancing)
        return runtime_agree_min(t->rt, preempt_requested() ? VGPU_EPREEMPTED : 0) < 0;
    const int n = t->rt->size, me = t->rt->rank;
    double *x = t->exchange, *seconds = x + 1, *rows = x + 1 + n, *split = x + 1 + 2 * n;
    const int slots = 2 + 3 * n;
    memset(x, 0, (size_t)slots * sizeof *x);
    x[0] = preempt_requested() ? 1 : 0;
    // The per-row part of the compute: each step's fixed cost comes off (at
    // least a quarter of the time stays, in case the fixed cost was measured high).
    seconds[me] = fmax(t->busy_s - (double)t->busy_steps * t->fixed_s, 0.25 * t->busy_s);
    rows[me] = t->busy_rows;
    if (me == 0 && t->proposing) {
        for (int r = 0; r < n; r++)
            split[r] = (double)t->proposal[r];
        split[n] = 1;
    }
    t->busy_s = t->busy_rows = 0;
    t->busy_steps = 0;
    TRY(runtime_sum_doubles(t->rt, x, slots));
    if (split[n] > 0) {
        long counts[TRAIN_MAX_RANKS];
        for (int r = 0; r < n; r++)
            counts[r] = (long)split[r];
        // Same numbers and bounds on every rank: all adopt, or none.
        if (balance_adopt(&t->bal, counts) == 0)
            TRY(sampler_set_weights(&t->sampler, split, n));
    }
    if (me == 0) {
        for (int r = 0; r < n; r++)
            t->rows_total[r] += rows[r];
        t->proposing = balance_propose(&t->bal, rows, seconds, t->proposal);
    }
    return x[0] > 0;
}

// Rank 0, dynamic balance: each rank's share of the rows computed in this run,
// as rows of a full batch ("141,115"); the range for many ranks.
static void describe_split_(const struct trainer *t, char *buf, size_t bytes)
{
    double total = 0;
    for (int r = 0; r < t->rt->size; r++)
        total += t->rows_total[r];
    buf[0] = '\0';
    if (total > 0)
        format_ranks_(buf, bytes, t->rows_total, t->rt->size,
                      (double)t->cfg->train.batch_size / total, "%.0f");
}

// The test-set evaluation after an epoch (number: 1-based), reported by
// rank 0 on stdout and as a metrics row; lr is the last step's.
static int evaluate_epoch_(struct trainer *t, const struct train_options *opts,
                           struct train_result *res, long number, double lr)
{
    TRY(evaluate_(t, &res->test_loss, &res->test_acc, &res->test_top5));
    if (t->rt->rank != 0)
        return 0;
    if (!opts->quiet)
        printf("eval  epoch %3ld  test_loss %.4f  test_acc %.4f  top5 %.4f\n", number,
               res->test_loss, res->test_acc, res->test_top5);
    if (t->metrics) {
        fprintf(t->metrics, "eval,%ld,%ld,%.6g,%.6f,%.6f,%.6f,,%.3f\n", number, t->step, lr,
                res->test_loss, res->test_acc, res->test_top5, t->train_seconds);
        fflush(t->metrics);
    }
    fflush(stdout);
    return 0;
}

static int train_loop_(struct trainer *t, const struct train_options *opts, struct train_result *res)
{
    const struct config *cfg = t->cfg;
    struct runtime *rt = t->rt;
    struct batch_slice b;
    double lr = t->step > 0 ? optim_lr_at(cfg, t->step - 1, t->total_steps) : 0; // a resumed run's
    const long check_every = cfg->train.check_replicas_every;
    const int checkpoints = cfg->checkpoint.dir[0] && cfg->checkpoint.every_steps;
    char path[CONFIG_STR_MAX + 64];
    long epoch = sampler_epoch(&t->sampler);
    if (epoch >= cfg->train.epochs || t->step >= t->total_steps) {
        // Resumed from a checkpoint of a finished run: nothing to train, so
        // evaluate what was restored (no training loss to report). The
        // epoch it is in, or the last it finished.
        long in_epoch = sampler_step_in_epoch(&t->sampler);
        long number = in_epoch > 0 ? epoch + 1 : epoch;
        if (rt->rank == 0)
            printf("vgpu_train: nothing left to train at step %ld (epoch %ld of %ld, %ld steps "
                   "in all)\n", t->step, number, cfg->train.epochs, t->total_steps);
        TRY(evaluate_epoch_(t, opts, res, number, lr));
        res->epochs = in_epoch >= sampler_batches_per_epoch(&t->sampler) ? epoch + 1 : epoch;
        if (res->epochs > cfg->train.epochs)
            res->epochs = cfg->train.epochs;
    }
    while (epoch < cfg->train.epochs && t->step < t->total_steps) {
        double t0 = util_now_s();
        int more = 0;
        while (t->step < t->total_steps && (more = sampler_next(&t->sampler, rt->rank, &b)) == 1) {
            double st[XENT_STATS] = {0, 0, 0};
            lr = optim_lr_at(cfg, t->step, t->total_steps);
            if (cfg->train.deterministic) {
                TRY(gradient_deterministic_(t, &b, st));
                TRY(optim_step(&t->opt, t->dev, t->model.params, t->model.grads, (float)lr));
            } else {
                TRY(step_normal_(t, &b, (float)lr, st));
            }
            t->window[0] += st[0];
            t->window[1] += st[1];
            if (!cfg->train.deterministic || rt->rank == 0)
                t->window[2] += (double)(cfg->train.deterministic ? b.global_count : b.count);
            t->step++;
            t->samples_done += (double)b.global_count;
            TRY(maybe_perturb_(t));
            // Every rank learns of a signal that reached any of them, at the
            // same step: an extra synchronisation, so every few steps only.
            if (t->step % PREEMPT_CHECK_STEPS == 0) {
                int stop = exchange_(t);
                TRY(stop < 0 ? stop : 0);
                if (stop) {
                    t->train_seconds += util_now_s() - t0;
                    return stop_for_preemption_(t, res);
                }
            }
            int log_now = t->step % cfg->train.log_every == 0;
            int save_now = checkpoints && t->step % cfg->checkpoint.every_steps == 0;
            int check_now = check_every && t->step % check_every == 0;
            if (log_now || save_now || check_now) {
                t->train_seconds += util_now_s() - t0;
                int rc = check_now ? check_replicas_(t) : 0;
                if (rc < 0) // a verdict every rank shares, already reported
                    return rc;
                if (log_now)
                    log_progress_(t, epoch, lr, 0, opts->quiet);
                if (save_now)
                    TRY(save_checkpoint_(t, cfg->checkpoint.dir, path, sizeof path));
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
        TRY(evaluate_epoch_(t, opts, res, epoch - ended + 1, lr));
        res->epochs = epoch;
    }
    if (check_every || opts->verify) {
        int rc = check_replicas_(t);
        if (rc < 0)
            return rc;
    }
    if (cfg->checkpoint.dir[0] && !opts->verify) {
        TRY(save_checkpoint_(t, cfg->checkpoint.dir, path, sizeof path));
        if (rt->rank == 0)
            snprintf(res->checkpoint, sizeof res->checkpoint, "%s", path);
    }
    if (rt->rank == 0 && t->balancing)
        describe_split_(t, res->split, sizeof res->split);
    return fill_result_(t, res);
}

// ---- --verify: a single-device replay on rank 0 ----

// Replays the run's t->step global batches on one device from the same
// initial parameters and data order, into ref_params (host).
static int replay_(struct trainer *t, float *ref_params)
{
    const struct config *cfg = t->cfg;
    const long M = cfg->train.micro_batches;
    struct mlp ref = {0};
    struct optimizer opt = {0};
    struct sampler s = {0};
    float *parts = NULL;
    float **leaves = NULL;
    double *stats = NULL;
    int rows = cfg->train.deterministic ? (int)micro_rows_(cfg) : (int)cfg->train.batch_size;
    int rc = mlp_init(&ref, t->dev, t->model.dims, t->model.n_dims, rows);
    if (rc == 0)
        rc = optim_init(&opt, t->dev, cfg, ref.param_count);
    if (rc == 0)
        rc = sampler_init(&s, t->data->train.count, cfg->train.batch_size, cfg->train.drop_last,
                          (uint64_t)cfg->train.seed, 1, NULL, 0);
    if (rc == 0 && cfg->train.deterministic) {
        rc = device_alloc_floats(t->dev, (size_t)M * ref.param_count, &parts);
        leaves = malloc((size_t)M * sizeof *leaves);
        stats = calloc((size_t)M * XENT_STATS, sizeof *stats);
        if (rc == 0 && (!leaves || !stats))
            rc = VGPU_ENOMEM;
    }
    if (rc == 0) {
        mlp_init_params_host(&ref, ref_params, (uint64_t)cfg->train.seed);
        rc = device_copy_to_device(t->dev, ref.params, ref_params, ref.param_count * sizeof(float));
    }
    struct batch_slice b;
    for (long step = 0; rc == 0 && step < t->step; step++) {
        int more = sampler_next(&s, 0, &b);
        if (more == 0) {
            sampler_set_position(&s, sampler_epoch(&s) + 1, 0);
            more = sampler_next(&s, 0, &b);
        }
        if (more != 1) {
            rc = more < 0 ? more : VGPU_EINVAL;
            break;
        }
        if (cfg->train.deterministic) {
            rc = micro_gradients_(t, &ref, &b, 0, (int)M, parts, stats);
            for (long m = 0; m < M; m++)
                leaves[m] = parts + (size_t)m * ref.param_count;
            if (rc == 0)
                rc = comm_tree_sum(t->dev, leaves, (int)M, ref.param_count);
            if (rc == 0)
                rc = device_copy(t->dev, ref.grads, parts, ref.param_count * sizeof(float));
        } else if ((rc = load_rows_(t, &ref, &t->data->train, b.indices, b.count)) == 0 &&
                   (rc = mlp_forward(&ref, t->dev, (int)b.count)) == 0) {
            rc = mlp_backward(&ref, t->dev, (int)b.count, 1.0f / (float)b.global_count);
        }
        if (rc == 0)
            rc = optim_step(&opt, t->dev, ref.params, ref.grads,
                            (float)optim_lr_at(cfg, step, t->total_steps));
    }
    if (rc == 0)
        rc = device_copy_to_host(t->dev, ref_params, ref.params, ref.param_count * sizeof(float));
    free(leaves);
    free(stats);
    if (parts)
        device_free(t->dev, parts);
    sampler_free(&s);
    optim_free(&opt, t->dev);
    mlp_free(&ref, t->dev);
    return rc;
}

// Rank 0 replays and compares tensor by tensor; every rank returns the verdict:
// 0, VGPU_EMISMATCH, or a failure status.
static int verify_(struct trainer *t, struct train_result *res)
{
    const struct config *cfg = t->cfg;
    int rc = 0;
    if (t->rt->rank == 0) {
        const size_t np = t->model.param_count;
        float *dist = malloc(np * sizeof(float)), *ref = malloc(np * sizeof(float));
        rc = !dist || !ref ? VGPU_ENOMEM : 0;
        if (rc == 0)
            rc = device_copy_to_host(t->dev, dist, t->model.params, np * sizeof(float));
        double t0 = util_now_s();
        if (rc == 0)
            rc = replay_(t, ref);
        if (rc == 0) {
            const int exact = cfg->train.deterministic;
            printf("verify: %d rank%s (%s) against one device replaying the same %ld global "
                   "batches (%.1f s); %s\n",
                   t->rt->size, t->rt->size > 1 ? "s" : "", comm_backend_name(t->rt->comm), t->step, util_now_s() - t0,
                   exact ? "deterministic mode: must be bitwise identical"
                         : "tolerance verify.rtol");
            printf("  %-14s %-10s %13s %13s %9s  %s\n", "tensor", "shape", "max_abs_diff",
                   "max_rel_diff", "differing", "result");
            double worst = 0;
            int failed = 0;
            for (int l = 0; l < t->model.n_layers; l++)
                for (int bias = 0; bias < 2; bias++) {
                    const size_t in = (size_t)t->model.dims[l], out = (size_t)t->model.dims[l + 1];
                    const size_t at = bias ? t->model.b_offset[l] : t->model.w_offset[l];
                    const size_t n = bias ? out : in * out;
                    double max_abs = 0, max_ref = 0;
                    size_t differing = 0;
                    for (size_t i = at; i < at + n; i++) {
                        double d = fabs((double)dist[i] - (double)ref[i]);
                        max_abs = d > max_abs ? d : max_abs;
                        max_ref = fabs(ref[i]) > max_ref ? fabs(ref[i]) : max_ref;
                        differing += memcmp(&dist[i], &ref[i], sizeof(float)) != 0;
                    }
                    // Relative to the tensor's scale: elementwise ratios blow up
                    // on weights that happen to sit near zero.
                    double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
                    int ok = exact ? differing == 0 : rel <= cfg->verify.rtol;
                    failed += !ok;
                    worst = rel > worst ? rel : worst;
                    char name[32], shape[32];
                    snprintf(name, sizeof name, "layer%d.%s", l, bias ? "bias" : "weight");
                    if (bias)
                        snprintf(shape, sizeof shape, "%zu", out);
                    else
                        snprintf(shape, sizeof shape, "%zux%zu", in, out);
                    printf("  %-14s %-10s %13.3g %13.3g %9zu  %s\n", name, shape, max_abs, rel,
                           differing, ok ? "ok" : "FAILED");
                }
            res->verify_max_rel = worst;
            if (failed) {
                printf("vgpu_train: verify FAILED: %d tensor%s %s\n", failed, failed > 1 ? "s" : "",
                       exact ? "not bitwise identical" : "over verify.rtol");
                rc = VGPU_EMISMATCH;
            } else if (exact) {
                printf("vgpu_train: verify passed: bitwise identical to the single-device run\n");
            } else {
                printf("vgpu_train: verify passed: max_rel_diff %.3g <= verify.rtol %.3g\n", worst,
                       cfg->verify.rtol);
            }
            fflush(stdout);
        }
        free(dist);
        free(ref);
    }
    return runtime_agree_min(t->rt, rc);
}

int train_run(struct runtime *rt, struct train_data *data, const struct train_options *opts,
              struct train_result *result)
{
    struct trainer t = {.rt = rt, .dev = &rt->dev, .cfg = &rt->cfg, .data = data};
    memset(result, 0, sizeof *result);
    // Not measured until an evaluation runs (a run preempted before its first
    // epoch ends reports nan, not 0).
    result->train_loss = result->test_loss = result->test_acc = result->test_top5 = NAN;
    t.last_loss = NAN;
    int rc = trainer_prepare_(&t, opts);
    rc = runtime_agree_min(rt, rc < 0 ? rc : 0);
    // Past this point the ranks are in lockstep: a failure on one rank would
    // leave the others waiting in the next collective, so it ends the job.
    // Agreed verdicts (a bad checkpoint, divergence, preemption) do not.
    if (rc == 0 && (rc = trainer_start_(&t, opts)) < 0)
        FATAL(1, "training set-up failed: %s", status_str(rc));
    if (rc == 0 && opts->resume_path)
        rc = resume_(&t, opts->resume_path); // same verdict on every rank
    if (rc == 0) {
        rc = train_loop_(&t, opts, result);
        result->steps = t.step;
        if (rc == 0 && opts->verify)
            rc = verify_(&t, result);
        if (rc < 0 && rc != VGPU_EMISMATCH && rc != VGPU_EPREEMPTED)
            FATAL(1, "training failed: %s", status_str(rc));
    }
    trainer_free_(&t);
    return rc;
}
