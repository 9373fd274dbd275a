/* Attention of one request's newest Q tokens over its KV history, in one call: the new keys and
 * values are written to the cache, then every (query, head) row attends to the keys at positions
 * up to its own, or to those its row of an explicit mask admits (a token tree: the prefix and the
 * node's ancestors). bf16 in and out, fp32 inside (scores, softmax, weighted sum).
 * specpath_attention_batch does the same for several requests at once (a batched step), each
 * request's rows over its own slots, through the same row function: a row's bits do not depend
 * on the batch it is in.
 *
 * A row's visible keys are listed in position order and everything after runs over that list,
 * so a row's result depends only on the keys it sees: not on Q, nor on masked-out siblings. With
 * the row-invariant matmuls, a bf16 target gives a drafted token (chain or tree) the logits plain
 * decoding would. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* Every row runs with denormals flushed (MXCSR FTZ and DAZ, set per OpenMP thread for the call
 * and restored after): a key 87+ below its row's best score gets a softmax weight at the bottom
 * of float's range, and its products with the values are denormal; each such FMA took a microcode
 * assist (a DSpark block, 4 queries x 9 heads over 108 keys whose scores span ~730: 206 us, 29 us
 * flushed). A flushed product is below 2^-126, far under the rounding of the bf16 output. */
#define FLUSH_DENORMALS 0x8040u

/* One (query, head) row: q_row [D] against the `keys` cache rows listed in `visible` (in
 * position order), KV head g; scores [>= keys] is scratch. out_row [D]. */
static void attend_row(const uint16_t *qh, const uint16_t *key_cache, const uint16_t *value_cache,
                       const int *visible, int keys, int KV, int D, int g, float scale, float *scores,
                       uint16_t *oh) {
    float top = -FLT_MAX;
    for (int j = 0; j < keys; j++) {
        const uint16_t *kj = key_cache + ((size_t)visible[j] * KV + g) * D;
        __m512 dot = _mm512_setzero_ps();
        for (int d = 0; d < D; d += 32)
            dot = _mm512_dpbf16_ps(dot, (__m512bh)_mm512_loadu_si512((const void *)(qh + d)),
                                   (__m512bh)_mm512_loadu_si512((const void *)(kj + d)));
        scores[j] = _mm512_reduce_add_ps(dot) * scale;
        top = scores[j] > top ? scores[j] : top;
    }
    __m512 total = _mm512_setzero_ps();
    int j = 0;
    for (; j + 16 <= keys; j += 16) {
        __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(scores + j), _mm512_set1_ps(top)));
        _mm512_storeu_ps(scores + j, e);
        total = _mm512_add_ps(total, e);
    }
    if (j < keys) {
        const __mmask16 tail = (__mmask16)((1u << (keys - j)) - 1);
        __m512 e = exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, scores + j), _mm512_set1_ps(top)));
        _mm512_mask_storeu_ps(scores + j, tail, e);
        total = _mm512_add_ps(total, _mm512_maskz_mov_ps(tail, e));
    }
    const __m512 norm = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(total));
    const size_t step = (size_t)KV * D;
    /* 64 dimensions per pass over the keys: each key's index, weight and value row are read
     * once for four 16-wide chunks, whose sums run exactly as in the loop below */
    int d = 0;
    for (; d + 64 <= D; d += 64) {
        const uint16_t *vd = value_cache + (size_t)g * D + d;
        __m512 e0 = _mm512_setzero_ps(), e1 = e0, e2 = e0, e3 = e0, o0 = e0, o1 = e0, o2 = e0, o3 = e0;
        int jj = 0;
        for (; jj + 1 < keys; jj += 2) {
            const uint16_t *va = vd + visible[jj] * step, *vb = vd + visible[jj + 1] * step;
            const __m512 pa = _mm512_set1_ps(scores[jj]), pb = _mm512_set1_ps(scores[jj + 1]);
            e0 = _mm512_fmadd_ps(pa, load_bf16(va), e0);
            e1 = _mm512_fmadd_ps(pa, load_bf16(va + 16), e1);
            e2 = _mm512_fmadd_ps(pa, load_bf16(va + 32), e2);
            e3 = _mm512_fmadd_ps(pa, load_bf16(va + 48), e3);
            o0 = _mm512_fmadd_ps(pb, load_bf16(vb), o0);
            o1 = _mm512_fmadd_ps(pb, load_bf16(vb + 16), o1);
            o2 = _mm512_fmadd_ps(pb, load_bf16(vb + 32), o2);
            o3 = _mm512_fmadd_ps(pb, load_bf16(vb + 48), o3);
        }
        if (jj < keys) {
            const uint16_t *va = vd + visible[jj] * step;
            const __m512 pa = _mm512_set1_ps(scores[jj]);
            e0 = _mm512_fmadd_ps(pa, load_bf16(va), e0);
            e1 = _mm512_fmadd_ps(pa, load_bf16(va + 16), e1);
            e2 = _mm512_fmadd_ps(pa, load_bf16(va + 32), e2);
            e3 = _mm512_fmadd_ps(pa, load_bf16(va + 48), e3);
        }
        store_bf16(oh + d, _mm512_mul_ps(_mm512_add_ps(e0, o0), norm));
        store_bf16(oh + d + 16, _mm512_mul_ps(_mm512_add_ps(e1, o1), norm));
        store_bf16(oh + d + 32, _mm512_mul_ps(_mm512_add_ps(e2, o2), norm));
        store_bf16(oh + d + 48, _mm512_mul_ps(_mm512_add_ps(e3, o3), norm));
    }
    for (; d < D; d += 16) {
        const uint16_t *vd = value_cache + (size_t)g * D + d;
        __m512 even = _mm512_setzero_ps(), odd = _mm512_setzero_ps();
        int jj = 0;
        for (; jj + 1 < keys; jj += 2) {
            even = _mm512_fmadd_ps(_mm512_set1_ps(scores[jj]), load_bf16(vd + visible[jj] * step), even);
            odd = _mm512_fmadd_ps(_mm512_set1_ps(scores[jj + 1]), load_bf16(vd + visible[jj + 1] * step), odd);
        }
        if (jj < keys) even = _mm512_fmadd_ps(_mm512_set1_ps(scores[jj]), load_bf16(vd + visible[jj] * step), even);
        store_bf16(oh + d, _mm512_mul_ps(_mm512_add_ps(even, odd), norm));
    }
}

