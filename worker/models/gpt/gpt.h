// models/gpt/gpt.h: a decoder-only transformer over bytes (GPT-2's shape):
// learned token and position embeddings, pre-norm blocks (LayerNorm, causal
// multi-head self-attention, LayerNorm, MLP with GELU, residuals), a final
// LayerNorm and the output projection tied to the token embedding;
// cross-entropy on the next byte at every position. model.type = gpt.
//
// Parameters are one flat buffer in this order, each tensor row-major, a
// weight [out, in] as PyTorch's Linear holds it (tests/gpt_reference.py
// reads the same layout): wte [V,C], wpe [T,C]; per layer: ln1.weight [C],
// ln1.bias [C], attn.qkv.weight [3C,C], attn.qkv.bias [3C],
// attn.proj.weight [C,C], attn.proj.bias [C], ln2.weight [C], ln2.bias [C],
// mlp.fc.weight [4C,C], mlp.fc.bias [4C], mlp.proj.weight [C,4C],
// mlp.proj.bias [C]; then ln_f.weight [C], ln_f.bias [C]. Layer-major, so a
// layer's gradients are one range, ready together in the backward pass.
#ifndef VGPU_GPT_H
#define VGPU_GPT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define GPT_MAX_LAYERS 64
#define GPT_STATS MATH_SEQ_STATS // a row's (sequence's) stats: sums of loss, top-1, top-5 hits; positions

// A layer's tensors, in their order in params.
enum gpt_tensor {
    GPT_LN1_W, GPT_LN1_B, GPT_QKV_W, GPT_QKV_B, GPT_PROJ_W, GPT_PROJ_B,
    GPT_LN2_W, GPT_LN2_B, GPT_FC_W, GPT_FC_B, GPT_FCPROJ_W, GPT_FCPROJ_B,
    GPT_LAYER_TENSORS
};

// What the forward pass keeps of a layer for the backward pass, [B*T, ...].
struct gpt_layer_acts {
    float *ln1, *ln1_mean, *ln1_rstd; // LayerNorm 1: output [BT,C], its mean and 1/std [BT]
    float *qkv;                       // [BT,3C]
    float *att;                       // attention probabilities [B,NH,T,T]
    float *atty;                      // attention output, heads side by side [BT,C]
    float *res2;                      // residual after attention [BT,C]
    float *ln2, *ln2_mean, *ln2_rstd; // LayerNorm 2
    float *fch, *fch_gelu;            // MLP hidden before and after GELU [BT,4C]
    float *res3;                      // residual after the MLP: the layer's output [BT,C]
};

struct gpt {
    int L, NH, C, T, V;             // layers, heads, channels, context, vocabulary
    int max_rows;                   // sequences a pass takes
    size_t param_count;
    size_t layer_floats;            // one layer's parameters
    size_t tensor_offset[GPT_LAYER_TENSORS]; // within a layer's block
    size_t tensor_floats[GPT_LAYER_TENSORS];
    size_t acts_floats, scratch_floats; // the two device blocks below, floats
    float *params, *grads;          // device [param_count]
    int32_t *tokens, *labels;       // device [max_rows, T]
    float *stats;                   // device [max_rows, GPT_STATS]
    float *acts_block;              // device: everything below but the scratch
    float *encoded;                 // embeddings [BT,C]
    struct gpt_layer_acts layer[GPT_MAX_LAYERS];
    float *lnf, *lnf_mean, *lnf_rstd; // final LayerNorm
    float *logits;                  // [BT,V]; the backward pass turns them into their gradient
    float *xent;                    // per position {loss, top-1, top-5} [BT,3]
    float *scratch_block;           // device: the backward pass's buffers
    float *dres, *dln;              // [BT,C]: the residual's gradient; a LayerNorm output's
    float *dfch;                    // [BT,4C]
    float *dqkv;                    // [BT,3C]
    float *datt;                    // [B,NH,T,T]
};

// The trainer's model (model.type = gpt): model.h's table.
extern const struct model_ops model_gpt;

// Offsets in params (floats).
static inline size_t gpt_wte(const struct gpt *g) { (void)g; return 0; }
static inline size_t gpt_wpe(const struct gpt *g) { return (size_t)g->V * (size_t)g->C; }
static inline size_t gpt_layer_param(const struct gpt *g, int l, enum gpt_tensor t)
{
    return gpt_wpe(g) + (size_t)g->T * (size_t)g->C + (size_t)l * g->layer_floats +
           g->tensor_offset[t];
}
static inline size_t gpt_lnf(const struct gpt *g)
{
    return gpt_layer_param(g, g->L, GPT_LN1_W); // just past the last layer
}

// The passes (gpt_pass.c), on rows (sequences) <= max_rows whose tokens and
// labels are in g->tokens and g->labels.
int gpt_forward(struct gpt *g, vgpu_t *dev, int rows);
// After gpt_forward: stats, and the gradient of sum over rows of (the mean
// loss of the row's positions) * grad_scale into grads (overwritten),
// telling `ready` (NULL: nobody) after the final LayerNorm, after each block
// (from its first parameter) and at the end (struct grads_ready).
int gpt_backward(struct gpt *g, vgpu_t *dev, int rows, float grad_scale, float *grads,
                 const struct grads_ready *ready);
// After gpt_forward: stats only.
int gpt_eval_stats(struct gpt *g, vgpu_t *dev, int rows);
// model_ops.sample (gpt_sample.c).
int gpt_sample(struct gpt *g, vgpu_t *dev, const int32_t *prompt, int n_prompt, int32_t *out,
               int n_out, float temperature, uint64_t seed);

#endif
