/* bf16 matmuls on AMX tiles (Intel AMX-BF16: Sapphire Rapids and later), up to sixteen rows per
 * pass at the cost of one.
 *
 * rows_matmul.c's vdpbf16ps kernel reads each weight once for up to eight rows, but its
 * multiplies grow with the rows: on a Xeon with AMX a SmolLM2 layer costs ~240 us at one row and
 * ~490 at five. One tdpbf16ps multiplies a 16 x 32 block of the weight into up to 16 rows, so
 * here a pass costs the same (~250 us) for 1 to 16 rows: verifying K drafts is as cheap as
 * decoding one token.
 *
 * The weight is held in the tile layout (specpath_bf16_tile_pack): per block of 16 outputs and 32
 * inputs, 16 rows of 64 bytes, row kp holding inputs 2kp and 2kp+1 of each of the 16 outputs
 * (the "VNNI" pairing tdpbf16ps reads). Every (row, output) sum runs the same instructions in the
 * same order whatever the number of rows or threads, so a row's result does not depend on what
 * else is in the batch; it differs from rows_matmul.c's in the order of the fp32 additions.
 *
 * An int8 weight (rows_matmul.c's q8: w = q * scale per output) can be held here too, its levels
 * q as bf16 (exact: |q| <= 127) with the scales applied to the fp32 sums, as the q8 kernel applies
 * them (specpath_q8_tile_matmul): the same products, summed in another order. A drafter keeps
 * both copies and takes this one for passes of several rows (specpath_linear_matmul).
 *
 * Linux hands out the tile registers per process on request (arch_prctl ARCH_REQ_XCOMP_PERM);
 * specpath_bf16_tile_supported asks once. Compilers without AMX support build a stub. */
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__) && (defined(__clang__) || __GNUC__ >= 11)
#define SPECPATH_HAVE_AMX 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define TILE_OUT 16 /* outputs per block (a C tile's 16 fp32 columns) */
#define TILE_IN 32  /* inputs per block (a B tile's 16 rows of bf16 pairs) */
#define TILE_ROWS 16
#define BLOCK (TILE_OUT * TILE_IN)

/* packed [N/16][K/32][16][32] from w [N, K] (bf16); N a multiple of 16, K of 32. */
void specpath_bf16_tile_pack(const uint16_t *w, uint16_t *packed, int N, int K) {
    const int kb_count = K / TILE_IN;
    for (int nb = 0; nb < N / TILE_OUT; nb++)
        for (int kb = 0; kb < kb_count; kb++) {
            uint16_t *dst = packed + ((size_t)nb * kb_count + kb) * BLOCK;
            for (int kp = 0; kp < TILE_IN / 2; kp++)
                for (int n = 0; n < TILE_OUT; n++)
                    for (int e = 0; e < 2; e++)
                        dst[kp * 2 * TILE_OUT + n * 2 + e] = w[(size_t)(nb * TILE_OUT + n) * K + kb * TILE_IN + kp * 2 + e];
        }
}

