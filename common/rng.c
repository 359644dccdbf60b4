// rng.c: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
#include "rng.h"

#include <math.h>

void rng_philox_block(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)counter_lo, c1 = (uint32_t)(counter_lo >> 32);
    uint32_t c2 = (uint32_t)counter_hi, c3 = (uint32_t)(counter_hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
        c0 = n0, c1 = n1, c2 = n2, c3 = n3;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void rng_init(rng_t *r, uint64_t seed, uint64_t stream)
{
    // The stream index goes in the high counter word, so streams never meet.
    r->seed = seed ^ (stream * 0x9E3779B97F4A7C15ull);
    r->counter = 0;
    r->buf_used = 4;
}

uint32_t rng_next_u32(rng_t *r)
{
    if (r->buf_used == 4) {
        rng_philox_block(r->seed, 0, r->counter++, r->buf);
        r->buf_used = 0;
    }
    return r->buf[r->buf_used++];
}

float rng_uniform(rng_t *r) { return (float)(rng_next_u32(r) >> 8) * (1.0f / 16777216.0f); }

float rng_normal(rng_t *r)
{
    // 1 - u keeps the log argument in (0, 1].
    float u1 = 1.0f - rng_uniform(r), u2 = rng_uniform(r);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

uint32_t rng_below(rng_t *r, uint32_t n)
{
    // Lemire's multiply-shift with rejection: unbiased for any n.
    uint64_t m = (uint64_t)rng_next_u32(r) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (uint64_t)rng_next_u32(r) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}
