/* Weight-only matmuls for a few bf16 rows on AVX512-BF16 CPUs: each weight is read once and
 * multiplied into every row, so verifying K+1 tokens costs little more than decoding one.
 *
 *   q4: 4-bit levels in groups of 32 inputs with an fp32 scale and minimum per group (GGUF
 *       Q4_1's block): w = level * scale + minimum, rounded to bf16. Two groups share 32 bytes:
 *       byte j holds level j of the first in its low nibble, level j of the second in its high.
 *   q8: int8 weights with one fp32 scale per output row: w = q * scale.
 *   q8a16: the same int8 weights times int16 activations (AVX512-VNNI's vpdpwssd): each row of x
 *       is quantised to int16 with one fp32 scale (symmetric, its largest magnitude at the top of
 *       the range), products summed exactly in int32, then scaled. One sign extension per 32
 *       weights instead of q8's five conversion instructions, which bound q8 with warm weights;
 *       but vpdpwssd retires at about half vdpbf16ps's rate (an AVX512-BF16 EPYC), so it pays at
 *       one to three rows (1.7x at one), breaks even at four and loses from five: a drafter's
 *       chain (one row) and ingest (the accepted tokens), not a verification's rows.
 *       Not the bf16 path's bits (the activations are rounded differently): for drafters, whose
 *       drafts verification checks, not for a target's logits.
 *   bf16: the weights as they are.
 *
 * Products are bf16 x bf16 summed in fp32 (vdpbf16ps). Every (row, output) sum runs the same
 * instructions in the same order whatever the number of rows or threads, so a row's result does
 * not depend on what else is in the batch. Threads: the caller's OpenMP runtime (torch's). */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

#define GROUP 32
/* Rows one pass over the weights multiplies (more run in passes of this many). A pass of up to
 * PAIR_ROWS rows runs two output rows at a time (two accumulator chains per input row hide
 * vdpbf16ps's latency when rows are few); a wider one either one output row at a time (the rows'
 * own chains hide it; 16 accumulators fit the 32 registers where 32 would not) or, for a 16-output
 * block, its rows in chunks of PAIR_ROWS as pairs while the block's weights sit in the caches.
 * Every (row, output) chain runs the same instructions in each layout, so no layout changes a
 * row's bits. Why passes of 16: a batch of 8 requests with a draft row each is 9-16 rows, which
 * in passes of 8 read every weight twice. Measured on an AVX512-BF16 EPYC (2 threads, 30 SmolLM2
 * layers streamed, us per layer), passes of 8 against these: bf16 9 rows 514-537 -> 418-438, 12
 * rows 545-548 -> 481-488, 16 rows 609-643 -> 602-608; int4 9 rows 400-404 -> 332-340, 12 rows
 * 445-450 -> 422-425 (one output at a time), int4 and int8 at 16 rows lost that way (515-561 ->
 * 586-594), so past WIDE rows they take the chunks. */
#define PAIR_ROWS 8
#define MAX_ROWS 16
#define WIDE_BF16 16
#define WIDE_QUANT 12
/* Software prefetch distance (bytes ahead in each weight row's stream): measured on an AVX512-BF16
 * EPYC, 2 KiB ahead took a 4-bit layer from ~190 to ~140 us at one row and ~300 to ~200 at five;
 * the hardware prefetcher alone falls behind once each weight feeds several rows. */
#define AHEAD 2048

int specpath_vnni_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
}

int specpath_rows_matmul_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
           __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma");
}

/* Lane i of the result = the sum of v[i]'s 16 lanes: sixteen sums in 45 shuffles and adds (a
 * transpose-add tree) instead of sixteen horizontal reductions; each lane's order is fixed. */
static inline __m512 hsum16(const __m512 *v) {
    __m512 t[8], u[4], w[2];
    for (int i = 0; i < 8; i++)
        t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++)
        u[i] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0x44), _mm512_shuffle_ps(t[2 * i], t[2 * i + 1], 0xEE));
    for (int i = 0; i < 2; i++)
        w[i] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Sixteen outputs of one row at out[index..index+15], bf16 (round to nearest even) or fp32. */
