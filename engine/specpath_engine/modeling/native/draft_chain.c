/* A one-layer hidden-state drafter's chain of K greedy drafts for one request, in one call.
 *
 * Per draft j: logits = lm_head(final_norm(a)) (+ bias) (+ noise row j: a seeded request's race,
 * specpath_drafting.coupling), token = the first argmax, mapped to a target id; then (but for the last) the head's layer on [that token's embedding ; a] at the
 * next position, writing its k/v into the request's KV row, gives the next a. The same kernels
 * as the Python chain (layer_ops.c, rows_matmul.c, attention.c, decoder_layer.c), in the same
 * order, so the drafts are that path's to the bit; what goes is the Python between them and
 * the host sync per draft (a drafting step of a small head on a CPU spends longer there than
 * in the matmuls).
 *
 * Two input stages, the two head families of specpath_drafting:
 *   EAGLE-3: x = [embed_norm(e) ; hidden_norm(a)] (2d), residual = a
 *   MTP:     z = fuse([embed_norm(e) ; hidden_norm(a)]) (either order), x = fuse_norm(z), residual = z */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

void specpath_q4_matmul(const uint8_t *levels, const float *scale_mins, const uint16_t *x, void *out,
                        int out_f32, int M, int N, int K);
void specpath_q8_matmul(const int8_t *weight, const float *scales, const uint16_t *x, void *out,
                        int out_f32, int M, int N, int K);
void specpath_bf16_matmul(const uint16_t *weight, const uint16_t *x, void *out, int out_f32, int M, int N, int K);
void specpath_bf16_tile_matmul(const uint16_t *packed, const uint16_t *x, void *out, int out_f32, int M, int N, int K);
void specpath_rms_norm(const uint16_t *x, const uint16_t *delta, uint16_t *sum_out, const uint16_t *weight,
                       uint16_t *out, int M, int D, float eps);

typedef struct {
    const void *weight;
    const float *scales;
    int64_t bits, out_features, in_features, tiled;
} specpath_linear;

typedef struct {
    const uint16_t *input_norm, *post_norm;
    float input_eps, post_eps;
    const specpath_linear *qkv, *o_proj, *gate_up, *down;
} specpath_layer_weights;

void specpath_layer_pre(const uint16_t *h, const uint16_t *norm_weight, float eps, const specpath_linear *qkv,
                        const uint16_t *cos, const uint16_t *sin, int T, int H, int KV, int D, uint16_t *qkv_out);
void specpath_layer_post(const uint16_t *h, const uint16_t *attn, const specpath_linear *o_proj,
                         const uint16_t *norm_weight, float eps, const specpath_linear *gate_up,
                         const specpath_linear *down, int T, uint16_t *out);
void specpath_attention(const uint16_t *q, int q_stride, const uint16_t *k_new, int k_stride, const uint16_t *v_new,
                        int v_stride, uint16_t *key_cache, uint16_t *value_cache, int L, int Q, int H, int KV,
                        int D, float scale, const uint8_t *mask, const int64_t *slots, uint16_t *out);

/* The head as the chain reads it (specpath_draft_head in Python). fuse/fuse_norm: MTP only
 * (NULL for EAGLE-3); hidden_first: MTP's input order. lm_bias: NULL or fp32 [n]; ids: NULL
 * (row i is target id i) or int64 [n], the target id of each LM-head row. */
typedef struct {
    const uint16_t *embed; /* [V, d] bf16: the target's embedding */
    const uint16_t *embed_norm, *hidden_norm, *fuse_norm, *final_norm;
    float embed_eps, hidden_eps, fuse_eps, final_eps;
    const specpath_linear *fuse;
    int64_t hidden_first;
    specpath_layer_weights layer; /* input_norm unused: the input stage norms */
    const specpath_linear *lm_head;
    const float *lm_bias;
    const int64_t *ids;
} specpath_draft_head;

static void linear(const specpath_linear *l, const uint16_t *x, uint16_t *out, int M) {
    if (l->bits == 4)
        specpath_q4_matmul((const uint8_t *)l->weight, l->scales, x, out, 0, M, (int)l->out_features, (int)l->in_features);
    else if (l->bits == 16 && l->tiled)
        specpath_bf16_tile_matmul((const uint16_t *)l->weight, x, out, 0, M, (int)l->out_features, (int)l->in_features);
    else if (l->bits == 16)
        specpath_bf16_matmul((const uint16_t *)l->weight, x, out, 0, M, (int)l->out_features, (int)l->in_features);
    else
        specpath_q8_matmul((const int8_t *)l->weight, l->scales, x, out, 0, M, (int)l->out_features, (int)l->in_features);
}

