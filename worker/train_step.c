// train_step.c: one optimizer step in each training mode (the step_ops
// tables), batches onto the device through the staging buffers, the step
// clock, and the test-set evaluation.
#include "train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grad_buckets.h"
#include "log.h"
#include "util.h"

// ---- batches onto the device ----

// The input a model takes, in words, for the message of a mismatch.
static const char *input_name_(enum model_input input)
{
    return input == MODEL_INPUT_F32 ? "values" : input == MODEL_INPUT_I32 ? "int32 tokens"
                                                                          : "uint8 tokens";
}

// The model takes the data's rows (both sets' the same way), or says why not.
static int check_input_(const struct trainer *t)
{
    const struct model_batch *b = &t->model.batch;
    const struct dataset *train = &t->data->train, *test = &t->data->test;
    const int path = train_input_path(b, train);
    if (path > 0 && (test->count == 0 || train_input_path(b, test) == path))
        return path;
    if (t->job->rank == 0)
        log_error("model.type = %s takes rows of %d %s with %d label%s each; the data's rows "
                  "are %d %s with %d label%s each (data.dataset = %s)",
                  t->model.ops->name, b->input_width, input_name_(b->input), b->labels_per_row,
                  b->labels_per_row == 1 ? "" : "s", train->features,
                  train->tokens ? "tokens" : "values", dataset_label_width(train),
                  dataset_label_width(train) == 1 ? "" : "s",
                  train_config_enum_name("data", "dataset", (int)t->cfg->data.dataset));
    return VGPU_ECONFIG;
}

int train_staging_prepare(struct trainer *t, int max_rows)
{
    const struct dataset *train = &t->data->train;
    const int path = check_input_(t);
    if (path < 0)
        return path;
    t->staging.path = path;
    t->staging.rows_cap = train_staging_rows(t->cfg, max_rows, t->opts->verify);
    const size_t values = (size_t)t->staging.rows_cap * (size_t)train->features;
    const size_t label_bytes =
        (size_t)t->staging.rows_cap * (size_t)t->model.batch.labels_per_row * sizeof(int32_t);
    const size_t stats_bytes =
        (size_t)t->staging.rows_cap * (size_t)model_metrics_of(&t->model)->n_stats * sizeof(float);
    if (path == TRAIN_INPUT_DECODE) {
        t->staging.host_codes = malloc(values);
        TRY(vgpu_malloc(t->dev, (void **)&t->staging.dev_codes, values));
        TRY(vgpu_malloc(t->dev, (void **)&t->staging.dev_lut, sizeof train->lut));
    } else if (path == TRAIN_INPUT_TOKENS) {
        t->staging.host_codes = malloc(values);
    } else if (path == TRAIN_INPUT_WIDEN) {
        t->staging.host_tokens = malloc(values * sizeof(int32_t));
    } else {
        t->staging.host_rows = malloc(values * sizeof(float));
    }
    t->staging.host_labels = malloc(label_bytes);
    t->staging.host_stats = malloc(stats_bytes);
    if (!(t->staging.host_rows || t->staging.host_codes || t->staging.host_tokens) ||
        !t->staging.host_labels || !t->staging.host_stats)
        return VGPU_ENOMEM;
    // Every step copies through these: page-locked on a GPU (a failure is
    // only slower, and said once).
    vgpu_host_register(t->dev, t->staging.host_codes, values);
    vgpu_host_register(t->dev, t->staging.host_rows, values * sizeof(float));
    vgpu_host_register(t->dev, t->staging.host_tokens, values * sizeof(int32_t));
    vgpu_host_register(t->dev, t->staging.host_labels, label_bytes);
    vgpu_host_register(t->dev, t->staging.host_stats, stats_bytes);
    return 0;
}

void train_step_free(struct trainer *t)
{
    grad_buckets_close(t->buckets);
    t->buckets = NULL;
    if (t->micro.parts)
        vgpu_free(t->dev, t->micro.parts);
    free(t->micro.stats);
    if (t->staging.dev_lut)
        vgpu_free(t->dev, t->staging.dev_lut);
    if (t->staging.dev_codes)
        vgpu_free(t->dev, t->staging.dev_codes);
    vgpu_host_unregister(t->dev, t->staging.host_rows);
    vgpu_host_unregister(t->dev, t->staging.host_codes);
    vgpu_host_unregister(t->dev, t->staging.host_tokens);
    vgpu_host_unregister(t->dev, t->staging.host_labels);
    vgpu_host_unregister(t->dev, t->staging.host_stats);
    free(t->staging.host_rows);
    free(t->staging.host_codes);
    free(t->staging.host_tokens);
    free(t->staging.host_labels);
    free(t->staging.host_stats);
}

