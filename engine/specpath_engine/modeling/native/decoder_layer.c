/* A Llama decoder layer's two halves around attention, each one call from Python:
 *
 *   pre:  x = rms_norm(h) (or h); qkv = x @ Wqkv; RoPE on q and k (in place)
 *   post: h2 = h + attn @ Wo; x = rms_norm(h2); y = down(silu(gate) * up); out = h2 + y
 *
 * and the whole stack of them with attention between for one request (specpath_decoder_stack),
 * built from the same kernels the per-op path calls (rows_matmul.c, layer_ops.c), in the same
 * order, so the result is that path's to the bit; only the Python between them is gone (a CPU
 * decode step of a small model spends as long there as in the matmuls). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

void specpath_q4_matmul(const uint8_t *levels, const float *scale_mins, const uint16_t *x, void *out,
                        int out_f32, int M, int N, int K);
void specpath_q8_matmul(const int8_t *weight, const float *scales, const uint16_t *x, void *out,
                        int out_f32, int M, int N, int K);
void specpath_q8a16_matmul(const int8_t *weight, const float *scales, const uint16_t *x, void *out,
                           int out_f32, int M, int N, int K);
void specpath_bf16_matmul(const uint16_t *weight, const uint16_t *x, void *out, int out_f32, int M, int N, int K);
void specpath_bf16_tile_matmul(const uint16_t *packed, const uint16_t *x, void *out, int out_f32, int M, int N, int K);
void specpath_q8_tile_matmul(const uint16_t *packed, const float *scales, const uint16_t *x, void *out, int out_f32,
                             int M, int N, int K);
void specpath_rope(const uint16_t *x, int x_stride, const uint16_t *cos, const uint16_t *sin, uint16_t *out,
                   int out_stride, int T, int H, int D);
void specpath_silu_mul(const uint16_t *gate_up, uint16_t *out, int M, int F);
void specpath_add(const uint16_t *a, const uint16_t *b, uint16_t *out, int64_t n);

/* Passes of dual-weight linears (an int8 weight with its tile copy) since the library loaded:
 * [0] on the int8 kernel, [1] on the tiles (tests read which kernel a pass took; single-threaded
 * callers, as the draft timers). */
static int64_t dual_passes[2];

int64_t *specpath_dual_weight_passes(void) { return dual_passes; }

void specpath_linear_matmul(const specpath_linear *l, const uint16_t *x, uint16_t *out, int M) {
    const int N = (int)l->out_features, K = (int)l->in_features;
    if (l->tiles) {
        const int on_tiles = l->tiles_from_rows > 0 && M >= l->tiles_from_rows;
        dual_passes[on_tiles]++;
        if (on_tiles) {
            specpath_q8_tile_matmul(l->tiles, l->scales, x, out, 0, M, N, K);
            return;
        }
    }
    if (l->bits == 4)
        specpath_q4_matmul((const uint8_t *)l->weight, l->scales, x, out, 0, M, N, K);
    else if (l->bits == 16 && l->tiled)
        specpath_bf16_tile_matmul((const uint16_t *)l->weight, x, out, 0, M, N, K);
    else if (l->bits == 16)
        specpath_bf16_matmul((const uint16_t *)l->weight, x, out, 0, M, N, K);
    else if (l->int16_activations && M <= INT16_ACTIVATION_ROWS)
        specpath_q8a16_matmul((const int8_t *)l->weight, l->scales, x, out, 0, M, N, K);
    else
        specpath_q8_matmul((const int8_t *)l->weight, l->scales, x, out, 0, M, N, K);
}

static inline void linear(const specpath_linear *l, const uint16_t *x, uint16_t *out, int M) {
    specpath_linear_matmul(l, x, out, M);
}

/* qkv_out [T, H + 2 KV, D]: q and k rotated, v as projected; without norm_weight, h goes in as it is. */
void specpath_layer_pre(const uint16_t *h, const uint16_t *norm_weight, float eps, const specpath_linear *qkv,
                        const uint16_t *cos, const uint16_t *sin, int T, int H, int KV, int D, uint16_t *qkv_out) {
    const int hidden = (int)qkv->in_features, width = (H + 2 * KV) * D;
    if (norm_weight) {
        uint16_t *x = malloc(sizeof(uint16_t) * (size_t)T * hidden);
        specpath_rms_norm(h, 0, 0, norm_weight, x, T, hidden, eps);
        linear(qkv, x, qkv_out, T);
        free(x);
    } else {
        linear(qkv, h, qkv_out, T); /* the caller normed h (a drafter's fused input) */
    }
    /* in place: each head's halves are read before either is written; q and k heads are adjacent */
    specpath_rope(qkv_out, width, cos, sin, qkv_out, width, T, H + KV, D);
}

