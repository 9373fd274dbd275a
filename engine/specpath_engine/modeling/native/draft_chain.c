/* A one-layer hidden-state drafter's chain of K greedy drafts for one request (or a batch), in one call.
 *
 * Per draft j: logits = lm_head(final_norm(a)) (+ bias) (+ noise row j: a seeded request's race,
 * specpath_drafting.coupling), token = the first argmax, mapped to a target id; then (but for the last) the head's layer on [that token's embedding ; a] at the
 * next position, writing its k/v into the request's KV row, gives the next a. The same kernels
 * as the Python chain (layer_ops.c, rows_matmul.c, attention.c, decoder_layer.c), in the same
 * order, so the drafts are that path's to the bit; what goes is the Python between them and
 * the host sync per draft (a drafting step of a small head on a CPU spends longer there than
 * in the matmuls).
 *
 * Which kernel a matmul runs is its weight's (specpath_linear_matmul in decoder_layer.c): int4,
 * int8, bf16 or bf16 on AMX tiles; an int8 drafter weight with a tile copy (dual weights, where
 * the CPU has AMX) takes the int8 kernel for passes of fewer than its tiles_from_rows rows (a lone
 * request's chain) and the tiles for more (a batch's passes, a long ingest): the int8 kernel's
 * cost grows with the rows, a tile pass's does not. The per-op path dispatches the same way, so
 * it stays this path's reference pass for pass.
 *
 * specpath_draft_propose runs the step before the chain in the same call: the ingest, the head
 * over the request's newly verified positions with the target's hidden states there (EAGLE-3's
 * fc over the concatenated taps first), writing the drafter KV there; a greedy propose of one
 * request is then one C call (the torch path stays the reference and the fallback).
 * specpath_draft_propose_batch does the same for a batch of requests, each pass over all their
 * rows at once (a weight is read once per pass, not once per request), each request attending
 * over its own KV row; the one-request calls are its batch of one, so the code is shared.
 *
 * Two input stages, the two head families of specpath_drafting:
 *   EAGLE-3: x = [embed_norm(e) ; hidden_norm(a)] (2d), residual = a
 *   MTP:     z = fuse([embed_norm(e) ; hidden_norm(a)]) (either order), x = fuse_norm(z), residual = z */
#include <stdint.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "common.h"

/* Where a propose's time goes (benchmarks/draft_cost.py --breakdown): off unless switched on by
 * specpath_draft_timers; then nanoseconds are added per section: [0] the ingest's input stage
 * (EAGLE-3's fc, the embedding gather), [1] the ingest's layer pass, [2] the chain's final norm and
 * LM head, [3] its argmax, [4] its layer passes, [5] the whole call; [6] calls, [7] ingested
 * positions (over all requests of a batched call). Single-threaded callers only (one propose at a
 * time). */
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

static inline void linear(const specpath_linear *l, const uint16_t *x, uint16_t *out, int M) {
    specpath_linear_matmul(l, x, out, M); /* an int8 weight with a tile copy: by rows (decoder_layer.c) */
}

static inline float bf16_value(uint16_t v) {
    union { uint32_t u; float f; } bits = {.u = (uint32_t)v << 16};
    return bits.f;
}

/* One pass of the head's layer over `rows` rows of B requests (a batch of one: one request's
 * consecutive positions): embeds/features [rows, d] (the tokens' embeddings, the features the
 * head reads) -> out [rows, d], their k/v written into each request's KV row on the way;
 * cos/sin [rows, D]. Request b's rows are query_start[b] .. query_start[b+1]-1, its last positions
 * of lengths[b], position p at slot slots[b * slot_stride + p] of keys/values (as
 * specpath_attention_batch takes them); mask: NULL (causal) or, for one request (B = 1), bool rows
 * of mask_stride bytes, query i seeing position j where mask[i * mask_stride + j] (a token tree's
 * pass). Exactly the calls of the head's Python step
 * (HiddenStateHead.step with the native layer halves): the two norms over all rows, their
 * concatenation per row, MTP's fuse and its norm, then the layer; every kernel is row-invariant
 * (a row's bits do not depend on the others), so a request's rows get the bits of a pass alone. */
