// fuzz_checkpoint.c: libFuzzer target for the checkpoint reader. Random bytes
// rarely carry valid CRCs, so when the input's last byte is odd the target
// first writes correct header and payload CRCs into it: that takes the fuzzer
// past the CRC checks to the size and consistency checks behind them.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "fuzz_util.h"
#include "util.h"

#define HEADER_BYTES 192 // as in checkpoint.c
#define PAYLOAD_CRC_AT 184
#define HEADER_CRC_AT 188

static void put_u32_(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes)
        return 0;
    memcpy(bytes, data, size);
    if (size > HEADER_BYTES && (bytes[size - 1] & 1)) {
        put_u32_(bytes + PAYLOAD_CRC_AT, util_crc32(0, bytes + HEADER_BYTES, size - HEADER_BYTES));
        put_u32_(bytes + HEADER_CRC_AT, util_crc32(0, bytes, HEADER_CRC_AT));
    }
    char path[64], err[512];
    int fd = fuzz_memfile(bytes, size, path, sizeof path);
    struct ckpt_meta meta;
    float *params, *opt_state;
    int rc = checkpoint_load(path, &meta, &params, &opt_state, err, sizeof err);
    if (rc == 0) {
        if (meta.n_dims < 1 || meta.n_dims > CKPT_MAX_LAYERS || meta.param_count < 0 ||
            meta.opt_state_count < 0 || (meta.param_count > 0) != (params != NULL) ||
            (meta.opt_state_count > 0) != (opt_state != NULL))
            abort();
        // The compatibility check must cope with whatever the file says.
        (void)checkpoint_check_compatible(&meta, &meta, err, sizeof err);
    } else if (params || opt_state) {
        abort(); // documented: outputs NULL on error
    }
    free(params);
    free(opt_state);
    close(fd);
    free(bytes);
    return 0;
}
