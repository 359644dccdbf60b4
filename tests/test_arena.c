// test_arena.c: the capped sub-allocator: alignment, the cap, coalescing,
// fragmentation, statistics and misuse. The region is never dereferenced, so
// any ARENA_ALIGN-aligned address serves as its base.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "arena.h"
#include "status.h"
#include "test_util.h"

#define BASE ((void *)0x100000)
#define CAP (64 * ARENA_ALIGN) // 16 KiB

static int setup_arena(void **state)
{
    arena_t *a = malloc(sizeof *a);
    if (!a || arena_init(a, BASE, CAP))
        return -1;
    *state = a;
    return 0;
}

static int teardown_arena(void **state)
{
    arena_destroy(*state);
    free(*state);
    return 0;
}

static uintptr_t off_(const arena_t *a, const void *p) { return (uintptr_t)((const char *)p - a->base); }

// Checks the arena's invariants: stats agree with a recount of the caller's
// live set, nothing overlaps, and everything lies within the cap.
static void check_live_(const arena_t *a, void *const *ptrs, const uint64_t *sizes, size_t n)
{
    uint64_t sum = 0, live = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ptrs[i])
            continue;
        live++;
        uint64_t rounded = (sizes[i] + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        if (rounded == 0)
            rounded = ARENA_ALIGN;
        sum += rounded;
        assert_int_equal(off_(a, ptrs[i]) % ARENA_ALIGN, 0);
        assert_true(off_(a, ptrs[i]) + rounded <= a->cap_bytes);
        for (size_t j = 0; j < i; j++) {
            if (!ptrs[j])
                continue;
            uint64_t rj = sizes[j] ? (sizes[j] + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN : ARENA_ALIGN;
            uintptr_t oi = off_(a, ptrs[i]), oj = off_(a, ptrs[j]);
            if (oi < oj + rj && oj < oi + rounded)
                fail_msg("blocks %zu [%lu,+%lu) and %zu [%lu,+%lu) overlap", i, (unsigned long)oi,
                         (unsigned long)rounded, j, (unsigned long)oj, (unsigned long)rj);
        }
    }
    struct arena_stats s = arena_get_stats(a);
    assert_int_equal(s.in_use_bytes, sum);
    assert_int_equal(s.live_count, live);
    assert_true(s.in_use_bytes <= s.cap_bytes);
    assert_true(s.peak_bytes >= s.in_use_bytes);
    assert_true(s.largest_free_bytes <= s.cap_bytes - s.in_use_bytes);
}

static void test_init(void **state)
{
    (void)state;
    arena_t a;
    assert_int_equal(arena_init(&a, (void *)0x100010, CAP), VGPU_EINVAL); // misaligned base
    arena_destroy(&a);
    // The cap is rounded down to the alignment.
    assert_int_equal(arena_init(&a, BASE, CAP + 100), 0);
    struct arena_stats s = arena_get_stats(&a);
    assert_int_equal(s.cap_bytes, CAP);
    assert_int_equal(s.in_use_bytes, 0);
    assert_int_equal(s.peak_bytes, 0);
    assert_int_equal(s.live_count, 0);
    assert_int_equal(s.total_allocs, 0);
    assert_int_equal(s.largest_free_bytes, CAP);
    arena_destroy(&a);
    // A zero cap holds nothing.
    assert_int_equal(arena_init(&a, BASE, 0), 0);
    void *p = (void *)1;
    assert_int_equal(arena_alloc(&a, 1, &p), VGPU_EDEVMEM);
    assert_null(p);
    arena_destroy(&a);
    arena_destroy(NULL);
}

static void test_alignment_and_rounding(void **state)
{
    arena_t *a = *state;
    static const uint64_t sizes[] = {1, 255, 256, 257, 0, 1000, 512, 3};
    void *p[TEST_ARRAY_LEN(sizes)] = {0};
    uint64_t want_in_use = 0;
    for (size_t i = 0; i < TEST_ARRAY_LEN(sizes); i++) {
        assert_int_equal(arena_alloc(a, sizes[i], &p[i]), 0);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % ARENA_ALIGN, 0);
        assert_true(arena_contains(a, p[i]));
        uint64_t r = sizes[i] ? (sizes[i] + 255) / 256 * 256 : 256;
        want_in_use += r;
        assert_int_equal(arena_get_stats(a).in_use_bytes, want_in_use);
    }
    check_live_(a, p, sizes, TEST_ARRAY_LEN(sizes));
    // Zero-byte blocks are unique and distinct from everything else.
    void *z2;
    assert_int_equal(arena_alloc(a, 0, &z2), 0);
    assert_ptr_not_equal(z2, p[4]);
    assert_int_equal(arena_free(a, z2), 0);
}

static void test_contains(void **state)
{
    arena_t *a = *state;
    char *base = BASE;
    assert_true(arena_contains(a, base));
    assert_true(arena_contains(a, base + CAP - 1));
    assert_false(arena_contains(a, base + CAP));
    assert_false(arena_contains(a, base - 1));
    assert_false(arena_contains(a, NULL));
}

