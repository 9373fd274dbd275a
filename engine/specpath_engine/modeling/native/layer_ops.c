/* The element-wise steps of a bf16 decoder layer, one call each instead of several torch ops
 * (a CPU decode step of a small model pays more per call than per element). AVX512; widths are
 * multiples of 16 (the callers check).
 *
 * Each follows the rounding of the torch code it replaces, step by step: RMSNorm normalises in
 * fp32, rounds to bf16, then multiplies by the bf16 weight (Hugging Face's order); RoPE rounds
 * x*cos and rotate_half(x)*sin to bf16 before adding them; SiLU-and-multiply rounds silu(gate)
 * before multiplying by up. Only the order of a sum of squares and the exponential's last bits
 * can differ from torch's. */
#include <math.h>

#include "common.h"

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
