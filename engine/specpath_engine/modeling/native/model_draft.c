/* A draft model's greedy chain for one request (specpath_draft_model's autoregressive drafting) in
 * one call: the pass over the tokens the draft has not seen yet (its catch-up and the newest
 * token), whose last row's argmax is draft 1, then one pass per further draft over the draft
 * before it.
 *
 * Each pass is the per-op forward's calls in its order: the embedding rows, per layer
 * specpath_layer_pre (input norm, q/k/v, RoPE), specpath_attention over the request's KV row
 * (causal, the new keys written on the way) and specpath_layer_post; then the final norm of the
 * last row, the LM head (a reduced draft vocabulary's kept rows, with their fp32 bias) and the
 * first argmax (of the logits plus the draft's noise row for a seeded request's race,
 * specpath_drafting.coupling), mapped to a target id. So the KV and the drafts are that path's to the bit; what
 * goes is the Python around each layer (a 2-layer SmolLM2 draft spent more time there than in its
 * matmuls). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* The draft model as the chain reads it (DraftModelHead in Python). */
typedef struct {
    const uint16_t *embed; /* [V, d] bf16 */
    int64_t num_layers;
    const specpath_layer_weights *layers;
    const uint16_t *final_norm;
    float final_eps;
    const specpath_linear *lm_head; /* the kept rows [n, d] */
    const float *lm_bias;           /* NULL or fp32 [n] */
    const int64_t *ids;             /* NULL (row i is id i) or int64 [n]: each row's target id */
} specpath_model_head;

/* tokens [T]: the tokens at positions p0 .. p0 + T - 1 (the draft's first unseen position onwards,
 * the newest committed token last); K drafts from there into drafts_out [K] (target ids). The
 * request's position p lives at row p of keys/values + layer * layer_stride (its KV row, [rows,
 * KV, D] per layer); cos/sin the rotary tables (row p: position p). noise: NULL (greedy) or fp32
 * [K, n], row j added to draft j's logits (LM-head row order: T G, a seeded request's race). */
void specpath_model_propose(const specpath_model_head *hd, const int64_t *tokens, int T, int K, int p0,
                            uint16_t *keys, uint16_t *values, int64_t layer_stride, const uint16_t *cos,
                            const uint16_t *sin, int H, int KV, int D, float scale, const float *noise,
                            int64_t *drafts_out) {
    const int d = (int)hd->layers[0].o_proj->out_features, width = (H + 2 * KV) * D;
    const int n = (int)hd->lm_head->out_features;
    const size_t rows = (size_t)(T > 1 ? T : 1);
    uint16_t *buf = malloc(sizeof(uint16_t) * (rows * (2 * (size_t)d + (size_t)width + (size_t)H * D) + (size_t)d + (size_t)n));
    uint16_t *h = buf, *next = h + rows * d, *qkv = next + rows * d, *attn = qkv + rows * width;
    uint16_t *normed = attn + rows * H * D, *logits = normed + d;
    int64_t token = 0;
    int position = p0, count = T;
    for (int j = 0; j < K; j++) {
        for (int t = 0; t < count; t++)
            memcpy(h + (size_t)t * d, hd->embed + (size_t)(j ? token : tokens[t]) * d, sizeof(uint16_t) * d);
        const uint16_t *cs = cos + (size_t)position * D, *ss = sin + (size_t)position * D;
        for (int64_t l = 0; l < hd->num_layers; l++) {
            const specpath_layer_weights *w = &hd->layers[l];
            specpath_layer_pre(h, w->input_norm, w->input_eps, w->qkv, cs, ss, count, H, KV, D, qkv);
            specpath_attention(qkv, width, qkv + H * D, width, qkv + (H + KV) * D, width, keys + l * layer_stride,
                               values + l * layer_stride, position + count, count, H, KV, D, scale, 0, 0, attn);
            specpath_layer_post(h, attn, w->o_proj, w->post_norm, w->post_eps, w->gate_up, w->down, count, next);
            uint16_t *t = h;
            h = next, next = t;
        }
        specpath_rms_norm(h + (size_t)(count - 1) * d, 0, 0, hd->final_norm, normed, 1, d, hd->final_eps);
        specpath_linear_matmul(hd->lm_head, normed, logits, 1);
        const int best = specpath_draft_argmax(logits, hd->lm_bias, noise ? noise + (size_t)j * n : 0, n);
        token = hd->ids ? hd->ids[best] : best;
        drafts_out[j] = token;
        position += count, count = 1;
    }
    free(buf);
}
