// arena.c: first-fit sub-allocation with coalescing, bookkeeping on the host.
#include "arena.h"

#include <stdlib.h>

#include "status.h"

struct arena_block {
    uint64_t offset, bytes;
    int free;
    struct arena_block *next;
};

static uint64_t round_up_(uint64_t n) { return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

int arena_init(arena_t *a, void *base, uint64_t cap_bytes)
{
    *a = (arena_t){0};
    if ((uintptr_t)base % ARENA_ALIGN)
        return VGPU_EINVAL;
    cap_bytes = cap_bytes / ARENA_ALIGN * ARENA_ALIGN;
    a->base = base;
    a->cap_bytes = cap_bytes;
    a->stats.cap_bytes = cap_bytes;
    if (cap_bytes) {
        a->blocks = calloc(1, sizeof *a->blocks);
        if (!a->blocks)
            return VGPU_ENOMEM;
        *a->blocks = (struct arena_block){.offset = 0, .bytes = cap_bytes, .free = 1};
    }
    return 0;
}

void arena_destroy(arena_t *a)
{
    if (!a)
        return;
    for (struct arena_block *b = a->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->blocks = NULL;
}

int arena_alloc(arena_t *a, uint64_t bytes, void **out)
{
    *out = NULL;
    uint64_t need = round_up_(bytes ? bytes : 1);
    if (need < bytes) // overflow of a huge request
        return VGPU_EDEVMEM;
    struct arena_block *b = a->blocks;
    while (b && !(b->free && b->bytes >= need))
        b = b->next;
    if (!b)
        return VGPU_EDEVMEM;
    if (b->bytes > need) { // split: the tail stays free
        struct arena_block *rest = malloc(sizeof *rest);
        if (!rest)
            return VGPU_ENOMEM;
        *rest = (struct arena_block){b->offset + need, b->bytes - need, 1, b->next};
        b->bytes = need;
        b->next = rest;
    }
    b->free = 0;
    a->stats.in_use_bytes += need;
    if (a->stats.in_use_bytes > a->stats.peak_bytes)
        a->stats.peak_bytes = a->stats.in_use_bytes;
    a->stats.live_count++;
    a->stats.total_allocs++;
    *out = a->base + b->offset;
    return 0;
}

int arena_free(arena_t *a, void *ptr)
{
    if (!ptr)
        return 0;
    if (!arena_contains(a, ptr))
        return VGPU_EINVAL;
    uint64_t off = (uint64_t)((char *)ptr - a->base);
    struct arena_block *prev = NULL, *b = a->blocks;
    while (b && b->offset != off) {
        prev = b;
        b = b->next;
    }
    if (!b || b->free)
        return VGPU_EINVAL; // not a block start, or a double free
    b->free = 1;
    a->stats.in_use_bytes -= b->bytes;
    a->stats.live_count--;
    struct arena_block *next = b->next;
    if (next && next->free) { // merge with the following free block
        b->bytes += next->bytes;
        b->next = next->next;
        free(next);
    }
    if (prev && prev->free) { // and with the preceding one
        prev->bytes += b->bytes;
        prev->next = b->next;
        free(b);
    }
    return 0;
}

int arena_contains(const arena_t *a, const void *ptr)
{
    return a->base && (const char *)ptr >= a->base && (const char *)ptr < a->base + a->cap_bytes;
}

struct arena_stats arena_get_stats(const arena_t *a)
{
    struct arena_stats s = a->stats;
    s.largest_free_bytes = 0;
    for (const struct arena_block *b = a->blocks; b; b = b->next)
        if (b->free && b->bytes > s.largest_free_bytes)
            s.largest_free_bytes = b->bytes;
    return s;
}
