/* A block drafter's step (DFlash, DSpark: specpath_drafting.block) in one call: the ingest of the
 * positions the target committed since the last step, then one non-causal pass over every
 * drafting request's block.
 *
 *   ingest: ctx = hidden_norm(fc(taps)) for each new position; in every draft layer its key (RoPE
 *           at its position) and value go to its slot of that layer's KV (its query is not used).
 *   block:  h = [anchor's embedding, mask embeddings...] at positions anchor_pos onwards; per
 *           layer input norm, q/k/v (RoPE), attention over the request's whole row up to the
 *           block's end (its committed positions and the block itself, both directions: the
 *           block's keys and values are written right after the committed ones, scratch the next
 *           ingest overwrites), then the layer's second half.
 *
 * The calls and their order are the per-op path's with the native layer halves (the block
 * speculator's ingest and draft_blocks_native), so the KV and the block's outputs are its bits;
 * what goes is the Python between them (a block step of a small drafter on a CPU spent longer
 * there than in its matmuls). The drafts (the LM head and the method's choice) stay in Python. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* The drafter as the step reads it (BlockHead in Python). */
typedef struct {
    const uint16_t *embed;          /* [V, d] bf16: the target's embedding */
    const uint16_t *mask_embedding; /* [d]: a mask slot's input */
    const specpath_linear *fc;      /* the taps [num_taps * target d] -> d */
    const uint16_t *hidden_norm;    /* [d]: the context's norm after fc */
    float hidden_eps;
    int64_t num_layers;
    const specpath_layer_weights *layers; /* [num_layers]: input_norm is the layer's own */
} specpath_block_head;

/* rows of the rotary tables cos/sin [positions, D] at pos [n] -> cs/ss [n, D] */
static void rope_rows(const uint16_t *cos, const uint16_t *sin, const int64_t *pos, int n, int D, uint16_t *cs,
                      uint16_t *ss) {
    for (int i = 0; i < n; i++) {
        memcpy(cs + (size_t)i * D, cos + (size_t)pos[i] * D, sizeof(uint16_t) * D);
        memcpy(ss + (size_t)i * D, sin + (size_t)pos[i] * D, sizeof(uint16_t) * D);
    }
}

/* Ingest: T new positions, taps [T, fc inputs] (bf16, flat), position ingest_pos[t] at slot
 * ingest_slots[t] of every layer's keys/values. Block: R requests of B rows each, ids [R * B]
 * (< 0: a mask slot), request r's row starting at slot row_base[r] and its block at positions
 * anchor_pos[r] .. anchor_pos[r] + B - 1. keys/values: layer l's [slots, KV, D] at
 * keys + l * layer_stride. cos/sin: the rotary tables, row p for position p. out [R * B, d]. */
void specpath_block_propose(const specpath_block_head *hd, int T, const uint16_t *taps, const int64_t *ingest_slots,
                            const int64_t *ingest_pos, int R, int B, const int64_t *ids, const int64_t *row_base,
                            const int64_t *anchor_pos, uint16_t *keys, uint16_t *values, int64_t layer_stride,
                            const uint16_t *cos, const uint16_t *sin, int H, int KV, int D, float scale,
                            uint16_t *out) {
    const int d = (int)hd->layers[0].o_proj->out_features, width = (H + 2 * KV) * D;
    const int rows = R * B, most = T > rows ? T : rows;
    uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)most * (3 * (size_t)d + (size_t)width + (size_t)H * D + 2 * (size_t)D));
    uint16_t *x = buf, *h = x + (size_t)most * d, *next = h + (size_t)most * d, *qkv = next + (size_t)most * d;
    uint16_t *attn = qkv + (size_t)most * width, *cs = attn + (size_t)most * H * D, *ss = cs + (size_t)most * D;
    if (T > 0) {
        specpath_linear_matmul(hd->fc, taps, x, T);
        specpath_rms_norm(x, 0, 0, hd->hidden_norm, h, T, d, hd->hidden_eps);
        rope_rows(cos, sin, ingest_pos, T, D, cs, ss);
        for (int64_t l = 0; l < hd->num_layers; l++) {
            uint16_t *kl = keys + l * layer_stride, *vl = values + l * layer_stride;
            specpath_layer_pre(h, 0, 0.0f, hd->layers[l].qkv, cs, ss, T, H, KV, D, qkv);
            for (int t = 0; t < T; t++) {
                const uint16_t *row = qkv + (size_t)t * width;
                memcpy(kl + (size_t)ingest_slots[t] * KV * D, row + (size_t)H * D, sizeof(uint16_t) * KV * D);
                memcpy(vl + (size_t)ingest_slots[t] * KV * D, row + (size_t)(H + KV) * D, sizeof(uint16_t) * KV * D);
            }
        }
    }
    if (rows > 0) {
        int64_t span = 0;
        for (int r = 0; r < R; r++) span = anchor_pos[r] + B > span ? anchor_pos[r] + B : span;
        int64_t *slots = malloc(sizeof(int64_t) * ((size_t)R * span + 2 * (size_t)R + 1 + (size_t)rows));
        int64_t *lengths = slots + (size_t)R * span, *query_start = lengths + R, *pos = query_start + R + 1;
        uint8_t *mask = malloc((size_t)B * span); /* every query sees the whole row up to its block's end */
        memset(mask, 1, (size_t)B * span);
        for (int r = 0; r < R; r++) {
            for (int64_t p = 0; p < span; p++) slots[(size_t)r * span + p] = row_base[r] + p;
            lengths[r] = anchor_pos[r] + B;
            query_start[r] = (int64_t)r * B;
            for (int i = 0; i < B; i++) {
                const int64_t id = ids[r * B + i];
                memcpy(h + (size_t)(r * B + i) * d, id < 0 ? hd->mask_embedding : hd->embed + (size_t)id * d,
                       sizeof(uint16_t) * d);
                pos[r * B + i] = anchor_pos[r] + i;
            }
        }
        query_start[R] = rows;
        rope_rows(cos, sin, pos, rows, D, cs, ss);
        for (int64_t l = 0; l < hd->num_layers; l++) {
            const specpath_layer_weights *w = &hd->layers[l];
            specpath_rms_norm(h, 0, 0, w->input_norm, x, rows, d, w->input_eps);
            specpath_layer_pre(x, 0, 0.0f, w->qkv, cs, ss, rows, H, KV, D, qkv);
            specpath_attention_batch(qkv, width, qkv + H * D, width, qkv + (H + KV) * D, width, keys + l * layer_stride,
                                     values + l * layer_stride, R, query_start, lengths, slots, span, mask, 0, span,
                                     H, KV, D, scale, attn);
            specpath_layer_post(h, attn, w->o_proj, w->post_norm, w->post_eps, w->gate_up, w->down, rows, next);
            uint16_t *t = h;
            h = next, next = t;
        }
        memcpy(out, h, sizeof(uint16_t) * (size_t)rows * d);
        free(mask);
        free(slots);
    }
    free(buf);
}