#ifdef SPECPATH_HAVE_AMX
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct {
    uint8_t palette_id, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

int specpath_bf16_tile_supported(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (!((d >> 22) & 1) || !((d >> 24) & 1)) return 0; /* AMX-BF16, AMX-TILE */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

/* Rows [rows, 16] of fp32 sums (stride 16), times scales[n0..n0+15] if any (rows_matmul.c's order),
 * to out: bf16 (round to nearest even) or fp32. */
__attribute__((target("avx512f,avx512bf16")))
static inline void store_block(void *out, int out_f32, int N, int n0, const float *sums, int rows, const float *scales) {
    for (int m = 0; m < rows; m++) {
        __m512 v = _mm512_loadu_ps(sums + m * TILE_OUT);
        if (scales) v = _mm512_mul_ps(v, _mm512_loadu_ps(scales + n0));
        if (out_f32) _mm512_storeu_ps((float *)out + (size_t)m * N + n0, v);
        else _mm256_storeu_si256((__m256i *)((uint16_t *)out + (size_t)m * N + n0), (__m256i)_mm512_cvtneps_pbh(v));
    }
}

/* Two output blocks per work item (C tiles 0 and 1 share each A tile load), one for an odd tail. */
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bf16")))
static void tile_pass(const uint16_t *packed, const float *scales, const uint16_t *x, void *out, int out_f32, int rows,
                      int N, int K) {
    const int kb_count = K / TILE_IN, blocks = N / TILE_OUT, items = (blocks + 1) / 2;
#pragma omp parallel
    {
        TileConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.palette_id = 1;
        cfg.rows[0] = cfg.rows[1] = cfg.rows[2] = (uint8_t)rows; /* C0, C1, A */
        cfg.colsb[0] = cfg.colsb[1] = cfg.colsb[2] = 64;
        cfg.rows[3] = cfg.rows[4] = TILE_IN / 2; /* B0, B1 */
        cfg.colsb[3] = cfg.colsb[4] = 64;
        _tile_loadconfig(&cfg);
        float sums[2][TILE_ROWS * TILE_OUT];
#pragma omp for schedule(static)
        for (int item = 0; item < items; item++) {
            const int nb = 2 * item, pair = nb + 1 < blocks;
            const uint16_t *b0 = packed + (size_t)nb * kb_count * BLOCK, *b1 = b0 + (size_t)kb_count * BLOCK;
            _tile_zero(0);
            _tile_zero(1);
            for (int kb = 0; kb < kb_count; kb++) {
                _tile_loadd(2, x + kb * TILE_IN, K * 2);
                _tile_loadd(3, b0 + (size_t)kb * BLOCK, 64);
                _tile_dpbf16ps(0, 2, 3);
                if (pair) {
                    _tile_loadd(4, b1 + (size_t)kb * BLOCK, 64);
                    _tile_dpbf16ps(1, 2, 4);
                }
            }
            _tile_stored(0, sums[0], 64);
            store_block(out, out_f32, N, nb * TILE_OUT, sums[0], rows, scales);
            if (pair) {
                _tile_stored(1, sums[1], 64);
                store_block(out, out_f32, N, (nb + 1) * TILE_OUT, sums[1], rows, scales);
            }
        }
        _tile_release();
    }
}

/* out [M, N] (bf16, or fp32 when out_f32) = x [M, K] (bf16) @ (w * scales[:, None]).T for w packed
 * by specpath_bf16_tile_pack and fp32 scales [N] (NULL: none); rows in passes of 16. */
void specpath_q8_tile_matmul(const uint16_t *packed, const float *scales, const uint16_t *x, void *out, int out_f32,
                             int M, int N, int K) {
    const size_t out_size = out_f32 ? sizeof(float) : sizeof(uint16_t);
    for (int r0 = 0; r0 < M; r0 += TILE_ROWS) {
        const int rows = M - r0 < TILE_ROWS ? M - r0 : TILE_ROWS;
        tile_pass(packed, scales, x + (size_t)r0 * K, (char *)out + (size_t)r0 * N * out_size, out_f32, rows, N, K);
    }
}

/* out [M, N] (bf16, or fp32 when out_f32) = x [M, K] (bf16) @ w.T for w packed by
 * specpath_bf16_tile_pack; rows in passes of 16. */
void specpath_bf16_tile_matmul(const uint16_t *packed, const uint16_t *x, void *out, int out_f32, int M, int N, int K) {
    specpath_q8_tile_matmul(packed, 0, x, out, out_f32, M, N, K);
}
#else
int specpath_bf16_tile_supported(void) { return 0; }

void specpath_bf16_tile_matmul(const uint16_t *packed, const uint16_t *x, void *out, int out_f32, int M, int N, int K) {
    (void)packed; (void)x; (void)out; (void)out_f32; (void)M; (void)N; (void)K;
}

void specpath_q8_tile_matmul(const uint16_t *packed, const float *scales, const uint16_t *x, void *out, int out_f32,
                             int M, int N, int K) {
    (void)packed; (void)scales; (void)x; (void)out; (void)out_f32; (void)M; (void)N; (void)K;
}
#endif