static inline void store16(void *out, int out_f32, size_t index, __m512 sums) {
    if (out_f32) _mm512_storeu_ps((float *)out + index, sums);
    else _mm256_storeu_si256((__m256i *)((uint16_t *)out + index), (__m256i)_mm512_cvtneps_pbh(sums));
}

/* Each *_rows function leaves its accumulators in part[m][output slot]: part[m][j] is output row
 * n0 + j's 16-lane partial sums for input row m; PASSES sums and stores them sixteen at a time. */
typedef __m512 Partials[MAX_ROWS][16];

/* 4-bit levels come in pairs of groups: byte j of a 32-byte chunk holds level j of the first group in
 * its low nibble and level j of the second in its high nibble. Each group's 16 possible weights
 * are made once (fp32 fma, rounded to bf16) and looked up with vpermw. */
static inline __attribute__((always_inline)) __m512bh q4_lookup(__m512i index, const float *sm) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m256bh table = _mm512_cvtneps_pbh(_mm512_fmadd_ps(iota, _mm512_set1_ps(sm[0]), _mm512_set1_ps(sm[1])));
    return (__m512bh)_mm512_permutexvar_epi16(index, _mm512_castsi256_si512((__m256i)table));
}

/* OUTS (1 or 2) output rows n.. of M input rows, one accumulator chain per (output, input row):
 * two outputs at a time where rows are few (two chains per row hide vdpbf16ps's latency), one at a
 * time for a pass of up to WIDE_BF16 / WIDE_QUANT rows (their chains fit the registers, twice as
 * many would not). A chain runs the
 * same instructions either way, so its bits do not depend on OUTS or M. */
static inline __attribute__((always_inline)) void q4_rows(
    const uint8_t *levels, const float *scale_mins, const uint16_t *x, Partials part, int j, int n, int K,
    const int OUTS, const int M) {
    const int G = K / GROUP;
    const __m512i nibble = _mm512_set1_epi16(0xF);
    __m512 acc[2][MAX_ROWS];
    for (int o = 0; o < OUTS; o++)
        for (int m = 0; m < M; m++) acc[o][m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g += 2) {
        __m512bh a[2], b[2];
        for (int o = 0; o < OUTS; o++) {
            const uint8_t *w = levels + (size_t)(n + o) * (K / 2) + g * 16;
            const float *sm = scale_mins + ((size_t)(n + o) * G + g) * 2;
            _mm_prefetch((const char *)(w + AHEAD), _MM_HINT_T0);
            __m512i v = _mm512_cvtepu8_epi16(_mm256_loadu_si256((const __m256i *)w));
            a[o] = q4_lookup(_mm512_and_si512(v, nibble), sm);
            b[o] = q4_lookup(_mm512_srli_epi16(v, 4), sm + 2);
        }
        for (int m = 0; m < M; m++) {
            const uint16_t *xm = x + (size_t)m * K + g * GROUP;
            __m512bh xa = (__m512bh)_mm512_loadu_si512((const void *)xm);
            __m512bh xb = (__m512bh)_mm512_loadu_si512((const void *)(xm + GROUP));
            for (int o = 0; o < OUTS; o++) acc[o][m] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[o][m], a[o], xa), b[o], xb);
        }
    }
    for (int m = 0; m < M; m++)
        for (int o = 0; o < OUTS; o++) part[m][j + o] = acc[o][m];
}

