// data.c: nccl_api_test's data for the collectives that move bytes: per-rank
// patterns a receiver can rebuild, and the byte-exact check of a result.
#include "nccl_test.h"
#include "ref.h"

#include <stdlib.h>

// A block's bytes: a function of (rank, tag, byte) the receiver can rebuild.
void nt_pattern(unsigned char *buf, size_t bytes, int rank, unsigned tag)
{
    for (size_t i = 0; i < bytes; i++)
        buf[i] = (unsigned char)(ref_hash((uint32_t)rank, (uint32_t)i, tag) >> 11);
    // (never all NT_SENTINEL: the hash varies with i)
}

// Host copy of the pattern, or NULL after a recorded failure.
unsigned char *nt_pattern_new(struct nt_ctx *ctx, size_t bytes, int rank, unsigned tag)
{
    unsigned char *buf = malloc(bytes + 1);
    if (!buf) {
        nt_fail(ctx, __FILE__, __LINE__, "malloc(%zu) failed", bytes);
        return NULL;
    }
    nt_pattern(buf, bytes, rank, tag);
    return buf;
}

// dev holds want (bytes long), else a soft failure naming what and the first
// wrong byte. -1 only when the buffer cannot be read.
int nt_expect_bytes(struct nt_ctx *ctx, const void *dev, const unsigned char *want, size_t bytes,
                    const char *what)
{
    unsigned char *got = malloc(bytes + 1);
    NT_REQUIRE(ctx, got, "malloc(%zu) failed", bytes);
    if (nt_dev_read(ctx, got, dev, bytes) != 0) {
        free(got);
        return -1;
    }
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < bytes; i++)
        if (got[i] != want[i] && wrong++ == 0)
            first = i;
    NT_EXPECT(ctx, wrong == 0,
              "%s: %zu of %zu bytes wrong, first at byte %zu: got 0x%02x, want 0x%02x", what, wrong,
              bytes, first, got[first], want[first]);
    free(got);
    return 0;
}