/* q [Q, H, D] and the new k/v [Q, KV, D] with their own token strides; the new tokens are
 * positions L-Q..L-1. Without slots, key_cache/value_cache [L, KV, D] start at the request's
 * position 0 (one run of slots); with slots [L] (a paged cache), they are the whole cache and
 * position p lives at slot slots[p]. Either way a row reads the same keys in the same order, so
 * its result does not depend on where they lie. mask: NULL (causal) or bool [Q, L]. D is a
 * multiple of 32. out [Q, H, D] contiguous. */
void specpath_attention(const uint16_t *q, int q_stride, const uint16_t *k_new, int k_stride, const uint16_t *v_new,
                        int v_stride, uint16_t *key_cache, uint16_t *value_cache, int L, int Q, int H, int KV,
                        int D, float scale, const uint8_t *mask, const int64_t *slots, uint16_t *out) {
    const int group = H / KV, first = L - Q;
    for (int i = 0; i < Q; i++) {
        const size_t at = (size_t)(slots ? slots[first + i] : first + i) * KV * D;
        memcpy(key_cache + at, k_new + (size_t)i * k_stride, sizeof(uint16_t) * KV * D);
        memcpy(value_cache + at, v_new + (size_t)i * v_stride, sizeof(uint16_t) * KV * D);
    }
#pragma omp parallel
    {
        const unsigned int csr = _mm_getcsr();
        _mm_setcsr(csr | FLUSH_DENORMALS);
        float *scores = malloc(sizeof(float) * (size_t)L);
        int *visible = malloc(sizeof(int) * (size_t)L);
#pragma omp for schedule(static)
        for (int task = 0; task < Q * H; task++) {
            const int i = task / H, h = task % H;
            int keys = 0;
            if (mask) {
                for (int j = 0; j < L; j++)
                    if (mask[(size_t)i * L + j]) visible[keys++] = slots ? (int)slots[j] : j;
            } else {
                for (int j = 0; j <= first + i; j++) visible[keys++] = slots ? (int)slots[j] : j;
            }
            attend_row(q + (size_t)i * q_stride + (size_t)h * D, key_cache, value_cache, visible, keys, KV, D,
                       h / group, scale, scores, out + ((size_t)i * H + h) * D);
        }
        free(visible);
        free(scores);
        _mm_setcsr(csr);
    }
}