/* q4_rows for int8 weights (each 32 converted to bf16 once per output and pass). */
static inline __attribute__((always_inline)) void q8_rows(
    const int8_t *weight, const uint16_t *x, Partials part, int j, int n, int K, const int OUTS, const int M) {
    const int G = K / GROUP;
    __m512 acc[2][MAX_ROWS];
    for (int o = 0; o < OUTS; o++)
        for (int m = 0; m < M; m++) acc[o][m] = _mm512_setzero_ps();
    for (int g = 0; g < G; g++) {
        __m512bh b[2];
        for (int o = 0; o < OUTS; o++) {
            const int8_t *p = weight + (size_t)(n + o) * K + g * GROUP;
            _mm_prefetch((const char *)(p + AHEAD), _MM_HINT_T0);
            b[o] = _mm512_cvtne2ps_pbh(
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(p + 16)))),
                _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p))));
        }
        for (int m = 0; m < M; m++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(x + (size_t)m * K + g * GROUP));
            for (int o = 0; o < OUTS; o++) acc[o][m] = _mm512_dpbf16_ps(acc[o][m], b[o], xv);
        }
    }
    for (int m = 0; m < M; m++)
        for (int o = 0; o < OUTS; o++) part[m][j + o] = acc[o][m];
}

/* Four output rows n..n+3 of up to QUAD_ROWS input rows xq (int16, rows of K): four independent
 * vpdpwssd chains per input row (two would wait on its latency), int32 lane sums converted to
 * fp32 for the shared reduction (exact in int32; see specpath_q8a16_matmul's range). */
#define QUAD_ROWS 4
static inline __attribute__((always_inline)) __attribute__((target("avx512vnni"))) void q8a16_quad(
    const int8_t *weight, const int16_t *xq, Partials part, int j, int n, int K, const int M) {
    __m512i acc[QUAD_ROWS][4];
    for (int m = 0; m < M; m++)
        for (int i = 0; i < 4; i++) acc[m][i] = _mm512_setzero_si512();
    const int8_t *w = weight + (size_t)n * K;
    for (int k = 0; k < K; k += GROUP) {
        __m512i b[4];
        for (int i = 0; i < 4; i++) {
            _mm_prefetch((const char *)(w + (size_t)i * K + k + AHEAD), _MM_HINT_T0);
            b[i] = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(w + (size_t)i * K + k)));
        }
        for (int m = 0; m < M; m++) {
            __m512i xv = _mm512_loadu_si512((const void *)(xq + (size_t)m * K + k));
            for (int i = 0; i < 4; i++) acc[m][i] = _mm512_dpwssd_epi32(acc[m][i], b[i], xv);
        }
    }
    for (int m = 0; m < M; m++)
        for (int i = 0; i < 4; i++) part[m][j + i] = _mm512_cvtepi32_ps(acc[m][i]);
}

/* q4_rows for bf16 weights, as they are. */
static inline __attribute__((always_inline)) void bf16_rows(
    const uint16_t *weight, const uint16_t *x, Partials part, int j, int n, int K, const int OUTS, const int M) {
    __m512 acc[2][MAX_ROWS];
    for (int o = 0; o < OUTS; o++)
        for (int m = 0; m < M; m++) acc[o][m] = _mm512_setzero_ps();
    for (int k = 0; k < K; k += GROUP) {
        __m512bh b[2];
        for (int o = 0; o < OUTS; o++) {
            const uint16_t *w = weight + (size_t)(n + o) * K + k;
            _mm_prefetch((const char *)w + 4 * AHEAD, _MM_HINT_T0);
            b[o] = (__m512bh)_mm512_loadu_si512((const void *)w);
        }
        for (int m = 0; m < M; m++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512((const void *)(x + (size_t)m * K + k));
            for (int o = 0; o < OUTS; o++) acc[o][m] = _mm512_dpbf16_ps(acc[o][m], b[o], xv);
        }
    }
    for (int m = 0; m < M; m++)
        for (int o = 0; o < OUTS; o++) part[m][j + o] = acc[o][m];
}

#define DISPATCH(CALL)                                                                   \
    switch (rows) {                                                                      \
    case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break;              \
    case 4: CALL(4); break; case 5: CALL(5); break; case 6: CALL(6); break;              \
    case 7: CALL(7); break; default: CALL(8); break;                                     \
    }
