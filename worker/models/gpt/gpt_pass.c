// models/gpt/gpt_pass.c: the transformer's forward and backward passes on
// the device, as the math module's operations (vgpu/vgpu_math.h), queued in
// order on the rank's stream. Shapes: B rows (sequences) of T positions, C
// channels, NH heads, V tokens; BT = B * T rows of activations.
#include "gpt.h"

#include "status.h"

// y[BT, out] = x[BT, in] @ W^T + b, W [out, in] as PyTorch's Linear.
static int linear_(device_t *d, float *y, const float *x, const float *w, const float *b, int bt,
                   int in, int out)
{
    TRY(math_gemm(d, 0, 1, bt, out, in, 1.0f, x, w, 0.0f, y));
    return math_bias_add(d, y, b, bt, out, 0);
}

// The linear layer's gradients: dW[out, in] = dy^T @ x, db = the column sums
// of dy, and dx[BT, in] = dy @ W (when dx is not NULL).
static int linear_backward_(device_t *d, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, int bt, int in, int out)
{
    TRY(math_gemm(d, 1, 0, out, in, bt, 1.0f, dy, x, 0.0f, dw));
    TRY(math_bias_grad(d, db, dy, bt, out));
    return dx ? math_gemm(d, 0, 0, bt, in, out, 1.0f, dy, w, 0.0f, dx) : 0;
}

static const float *layer_param_(const struct gpt *g, const float *params, int l,
                                 enum gpt_tensor t)
{
    return params + gpt_layer_param(g, l, t);
}

// One block: x -> res2 = x + proj(attn(ln1(x))) -> res3 = res2 + mlp(ln2(res2)).
static int block_forward_(struct gpt *g, device_t *d, int l, const float *x, int rows)
{
    const int BT = rows * g->T, C = g->C;
    const size_t n = (size_t)BT * (size_t)C;
    struct gpt_layer_acts *a = &g->layer[l];
#define P_(t) layer_param_(g, g->params, l, (t))
    TRY(math_layernorm_forward(d, a->ln1, a->ln1_mean, a->ln1_rstd, x, P_(GPT_LN1_W),
                               P_(GPT_LN1_B), BT, C));
    TRY(linear_(d, a->qkv, a->ln1, P_(GPT_QKV_W), P_(GPT_QKV_B), BT, C, 3 * C));
    TRY(math_attention_forward(d, a->atty, a->att, a->qkv, rows, g->T, C, g->NH));
    TRY(linear_(d, a->res2, a->atty, P_(GPT_PROJ_W), P_(GPT_PROJ_B), BT, C, C));
    TRY(math_add(d, a->res2, a->res2, x, n));
    TRY(math_layernorm_forward(d, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, P_(GPT_LN2_W),
                               P_(GPT_LN2_B), BT, C));
    TRY(linear_(d, a->fch, a->ln2, P_(GPT_FC_W), P_(GPT_FC_B), BT, C, 4 * C));
    TRY(math_gelu_forward(d, a->fch_gelu, a->fch, (size_t)BT * 4 * (size_t)C));
    TRY(linear_(d, a->res3, a->fch_gelu, P_(GPT_FCPROJ_W), P_(GPT_FCPROJ_B), BT, 4 * C, C));
    return math_add(d, a->res3, a->res3, a->res2, n);
#undef P_
}

int gpt_forward(struct gpt *g, vgpu_t *dev, int rows)
{
    if (rows < 0 || rows > g->max_rows)
        return VGPU_EINVAL;
    if (rows == 0)
        return 0;
    device_t *d = vgpu_math_device(dev);
    const int BT = rows * g->T, C = g->C;
    TRY(math_embed_forward(d, g->encoded, g->tokens, g->params + gpt_wte(g),
                           g->params + gpt_wpe(g), rows, g->T, C, g->V));
    const float *x = g->encoded;
    for (int l = 0; l < g->L; l++) {
        TRY(block_forward_(g, d, l, x, rows));
        x = g->layer[l].res3;
    }
    const float *lnf = g->params + gpt_lnf(g);
    TRY(math_layernorm_forward(d, g->lnf, g->lnf_mean, g->lnf_rstd, x, lnf, lnf + C, BT, C));
    // logits[BT, V] = lnf @ wte^T: the output projection is the token embedding.
    return math_gemm(d, 0, 1, BT, g->V, C, 1.0f, g->lnf, g->params + gpt_wte(g), 0.0f,
                     g->logits);
}

// The loss at every position, then each row's stats: the sums over its
// positions (GPT_STATS). dlogits NULL: no gradient (evaluation).
static int loss_(struct gpt *g, device_t *d, int rows, float *dlogits, float grad_scale)
{
    const int BT = rows * g->T;
    TRY(math_softmax_xent(d, dlogits, g->xent, g->logits, g->labels, BT, g->V, grad_scale));
    return math_seq_stats(d, g->stats, g->xent, rows, g->T);
}