static void head_pass(const specpath_draft_head *hd, const uint16_t *e, const uint16_t *f, int rows, int H, int KV,
                      int D, uint16_t *keys, uint16_t *values, int B, const int64_t *query_start,
                      const int64_t *lengths, const int64_t *slots, int64_t slot_stride, const uint8_t *mask,
                      int64_t mask_stride, const uint16_t *cos, const uint16_t *sin, float scale, uint16_t *out) {
    const specpath_layer_weights *w = &hd->layer;
    const int d = (int)w->o_proj->out_features, width = (H + 2 * KV) * D;
    const size_t T = (size_t)rows;
    uint16_t *buf = malloc(sizeof(uint16_t) * T * (6 * (size_t)d + (size_t)width + (size_t)H * D));
    uint16_t *ne = buf, *nf = ne + T * d, *x = nf + T * d, *z = x + T * 2 * d, *normed = z + T * d;
    uint16_t *qkv = normed + T * d, *attn = qkv + T * width;
    specpath_rms_norm(e, 0, 0, hd->embed_norm, ne, rows, d, hd->embed_eps);
    specpath_rms_norm(f, 0, 0, hd->hidden_norm, nf, rows, d, hd->hidden_eps);
    const uint16_t *first = hd->hidden_first ? nf : ne, *second = hd->hidden_first ? ne : nf;
    for (size_t t = 0; t < T; t++) { /* torch.cat([first, second], dim=-1) */
        memcpy(x + t * 2 * d, first + t * d, sizeof(uint16_t) * d);
        memcpy(x + t * 2 * d + d, second + t * d, sizeof(uint16_t) * d);
    }
    const uint16_t *residual = f, *layer_in = x;
    if (hd->fuse) {
        linear(hd->fuse, x, z, rows);
        specpath_rms_norm(z, 0, 0, hd->fuse_norm, normed, rows, d, hd->fuse_eps);
        residual = z, layer_in = normed;
    }
    specpath_layer_pre(layer_in, 0, 0.0f, w->qkv, cos, sin, rows, H, KV, D, qkv);
    specpath_attention_batch(qkv, width, qkv + H * D, width, qkv + (H + KV) * D, width, keys, values, B, query_start,
                             lengths, slots, slot_stride, mask, 0, mask_stride, H, KV, D, scale, attn);
    specpath_layer_post(residual, attn, w->o_proj, w->post_norm, w->post_eps, w->gate_up, w->down, rows, out);
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

static void tree_scores(const uint16_t *logits, const float *bias, const float *noise, int n, float *v);
void specpath_log_softmax_terms(const float *v, int n, double *out);

/* R requests' proposes in one call, every weight read once per pass for all their rows (the
 * shared body of specpath_draft_propose, specpath_draft_chain and specpath_draft_propose_batch).
 * Request r: T_r = counts[r] newly committed positions p0s[r] .. p0s[r] + T_r - 1 (its taps and
 * ids rows, concatenated over requests in order), its output row a_base + a_rows[r] * d (in/out:
 * the ingest's last output goes there; read as it is when T_r = 0), then ks[r] drafts (0: ingest
 * only) from it at p0s[r] + T_r onwards; its position p at slot kv_base[r] + p of keys/values
 * [slots, KV, D], with cos/sin row cos_rows[r] + p - p0s[r]. noise: NULL, or fp32 rows, request
 * r's draft j adding row noise_rows[r] + j (noise_rows[r] < 0: greedy). tokens_out [sum ks]: the
 * drafts, request after request. floors: NULL, or per request the least summed log-probability
 * (under the head's softmax) its drafts may reach: request r stops before the draft j > 0 that
 * would take it below floors[r] (its chance of being accepted no longer pays for a pass and a
 * row), kept_out [R] (NULL: not wanted) saying how many it drafted; logp_out: NULL, or [sum ks]
 * each kept draft's log-probability.
 *
 * The ingest is one head pass over every request's rows (EAGLE-3's fc over all of them in one
 * matmul first); chain step j is one final norm and LM-head matmul over the requests still
 * drafting (ks[r] > j), the argmax per row, then one head pass over those that draft again
 * (ks[r] > j + 1), one position each. Requests run in the order of their ks, longest first, so
 * those still drafting at step j are a prefix; each attends over its own KV row only. */
static void propose(const specpath_draft_head *hd, int R, const uint16_t *taps, const int64_t *ids,
                    const int64_t *counts, uint16_t *a_base, const int64_t *a_rows, const int64_t *ks, int H, int KV,
                    int D, uint16_t *keys, uint16_t *values, const int64_t *kv_base, const int64_t *p0s,
                    const uint16_t *cos, const uint16_t *sin, const int64_t *cos_rows, float scale,
                    const float *noise, const int64_t *noise_rows, const double *floors, double *logp_out,
                    int64_t *kept_out, int64_t *tokens_out) {
    const double t0 = stamp();
    const int d = (int)hd->layer.o_proj->out_features, n = (int)hd->lm_head->out_features;
    const size_t taps_width = hd->fc ? (size_t)hd->fc->in_features : (size_t)d;
    /* per request: where its taps/ids rows and its drafts start; the order (ks descending, stable) */
    int64_t *row_start = malloc(sizeof(int64_t) * (4 * (size_t)R + 2)), *draft_start = row_start + R + 1;
    int64_t *query_start = draft_start + R, *lengths = query_start + R + 1;
    int *order = malloc(sizeof(int) * (size_t)R);
    int64_t stride = 1, K = 0;
    row_start[0] = 0;
    for (int r = 0; r < R; r++) {
        row_start[r + 1] = row_start[r] + counts[r];
        draft_start[r] = r ? draft_start[r - 1] + ks[r - 1] : 0;
        const int64_t end = p0s[r] + counts[r] + (ks[r] > 1 ? ks[r] - 1 : 0);
        stride = end > stride ? end : stride;
        K = ks[r] > K ? ks[r] : K;
        int s = r; /* insertion: after every earlier request with at least as many drafts */
        while (s > 0 && ks[order[s - 1]] < ks[r]) order[s] = order[s - 1], s--;
        order[s] = r;
    }
    const int64_t rows = row_start[R];
    /* per request: its drafts' summed log-probability so far, and the drafts it keeps (a floor
     * stops it early: its later rows still ride in the batch's passes, their drafts unused) */
    double *path = calloc((size_t)R, sizeof(double));
    int64_t *kept = malloc(sizeof(int64_t) * (size_t)R);
    for (int r = 0; r < R; r++) kept[r] = ks[r];
    float *v = (floors || logp_out) ? malloc(sizeof(float) * (size_t)n) : 0;
    /* slots [R, stride] in that order: request s's position p at kv_base + p */
    int64_t *slots = malloc(sizeof(int64_t) * (size_t)R * (size_t)stride);
    for (int s = 0; s < R; s++) {
        const int r = order[s];
        const int64_t end = p0s[r] + counts[r] + (ks[r] > 1 ? ks[r] - 1 : 0);
        for (int64_t p = 0; p < end; p++) slots[(size_t)s * stride + p] = kv_base[r] + p;
    }
    const size_t most = (size_t)(rows > R ? rows : R);
    uint16_t *buf = malloc(sizeof(uint16_t) * (most * (5 * (size_t)d + 2 * (size_t)D + taps_width) + (size_t)R * n));
    uint16_t *e = buf, *features = e + most * d, *out = features + most * d, *cur = out + most * d;
    uint16_t *normed = cur + most * d, *cos_rows_in = normed + most * d, *sin_rows_in = cos_rows_in + most * D;
    uint16_t *gathered = sin_rows_in + most * D, *logits = gathered + most * taps_width;
    if (rows > 0) {
        /* the rows in request order `order`: taps (gathered unless already so), ids' embeddings, cos/sin */
        int64_t at = 0;
        const uint16_t *x = taps;
        int in_order = 1;
        for (int s = 0; s < R; s++) in_order &= (order[s] == s) | (counts[order[s]] == 0);
        query_start[0] = 0;
        for (int s = 0; s < R; s++) {
            const int r = order[s];
            for (int64_t t = 0; t < counts[r]; t++, at++) {
                const int64_t from = row_start[r] + t, row = cos_rows[r] + t;
                memcpy(e + (size_t)at * d, hd->embed + (size_t)ids[from] * d, sizeof(uint16_t) * d);
                memcpy(cos_rows_in + (size_t)at * D, cos + (size_t)row * D, sizeof(uint16_t) * D);
                memcpy(sin_rows_in + (size_t)at * D, sin + (size_t)row * D, sizeof(uint16_t) * D);
                if (!in_order)
                    memcpy(gathered + (size_t)at * taps_width, taps + (size_t)from * taps_width,
                           sizeof(uint16_t) * taps_width);
            }
            query_start[s + 1] = at;
            lengths[s] = p0s[r] + counts[r];
        }
        if (!in_order) x = gathered;
        if (hd->fc)
            linear(hd->fc, x, features, (int)rows);
        else
            memcpy(features, x, sizeof(uint16_t) * (size_t)rows * d);
        const double t1 = stamp();
        head_pass(hd, e, features, (int)rows, H, KV, D, keys, values, R, query_start, lengths, slots, stride, 0, 0,
                  cos_rows_in, sin_rows_in, scale, out);
        timers[0] += t1 - t0, timers[1] += stamp() - t1;
        for (int s = 0; s < R; s++)
            if (counts[order[s]] > 0)
                memcpy(a_base + (size_t)a_rows[order[s]] * d, out + (size_t)(query_start[s + 1] - 1) * d,
                       sizeof(uint16_t) * d);
    }
    for (int s = 0; s < R && ks[order[s]] > 0; s++)
        memcpy(cur + (size_t)s * d, a_base + (size_t)a_rows[order[s]] * d, sizeof(uint16_t) * d);
    for (int64_t j = 0; j < K; j++) {
        int m = 0, again = 0; /* drafting now; drafting again after this step */
        while (m < R && ks[order[m]] > j) m++;
        while (again < m && ks[order[again]] > j + 1) again++;
        const double t2 = stamp();
        specpath_rms_norm(cur, 0, 0, hd->final_norm, normed, m, d, hd->final_eps);
        linear(hd->lm_head, normed, logits, m);
        const double t3 = stamp();
        int going = 0; /* requests that draft again after this step */
        for (int s = 0; s < m; s++) {
            const int r = order[s];
            if (kept[r] <= j) continue; /* stopped by its floor: its row rides along */
            const float *row_noise = noise && noise_rows[r] >= 0 ? noise + (size_t)(noise_rows[r] + j) * n : 0;
            const int best = specpath_draft_argmax(logits + (size_t)s * n, hd->lm_bias, row_noise, n);
            if (v) { /* the draft's log-probability under the head (its own softmax, no noise) */
                double terms[2];
                tree_scores(logits + (size_t)s * n, hd->lm_bias, 0, n, v);
                specpath_log_softmax_terms(v, n, terms);
                const double lp = ((double)v[best] - terms[0]) - terms[1];
                if (floors && j > 0 && path[r] + lp < floors[r]) { /* not worth its row: it stops here */
                    kept[r] = j;
                    continue;
                }
                path[r] += lp;
                if (logp_out) logp_out[draft_start[r] + j] = lp;
            }
            const int64_t token = hd->ids ? hd->ids[best] : best;
            tokens_out[draft_start[r] + j] = token;
            going += s < again && kept[r] > j + 1;
            /* the next pass's inputs: this token's embedding at the next position */
            if (s < again) {
                const int64_t position = p0s[r] + counts[r] + j, row = cos_rows[r] + counts[r] + j;
                memcpy(e + (size_t)s * d, hd->embed + (size_t)token * d, sizeof(uint16_t) * d);
                memcpy(cos_rows_in + (size_t)s * D, cos + (size_t)row * D, sizeof(uint16_t) * D);
                memcpy(sin_rows_in + (size_t)s * D, sin + (size_t)row * D, sizeof(uint16_t) * D);
                query_start[s] = s;
                lengths[s] = position + 1;
            }
        }
        const double t4 = stamp();
        timers[2] += t3 - t2, timers[3] += t4 - t3;
        if (going == 0) break;
        query_start[again] = again;
        head_pass(hd, e, cur, again, H, KV, D, keys, values, again, query_start, lengths, slots, stride, 0, 0,
                  cos_rows_in, sin_rows_in, scale, out);
        timers[4] += stamp() - t4;
        uint16_t *t = cur;
        cur = out, out = t;
    }
    if (kept_out)
        for (int r = 0; r < R; r++) kept_out[r] = kept[r];
    free(v);
    free(kept);
    free(path);
    free(buf);
    free(slots);
    free(order);
    free(row_start);
    if (timing) timers[5] += stamp() - t0, timers[6] += 1, timers[7] += (double)rows;
}

/* a0 [d]: the head's output at the last committed position; keys/values [positions, KV, D]: the
 * request's KV row (position p at row p); draft j > 0 runs at position first_position + j - 1
 * with cos/sin row j - 1 of [K - 1, D]. noise: NULL (greedy) or fp32 [K, n], added to draft j's
 * logits (LM-head row order). tokens_out [K]: target ids; logp_out: NULL or [K], each draft's
 * log-probability under the head. A propose of one request without an ingest (a0 is not written). */
void specpath_draft_chain(const specpath_draft_head *hd, const uint16_t *a0, int K, int H, int KV, int D,
                          uint16_t *keys, uint16_t *values, int first_position, const uint16_t *cos,
                          const uint16_t *sin, float scale, const float *noise, double *logp_out,
                          int64_t *tokens_out) {
    const int d = (int)hd->layer.o_proj->out_features;
    uint16_t *a = malloc(sizeof(uint16_t) * (size_t)d);
    memcpy(a, a0, sizeof(uint16_t) * d);
    const int64_t zero = 0, none = 0, k = K, p0 = first_position, noise_row = noise ? 0 : -1;
    propose(hd, 1, 0, 0, &none, a, &zero, &k, H, KV, D, keys, values, &zero, &p0, cos, sin, &zero, scale, noise,
            &noise_row, 0, logp_out, 0, tokens_out);
    free(a);
}

/* A whole greedy propose of one request in one call: the ingest of its T newly committed
 * positions p0 .. p0 + T - 1 (taps [T, fc inputs] the target's hidden states there, through
 * EAGLE-3's fc, or [T, d] as they are for MTP; ids [T] the tokens one position ahead), whose
 * last output goes to a [d] (in place: the head's output at the last committed position, read
 * as it is when T = 0), then the chain of K drafts from it at p0 + T onwards. cos/sin
 * [T + K - 1, D] (at least T rows): positions p0 onwards. noise: NULL (greedy) or fp32 [K, n],
 * the chain's (a seeded request's race). Per position and per draft the same calls as the per-op
 * path, so the KV, a and the drafts are its bits. A batch of one of specpath_draft_propose_batch. */
void specpath_draft_propose(const specpath_draft_head *hd, const uint16_t *taps, const int64_t *ids, int T,
                            uint16_t *a, int K, int H, int KV, int D, uint16_t *keys, uint16_t *values, int p0,
                            const uint16_t *cos, const uint16_t *sin, float scale, const float *noise,
                            const double *floor, double *logp_out, int64_t *kept_out, int64_t *tokens_out) {
    const int64_t zero = 0, t = T, k = K, p = p0, noise_row = noise ? 0 : -1;
    propose(hd, 1, taps, ids, &t, a, &zero, &k, H, KV, D, keys, values, &zero, &p, cos, sin, &zero, scale, noise,
            &noise_row, floor, logp_out, kept_out, tokens_out);
}

/* R requests' proposes in one call (a batched step's drafting), each request's drafts, KV and
 * output row the bits of its specpath_draft_propose alone (row-invariant kernels; but for dual
 * weights, whose kernel follows a pass's rows): see propose above for the layout. taps [sum counts, fc inputs] and ids [sum counts] concatenated in request
 * order; a_base [rows, d] (the speculator's kept outputs) with request r's at row a_rows[r];
 * keys/values [slots, KV, D] the whole drafter KV layer, request r's position p at slot
 * kv_base[r] + p; cos/sin a table whose row cos_rows[r] + p - p0s[r] is request r's position p
 * (the rotary cache: cos_rows = p0s); noise NULL or fp32 rows with noise_rows[r] request r's first
 * (-1: greedy). tokens_out [sum ks]. */
void specpath_draft_propose_batch(const specpath_draft_head *hd, int R, const uint16_t *taps, const int64_t *ids,
                                  const int64_t *counts, uint16_t *a_base, const int64_t *a_rows, const int64_t *ks,
                                  int H, int KV, int D, uint16_t *keys, uint16_t *values, const int64_t *kv_base,
                                  const int64_t *p0s, const uint16_t *cos, const uint16_t *sin,
                                  const int64_t *cos_rows, float scale, const float *noise, const int64_t *noise_rows,
                                  const double *floors, double *logp_out, int64_t *kept_out, int64_t *tokens_out) {
    propose(hd, R, taps, ids, counts, a_base, a_rows, ks, H, KV, D, keys, values, kv_base, p0s, cos, sin, cos_rows,
            scale, noise, noise_rows, floors, logp_out, kept_out, tokens_out);
}

/* v [n] = (logits (bf16) + bias (fp32, NULL: none)) + noise (fp32, NULL: none), in fp32, in that
 * order (torch's): the scores a tree ranks; with noise, a seeded request's race at that depth. */
static void tree_scores(const uint16_t *logits, const float *bias, const float *noise, int n, float *v) {
    for (int i = 0; i < n; i++) v[i] = bias ? bf16_value(logits[i]) + bias[i] : bf16_value(logits[i]);
    if (noise)
        for (int i = 0; i < n; i++) v[i] += noise[i];
}

/* The k largest of v [n] by value, the first index first among equals (a stable descending sort's
 * first k): idx_out/val_out [k], best first. */
static void top_k(const float *v, int n, int k, int *idx_out, float *val_out) {
    int have = 0;
    for (int i = 0; i < n; i++) {
        if (have == k && !(v[i] > val_out[k - 1])) continue;
        int s = have < k ? have++ : k - 1; /* after every kept score >= v[i] (the earlier index first) */
        while (s > 0 && val_out[s - 1] < v[i]) val_out[s] = val_out[s - 1], idx_out[s] = idx_out[s - 1], s--;
        val_out[s] = v[i], idx_out[s] = i;
    }
}

/* out[0] = max(v), out[1] = log(sum(exp(v - max))) over v [n] (fp32; -inf counts nothing): a
 * log-probability is (v - out[0]) - out[1] (torch's log_softmax order). exp in fp32 (exp_ps),
 * summed in double lanes in index order, so a row's terms are fixed by its finite values alone. */
void specpath_log_softmax_terms(const float *v, int n, double *out) {
    float top = -__builtin_inff();
    for (int i = 0; i < n; i++) top = v[i] > top ? v[i] : top;
    out[0] = top, out[1] = 0.0;
    if (top == -__builtin_inff()) return;
    const __m512 shift = _mm512_set1_ps(top), floor = _mm512_set1_ps(-__builtin_inff());
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int i = 0; i < n; i += 16) {
        const __mmask16 in = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_mask_loadu_ps(floor, in, v + i);
        const __mmask16 finite = _mm512_cmp_ps_mask(x, floor, _CMP_NEQ_OQ);
        const __m512 e = _mm512_maskz_mov_ps(finite, exp_ps(_mm512_sub_ps(x, shift)));
        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    double lanes[16];
    _mm512_storeu_pd(lanes, lo);
    _mm512_storeu_pd(lanes + 8, hi);
    double sum = 0.0;
    for (int j = 0; j < 16; j++) sum += lanes[j];
    out[1] = log(sum);
}

typedef struct {
    double score;   /* the path's log-probability */
    int64_t row;    /* LM-head row (draft-vocabulary id) */
    int parent;     /* candidate index, -1: a depth-0 node */
    int run;        /* run index once the head ran on it, else -1 */
} tree_candidate;

/* Candidate c before candidate o: higher score, then created first. */
static inline int tree_before(const tree_candidate *cands, int c, int o) {
    return cands[c].score > cands[o].score || (cands[c].score == cands[o].score && c < o);
}

/* The k best of `count` candidate indices `from` (in place, best first): insertion sort. */
static void tree_sort(const tree_candidate *cands, int *from, int count) {
    for (int i = 1; i < count; i++) {
        const int c = from[i];
        int s = i;
        while (s > 0 && tree_before(cands, c, from[s - 1])) from[s] = from[s - 1], s--;
        from[s] = c;
    }
}

/* One request's dynamic draft tree (EAGLE-2), the ingest first: specpath_drafting.tree_search's
 * grow_tree over the per-op head passes, the same candidates in the same order.
 *
 * The ingest is specpath_draft_propose's with no chain (T newly committed positions from p0;
 * a [d] in/out). Then, from a (the output at the last committed position, last = p0 + T - 1):
 * the k best tokens of its logits are the depth-0 candidates, each scored by its log-probability
 * (specpath_log_softmax_terms over the LM head's rows, v = logit (+ bias) in fp32); each of
 * `passes` passes runs the k best candidates of the newest depth through the head at once (run r
 * at position last + 1 + depth, its k/v at slot last + 1 + r of the request's KV row, attending
 * to the committed positions, its ancestors' runs and itself), each scoring the k best of its
 * children (its score plus theirs). The tree is the `budget` best candidates (higher score, then
 * created first: parents come first), less those scored below min_score but the first (a path
 * log-probability whose node does not pay for its row: -inf keeps all; a pass whose best
 * candidates are all below it is not run). keys/values [positions, KV, D]: the request's KV row from
 * position 0; cos/sin: the rotary table (row p: position p). noise: NULL (the head's own
 * distribution), or fp32 [passes + 1, n], row d added to every depth-d node's scores before they
 * are ranked and normalised (a seeded request's race: its candidates are the best of its drafts'
 * `logits + T G`, as the chain's race takes the first). Returns the nodes written:
 * tokens_out (target ids), parents_out (node index, -1: the root) and scores_out, [budget] each. */
int specpath_draft_tree(const specpath_draft_head *hd, const uint16_t *taps, const int64_t *ids, int T, uint16_t *a,
                        int budget, int k, int passes, double min_score, int H, int KV, int D, uint16_t *keys,
                        uint16_t *values, int p0,
                        const uint16_t *cos, const uint16_t *sin, float scale, const float *noise,
                        int64_t *tokens_out, int64_t *parents_out, double *scores_out) {
    const int64_t zero = 0, t = T, none = 0, p = p0, greedy = -1;
    propose(hd, 1, taps, ids, &t, a, &zero, &none, H, KV, D, keys, values, &zero, &p, cos, sin, &p, scale, 0, &greedy,
            0, 0, 0, 0);
    if (budget < 1) return 0;
    const int d = (int)hd->layer.o_proj->out_features, n = (int)hd->lm_head->out_features;
    const int64_t last = (int64_t)p0 + T - 1;
    k = k < n ? k : n;
    const int most_cands = k + passes * k * k, most_runs = passes * k;
    const int64_t most_length = last + 1 + most_runs;
    tree_candidate *cands = malloc(sizeof(tree_candidate) * (size_t)most_cands);
    int *frontier = malloc(sizeof(int) * (size_t)(most_cands + k)), *beam = frontier + most_cands;
    int *top_idx = malloc(sizeof(int) * (size_t)k);
    float *top_val = malloc(sizeof(float) * (size_t)k);
    int64_t *slots = malloc(sizeof(int64_t) * (size_t)most_length);
    uint8_t *mask = calloc((size_t)k * (size_t)most_length, 1);
    uint16_t *buf = malloc(sizeof(uint16_t) * ((size_t)(most_runs + 1) * d + (size_t)k * (4 * (size_t)d + 2 * D + n)));
    uint16_t *outputs = buf, *e = outputs + (size_t)(most_runs + 1) * d, *f = e + (size_t)k * d, *normed = f + (size_t)k * d;
    uint16_t *out = normed + (size_t)k * d, *cos_in = out + (size_t)k * d, *sin_in = cos_in + (size_t)k * D;
    uint16_t *logits = sin_in + (size_t)k * D;
    float *v = malloc(sizeof(float) * (size_t)n);
    double terms[2];
    for (int64_t q = 0; q < most_length; q++) slots[q] = q;
    memcpy(outputs + (size_t)most_runs * d, a, sizeof(uint16_t) * d); /* a0: the depth-0 nodes' features */
    int count = 0, width = 0, runs = 0;
    /* depth 0: the k best of a's logits */
    specpath_rms_norm(a, 0, 0, hd->final_norm, normed, 1, d, hd->final_eps);
    linear(hd->lm_head, normed, logits, 1);
    {
        tree_scores(logits, hd->lm_bias, noise, n, v);
        specpath_log_softmax_terms(v, n, terms);
        top_k(v, n, k, top_idx, top_val);
        for (int i = 0; i < k; i++) {
            cands[count] = (tree_candidate){
                .score = ((double)top_val[i] - terms[0]) - terms[1], .row = top_idx[i], .parent = -1, .run = -1};
            frontier[width++] = count++;
        }
    }
    for (int depth = 0; depth < passes; depth++) {
        tree_sort(cands, frontier, width);
        int q = width < k ? width : k;
        while (q > 0 && cands[frontier[q - 1]].score < min_score) q--; /* below the floor: not run */
        if (q == 0) break;
        const int first = runs;
        const int64_t length = last + 1 + first + q, position = last + 1 + depth;
        for (int j = 0; j < q; j++) {
            const int c = frontier[j];
            beam[j] = c;
            cands[c].run = runs++;
            const int64_t token = hd->ids ? hd->ids[cands[c].row] : cands[c].row;
            const int parent_run = cands[c].parent < 0 ? -1 : cands[cands[c].parent].run;
            memcpy(e + (size_t)j * d, hd->embed + (size_t)token * d, sizeof(uint16_t) * d);
            memcpy(f + (size_t)j * d, outputs + (size_t)(parent_run < 0 ? most_runs : parent_run) * d,
                   sizeof(uint16_t) * d);
            memcpy(cos_in + (size_t)j * D, cos + (size_t)position * D, sizeof(uint16_t) * D);
            memcpy(sin_in + (size_t)j * D, sin + (size_t)position * D, sizeof(uint16_t) * D);
            /* its mask row: the committed positions, its ancestors' runs and itself */
            uint8_t *row = mask + (size_t)j * length;
            memset(row, 0, (size_t)length);
            memset(row, 1, (size_t)(last + 1));
            for (int a_c = c; a_c >= 0; a_c = cands[a_c].parent) row[last + 1 + cands[a_c].run] = 1;
        }
        const int64_t query_start[2] = {0, q};
        head_pass(hd, e, f, q, H, KV, D, keys, values, 1, query_start, &length, slots, 0, mask, length, cos_in, sin_in,
                  scale, out);
        memcpy(outputs + (size_t)first * d, out, sizeof(uint16_t) * (size_t)q * d);
        specpath_rms_norm(out, 0, 0, hd->final_norm, normed, q, d, hd->final_eps);
        linear(hd->lm_head, normed, logits, q);
        width = 0;
        for (int j = 0; j < q; j++) {
            const double base = cands[beam[j]].score;
            tree_scores(logits + (size_t)j * n, hd->lm_bias, noise ? noise + (size_t)(depth + 1) * n : 0, n, v);
            specpath_log_softmax_terms(v, n, terms);
            top_k(v, n, k, top_idx, top_val);
            for (int i = 0; i < k; i++) {
                cands[count] = (tree_candidate){.score = base + (((double)top_val[i] - terms[0]) - terms[1]),
                                                .row = top_idx[i], .parent = beam[j], .run = -1};
                frontier[width++] = count++;
            }
        }
    }
    /* the tree: the budget best candidates, parents first */
    int *order = malloc(sizeof(int) * (size_t)count), *node = malloc(sizeof(int) * (size_t)count);
    for (int c = 0; c < count; c++) order[c] = c, node[c] = -1;
    tree_sort(cands, order, count);
    int size = budget < count ? budget : count;
    while (size > 1 && cands[order[size - 1]].score < min_score) size--; /* below the floor: not a node */
    for (int i = 0; i < size; i++) {
        const tree_candidate *c = &cands[order[i]];
        node[order[i]] = i;
        tokens_out[i] = hd->ids ? hd->ids[c->row] : c->row;
        parents_out[i] = c->parent < 0 ? -1 : node[c->parent];
        scores_out[i] = c->score;
    }
    free(node);
    free(order);
    free(v);
    free(buf);
    free(mask);
    free(slots);
    free(top_val);
    free(top_idx);
    free(frontier);
    free(cands);
    return size;
}
