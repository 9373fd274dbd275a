/* Counter-based uniforms for seeded sampling noise (specpath_engine.sample.noise). Entry i of a
 * key's stream is the top 24 bits of splitmix64's output i (the state key + (i + 1) * golden, mixed)
 * as a float in [0, 1): a function of (key, i) alone, made by plain integer steps that vectorise
 * (torch's CPU generator takes ~4 ns an entry, a vocabulary's noise per sampled position), and
 * that torch's int64 ops repeat bit for bit where this library is not built (noise.py). */
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
