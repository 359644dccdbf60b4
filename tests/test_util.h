// test_util.h: helpers shared by the unit tests (header-only, static): array
// comparison against a reference, substring checks, test data, and (in a
// test that includes device.h before it) a device fixture.
// Include after <cmocka.h> (and its prerequisites).
#ifndef VGPU_TEST_UTIL_H
#define VGPU_TEST_UTIL_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

// Counts elements where |got - want| > atol + rtol * |want| (NaN or Inf in
// either counts as a mismatch unless both are the same non-finite value),
// prints the first few mismatches and the max abs/rel difference.
// Returns the number of mismatches.
static inline size_t test_count_mismatches_d(const char *what, const double *got, const double *want,
                                             size_t n, double atol, double rtol)
{
    size_t bad = 0, worst_i = 0;
    double max_abs = 0, max_rel = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        int ok;
        double diff;
        if (!isfinite(g) || !isfinite(w)) {
            ok = (isnan(g) && isnan(w)) || (g == w);
            diff = ok ? 0 : INFINITY;
        } else {
            diff = fabs(g - w);
            ok = diff <= atol + rtol * fabs(w);
        }
        if (diff > max_abs) {
            max_abs = diff;
            worst_i = i;
        }
        if (isfinite(diff) && w != 0 && diff / fabs(w) > max_rel)
            max_rel = diff / fabs(w);
        if (!ok) {
            if (bad < 8)
                fprintf(stderr, "  %s[%zu]: got %.9g, want %.9g (diff %.3g, allowed %.3g)\n",
                        what ? what : "x", i, g, w, diff, atol + rtol * fabs(w));
            bad++;
        }
    }
    if (bad)
        fprintf(stderr, "  %s: %zu of %zu elements differ; max abs diff %.3g at [%zu], max rel diff %.3g\n",
                what ? what : "x", bad, n, max_abs, worst_i, max_rel);
    return bad;
}

static inline size_t test_count_mismatches_f(const char *what, const float *got, const double *want,
                                             size_t n, double atol, double rtol)
{
    double buf[256];
    size_t bad = 0;
    // Convert in chunks so that big arrays need no allocation.
    for (size_t off = 0; off < n; off += TEST_ARRAY_LEN(buf)) {
        size_t m = n - off < TEST_ARRAY_LEN(buf) ? n - off : TEST_ARRAY_LEN(buf);
        for (size_t i = 0; i < m; i++)
            buf[i] = got[off + i];
        char name[96];
        snprintf(name, sizeof name, "%s(+%zu)", what ? what : "x", off);
        bad += test_count_mismatches_d(off ? name : what, buf, want + off, m, atol, rtol);
    }
    return bad;
}

// assert_allclose(got, want, n, atol, rtol): got is float* or double*, want
// is double* (the reference is computed in double).
#define assert_allclose(got, want, n, atol, rtol)                                                   \
    assert_int_equal(_Generic((got), float *: test_count_mismatches_f,                             \
                              const float *: test_count_mismatches_f,                              \
                              double *: test_count_mismatches_d,                                   \
                              const double *: test_count_mismatches_d)(#got, (got), (want), (n),   \
                                                                       (atol), (rtol)),            \
                     0)

// Asserts that `haystack` contains `needle`, printing both if not.
#define assert_contains(haystack, needle)                                                          \
    do {                                                                                           \
        const char *h_ = (haystack), *n_ = (needle);                                               \
        if (!h_ || !strstr(h_, n_)) {                                                              \
            fprintf(stderr, "  expected \"%s\" to contain \"%s\"\n", h_ ? h_ : "(null)", n_);       \
            fail_msg("%s does not contain \"%s\"", #haystack, n_);                                 \
        }                                                                                          \
    } while (0)

#define assert_not_contains(haystack, needle)                                                      \
    do {                                                                                           \
        const char *h_ = (haystack), *n_ = (needle);                                               \
        if (h_ && strstr(h_, n_)) {                                                                \
            fprintf(stderr, "  expected \"%s\" not to contain \"%s\"\n", h_, n_);                   \
            fail_msg("%s contains \"%s\"", #haystack, n_);                                         \
        }                                                                                          \
    } while (0)

// A small deterministic generator for test data (xorshift64*), so that test
// inputs do not depend on the code under test.
static inline uint64_t test_rand_u64(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

// Uniform in [lo, hi).
static inline double test_rand_uniform(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * ((double)(test_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0));
}

static inline void test_fill_uniform(float *x, size_t n, uint64_t *s, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)test_rand_uniform(s, lo, hi);
}

#ifdef VGPU_DEVICE_H
// ---- the device fixture (tests that include device.h) ----

// Opens the first device of `kind` with a cap of cap_bytes as a cmocka
// fixture's *state; -1 (the test fails in its set-up) when none opens.
static inline int test_device_setup(void **state, enum device_kind kind, uint64_t cap_bytes)
{
    struct device_info infos[8];
    int count = 0;
    if (device_discover(kind, infos, 8, &count, NULL, 0) || count < 1)
        return -1;
    device_t *dev = calloc(1, sizeof *dev);
    if (!dev || device_open(dev, &infos[0], 0, "testhost", cap_bytes, 1)) {
        free(dev);
        return -1;
    }
    *state = dev;
    return 0;
}

// Closes and frees test_device_setup's device.
static inline int test_device_teardown(void **state)
{
    device_close(*state);
    free(*state);
    return 0;
}
#endif

#endif
