/* Counter-based uniforms for seeded sampling noise (specpath_engine.sample.noise), and the Gumbel
 * noise made of them. Entry i of a key's stream is the top 24 bits of splitmix64's output i (the
 * state key + (i + 1) * golden, mixed) as a float in [0, 1): a function of (key, i) alone, made by
 * plain integer steps that vectorise (torch's CPU generator takes ~4 ns an entry, a vocabulary's
 * noise per sampled position), and that torch's int64 ops repeat bit for bit where this library
 * is not built (noise.py).
 *
 * The Gumbel noise G = -log(max(-log(1 - u), first_step)) takes its two logs from one polynomial
 * (noise.py's _log, the same float32 multiplies and adds in the same order, none fused: the
 * pragma below, since -mfma would let the compiler contract them), so it too is the same bits
 * with or without this library; torch's own log took ~1.5 ns an entry on one core of an AVX512
 * EPYC, two thirds of the noise's cost per sampled position. */
#pragma GCC optimize("fp-contract=off")
#pragma STDC FP_CONTRACT OFF
#include <immintrin.h>
#include <stdint.h>

void specpath_uniforms(uint64_t key, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = key + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        out[i] = (float)(int32_t)(z >> 40) * 0x1p-24f;
    }
}

/* Natural log of 16 positive normal floats: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), f = m - 1
 * (exact), log(1 + f) by a degree-9 minimax polynomial in f (the Cephes single-precision
 * coefficients, ~1 ulp), plus e * log(2) in two parts. noise.py's _log is this, op for op. */
static inline __m512 log16(__m512 x) {
    const __m512i bits = _mm512_castps_si512(x);
    __m512i e = _mm512_sub_epi32(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(126));
    __m512 m = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(0x007FFFFF)),
                                                   _mm512_set1_epi32(0x3F000000))); /* [1/2, 1) */
    const __mmask16 low = _mm512_cmp_ps_mask(m, _mm512_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
    e = _mm512_mask_sub_epi32(e, low, e, _mm512_set1_epi32(1));
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 f = _mm512_sub_ps(_mm512_mask_add_ps(m, low, m, m), one);
    const __m512 ef = _mm512_cvtepi32_ps(e);
    const __m512 z = _mm512_mul_ps(f, f);
    __m512 y = _mm512_mul_ps(_mm512_set1_ps(7.0376836292e-2f), f);
    y = _mm512_mul_ps(_mm512_add_ps(y, _mm512_set1_ps(-1.1514610310e-1f)), f);
    y = _mm512_mul_ps(_mm512_add_ps(y, _mm512_set1_ps(1.1676998740e-1f)), f);
    y = _mm512_mul_ps(_mm512_add_ps(y, _mm512_set1_ps(-1.2420140846e-1f)), f);
    y = _mm512_mul_ps(_mm512_add_ps(y, _mm512_set1_ps(1.4249322787e-1f)), f);
    y = _mm512_mul_ps(_mm512_add_ps(y, _mm512_set1_ps(-1.6668057665e-1f)), f);
    y = _mm512_mul_ps(_mm512_add_ps(y, _mm512_set1_ps(2.0000714765e-1f)), f);
    y = _mm512_mul_ps(_mm512_add_ps(y, _mm512_set1_ps(-2.4999993993e-1f)), f);
    y = _mm512_mul_ps(_mm512_add_ps(y, _mm512_set1_ps(3.3333331174e-1f)), f);
    y = _mm512_mul_ps(y, z);
    y = _mm512_add_ps(y, _mm512_mul_ps(ef, _mm512_set1_ps(-2.12194440e-4f)));
    y = _mm512_add_ps(y, _mm512_mul_ps(z, _mm512_set1_ps(-0.5f)));
    return _mm512_add_ps(_mm512_add_ps(f, y), _mm512_mul_ps(ef, _mm512_set1_ps(0.693359375f)));
}

/* out[0..n) = the Gumbel noise of key's uniforms: u from specpath_uniforms, E = -log(1 - u)
 * floored at first_step, G = -log E (the last partial vector under a mask). */
void specpath_gumbel(uint64_t key, int64_t n, float first_step, float *out) {
    specpath_uniforms(key, n, out);
    const __m512 one = _mm512_set1_ps(1.0f), floor = _mm512_set1_ps(first_step);
    const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32((int)0x80000000u));
    /* a vocabulary's worth (~70 us of logs at V = 49,152 on one core) over the caller's threads */
    _Pragma("omp parallel for schedule(static) if (n >= 16384)")
    for (int64_t i = 0; i < n; i += 32) { /* two vectors a pass: their chains overlap */
        const __mmask16 a = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __mmask16 b = n - i >= 32 ? (__mmask16)0xFFFF : n - i <= 16 ? 0 : (__mmask16)((1u << (n - i - 16)) - 1);
        const __m512 va = _mm512_sub_ps(one, _mm512_maskz_loadu_ps(a, out + i)); /* exact: u is k * 2^-24 */
        const __m512 vb = _mm512_sub_ps(one, _mm512_maskz_loadu_ps(b, out + i + 16));
        const __m512 ea = _mm512_max_ps(_mm512_xor_ps(log16(va), sign), floor);
        const __m512 eb = _mm512_max_ps(_mm512_xor_ps(log16(vb), sign), floor);
        _mm512_mask_storeu_ps(out + i, a, _mm512_xor_ps(log16(ea), sign));
        _mm512_mask_storeu_ps(out + i + 16, b, _mm512_xor_ps(log16(eb), sign));
    }
}