#define DISPATCH_WIDE(CALL)                                                              \
    switch (rows) {                                                                      \
    case 9: CALL(9); break; case 10: CALL(10); break; case 11: CALL(11); break;          \
    case 12: CALL(12); break; case 13: CALL(13); break; case 14: CALL(14); break;        \
    case 15: CALL(15); break; default: CALL(16); break;                                  \
    }

/* The loop every format shares: rows in passes of MAX_ROWS (same instructions per row), blocks
 * of 16 output rows spread over the threads. A pass of up to PAIR_ROWS rows runs each block as 8
 * pairs (PAIR(MM)); a pass of up to WIDE rows as 16 single outputs (ONE(MM)); a wider one as 8
 * pairs per chunk of PAIR_ROWS rows, the chunks inside the block. Then each row's sums are formed
 * and stored (times per-row scales if any). */
#define STORE_ROWS(FIRST, COUNT, SCALES)                                                              \
    for (int m = 0; m < (COUNT); m++) {                                                               \
        __m512 sums = hsum16(part[m]);                                                                \
        if (SCALES) sums = _mm512_mul_ps(sums, _mm512_loadu_ps((const float *)(SCALES) + n0));         \
        store16(out, out_f32, (size_t)(r0 + (FIRST) + m) * N + n0, sums);                             \
    }
#define PASSES(PAIR, ONE, SCALES, WIDE)                                                               \
    for (int r0 = 0; r0 < M; r0 += MAX_ROWS) {                                                        \
        const int pass = M - r0 < MAX_ROWS ? M - r0 : MAX_ROWS;                                       \
        _Pragma("omp parallel for schedule(static)")                                                  \
        for (int n0 = 0; n0 < N; n0 += 16) {                                                          \
            Partials part;                                                                            \
            if (pass > PAIR_ROWS && pass <= (WIDE)) {                                                 \
                const int rows = pass;                                                                \
                const uint16_t *xr = x + (size_t)r0 * K;                                              \
                for (int j = 0; j < 16; j++) {                                                        \
                    const int n = n0 + j;                                                             \
                    DISPATCH_WIDE(ONE)                                                                \
                }                                                                                     \
                STORE_ROWS(0, rows, SCALES)                                                           \
            } else {                                                                                  \
                for (int c0 = 0; c0 < pass; c0 += PAIR_ROWS) {                                        \
                    const int rows = pass - c0 < PAIR_ROWS ? pass - c0 : PAIR_ROWS;                   \
                    const uint16_t *xr = x + (size_t)(r0 + c0) * K;                                   \
                    for (int j = 0; j < 16; j += 2) {                                                 \
                        const int n = n0 + j;                                                         \
                        DISPATCH(PAIR)                                                                \
                    }                                                                                 \
                    STORE_ROWS(c0, rows, SCALES)                                                      \
                }                                                                                     \
            }                                                                                         \
        }                                                                                             \
    }

/* out [M, N] (bf16, or fp32 when out_f32) = x [M, K] (bf16) @ w.T; N a multiple of 16, K of 64
 * (q4) or 32 (q8, bf16); scale_mins [N, K/32, 2]. */
void specpath_q4_matmul(const uint8_t *levels, const float *scale_mins, const uint16_t *x, void *out,
                        int out_f32, int M, int N, int K) {
#define Q4(MM) q4_rows(levels, scale_mins, xr, part, j, n, K, 2, MM)
#define Q4_ONE(MM) q4_rows(levels, scale_mins, xr, part, j, n, K, 1, MM)
    PASSES(Q4, Q4_ONE, (const float *)0, WIDE_QUANT)
#undef Q4_ONE
#undef Q4
}

void specpath_q8_matmul(const int8_t *weight, const float *scales, const uint16_t *x, void *out,
                        int out_f32, int M, int N, int K) {
#define Q8(MM) q8_rows(weight, xr, part, j, n, K, 2, MM)
#define Q8_ONE(MM) q8_rows(weight, xr, part, j, n, K, 1, MM)
    PASSES(Q8, Q8_ONE, scales, WIDE_QUANT)
#undef Q8_ONE
#undef Q8
}