/* out [T, hidden] = h2 + down(silu(gate) * up)(rms_norm(h2)), h2 = h + attn [T, H*D] @ Wo. */
void specpath_layer_post(const uint16_t *h, const uint16_t *attn, const specpath_linear *o_proj,
                         const uint16_t *norm_weight, float eps, const specpath_linear *gate_up,
                         const specpath_linear *down, int T, uint16_t *out) {
    const int hidden = (int)o_proj->out_features, ffn = (int)down->in_features;
    uint16_t *o = malloc(sizeof(uint16_t) * (size_t)T * (3 * (size_t)hidden + 3 * (size_t)ffn));
    uint16_t *h2 = o + (size_t)T * hidden, *x = h2 + (size_t)T * hidden, *gu = x + (size_t)T * hidden;
    uint16_t *act = gu + (size_t)T * 2 * ffn;
    linear(o_proj, attn, o, T);
    specpath_rms_norm(h, o, h2, norm_weight, x, T, hidden, eps);
    linear(gate_up, x, gu, T);
    specpath_silu_mul(gu, act, T, ffn);
    linear(down, act, o, T);
    specpath_add(h2, o, out, (int64_t)T * hidden);
    free(o);
}

/* h [T, hidden] through every layer for one request: kv [layers, 2, slots, KV, D], `length`
 * positions after this step (the T new tokens last), position p at slot first_slot + p, or at
 * slots[p] where slots is given (a paged request). Each layer is exactly the Python path's three calls
 * (specpath_layer_pre, specpath_attention, specpath_layer_post), so the result is that path's to
 * the bit; what goes is the Python around them. mask: NULL (causal) or bool [T, length].
 * After layer l, h is copied to captured [rows, num_captures, hidden] at every j with
 * capture_layers[j] == l: row t of the step to row capture_rows[t] (a feature store's slots, so
 * the caller copies nothing after the call), or to row t where capture_rows is NULL. The final h
 * goes to h_out [T, hidden]. */
void specpath_decoder_stack(const specpath_layer_weights *layers, int num_layers, const uint16_t *h,
                            const uint16_t *cos, const uint16_t *sin, int T, int H, int KV, int D, uint16_t *kv,
                            int64_t num_slots, int64_t first_slot, const int64_t *slots, int length, float scale,
                            const uint8_t *mask, int num_captures, const int *capture_layers, uint16_t *captured,
                            const int64_t *capture_rows, uint16_t *h_out) {
    const int hidden = (int)layers[0].o_proj->out_features, width = (H + 2 * KV) * D;
    const size_t plane = (size_t)num_slots * KV * D;
    uint16_t *qkv = malloc(sizeof(uint16_t) * (size_t)T * (width + H * D + 2 * (size_t)hidden));
    uint16_t *attn = qkv + (size_t)T * width, *a = attn + (size_t)T * H * D, *b = a + (size_t)T * hidden;
    const uint16_t *x = h;
    for (int l = 0; l < num_layers; l++) {
        const specpath_layer_weights *w = layers + l;
        uint16_t *next = (l == num_layers - 1) ? h_out : (l % 2 ? b : a);
        uint16_t *keys = kv + (2 * (size_t)l * num_slots + (slots ? 0 : first_slot)) * KV * D;
        specpath_layer_pre(x, w->input_norm, w->input_eps, w->qkv, cos, sin, T, H, KV, D, qkv);
        specpath_attention(qkv, width, qkv + H * D, width, qkv + (H + KV) * D, width, keys, keys + plane, length, T,
                           H, KV, D, scale, mask, slots, attn);
        specpath_layer_post(x, attn, w->o_proj, w->post_norm, w->post_eps, w->gate_up, w->down, T, next);
        for (int j = 0; j < num_captures; j++)
            if (capture_layers[j] == l)
                for (int t = 0; t < T; t++)
                    memcpy(captured + ((size_t)(capture_rows ? capture_rows[t] : t) * num_captures + j) * hidden,
                           next + (size_t)t * hidden,
                           sizeof(uint16_t) * hidden);
        x = next;
    }
    free(qkv);
}