// Filling the arena exactly works; one byte more never does.
static void test_cap_enforced(void **state)
{
    arena_t *a = *state;
    void *p[64], *extra = (void *)1;
    for (int i = 0; i < 64; i++)
        assert_int_equal(arena_alloc(a, ARENA_ALIGN, &p[i]), 0);
    assert_int_equal(arena_get_stats(a).in_use_bytes, CAP);
    assert_int_equal(arena_get_stats(a).largest_free_bytes, 0);
    assert_int_equal(arena_alloc(a, 1, &extra), VGPU_EDEVMEM);
    assert_null(extra);
    assert_int_equal(arena_alloc(a, 0, &extra), VGPU_EDEVMEM);
    // A failed request changes no statistic.
    struct arena_stats s = arena_get_stats(a);
    assert_int_equal(s.total_allocs, 64);
    assert_int_equal(s.live_count, 64);
    for (int i = 0; i < 64; i++)
        assert_int_equal(arena_free(a, p[i]), 0);

    // One block of the whole cap fits; cap + 1 does not.
    void *big;
    assert_int_equal(arena_alloc(a, CAP + 1, &big), VGPU_EDEVMEM);
    assert_int_equal(arena_alloc(a, CAP, &big), 0);
    assert_ptr_equal(big, BASE);
    assert_int_equal(arena_free(a, big), 0);
}

static void test_huge_request(void **state)
{
    arena_t *a = *state;
    static const uint64_t huge[] = {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 255,
                                    UINT64_MAX - 256, (uint64_t)1 << 63, CAP * 2};
    for (size_t i = 0; i < TEST_ARRAY_LEN(huge); i++) {
        void *p = (void *)1;
        int rc = arena_alloc(a, huge[i], &p);
        if (rc != VGPU_EDEVMEM)
            fail_msg("arena_alloc(%llu) gave %d, want VGPU_EDEVMEM", (unsigned long long)huge[i], rc);
        assert_null(p);
    }
    struct arena_stats s = arena_get_stats(a);
    assert_int_equal(s.in_use_bytes, 0);
    assert_int_equal(s.total_allocs, 0);
    assert_int_equal(s.largest_free_bytes, CAP);
}

// Free the middle block, then its neighbours (in both orders): the free
// space must merge back into one block that holds the whole cap.
static void test_coalescing(void **state)
{
    static const int orders[][3] = {{1, 0, 2}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}, {0, 1, 2}, {2, 1, 0}};
    arena_t *a = *state;
    for (size_t o = 0; o < TEST_ARRAY_LEN(orders); o++) {
        void *p[3];
        const uint64_t third = CAP / 4; // leave a free tail too
        for (int i = 0; i < 3; i++)
            assert_int_equal(arena_alloc(a, third, &p[i]), 0);
        for (int i = 0; i < 3; i++)
            assert_int_equal(arena_free(a, p[orders[o][i]]), 0);
        struct arena_stats s = arena_get_stats(a);
        if (s.largest_free_bytes != CAP)
            fail_msg("free order %d,%d,%d: largest free %llu, want %d", orders[o][0], orders[o][1],
                     orders[o][2], (unsigned long long)s.largest_free_bytes, CAP);
        void *whole;
        assert_int_equal(arena_alloc(a, CAP, &whole), 0);
        assert_int_equal(arena_free(a, whole), 0);
    }
}

// Freeing every other block leaves plenty free but no big hole.
static void test_fragmentation(void **state)
{
    arena_t *a = *state;
    void *p[64];
    for (int i = 0; i < 64; i++)
        assert_int_equal(arena_alloc(a, ARENA_ALIGN, &p[i]), 0);
    for (int i = 0; i < 64; i += 2)
        assert_int_equal(arena_free(a, p[i]), 0);
    struct arena_stats s = arena_get_stats(a);
    assert_int_equal(s.in_use_bytes, CAP / 2);
    assert_int_equal(s.largest_free_bytes, ARENA_ALIGN);
    assert_true(s.largest_free_bytes < s.cap_bytes - s.in_use_bytes);
    void *two;
    assert_int_equal(arena_alloc(a, 2 * ARENA_ALIGN, &two), VGPU_EDEVMEM);
    // Freeing one more block joins three holes into one.
    assert_int_equal(arena_free(a, p[1]), 0);
    assert_int_equal(arena_get_stats(a).largest_free_bytes, 3 * ARENA_ALIGN);
    assert_int_equal(arena_alloc(a, 3 * ARENA_ALIGN, &two), 0);
    assert_ptr_equal(two, p[0]); // first fit: the lowest hole that fits
    assert_int_equal(arena_free(a, two), 0);
    for (int i = 3; i < 64; i += 2)
        assert_int_equal(arena_free(a, p[i]), 0);
    assert_int_equal(arena_get_stats(a).largest_free_bytes, CAP);
}