/* The largest int16 level of a row quantised for a K-long product with int8 weights (|q| <= 128):
 * each of the 16 lanes sums K/16 products, which must stay inside int32. */
static inline int q8a16_top(int K) {
    const int64_t top = ((int64_t)1 << 31) / ((int64_t)128 * (K / 16 + 1)) - 1;
    return top < 32767 ? (int)top : 32767;
}

/* x [M, K] bf16 -> xq [M, K] int16 and xs [M] (x ~ xq * xs): symmetric, per row, round to nearest. */
static void quantize_rows_i16(const uint16_t *x, int16_t *xq, float *xs, int M, int K) {
    const float top = (float)q8a16_top(K);
    for (int m = 0; m < M; m++) {
        const uint16_t *xm = x + (size_t)m * K;
        __m512 peak = _mm512_setzero_ps();
        for (int k = 0; k < K; k += 16) peak = _mm512_max_ps(peak, _mm512_abs_ps(load_bf16(xm + k)));
        const float largest = _mm512_reduce_max_ps(peak);
        const float scale = largest > 0.0f ? largest / top : 0.0f, inv = largest > 0.0f ? top / largest : 0.0f;
        xs[m] = scale;
        const __m512 vinv = _mm512_set1_ps(inv);
        for (int k = 0; k < K; k += 16) {
            __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(load_bf16(xm + k), vinv)); /* nearest even */
            _mm256_storeu_si256((__m256i *)(xq + (size_t)m * K + k), _mm512_cvtsepi32_epi16(q));
        }
    }
}

/* out [M, N] (bf16, or fp32 when out_f32) = x [M, K] (bf16, quantised per row to int16) @ (weight *
 * scales[:, None]).T on AVX512-VNNI; N a multiple of 16, K of 32. Row-invariant like the others. */
__attribute__((target("avx512vnni")))
void specpath_q8a16_matmul(const int8_t *weight, const float *scales, const uint16_t *x, void *out,
                           int out_f32, int M, int N, int K) {
    int16_t *xq = malloc(sizeof(int16_t) * (size_t)M * K);
    float *xs = malloc(sizeof(float) * (size_t)M);
    quantize_rows_i16(x, xq, xs, M, K);
    /* passes of QUAD_ROWS rows (the engine sends at most INT16_ACTIVATION_ROWS = QUAD_ROWS) */
    for (int r0 = 0; r0 < M; r0 += QUAD_ROWS) {
        const int rows = M - r0 < QUAD_ROWS ? M - r0 : QUAD_ROWS;
        const int16_t *xr = xq + (size_t)r0 * K;
        _Pragma("omp parallel for schedule(static)")
        for (int n0 = 0; n0 < N; n0 += 16) {
            Partials part;
            for (int j = 0; j < 16; j += 4) {
                const int n = n0 + j;
                switch (rows) {
                case 1: q8a16_quad(weight, xr, part, j, n, K, 1); break;
                case 2: q8a16_quad(weight, xr, part, j, n, K, 2); break;
                case 3: q8a16_quad(weight, xr, part, j, n, K, 3); break;
                default: q8a16_quad(weight, xr, part, j, n, K, 4); break;
                }
            }
            const __m512 row_scales = _mm512_loadu_ps(scales + n0);
            for (int m = 0; m < rows; m++) {
                __m512 sums = _mm512_mul_ps(_mm512_mul_ps(hsum16(part[m]), _mm512_set1_ps(xs[r0 + m])), row_scales);
                store16(out, out_f32, (size_t)(r0 + m) * N + n0, sums);
            }
        }
    }
    free(xq);
    free(xs);
}

void specpath_bf16_matmul(const uint16_t *weight, const uint16_t *x, void *out, int out_f32, int M, int N, int K) {
#define B16(MM) bf16_rows(weight, xr, part, j, n, K, 2, MM)
#define B16_ONE(MM) bf16_rows(weight, xr, part, j, n, K, 1, MM)
    PASSES(B16, B16_ONE, (const float *)0, WIDE_BF16)
#undef B16_ONE
#undef B16
}