static inline float bf16_value(uint16_t v) {
    union { uint32_t u; float f; } bits = {.u = (uint32_t)v << 16};
    return bits.f;
}

/* a0 [d]: the head's output at the last committed position; keys/values [positions, KV, D]: the
 * request's KV row (position p at row p); draft j > 0 runs at position first_position + j - 1
 * with cos/sin row j - 1 of [K - 1, D]. noise: NULL (greedy) or fp32 [K, n], added to draft j's
 * logits (LM-head row order). tokens_out [K]: target ids. */
void specpath_draft_chain(const specpath_draft_head *hd, const uint16_t *a0, int K, int H, int KV, int D,
                          uint16_t *keys, uint16_t *values, int first_position, const uint16_t *cos,
                          const uint16_t *sin, float scale, const float *noise, int64_t *tokens_out) {
    const specpath_layer_weights *w = &hd->layer;
    const int d = (int)w->o_proj->out_features, n = (int)hd->lm_head->out_features, width = (H + 2 * KV) * D;
    uint16_t *buf = malloc(sizeof(uint16_t) * (6 * (size_t)d + (size_t)n + (size_t)width + (size_t)H * D));
    uint16_t *a = buf, *next = a + d, *x = next + d, *z = x + 2 * (size_t)d, *normed = z + d;
    uint16_t *logits = normed + d, *qkv = logits + n, *attn = qkv + width;
    memcpy(a, a0, sizeof(uint16_t) * d);
    for (int j = 0; j < K; j++) {
        specpath_rms_norm(a, 0, 0, hd->final_norm, normed, 1, d, hd->final_eps);
        linear(hd->lm_head, normed, logits, 1);
        int best = 0;
        const float *g = noise ? noise + (size_t)j * n : 0;
        float top = bf16_value(logits[0]) + (hd->lm_bias ? hd->lm_bias[0] : 0.0f);
        if (g) top += g[0];
        for (int i = 1; i < n; i++) {
            float v = bf16_value(logits[i]) + (hd->lm_bias ? hd->lm_bias[i] : 0.0f);
            if (g) v += g[i]; /* additions only: torch's (logits + bias) + noise, to the bit */
            if (v > top) top = v, best = i; /* ties: the first, as torch.argmax */
        }
        const int64_t token = hd->ids ? hd->ids[best] : best;
        tokens_out[j] = token;
        if (j + 1 == K) break;
        const uint16_t *e = hd->embed + (size_t)token * d;
        const uint16_t *residual = a, *layer_in = x;
        if (hd->fuse) {
            uint16_t *first = x + (hd->hidden_first ? d : 0), *second = x + (hd->hidden_first ? 0 : d);
            specpath_rms_norm(e, 0, 0, hd->embed_norm, first, 1, d, hd->embed_eps);
            specpath_rms_norm(a, 0, 0, hd->hidden_norm, second, 1, d, hd->hidden_eps);
            linear(hd->fuse, x, z, 1);
            specpath_rms_norm(z, 0, 0, hd->fuse_norm, normed, 1, d, hd->fuse_eps);
            residual = z, layer_in = normed;
        } else {
            specpath_rms_norm(e, 0, 0, hd->embed_norm, x, 1, d, hd->embed_eps);
            specpath_rms_norm(a, 0, 0, hd->hidden_norm, x + d, 1, d, hd->hidden_eps);
        }
        const int position = first_position + j;
        specpath_layer_pre(layer_in, 0, 0.0f, w->qkv, cos + (size_t)j * D, sin + (size_t)j * D, 1, H, KV, D, qkv);
        specpath_attention(qkv, width, qkv + H * D, width, qkv + (H + KV) * D, width, keys, values, position + 1, 1,
                           H, KV, D, scale, 0, 0, attn);
        specpath_layer_post(residual, attn, w->o_proj, w->post_norm, w->post_eps, w->gate_up, w->down, 1, next);
        uint16_t *t = a;
        a = next, next = t;
    }
    free(buf);
}