int gpt_eval_stats(struct gpt *g, vgpu_t *dev, int rows)
{
    if (rows < 0 || rows > g->max_rows)
        return VGPU_EINVAL;
    if (rows == 0)
        return 0;
    return loss_(g, vgpu_math_device(dev), rows, NULL, 0.0f);
}

// One block backward. On entry g->dres holds the gradient of the layer's
// output (res3); on return, of its input x. Parameter gradients into grads.
static int block_backward_(struct gpt *g, device_t *d, int l, const float *x, int rows,
                           float *grads)
{
    const int BT = rows * g->T, C = g->C;
    struct gpt_layer_acts *a = &g->layer[l];
#define P_(t) layer_param_(g, g->params, l, (t))
#define G_(t) (grads + gpt_layer_param(g, l, (t)))
    // res3 = res2 + fcproj(gelu(fc(ln2(res2)))): dres flows on to res2 as it is.
    TRY(linear_backward_(d, g->dfch, G_(GPT_FCPROJ_W), G_(GPT_FCPROJ_B), g->dres, a->fch_gelu,
                         P_(GPT_FCPROJ_W), BT, 4 * C, C));
    TRY(math_gelu_backward(d, g->dfch, a->fch, g->dfch, (size_t)BT * 4 * (size_t)C));
    TRY(linear_backward_(d, g->dln, G_(GPT_FC_W), G_(GPT_FC_B), g->dfch, a->ln2, P_(GPT_FC_W), BT,
                         C, 4 * C));
    TRY(math_layernorm_backward(d, g->dres, G_(GPT_LN2_W), G_(GPT_LN2_B), g->dln, a->res2,
                                P_(GPT_LN2_W), a->ln2_mean, a->ln2_rstd, BT, C));
    // res2 = x + proj(attn(ln1(x))).
    TRY(linear_backward_(d, g->dln, G_(GPT_PROJ_W), G_(GPT_PROJ_B), g->dres, a->atty,
                         P_(GPT_PROJ_W), BT, C, C));
    TRY(math_attention_backward(d, g->dqkv, g->datt, g->dln, a->qkv, a->att, rows, g->T, C,
                                g->NH));
    TRY(linear_backward_(d, g->dln, G_(GPT_QKV_W), G_(GPT_QKV_B), g->dqkv, a->ln1, P_(GPT_QKV_W),
                         BT, C, 3 * C));
    return math_layernorm_backward(d, g->dres, G_(GPT_LN1_W), G_(GPT_LN1_B), g->dln, x,
                                   P_(GPT_LN1_W), a->ln1_mean, a->ln1_rstd, BT, C);
#undef G_
#undef P_
}

int gpt_backward(struct gpt *g, vgpu_t *dev, int rows, float grad_scale, float *grads,
                 const struct grads_ready *ready)
{
    if (rows < 0 || rows > g->max_rows)
        return VGPU_EINVAL;
    device_t *d = vgpu_math_device(dev);
    // Several gradients accumulate (the LayerNorms', wte's from both ends).
    TRY(vgpu_memzero(dev, grads, g->param_count * sizeof(float)));
    if (rows == 0) { // the gradient of no rows
        grads_ready_tell(ready, 0);
        return 0;
    }
    const int BT = rows * g->T, C = g->C;
    const size_t n = (size_t)BT * (size_t)C;
    // A row's loss is the mean over its positions: each position's weight is
    // grad_scale / T. The logits become their own gradient.
    TRY(loss_(g, d, rows, g->logits, grad_scale / (float)g->T));
    float *dwte = grads + gpt_wte(g);
    TRY(math_gemm(d, 1, 0, g->V, C, BT, 1.0f, g->logits, g->lnf, 0.0f, dwte));
    TRY(math_gemm(d, 0, 0, BT, C, g->V, 1.0f, g->logits, g->params + gpt_wte(g), 0.0f, g->dln));
    const float *x = g->L ? g->layer[g->L - 1].res3 : g->encoded;
    float *glnf = grads + gpt_lnf(g);
    TRY(vgpu_memzero(dev, g->dres, n * sizeof(float)));
    TRY(math_layernorm_backward(d, g->dres, glnf, glnf + C, g->dln, x, g->params + gpt_lnf(g),
                                g->lnf_mean, g->lnf_rstd, BT, C));
    grads_ready_tell(ready, gpt_lnf(g));
    for (int l = g->L - 1; l >= 0; l--) {
        TRY(block_backward_(g, d, l, l ? g->layer[l - 1].res3 : g->encoded, rows, grads));
        grads_ready_tell(ready, gpt_layer_param(g, l, GPT_LN1_W));
    }
    // The token embedding's gradient is final only now: the output
    // projection (the first product above) and the input both add to it.
    TRY(math_embed_backward(d, dwte, grads + gpt_wpe(g), g->dres, g->tokens, rows, g->T, C, g->V));
    grads_ready_tell(ready, 0);
    return 0;
}