static void test_stats(void **state)
{
    arena_t *a = *state;
    void *x, *y, *z;
    assert_int_equal(arena_alloc(a, 1000, &x), 0); // 1024
    assert_int_equal(arena_alloc(a, 256, &y), 0);  // 256
    struct arena_stats s = arena_get_stats(a);
    assert_int_equal(s.in_use_bytes, 1280);
    assert_int_equal(s.peak_bytes, 1280);
    assert_int_equal(s.live_count, 2);
    assert_int_equal(s.total_allocs, 2);
    assert_int_equal(s.largest_free_bytes, CAP - 1280);
    assert_int_equal(arena_free(a, x), 0);
    s = arena_get_stats(a);
    assert_int_equal(s.in_use_bytes, 256);
    assert_int_equal(s.peak_bytes, 1280); // the high-water mark stays
    assert_int_equal(s.live_count, 1);
    assert_int_equal(s.total_allocs, 2);
    assert_int_equal(arena_alloc(a, 512, &z), 0);
    s = arena_get_stats(a);
    assert_int_equal(s.in_use_bytes, 768);
    assert_int_equal(s.peak_bytes, 1280);
    assert_int_equal(s.total_allocs, 3);
    assert_int_equal(arena_free(a, y), 0);
    assert_int_equal(arena_free(a, z), 0);
    s = arena_get_stats(a);
    assert_int_equal(s.in_use_bytes, 0);
    assert_int_equal(s.live_count, 0);
    assert_int_equal(s.largest_free_bytes, CAP);
    assert_int_equal(s.cap_bytes, CAP);
}

static void test_misuse(void **state)
{
    arena_t *a = *state;
    void *p, *q;
    assert_int_equal(arena_alloc(a, 1024, &p), 0);
    assert_int_equal(arena_alloc(a, 256, &q), 0);
    struct arena_stats before = arena_get_stats(a);

    assert_int_equal(arena_free(a, NULL), 0); // no-op
    assert_int_equal(arena_free(a, (char *)p + 256), VGPU_EINVAL); // inside a block
    assert_int_equal(arena_free(a, (char *)p + 1), VGPU_EINVAL);
    int on_stack;
    assert_int_equal(arena_free(a, &on_stack), VGPU_EINVAL); // foreign pointer
    assert_int_equal(arena_free(a, (char *)BASE + CAP), VGPU_EINVAL); // one past the end
    assert_int_equal(arena_free(a, (char *)BASE + CAP - ARENA_ALIGN), VGPU_EINVAL); // free tail
    struct arena_stats after = arena_get_stats(a);
    assert_memory_equal(&before, &after, sizeof before);

    assert_int_equal(arena_free(a, p), 0);
    assert_int_equal(arena_free(a, p), VGPU_EINVAL); // double free
    assert_int_equal(arena_get_stats(a).live_count, 1);
    assert_int_equal(arena_free(a, q), 0);
    assert_int_equal(arena_free(a, q), VGPU_EINVAL); // double free after merging
    assert_int_equal(arena_get_stats(a).in_use_bytes, 0);
    assert_int_equal(arena_get_stats(a).largest_free_bytes, CAP);
}

// A long random sequence of allocations and frees keeps every invariant.
static void test_random_churn(void **state)
{
    arena_t *a = *state;
    enum { N = 24 };
    void *p[N] = {0};
    uint64_t sizes[N] = {0};
    uint64_t seed = 12345, peak = 0;
    for (int step = 0; step < 3000; step++) {
        int i = (int)(test_rand_u64(&seed) % N);
        if (p[i]) {
            assert_int_equal(arena_free(a, p[i]), 0);
            p[i] = NULL;
        } else {
            uint64_t bytes = test_rand_u64(&seed) % (CAP / 6);
            struct arena_stats s = arena_get_stats(a);
            uint64_t need = bytes ? (bytes + 255) / 256 * 256 : 256;
            int rc = arena_alloc(a, bytes, &p[i]);
            // A request fails exactly when no free block is large enough.
            if (need <= s.largest_free_bytes)
                assert_int_equal(rc, 0);
            else
                assert_int_equal(rc, VGPU_EDEVMEM);
            sizes[i] = bytes;
        }
        check_live_(a, p, sizes, N);
        struct arena_stats s = arena_get_stats(a);
        peak = s.in_use_bytes > peak ? s.in_use_bytes : peak;
        assert_int_equal(s.peak_bytes, peak);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(arena_free(a, p[i]), 0);
    assert_int_equal(arena_get_stats(a).largest_free_bytes, CAP);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),
        cmocka_unit_test_setup_teardown(test_alignment_and_rounding, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_contains, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_cap_enforced, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_huge_request, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_coalescing, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_fragmentation, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_stats, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_misuse, setup_arena, teardown_arena),
        cmocka_unit_test_setup_teardown(test_random_churn, setup_arena, teardown_arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