int train_load_rows(struct trainer *t, struct model *m, const struct dataset *ds,
                    const uint32_t *indices, long count)
{
    const size_t values = (size_t)count * (size_t)ds->features;
    // The batch goes up without waiting (a GPU reads the page-locked host
    // buffers while the host goes on); the buffers are refilled only once the
    // last batch's copies have read them, which the step's statistics copy
    // has usually made sure of already: no extra wait then.
    TRY(vgpu_wait_host_reads(t->dev));
    switch (t->staging.path) { // the test set's is the training set's (check_input_)
    case TRAIN_INPUT_DECODE:
        if (t->staging.lut_set != ds) { // the test set's table after the train set's, or back
            TRY(vgpu_memcpy_htod(t->dev, t->staging.dev_lut, ds->lut, sizeof ds->lut));
            t->staging.lut_set = ds;
        }
        dataset_gather_codes(ds, indices, count, t->staging.host_codes);
        TRY(vgpu_memcpy_htod_async(t->dev, t->staging.dev_codes, t->staging.host_codes, values));
        TRY(math_decode_u8(vgpu_math_device(t->dev), m->input, t->staging.dev_codes,
                           t->staging.dev_lut, values));
        break;
    case TRAIN_INPUT_TOKENS:
        dataset_gather_codes(ds, indices, count, t->staging.host_codes);
        TRY(vgpu_memcpy_htod_async(t->dev, m->input, t->staging.host_codes, values));
        break;
    case TRAIN_INPUT_WIDEN:
        dataset_gather_tokens(ds, indices, count, t->staging.host_tokens);
        TRY(vgpu_memcpy_htod_async(t->dev, m->input, t->staging.host_tokens,
                                   values * sizeof(int32_t)));
        break;
    default:
        dataset_gather(ds, indices, count, t->staging.host_rows);
        TRY(vgpu_memcpy_htod_async(t->dev, m->input, t->staging.host_rows,
                                   values * sizeof(float)));
    }
    dataset_gather_labels(ds, indices, count, t->staging.host_labels);
    return vgpu_memcpy_htod_async(t->dev, m->labels, t->staging.host_labels,
                                  (size_t)count * (size_t)m->batch.labels_per_row *
                                      sizeof(int32_t));
}

// Sums the statistics of `rows` rows of model m into acc[n_stats], row by
// row in order.
static int add_stats_(struct trainer *t, struct model *m, long rows, double *acc)
{
    if (rows <= 0)
        return 0;
    const int ns = model_metrics_of(m)->n_stats;
    TRY(vgpu_memcpy_dtoh(t->dev, t->staging.host_stats, m->stats,
                         (size_t)rows * (size_t)ns * sizeof(float)));
    for (long i = 0; i < rows; i++)
        for (int k = 0; k < ns; k++)
            acc[k] += t->staging.host_stats[i * ns + k];
    return 0;
}

// VGPU_INJECT_SLOW: the slowed rank sleeps (factor - 1) times what its compute took.
static void maybe_slow_(const struct trainer *t, double start)
{
    if (t->env->slow_rank != t->job->rank)
        return;
    const uint64_t span = vgpu_span_begin();
    double extra = (t->env->slow_factor - 1) * (util_now_s() - start);
    struct timespec ts = {(time_t)extra, (long)((extra - floor(extra)) * 1e9)};
    nanosleep(&ts, NULL);
    vgpu_span_end(t->dev, vgpu_span_injected_slowness, span, 0, 0);
}

// Ends a compute phase's span with its rows and the model's FLOPs for them
// (what vgpu-project scales compute by). A device runs its kernels after
// the host queued them: the span waits for them, so that it holds their
// time (only while tracing; a wait the timeline does not count as the
// program's, vgpu_math_wait).
static int end_phase_(struct trainer *t, vgpu_span_t what, uint64_t span, long rows)
{
    if (!span)
        return 0;
    TRY(vgpu_math_wait(vgpu_math_device(t->dev)));
    const uint64_t flops = what == vgpu_span_data ? 0
                           : model_pass_flops(&t->model, (int)rows, what == vgpu_span_backward);
    vgpu_span_end(t->dev, what, span, rows, (int64_t)flops);
    return 0;
}

