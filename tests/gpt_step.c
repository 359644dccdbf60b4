// gpt_step.c: one training step of vgpu_train's transformer (model.type =
// gpt) from files, on 1-N ranks, for the comparison with PyTorch
// (tests/test_gpt_step.sh, against tests/gpt_reference.py's `step`): the
// trainer's own model, all-reduce of the gradients, clip and optimizer.
//
//   gpt_step CONFIG PARAMS TOKENS OUTDIR
//
// CONFIG: vgpu_train's INI (model.layers/heads/channels/context; train.lr,
// beta1, beta2, eps, weight_decay, grad_clip, optimizer). PARAMS: the flat
// float32 parameters (models/gpt/gpt.h's layout). TOKENS: int32 [B, T + 1]
// (T = model.context: the inputs are [:, :T], the labels [:, 1:]); the rows
// are split over the ranks in order, as evenly as they go. Rank 0 writes
// OUTDIR/loss.txt (the mean loss over the B * T positions),
// grads.bin (the gradient of that mean, before clipping), grad_norm.txt (its
// L2 norm: the optimizer's, which clips by it, with train.grad_clip set; else
// summed here in double), grads_clipped.bin (the gradient the optimizer
// stepped with) and params_after.bin. Exit status: 0, 1 on a failure (said).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vgpu/vgpu_ext.h>

#include "dataset.h"
#include "model.h"
#include "optim.h"
#include "train_config.h"
#include "util.h"

#define FAIL_(...)                                                                         \
    do {                                                                                   \
        fprintf(stderr, "gpt_step: " __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                               \
        goto out;                                                                          \
    } while (0)

// The largest PARAMS or TOKENS file taken (the tests' are kilobytes).
#define GPT_STEP_MAX_FILE_BYTES ((size_t)1 << 30)

static int write_file_(const char *dir, const char *name, const void *data, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, bytes, f) == bytes;
    if (f && fclose(f))
        ok = 0;
    if (!ok)
        fprintf(stderr, "gpt_step: cannot write %s\n", path);
    return ok ? 0 : -1;
}

static int write_number_(const char *dir, const char *name, double value)
{
    char text[64];
    int n = snprintf(text, sizeof text, "%.9g\n", value);
    return write_file_(dir, name, text, (size_t)n);
}

