// rng.h: Philox4x32-10, a counter-based RNG: the stream is a pure function of
// (seed, counter), so any position can be regenerated or checkpointed exactly.
#ifndef VGPU_RNG_H
#define VGPU_RNG_H

#include <stdint.h>

typedef struct rng {
    uint64_t seed;     // the key
    uint64_t counter;  // blocks of 4 x 32 bits consumed so far
    uint32_t buf[4];   // the current block
    int buf_used;      // words of buf already handed out (4 = empty)
} rng_t;

// One Philox4x32-10 block for (key, counter).
void rng_philox_block(uint64_t key, uint64_t counter_hi, uint64_t counter_lo, uint32_t out[4]);

// Starts stream `stream` of `seed` (distinct streams never overlap).
void rng_init(rng_t *r, uint64_t seed, uint64_t stream);
uint32_t rng_next_u32(rng_t *r);
// Uniform in [0, 1) with 24 random bits (exact in float).
float rng_uniform(rng_t *r);
// Standard normal (Box-Muller).
float rng_normal(rng_t *r);
// Uniform integer in [0, n), unbiased; n > 0.
uint32_t rng_below(rng_t *r, uint32_t n);

#endif