int train_compute_rows(struct trainer *t, const uint32_t *indices, long count, float grad_scale,
                       const struct grads_ready *ready, double *acc, int timed, double *seconds)
{
    struct model *m = &t->model;
    const double start = util_now_s();
    uint64_t span;
    if (count > 0) {
        vgpu_mark_phase(t->dev, vgpu_phase_data);
        span = vgpu_span_begin();
        TRY(train_load_rows(t, m, &t->data->train, indices, count));
        TRY(end_phase_(t, vgpu_span_data, span, count));
        vgpu_mark_phase(t->dev, vgpu_phase_forward);
        span = vgpu_span_begin();
        TRY(model_forward(m, t->dev, (int)count));
        TRY(end_phase_(t, vgpu_span_forward, span, count));
    }
    vgpu_mark_phase(t->dev, vgpu_phase_backward);
    span = vgpu_span_begin();
    TRY(model_backward_telling(m, t->dev, (int)count, grad_scale, ready));
    TRY(end_phase_(t, vgpu_span_backward, span, count));
    TRY(add_stats_(t, m, count, acc));
    if (!timed)
        return 0;
    TRY(vgpu_synchronize(t->dev));
    maybe_slow_(t, start);
    *seconds = util_now_s() - start;
    return 0;
}

// ---- normal mode ----

// The sharded update's callback: this rank's optimizer step on one range.
struct shard_update {
    struct trainer *t;
    float lr;
};

static int update_shard_(void *arg, size_t first, size_t count)
{
    struct shard_update *u = arg;
    struct trainer *t = u->t;
    vgpu_mark_phase(t->dev, vgpu_phase_optimizer); // inside the collective: the phase is its part
    const uint64_t span = vgpu_span_begin();
    const double t0 = util_now_s();
    int rc = optim_update_range(&t->opt, t->dev, t->model.params, t->model.grads, u->lr, first,
                                count);
    const double took = util_now_s() - t0;
    vgpu_span_end(t->dev, vgpu_span_optimizer, span, (int64_t)first, (int64_t)count);
    t->clock.optim_s += took;
    t->clock.optim_in_comm_s += took;
    return rc;
}

// The backend's own accounting of the collectives so far.
static struct vgpu_comm_stats comm_stats_(vgpu_t *v)
{
    struct vgpu_comm_stats s = {0};
    vgpu_get_comm_stats(v, &s);
    return s;
}

// The step's collectives' time, from the backend's own accounting; exposed:
// the part the step waited for (NULL: all of it).
static void clock_comm_(struct trainer *t, const struct vgpu_comm_stats *before,
                        const double *exposed)
{
    const struct vgpu_comm_stats now = comm_stats_(t->job->v);
    t->clock.comm_s += now.seconds - before->seconds;
    t->clock.exposed_s += exposed ? *exposed : now.seconds - before->seconds;
    t->clock.wait_s += now.wait_seconds - before->wait_seconds;
    t->clock.wait_known = now.wait_known;
}

// Whether the optimizer step runs sharded inside the all-reduce: asked, no
// clipping (the clip's norm needs the whole summed gradient first), and not
// overlapped with the backward (its buckets are plain all-reduces).
static int sharded_(const struct trainer *t)
{
    return t->cfg->train.shard_optimizer && t->opt.clip <= 0 && !t->buckets;
}

// The optimizer's step outside any collective, timed.
static int clocked_optim_step_(struct trainer *t, float lr)
{
    vgpu_mark_phase(t->dev, vgpu_phase_optimizer);
    const uint64_t span = vgpu_span_begin();
    const double t0 = util_now_s();
    int rc = optim_step(&t->opt, t->dev, t->model.params, t->model.grads, lr);
    vgpu_span_end(t->dev, vgpu_span_optimizer, span, 0, 0);
    t->clock.optim_s += util_now_s() - t0;
    return rc;
}