// 1 when ok holds on every rank (a rank that failed alone would leave the
// others waiting in the next collective).
static int all_ok_(vgpu_t *v, int ok)
{
    int32_t bad = !ok;
    return vgpu_ctrl_all_reduce(&bad, &bad, 1, vgpu_int32, vgpu_max, v) == 0 && !bad;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: gpt_step CONFIG PARAMS TOKENS OUTDIR\n");
        return 1;
    }
    int status = 1;
    vgpu_t *v = NULL;
    struct train_config cfg;
    struct model m = {0};
    struct optimizer opt = {0};
    float *params = NULL, *grads = NULL;
    int32_t *tokens = NULL, *inputs = NULL, *labels = NULL;
    char err[512];
    train_config_defaults(&cfg);
    if (train_config_load_file(&cfg, NULL, argv[1], err, sizeof err) < 0)
        FAIL_("%s", err);
    const int T = (int)cfg.model.context;
    size_t param_bytes, token_bytes;
    void *data;
    if (util_read_file(argv[2], "PARAMS", GPT_STEP_MAX_FILE_BYTES, &data, &param_bytes, err,
                       sizeof err) < 0)
        FAIL_("%s", err);
    params = data;
    if (util_read_file(argv[3], "TOKENS", GPT_STEP_MAX_FILE_BYTES, &data, &token_bytes, err,
                       sizeof err) < 0)
        FAIL_("%s", err);
    tokens = data;
    // B rows of T + 1 tokens (the reference takes shorter rows too; the
    // trainer's sequences are model.context long).
    const size_t count = token_bytes / sizeof(int32_t);
    const int B = (int)(count / (size_t)(T + 1));
    if (B < 1 || token_bytes % ((size_t)(T + 1) * sizeof(int32_t)))
        FAIL_("%s: not int32 [B, model.context + 1 = %d]", argv[3], T + 1);
    if (vgpu_init(&v, &argc, &argv, &(struct vgpu_options){.quiet = 1}) < 0)
        FAIL_("vgpu_init failed");
    const int rank = vgpu_rank(v), n = vgpu_size(v);
    const int first = (int)((long)B * rank / n), rows = (int)((long)B * (rank + 1) / n) - first;
    // A token set of the shape the model takes (no data: the rows come from TOKENS).
    struct dataset shape = {.count = B, .rows = 1, .cols = T, .features = T, .classes = 256,
                            .tokens = 1, .label_width = T};
    if (model_init(&m, v, &cfg, &shape, rows > 0 ? rows : 1) < 0)
        FAIL_("the model does not lay out from %s", argv[1]);
    if (param_bytes != m.param_count * sizeof(float))
        FAIL_("%s: %zu bytes; the model has %zu parameters", argv[2], param_bytes, m.param_count);
    inputs = malloc((size_t)(rows + 1) * (size_t)T * sizeof *inputs);
    labels = malloc((size_t)(rows + 1) * (size_t)T * sizeof *labels);
    grads = malloc(param_bytes);
    if (!inputs || !labels || !grads)
        FAIL_("out of memory");
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < T; t++) {
            inputs[(size_t)r * T + t] = tokens[(size_t)(first + r) * (T + 1) + t];
            labels[(size_t)r * T + t] = tokens[(size_t)(first + r) * (T + 1) + t + 1];
        }
    const size_t row_bytes = (size_t)rows * (size_t)T * sizeof(int32_t);
    if (vgpu_memcpy_htod(v, m.params, params, param_bytes) < 0 ||
        vgpu_memcpy_htod(v, m.input, inputs, row_bytes) < 0 ||
        vgpu_memcpy_htod(v, m.labels, labels, row_bytes) < 0)
        FAIL_("copies to the device failed");
    // The gradient of the mean over the global batch's rows (each row's loss
    // is the mean over its positions): grad_scale 1 / B, as vgpu_train's.
    const int passed =
        model_forward(&m, v, rows) == 0 && model_backward(&m, v, rows, 1.0f / (float)B, NULL) == 0;
    if (!all_ok_(v, passed))
        FAIL_("rank %d: the passes %s", rank, passed ? "held here, failed elsewhere" : "failed");
    const int ns = model_metrics_of(&m)->n_stats;
    float *stats = malloc((size_t)(rows + 1) * (size_t)ns * sizeof *stats);
    double loss_sum[2] = {0, 0}; // the losses' sum, positions
    if (!stats || vgpu_memcpy_dtoh(v, stats, m.stats, (size_t)rows * ns * sizeof *stats) < 0)
        FAIL_("the stats did not come back");
    for (int r = 0; r < rows; r++) {
        loss_sum[0] += stats[(size_t)r * ns];
        loss_sum[1] += stats[(size_t)r * ns + ns - 1];
    }
    free(stats);
    if (vgpu_ctrl_all_reduce(loss_sum, loss_sum, 2, vgpu_float64, vgpu_sum, v) < 0 ||
        vgpu_all_reduce(m.grads, m.grads, m.param_count, vgpu_float32, vgpu_sum, v) < 0 ||
        vgpu_memcpy_dtoh(v, grads, m.grads, param_bytes) < 0)
        FAIL_("the all-reduce failed");
    if (optim_init(&opt, v, &cfg, m.param_count) < 0 ||
        optim_step(&opt, v, m.params, m.grads, (float)cfg.train.lr) < 0 ||
        vgpu_memcpy_dtoh(v, params, m.params, param_bytes) < 0)
        FAIL_("the optimizer step failed");
    double norm;
    if (optim_last_norm(&opt, v, &norm) < 0)
        FAIL_("the gradient norm did not come back");
    if (cfg.train.grad_clip <= 0) {
        double sum_sq = 0;
        for (size_t i = 0; i < m.param_count; i++)
            sum_sq += (double)grads[i] * grads[i];
        norm = sqrt(sum_sq);
    }
    if (rank == 0 &&
        (write_number_(argv[4], "loss.txt", loss_sum[0] / loss_sum[1]) < 0 ||
         write_file_(argv[4], "grads.bin", grads, param_bytes) < 0 ||
         write_number_(argv[4], "grad_norm.txt", norm) < 0 ||
         write_file_(argv[4], "params_after.bin", params, param_bytes) < 0))
        goto out;
    // The gradient the optimizer stepped with (clipped in place).
    if (vgpu_memcpy_dtoh(v, grads, m.grads, param_bytes) < 0 ||
        (rank == 0 && write_file_(argv[4], "grads_clipped.bin", grads, param_bytes) < 0))
        goto out;
    status = 0;
out:
    if (v) {
        optim_free(&opt, v);
        model_free(&m, v);
        vgpu_finalize(v);
    }
    free(labels);
    free(inputs);
    free(grads);
    free(tokens);
    free(params);
    return status;
}
