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
 * specpath_draft_propose runs the step before the chain in the same call: the ingest, the head
 * over the request's newly verified positions with the target's hidden states there (EAGLE-3's
 * fc over the concatenated taps first), writing the drafter KV there; a greedy propose of one
 * request is then one C call (the torch path stays the reference and the fallback).
 *
 * Two input stages, the two head families of specpath_drafting:
 *   EAGLE-3: x = [embed_norm(e) ; hidden_norm(a)] (2d), residual = a
 *   MTP:     z = fuse([embed_norm(e) ; hidden_norm(a)]) (either order), x = fuse_norm(z), residual = z */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

/* Where a propose's time goes (benchmarks/draft_cost.py --breakdown): off unless switched on by
 * specpath_draft_timers; then nanoseconds are added per section: [0] the ingest's input stage
 * (EAGLE-3's fc, the embedding gather), [1] the ingest's layer pass, [2] the chain's final norm and
 * LM head, [3] its argmax, [4] its layer passes, [5] the whole call; [6] calls, [7] ingested
 * positions. Single-threaded callers only (a propose is one request). */
static int timing;
static double timers[8];

double *specpath_draft_timers(int on) {
    timing = on;
    return timers;
}

static inline double stamp(void) {
    if (!timing) return 0.0;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

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
 * (NULL for EAGLE-3); hidden_first: MTP's input order; fc: EAGLE-3's tap fusion (read by the
 * ingest of specpath_draft_propose only). lm_bias: NULL or fp32 [n]; ids: NULL
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
    const specpath_linear *fc; /* EAGLE-3's fc over the concatenated taps (the ingest's); NULL: MTP */
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

/* One pass of the head's layer over T consecutive positions p0 .. p0 + T - 1 of one request:
 * embeds/features [T, d] (the tokens' embeddings, the features the head reads) -> out [T, d],
 * their k/v written into the request's KV row on the way; cos/sin [T, D]. Exactly the calls of
 * the head's Python step (HiddenStateHead.step with the native layer halves): the two norms
 * over all T rows, their concatenation per row, MTP's fuse and its norm, then the layer. */
static void head_pass(const specpath_draft_head *hd, const uint16_t *e, const uint16_t *f, int T, int H, int KV,
                      int D, uint16_t *keys, uint16_t *values, int p0, const uint16_t *cos, const uint16_t *sin,
                      float scale, uint16_t *out) {
    const specpath_layer_weights *w = &hd->layer;
    const int d = (int)w->o_proj->out_features, width = (H + 2 * KV) * D;
    const size_t rows = (size_t)T;
    uint16_t *buf = malloc(sizeof(uint16_t) * rows * (6 * (size_t)d + (size_t)width + (size_t)H * D));
    uint16_t *ne = buf, *nf = ne + rows * d, *x = nf + rows * d, *z = x + rows * 2 * d, *normed = z + rows * d;
    uint16_t *qkv = normed + rows * d, *attn = qkv + rows * width;
    specpath_rms_norm(e, 0, 0, hd->embed_norm, ne, T, d, hd->embed_eps);
    specpath_rms_norm(f, 0, 0, hd->hidden_norm, nf, T, d, hd->hidden_eps);
    const uint16_t *first = hd->hidden_first ? nf : ne, *second = hd->hidden_first ? ne : nf;
    for (size_t t = 0; t < rows; t++) { /* torch.cat([first, second], dim=-1) */
        memcpy(x + t * 2 * d, first + t * d, sizeof(uint16_t) * d);
        memcpy(x + t * 2 * d + d, second + t * d, sizeof(uint16_t) * d);
    }
    const uint16_t *residual = f, *layer_in = x;
    if (hd->fuse) {
        linear(hd->fuse, x, z, T);
        specpath_rms_norm(z, 0, 0, hd->fuse_norm, normed, T, d, hd->fuse_eps);
        residual = z, layer_in = normed;
    }
    specpath_layer_pre(layer_in, 0, 0.0f, w->qkv, cos, sin, T, H, KV, D, qkv);
    specpath_attention(qkv, width, qkv + H * D, width, qkv + (H + KV) * D, width, keys, values, p0 + T, T, H, KV, D,
                       scale, 0, 0, attn);
    specpath_layer_post(residual, attn, w->o_proj, w->post_norm, w->post_eps, w->gate_up, w->down, T, out);
    free(buf);
}

/* The first index of the largest (bf16 logits[i] + bias[i]) + noise[i] (fp32, in that order: torch's
 * (logits + bias) + noise, to the bit; bias, noise NULL: left out), as torch.argmax's first on ties,
 * for n a multiple of 16: sixteen lanes each keep their first largest, then the largest of those
 * with the smallest index wins (what a scan from the start finds). NaN-free logits (a NaN is never
 * larger: skipped, where torch.argmax would return it). */
int specpath_draft_argmax(const uint16_t *logits, const float *bias, const float *noise, int n) {
    __m512 top = _mm512_set1_ps(-__builtin_inff());
    __m512i where = _mm512_set1_epi32(n), index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i sixteen = _mm512_set1_epi32(16);
    for (int i = 0; i < n; i += 16) {
        __m512 v = load_bf16(logits + i);
        if (bias) v = _mm512_add_ps(v, _mm512_loadu_ps(bias + i));
        if (noise) v = _mm512_add_ps(v, _mm512_loadu_ps(noise + i));
        const __mmask16 larger = _mm512_cmp_ps_mask(v, top, _CMP_GT_OQ);
        top = _mm512_mask_mov_ps(top, larger, v);
        where = _mm512_mask_mov_epi32(where, larger, index);
        index = _mm512_add_epi32(index, sixteen);
    }
    const float best = _mm512_reduce_max_ps(top);
    const __mmask16 ties = _mm512_cmp_ps_mask(top, _mm512_set1_ps(best), _CMP_EQ_OQ);
    const int first = _mm512_mask_reduce_min_epi32(ties, where);
    return first < n ? first : 0; /* no lane above -inf (all -inf or NaN): the scan's 0 */
}

/* a0 [d]: the head's output at the last committed position; keys/values [positions, KV, D]: the
 * request's KV row (position p at row p); draft j > 0 runs at position first_position + j - 1
 * with cos/sin row j - 1 of [K - 1, D]. noise: NULL (greedy) or fp32 [K, n], added to draft j's
 * logits (LM-head row order). tokens_out [K]: target ids. */
void specpath_draft_chain(const specpath_draft_head *hd, const uint16_t *a0, int K, int H, int KV, int D,
                          uint16_t *keys, uint16_t *values, int first_position, const uint16_t *cos,
                          const uint16_t *sin, float scale, const float *noise, int64_t *tokens_out) {
    const int d = (int)hd->layer.o_proj->out_features, n = (int)hd->lm_head->out_features;
    uint16_t *buf = malloc(sizeof(uint16_t) * (3 * (size_t)d + (size_t)n));
    uint16_t *a = buf, *next = a + d, *normed = next + d, *logits = normed + d;
    memcpy(a, a0, sizeof(uint16_t) * d);
    for (int j = 0; j < K; j++) {
        const double t0 = stamp();
        specpath_rms_norm(a, 0, 0, hd->final_norm, normed, 1, d, hd->final_eps);
        linear(hd->lm_head, normed, logits, 1);
        const double t1 = stamp();
        const int best = specpath_draft_argmax(logits, hd->lm_bias, noise ? noise + (size_t)j * n : 0, n);
        const double t2 = stamp();
        timers[2] += t1 - t0, timers[3] += t2 - t1;
        const int64_t token = hd->ids ? hd->ids[best] : best;
        tokens_out[j] = token;
        if (j + 1 == K) break;
        head_pass(hd, hd->embed + (size_t)token * d, a, 1, H, KV, D, keys, values, first_position + j,
                  cos + (size_t)j * D, sin + (size_t)j * D, scale, next);
        timers[4] += stamp() - t2;
        uint16_t *t = a;
        a = next, next = t;
    }
    free(buf);
}

/* A whole greedy propose of one request in one call: the ingest of its T newly committed
 * positions p0 .. p0 + T - 1 (taps [T, fc inputs] the target's hidden states there, through
 * EAGLE-3's fc, or [T, d] as they are for MTP; ids [T] the tokens one position ahead), whose
 * last output goes to a [d] (in place: the head's output at the last committed position, read
 * as it is when T = 0), then the chain of K drafts from it at p0 + T onwards. cos/sin
 * [T + K - 1, D] (at least T rows): positions p0 onwards. noise: NULL (greedy) or fp32 [K, n],
 * the chain's (a seeded request's race). Per position and per draft the same calls as the per-op
 * path, so the KV, a and the drafts are its bits. */
void specpath_draft_propose(const specpath_draft_head *hd, const uint16_t *taps, const int64_t *ids, int T,
                            uint16_t *a, int K, int H, int KV, int D, uint16_t *keys, uint16_t *values, int p0,
                            const uint16_t *cos, const uint16_t *sin, float scale, const float *noise,
                            int64_t *tokens_out) {
    const int d = (int)hd->layer.o_proj->out_features;
    const double t0 = stamp();
    if (T > 0) {
        uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)T * (3 * (size_t)d));
        uint16_t *features = buf, *e = features + (size_t)T * d, *out = e + (size_t)T * d;
        if (hd->fc)
            linear(hd->fc, taps, features, T);
        else
            memcpy(features, taps, sizeof(uint16_t) * (size_t)T * d);
        for (int t = 0; t < T; t++)
            memcpy(e + (size_t)t * d, hd->embed + (size_t)ids[t] * d, sizeof(uint16_t) * d);
        const double t1 = stamp();
        head_pass(hd, e, features, T, H, KV, D, keys, values, p0, cos, sin, scale, out);
        timers[0] += t1 - t0, timers[1] += stamp() - t1;
        memcpy(a, out + (size_t)(T - 1) * d, sizeof(uint16_t) * d);
        free(buf);
    }
    if (K > 0)
        specpath_draft_chain(hd, a, K, H, KV, D, keys, values, p0 + T, cos + (size_t)T * D, sin + (size_t)T * D,
                             scale, noise, tokens_out);
    if (timing) timers[5] += stamp() - t0, timers[6] += 1, timers[7] += T;
}
