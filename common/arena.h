// arena.h: a sub-allocator over one pre-reserved region (a virtual GPU's
// memory cap). Only bookkeeping lives here; the region itself may be device
// memory that the host cannot touch, so no metadata is stored inside it.
#ifndef VGPU_ARENA_H
#define VGPU_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define ARENA_ALIGN 256 // bytes; matches cudaMalloc's guarantee

struct arena_block; // internal

struct arena_stats {
    uint64_t cap_bytes;     // size of the region
    uint64_t in_use_bytes;  // sum of live allocations (after alignment)
    uint64_t peak_bytes;    // high-water mark of in_use_bytes
    uint64_t live_count;    // live allocations
    uint64_t total_allocs;  // allocations ever made
    uint64_t largest_free_bytes; // biggest single allocation that would fit now
};

typedef struct arena {
    char *base;               // start of the region (not dereferenced here)
    uint64_t cap_bytes;
    struct arena_block *blocks; // address-ordered list covering the region
    struct arena_stats stats;
} arena_t;

// Prepares `a` to hand out pieces of [base, base + cap_bytes). base must be
// ARENA_ALIGN-aligned. Returns 0, VGPU_EINVAL or VGPU_ENOMEM.
int arena_init(arena_t *a, void *base, uint64_t cap_bytes);

// Releases the bookkeeping (not the region). arena_destroy(NULL) is a no-op.
void arena_destroy(arena_t *a);

// Allocates `bytes` (rounded up to ARENA_ALIGN; 0 bytes gives a valid unique
// block of ARENA_ALIGN). Returns 0 and sets *out, or VGPU_EDEVMEM when the
// request does not fit (the cap is never exceeded), VGPU_ENOMEM on host OOM.
int arena_alloc(arena_t *a, uint64_t bytes, void **out);

// Returns a block to the arena, merging it with free neighbours. Freeing NULL
// is a no-op; freeing a pointer the arena did not hand out returns VGPU_EINVAL.
int arena_free(arena_t *a, void *ptr);

// Whether ptr lies inside the region (any byte of it).
int arena_contains(const arena_t *a, const void *ptr);

// A copy of the current statistics.
struct arena_stats arena_get_stats(const arena_t *a);

#endif
