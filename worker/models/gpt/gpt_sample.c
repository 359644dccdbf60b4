// models/gpt/gpt_sample.c: text from the transformer: each next token drawn
// from the distribution its forward pass gives the last position of the
// window (the latest model.context tokens), on the host.
#include "gpt.h"

#include <math.h>
#include <stdlib.h>

#include "rng.h"
#include "status.h"

// The index drawn from softmax(logits / temperature) (temperature 0: the
// first largest), with u uniform in [0, 1). probs is scratch [V].
static int draw_(const float *logits, float *probs, int V, float temperature, float u)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        best = logits[v] > logits[best] ? v : best;
    if (temperature <= 0)
        return best;
    double sum = 0;
    for (int v = 0; v < V; v++) {
        probs[v] = expf((logits[v] - logits[best]) / temperature);
        sum += probs[v];
    }
    double at = u * sum;
    for (int v = 0; v < V; v++) {
        at -= probs[v];
        if (at < 0)
            return v;
    }
    return best; // rounding left a sliver past the last
}

int gpt_sample(struct gpt *g, vgpu_t *dev, const int32_t *prompt, int n_prompt, int32_t *out,
               int n_out, float temperature, uint64_t seed)
{
    const int T = g->T, V = g->V;
    int32_t *window = calloc((size_t)T, sizeof *window);
    float *logits = malloc((size_t)V * sizeof *logits), *probs = malloc((size_t)V * sizeof *probs);
    int rc = window && logits && probs ? 0 : VGPU_ENOMEM;
    for (int i = 0; i < n_prompt && rc == 0; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            rc = VGPU_EINVAL;
    rng_t r;
    rng_init(&r, seed, 0);
    for (int i = 0; i < n_out && rc == 0; i++) {
        // The window: the last min(T, length) tokens of prompt + out[0, i);
        // the positions after it are never seen by the one read (causal).
        const int len = n_prompt + i, n = len < T ? len : T;
        for (int k = 0; k < n; k++) {
            const int at = len - n + k;
            window[k] = at < n_prompt ? prompt[at] : out[at - n_prompt];
        }
        if ((rc = vgpu_memcpy_htod(dev, g->tokens, window, (size_t)T * sizeof *window)) < 0 ||
            (rc = gpt_forward(g, dev, 1)) < 0 ||
            (rc = vgpu_memcpy_dtoh(dev, logits, g->logits + (size_t)(n - 1) * (size_t)V,
                                   (size_t)V * sizeof *logits)) < 0)
            break;
        out[i] = draw_(logits, probs, V, temperature, rng_uniform(&r));
    }
    free(probs);
    free(logits);
    free(window);
    return rc;
}