// This rank's piece of the batch in one pass, then the gradients are summed
// over the ranks with the optimizer step sharded into the all-reduce: every
// rank updates only the ranges of the summed gradient it completes, and the
// updated parameters are all-gathered (each rank runs 1/N of the optimizer;
// the result is the same as a full update everywhere). Each rank's gradient
// is already divided by the global batch, so the sum is the mean over it.
// With train.bucket_mb the sum is taken bucket by bucket while the backward
// pass goes on (grad_buckets.h), and the update follows, whole.
static int normal_step_(struct trainer *t, const struct batch_slice *b, float lr)
{
    struct model *m = &t->model;
    // This rank's compute, timed (before any wait for the others) when it is measured.
    double stats[MODEL_MAX_STATS] = {0}, seconds = 0;
    const int timed = t->balance.on || t->env->slow_rank == t->job->rank;
    const struct vgpu_comm_stats before = comm_stats_(t->job->v);
    const double c0 = util_now_s();
    // With buckets, each one's all-reduce starts as the pass finishes it.
    const struct grads_ready *ready = t->buckets ? grad_buckets_begin(t->buckets) : NULL;
    int rc = train_compute_rows(t, b->indices + b->offset, b->count,
                                1.0f / (float)b->global_count, ready, stats, timed, &seconds);
    t->clock.compute_s += util_now_s() - c0;
    double waited = 0;
    if (t->buckets) { // every bucket is issued, whatever the pass returned
        const int comm_rc = grad_buckets_finish(t->buckets, &waited);
        rc = rc < 0 ? rc : comm_rc;
    }
    TRY(rc);
    t->clock.steps++;
    train_report_count(t, stats, (double)b->count);
    if (t->balance.on)
        train_balance_count(t, seconds, b->count);
    if (t->buckets) {
        clock_comm_(t, &before, &waited);
        return clocked_optim_step_(t, lr);
    }
    if (!sharded_(t)) {
        TRY(vgpu_all_reduce(m->grads, m->grads, m->param_count, vgpu_float32, vgpu_sum, t->job->v));
        clock_comm_(t, &before, NULL);
        return clocked_optim_step_(t, lr);
    }
    optim_begin_step(&t->opt);
    struct shard_update u = {t, lr};
    rc = vgpu_all_reduce_update(m->grads, m->params, m->param_count, update_shard_, &u,
                                t->job->v);
    clock_comm_(t, &before, NULL);
    return rc;
}

static int noop_update_(void *arg, size_t first, size_t count)
{
    (void)arg, (void)first, (void)count;
    return 0;
}

// The sharded collective with zero gradients and no update all-gathers each
// rank's ranges of the optimizer state. (Backends without the sharded form
// keep the full state everywhere: then this changes nothing.)
static int normal_gather_state_(struct trainer *t)
{
    if (!sharded_(t)) // full steps everywhere
        return 0;
    float *arrays[2];
    int k = optim_state_arrays(&t->opt, arrays);
    for (int i = 0; i < k; i++) {
        TRY(vgpu_memzero(t->dev, t->model.grads, t->model.param_count * sizeof(float)));
        TRY(vgpu_all_reduce_update(t->model.grads, arrays[i], t->model.param_count, noop_update_,
                                   NULL, t->job->v));
    }
    return 0;
}

static long normal_replay_rows_(const struct train_config *cfg)
{
    return cfg->train.batch_size;
}

// The whole global batch in one pass on the replay model.
static int normal_replay_gradient_(struct trainer *t, struct replay *r, const struct batch_slice *b)
{
    struct model *ref = &r->model;
    TRY(train_load_rows(t, ref, &t->data->train, b->indices, b->count));
    TRY(model_forward(ref, t->dev, (int)b->count));
    return model_backward(ref, t->dev, (int)b->count, 1.0f / (float)b->global_count, NULL);
}

// train.bucket_mb: the thread that all-reduces the gradient's buckets while
// the backward pass goes on (one rank has nothing to exchange).
static int normal_prepare_(struct trainer *t)
{
    const double mb = t->cfg->train.bucket_mb;
    if (mb <= 0 || t->job->size < 2)
        return 0;
    const size_t floats = (size_t)(mb * (1 << 20) / sizeof(float));
    return grad_buckets_open(&t->buckets, t->job->v, t->model.grads, t->model.param_count,
                             floats);
}

const struct step_ops train_step_normal = {
    .name = "normal",
    .bitwise = 0,
    .prepare = normal_prepare_,
    .step = normal_step_,
    .gather_state = normal_gather_state_,
    .replay_rows = normal_replay_rows_,
    .replay_gradient = normal_replay_gradient_,
};