/* A batched step's attention in one call: B requests, request b's new tokens the rows
 * query_start[b] .. query_start[b+1]-1 of q [T, H, D] / k_new, v_new [T, KV, D] (token strides
 * as above), positions lengths[b] - n_b .. lengths[b] - 1 of its lengths[b]; position p of
 * request b lives at slot slots[b * slot_stride + p] of the whole caches [slots, KV, D]. The new
 * keys and values are written there first. mask: NULL (causal) or bool, request b's query i
 * seeing position j where mask[b * mask_req_stride + i * mask_row_stride + j] (a token tree).
 * Each row is computed exactly as specpath_attention computes it for its request alone (the same
 * keys in the same order through the same row function), threads over (row, head) pairs, taken
 * dynamically since requests differ in length. out [T, H, D] contiguous. */
void specpath_attention_batch(const uint16_t *q, int q_stride, const uint16_t *k_new, int k_stride,
                              const uint16_t *v_new, int v_stride, uint16_t *key_cache, uint16_t *value_cache,
                              int B, const int64_t *query_start, const int64_t *lengths, const int64_t *slots,
                              int64_t slot_stride, const uint8_t *mask, int64_t mask_req_stride,
                              int64_t mask_row_stride, int H, int KV, int D, float scale, uint16_t *out) {
    const int group = H / KV, T = (int)query_start[B];
    int *request = malloc(sizeof(int) * (size_t)(T > 0 ? T : 1));
    int64_t longest = 1;
    for (int b = 0; b < B; b++) {
        const int64_t n = query_start[b + 1] - query_start[b], first = lengths[b] - n;
        const int64_t *at = slots + b * slot_stride;
        longest = lengths[b] > longest ? lengths[b] : longest;
        for (int64_t i = 0; i < n; i++) {
            const int64_t row = query_start[b] + i;
            const size_t to = (size_t)at[first + i] * KV * D;
            request[row] = b;
            memcpy(key_cache + to, k_new + (size_t)row * k_stride, sizeof(uint16_t) * KV * D);
            memcpy(value_cache + to, v_new + (size_t)row * v_stride, sizeof(uint16_t) * KV * D);
        }
    }
#pragma omp parallel
    {
        const unsigned int csr = _mm_getcsr();
        _mm_setcsr(csr | FLUSH_DENORMALS);
        float *scores = malloc(sizeof(float) * (size_t)longest);
        int *visible = malloc(sizeof(int) * (size_t)longest);
#pragma omp for schedule(dynamic, 4)
        for (int task = 0; task < T * H; task++) {
            const int row = task / H, h = task % H, b = request[row];
            const int64_t L = lengths[b], i = row - query_start[b], first = L - (query_start[b + 1] - query_start[b]);
            const int64_t *at = slots + b * slot_stride;
            int keys = 0;
            if (mask) {
                const uint8_t *m = mask + b * mask_req_stride + i * mask_row_stride;
                for (int64_t j = 0; j < L; j++)
                    if (m[j]) visible[keys++] = (int)at[j];
            } else {
                for (int64_t j = 0; j <= first + i; j++) visible[keys++] = (int)at[j];
            }
            attend_row(q + (size_t)row * q_stride + (size_t)h * D, key_cache, value_cache, visible, keys, KV, D,
                       h / group, scale, scores, out + ((size_t)row * H + h) * D);
        }
        free(visible);
        free(scores);
        _mm_setcsr(csr);
    }
    free(request);
}
