/* The element-wise steps of a bf16 decoder layer, one call each instead of several torch ops
 * (a CPU decode step of a small model pays more per call than per element). AVX512; widths are
 * multiples of 16 (the callers check).
 *
 * Each follows the rounding of the torch code it replaces, step by step: RMSNorm normalises in
 * fp32, rounds to bf16, then multiplies by the bf16 weight (Hugging Face's order); RoPE rounds
 * x*cos and rotate_half(x)*sin to bf16 before adding them; SiLU-and-multiply rounds silu(gate)
 * before multiplying by up. Only the order of a sum of squares and the exponential's last bits
 * can differ from torch's. */
#include <immintrin.h>
#include <math.h>
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

/* out = weight * bf16(x * rsqrt(mean(x^2) + eps)) over rows of D; with delta, x = bf16(x + delta)
 * is formed first and written to sum_out (the new residual). */
void specpath_rms_norm(const uint16_t *x, const uint16_t *delta, uint16_t *sum_out, const uint16_t *weight,
                       uint16_t *out, int M, int D, float eps) {
    for (int m = 0; m < M; m++) {
        const uint16_t *row = x + (size_t)m * D;
        if (delta) {
            uint16_t *sum = sum_out + (size_t)m * D;
            const uint16_t *dm = delta + (size_t)m * D;
            for (int d = 0; d < D; d += 16) store_bf16(sum + d, _mm512_add_ps(load_bf16(row + d), load_bf16(dm + d)));
            row = sum;
        }
        __m512 squares = _mm512_setzero_ps();
        for (int d = 0; d < D; d += 16) {
            __m512 v = load_bf16(row + d);
            squares = _mm512_fmadd_ps(v, v, squares);
        }
        const __m512 inv = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(squares) / (float)D + eps));
        uint16_t *o = out + (size_t)m * D;
        for (int d = 0; d < D; d += 16)
            store_bf16(o + d, _mm512_mul_ps(load_bf16(weight + d), rounded(_mm512_mul_ps(load_bf16(row + d), inv))));
    }
}

/* Rotate-half RoPE of H heads of width D per token: x and out are [T, H, D] with their own
 * strides between tokens (in place is allowed), cos/sin [T, D] contiguous. D/2 is a multiple
 * of 16. */
void specpath_rope(const uint16_t *x, int x_stride, const uint16_t *cos, const uint16_t *sin, uint16_t *out,
                   int out_stride, int T, int H, int D) {
    const int half = D / 2;
    const __m512 minus = _mm512_set1_ps(-1.0f);
    for (int t = 0; t < T; t++) {
        const uint16_t *c = cos + (size_t)t * D, *s = sin + (size_t)t * D;
        for (int h = 0; h < H; h++) {
            const uint16_t *xh = x + (size_t)t * x_stride + (size_t)h * D;
            uint16_t *oh = out + (size_t)t * out_stride + (size_t)h * D;
            for (int d = 0; d < half; d += 16) {
                __m512 x1 = load_bf16(xh + d), x2 = load_bf16(xh + half + d);
                __m512 first = _mm512_add_ps(rounded(_mm512_mul_ps(x1, load_bf16(c + d))),
                                             rounded(_mm512_mul_ps(_mm512_mul_ps(x2, minus), load_bf16(s + d))));
                __m512 second = _mm512_add_ps(rounded(_mm512_mul_ps(x2, load_bf16(c + half + d))),
                                              rounded(_mm512_mul_ps(x1, load_bf16(s + half + d))));
                store_bf16(oh + d, first);
                store_bf16(oh + half + d, second);
            }
        }
    }
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

/* out [M, F] = bf16(silu(gate)) * up for gate_up [M, 2F] (gate first). */
void specpath_silu_mul(const uint16_t *gate_up, uint16_t *out, int M, int F) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int m = 0; m < M; m++) {
        const uint16_t *g = gate_up + (size_t)m * 2 * F, *u = g + F;
        for (int f = 0; f < F; f += 16) {
            __m512 v = load_bf16(g + f);
            __m512 silu = rounded(_mm512_div_ps(v, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), v)))));
            store_bf16(out + (size_t)m * F + f, _mm512_mul_ps(silu, load_bf16(u + f)));
        }
    }
}

/* out = bf16(a + b) over n elements (n a multiple of 16). */
void specpath_add(const uint16_t *a, const uint16_t *b, uint16_t *out, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) store_bf16(out + i, _mm512_add_ps(load_bf16(a + i), load_bf16(b + i)));
}