// ---- deterministic mode ----

static int deterministic_prepare_(struct trainer *t)
{
    const struct train_config *cfg = t->cfg;
    const struct job *job = t->job;
    train_micro_split(cfg, job->size, t->micro.per_rank);
    for (int r = 0; r < job->rank; r++)
        t->micro.first += t->micro.per_rank[r];
    int mine = t->micro.per_rank[job->rank];
    TRY(job_alloc_floats(t->dev, (size_t)(mine ? mine : 1) * t->model.param_count,
                         &t->micro.parts));
    t->micro.stats = calloc((size_t)cfg->train.micro_batches *
                                (size_t)model_metrics_of(&t->model)->n_stats, sizeof(double));
    if (!t->micro.stats)
        return VGPU_ENOMEM;
    if (job->rank == 0 && cfg->train.micro_batches % job->size && !cfg->train.batch_weights.count)
        log_warn("train.micro_batches = %ld is not a multiple of %d ranks: results stay exact, "
                 "but some ranks compute more micro-batches than others",
                 cfg->train.micro_batches, job->size);
    return 0;
}

// The part every rank count shares: the global batch is cut into
// train.micro_batches pieces by position alone; the gradient of micro-batches
// [first, first + n) goes each into its own buffer parts[k] (computed by the
// same code with the same shapes on any rank), and its stats into
// micro_stats[mb].
static int micro_gradients_(struct trainer *t, struct model *m, const struct batch_slice *b,
                            int first, int n, float *parts, double *micro_stats)
{
    const long M = t->cfg->train.micro_batches;
    long *rows = malloc(2 * (size_t)M * sizeof *rows);
    if (!rows)
        return VGPU_ENOMEM;
    long *offsets = rows + M;
    sampler_split(b->global_count, (int)M, NULL, 0, rows, offsets);
    int rc = 0;
    for (int k = 0; k < n; k++) {
        const int mb = first + k;
        uint64_t span;
        if (rows[mb] > 0) {
            vgpu_mark_phase(t->dev, vgpu_phase_data);
            span = vgpu_span_begin();
            TRY_GOTO(train_load_rows(t, m, &t->data->train, b->indices + offsets[mb], rows[mb]),
                     rc, out);
            TRY_GOTO(end_phase_(t, vgpu_span_data, span, rows[mb]), rc, out);
            vgpu_mark_phase(t->dev, vgpu_phase_forward);
            span = vgpu_span_begin();
            TRY_GOTO(model_forward(m, t->dev, (int)rows[mb]), rc, out);
            TRY_GOTO(end_phase_(t, vgpu_span_forward, span, rows[mb]), rc, out);
        }
        vgpu_mark_phase(t->dev, vgpu_phase_backward);
        span = vgpu_span_begin();
        TRY_GOTO(model_backward(m, t->dev, (int)rows[mb], 1.0f / (float)b->global_count,
                                parts + (size_t)k * m->param_count), rc, out);
        TRY_GOTO(end_phase_(t, vgpu_span_backward, span, rows[mb]), rc, out);
        TRY_GOTO(add_stats_(t, m, rows[mb], micro_stats + (size_t)mb * model_metrics_of(m)->n_stats),
                 rc, out);
    }
out:
    free(rows);
    return rc;
}

// This rank's micro-batches, the tree all-reduce, a full update on every
// rank. Stats: each micro-batch's slot is filled by one rank only (exact
// sums), then added in micro-batch order; rank 0 keeps the total.
static int deterministic_step_(struct trainer *t, const struct batch_slice *b, float lr)
{
    struct model *m = &t->model;
    const long M = t->cfg->train.micro_batches;
    const int ns = model_metrics_of(m)->n_stats;
    memset(t->micro.stats, 0, (size_t)M * (size_t)ns * sizeof(double));
    const double c0 = util_now_s();
    TRY(micro_gradients_(t, m, b, t->micro.first, t->micro.per_rank[t->job->rank], t->micro.parts,
                         t->micro.stats));
    if (t->env->slow_rank == t->job->rank) {
        TRY(vgpu_synchronize(t->dev));
        maybe_slow_(t, c0);
    }
    t->clock.compute_s += util_now_s() - c0;
    t->clock.steps++;
    const struct vgpu_comm_stats before = comm_stats_(t->job->v);
    TRY(vgpu_all_reduce_tree(t->micro.parts, t->micro.per_rank, m->grads, m->param_count,
                             t->job->v));
    clock_comm_(t, &before, NULL);
    t->clock.wait_known = 0; // the tree's exchange is MPI's all-to-all: waits are not told apart
    job_sum_doubles(t->job, t->micro.stats, (int)(M * ns));
    if (t->job->rank == 0) { // micro-batch by micro-batch, in order
        for (long mb = 0; mb < M; mb++)
            train_report_count(t, t->micro.stats + mb * ns, 0);
        train_report_count(t, NULL, (double)b->global_count);
    }
    return clocked_optim_step_(t, lr);
}

