/* bf16 <-> fp32 helpers and a vectorised exp shared by the native element-wise kernels (AVX512),
 * and the weight descriptor every fused function takes (specpath_linear). */
#ifndef SPECPATH_NATIVE_COMMON_H
#define SPECPATH_NATIVE_COMMON_H
#include <immintrin.h>
#include <stdint.h>

static inline __m512 load_bf16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

static inline __m256i to_bf16(__m512 v) { return (__m256i)_mm512_cvtneps_pbh(v); }

static inline void store_bf16(uint16_t *p, __m512 v) { _mm256_storeu_si256((__m256i *)p, to_bf16(v)); }

/* v rounded to bf16 and back: the value torch holds after a bf16 op. */
static inline __m512 rounded(__m512 v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(to_bf16(v)), 16));
}

/* exp(v) for v <= 88, ~1 ulp: 2^n * p(r) with r = v - n*ln2 in [-ln2/2, ln2/2] (Cephes' polynomial). */
static inline __m512 exp_ps(__m512 v) {
    v = _mm512_max_ps(_mm512_min_ps(v, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), v);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* A weight: bits 4 (levels [N, K/2], scale_mins [N, K/32, 2]), 8 (int8 [N, K], scales [N]) or
 * 16 (bf16 [N, K], no scales; with tiled, in tiled_matmul.c's tile layout). An int8 weight may
 * also carry tiles: its levels as bf16 in the tile layout (exact: |q| <= 127), multiplied on the
 * AMX tiles (then by the scales) in passes of at least tiles_from_rows rows (<= 0: never). An int8
 * weight with int16_activations multiplies int16-quantised rows in passes of at most
 * INT16_ACTIVATION_ROWS rows (specpath_q8a16_matmul: a drafter's, where the CPU has AVX512-VNNI;
 * it loses to the bf16 kernel from five rows). Python's Linear. */
#define INT16_ACTIVATION_ROWS 4
typedef struct {
    const void *weight;
    const float *scales;
    int64_t bits, out_features, in_features, tiled;
    const uint16_t *tiles;
    int64_t tiles_from_rows, int16_activations;
} specpath_linear;

/* out [M, N] (bf16) = x [M, K] @ l's weight.T on the kernel its format takes (decoder_layer.c). */
void specpath_linear_matmul(const specpath_linear *l, const uint16_t *x, uint16_t *out, int M);

/* One decoder layer as the fused calls read it (LayerWeights in Python): its two norms (input_norm
 * NULL where the caller norms the input itself) and four fused projections. */
typedef struct {
    const uint16_t *input_norm, *post_norm;
    float input_eps, post_eps;
    const specpath_linear *qkv, *o_proj, *gate_up, *down;
} specpath_layer_weights;

/* The pieces every fused call is made of (layer_ops.c, decoder_layer.c, attention.c,
 * draft_chain.c), declared once. */
void specpath_rms_norm(const uint16_t *x, const uint16_t *delta, uint16_t *sum_out, const uint16_t *weight,
                       uint16_t *out, int M, int D, float eps);
void specpath_layer_pre(const uint16_t *h, const uint16_t *norm_weight, float eps, const specpath_linear *qkv,
                        const uint16_t *cos, const uint16_t *sin, int T, int H, int KV, int D, uint16_t *qkv_out);
void specpath_layer_post(const uint16_t *h, const uint16_t *attn, const specpath_linear *o_proj,
                         const uint16_t *norm_weight, float eps, const specpath_linear *gate_up,
                         const specpath_linear *down, int T, uint16_t *out);
void specpath_attention(const uint16_t *q, int q_stride, const uint16_t *k_new, int k_stride, const uint16_t *v_new,
                        int v_stride, uint16_t *key_cache, uint16_t *value_cache, int L, int Q, int H, int KV, int D,
                        float scale, const uint8_t *mask, const int64_t *slots, uint16_t *out);
void specpath_attention_batch(const uint16_t *q, int q_stride, const uint16_t *k_new, int k_stride,
                              const uint16_t *v_new, int v_stride, uint16_t *key_cache, uint16_t *value_cache,
                              int B, const int64_t *query_start, const int64_t *lengths, const int64_t *slots,
                              int64_t slot_stride, const uint8_t *mask, int64_t mask_req_stride,
                              int64_t mask_row_stride, int H, int KV, int D, float scale, uint16_t *out);
int specpath_draft_argmax(const uint16_t *logits, const float *bias, const float *noise, int n);

#endif
