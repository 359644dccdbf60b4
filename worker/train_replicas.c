// train_replicas.c: replica consistency: every rank's parameters and
// optimizer state must equal rank 0's, bit for bit; and the test hook that
// plants a divergence to prove the check works.
#include "train_internal.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

// Names parameter `index` of model m, e.g. "layer1.weight[12,5]".
static void describe_param_(const struct model *m, size_t index, char *buf, size_t bytes)
{
    for (int k = 0; k < model_tensor_count(m); k++) {
        struct model_tensor t;
        model_tensor(m, k, &t);
        const size_t cols = t.n_dims == 2 ? t.dims[1] : 1;
        if (index < t.offset || index >= t.offset + t.dims[0] * cols)
            continue;
        const size_t i = index - t.offset;
        if (t.n_dims == 2)
            snprintf(buf, bytes, "%s[%zu,%zu]", t.name, i / cols, i % cols);
        else
            snprintf(buf, bytes, "%s[%zu]", t.name, i);
        return;
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
    if (vgpu_memcpy_dtoh(t->dev, host, t->model.params, np * sizeof(float)) < 0 ||
        (ns && vgpu_memcpy_dtoh(t->dev, host + np, t->opt.state, ns * sizeof(float)) < 0)) {
        free(host);
        return NULL;
    }
    *count = np + ns;
    return host;
}

// A rank's first value that differs from rank 0's.
struct difference {
    int64_t index;     // flat index into parameters then optimizer state; -1 = none
    float mine, ref;   // the rank's value and rank 0's
};

// Rank 0 names each diverged rank and its first difference.
static void report_differences_(const struct trainer *t, const struct difference *all)
{
    const int n = t->job->size;
    char ranks[256] = "";
    for (int r = 1; r < n; r++)
        if (all[r].index >= 0)
            snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), "%s%d",
                     ranks[0] ? ", " : "", r);
    log_error("replica check at step %ld: rank%s %s diverged from rank 0", t->step,
              strchr(ranks, ',') ? "s" : "", ranks);
    for (int r = 1; r < n; r++) {
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

// After a mismatch: rank 0's state is broadcast, each rank finds its first
// differing value, and rank 0 names them all.
static void find_differences_(struct trainer *t, const float *mine, size_t count)
{
    struct job *job = t->job;
    struct difference d = {-1, 0, 0}, *all = malloc((size_t)job->size * sizeof d);
    float *ref = malloc(count * sizeof(float));
    if (!all || !ref)
        FATAL(1, "out of memory while reporting diverged replicas");
    if (job->rank == 0)
        memcpy(ref, mine, count * sizeof(float));
    job_broadcast(job, ref, count * sizeof(float), 0);
    for (size_t i = 0; i < count; i++)
        if (memcmp(&mine[i], &ref[i], sizeof(float))) {
            d = (struct difference){(int64_t)i, mine[i], ref[i]};
            break;
        }
    job_gather_all(job, &d, all, sizeof d);
    if (job->rank == 0)
        report_differences_(t, all);
    free(all);
    free(ref);
}

int train_check_replicas(struct trainer *t)
{
    struct job *job = t->job;
    if (t->mode->gather_state)
        TRY(t->mode->gather_state(t));
    size_t count = 0;
    float *mine = replica_state_(t, &count);
    uint64_t *hashes = malloc((size_t)job->size * sizeof *hashes);
    // One verdict on the allocations, so no rank gathers while another has
    // given up.
    int rc = job_agree_min(job, mine && hashes ? 0 : VGPU_ENOMEM);
    int diverged = 0;
    if (rc == 0) {
        uint64_t hash = util_hash64(0, mine, count * sizeof(float));
        job_gather_all(job, &hash, hashes, sizeof hash);
        for (int r = 1; r < job->size; r++)
            diverged += hashes[r] != hashes[0];
    }
    if (diverged) {
        find_differences_(t, mine, count);
        rc = VGPU_EMISMATCH;
    }
    free(hashes);
    free(mine);
    return rc;
}

int train_maybe_perturb(struct trainer *t)
{
    if (t->inject.perturb_step != t->step)
        return 0;
    const size_t i = t->model.param_count / 2;
    float v;
    TRY(vgpu_memcpy_dtoh(t->dev, &v, t->model.params + i, sizeof v));
    v += 1e-3f;
    log_warn("VGPU_INJECT_PERTURB: rank %d nudges parameter %zu after step %ld", t->job->rank, i,
             t->step);
    return vgpu_memcpy_htod(t->dev, t->model.params + i, &v, sizeof v);
}