// The same micro-batches on one device, summed by the same tree.
static int deterministic_replay_gradient_(struct trainer *t, struct replay *r,
                                          const struct batch_slice *b)
{
    struct model *ref = &r->model;
    const int M = (int)t->cfg->train.micro_batches;
    if (!r->parts) { // the first batch: scratch for the rest of the replay
        TRY(job_alloc_floats(t->dev, (size_t)M * ref->param_count, &r->parts));
        r->leaves = malloc((size_t)M * sizeof *r->leaves);
        r->stats = calloc((size_t)M * (size_t)model_metrics_of(ref)->n_stats, sizeof *r->stats);
        if (!r->leaves || !r->stats)
            return VGPU_ENOMEM;
    }
    TRY(micro_gradients_(t, ref, b, 0, M, r->parts, r->stats));
    for (int mb = 0; mb < M; mb++)
        r->leaves[mb] = r->parts + (size_t)mb * ref->param_count;
    TRY(vgpu_tree_sum(t->dev, r->leaves, M, ref->param_count));
    return vgpu_memcpy_dtod(t->dev, ref->grads, r->parts, ref->param_count * sizeof(float));
}

const struct step_ops train_step_deterministic = {
    .name = "deterministic",
    .bitwise = 1,
    .prepare = deterministic_prepare_,
    .step = deterministic_step_,
    .gather_state = NULL, // full updates everywhere
    .replay_rows = train_micro_rows,
    .replay_gradient = deterministic_replay_gradient_,
};

// ---- evaluation ----

// Fixed chunks of train_eval_rows rows, chunk j on rank j % N. Each chunk's sums
// land in their own slot (the other ranks add zeros, which is exact) and are
// added in chunk order, so the result has the same bits for any rank count.
int train_evaluate(struct trainer *t, double *values)
{
    vgpu_mark_phase(t->dev, vgpu_phase_eval);
    const uint64_t span = vgpu_span_begin();
    const struct dataset *ds = &t->data->test;
    const struct model_metrics *mm = model_metrics_of(&t->model);
    const int ns = mm->n_stats;
    const long chunk = train_eval_rows(dataset_label_width(ds));
    const long chunks = (ds->count + chunk - 1) / chunk;
    double *slots = calloc((size_t)(chunks ? chunks : 1) * (size_t)ns, sizeof *slots);
    uint32_t *idx = malloc((size_t)chunk * sizeof *idx);
    int rc = !slots || !idx ? VGPU_ENOMEM : 0;
    for (long j = t->job->rank; rc == 0 && j < chunks; j += t->job->size) {
        long at = j * chunk, rows = ds->count - at < chunk ? ds->count - at : chunk;
        for (long i = 0; i < rows; i++)
            idx[i] = (uint32_t)(at + i);
        TRY_GOTO(train_load_rows(t, &t->model, ds, idx, rows), rc, out);
        TRY_GOTO(model_forward(&t->model, t->dev, (int)rows), rc, out);
        TRY_GOTO(model_eval_stats(&t->model, t->dev, (int)rows), rc, out);
        TRY_GOTO(add_stats_(t, &t->model, rows, slots + ns * j), rc, out);
    }
    if (rc == 0)
        job_sum_doubles(t->job, slots, (int)(ns * chunks));
    double sums[MODEL_MAX_STATS] = {0};
    for (long j = 0; rc == 0 && j < chunks; j++)
        for (int k = 0; k < ns; k++)
            sums[k] += slots[ns * j + k];
    model_metrics_values(mm, sums, ds->count ? (double)ds->count : 1, values);
out:
    free(idx);
    free(slots);
    vgpu_span_end(t->dev, vgpu_span_eval, span, 0, 0);
    return rc;
}
