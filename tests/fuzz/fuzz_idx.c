// fuzz_idx.c: libFuzzer target for the IDX reader (plain or gzip). The input
// holds both files: a 2-byte little-endian length, the image file, then the
// label file (gzip is detected from the bytes, as for files on disk).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t images_bytes = (size_t)data[0] | (size_t)data[1] << 8;
    data += 2;
    size -= 2;
    if (images_bytes > size)
        images_bytes = size;
    char images_path[64], labels_path[64], err[512];
    int images_fd = fuzz_memfile(data, images_bytes, images_path, sizeof images_path);
    int labels_fd = fuzz_memfile(data + images_bytes, size - images_bytes, labels_path,
                                 sizeof labels_path);
    struct dataset ds;
    // A bound well under -rss_limit_mb, so a header claiming gigabytes
    // exercises the limit rather than the fuzzer's memory.
    int rc = dataset_load_idx(&ds, images_path, labels_path, 64u << 20, err, sizeof err);
    if (rc == 0) {
        // A dataset the reader accepts must keep its promises.
        if (ds.count <= 0 || ds.features != ds.rows * ds.cols || ds.classes != DATA_IDX_CLASSES)
            abort();
        for (long i = 0; i < ds.count; i++)
            if (ds.labels[i] < 0 || ds.labels[i] >= ds.classes)
                abort();
        for (long i = 0; i < ds.count * ds.features; i++)
            if (!(dataset_value(&ds, (size_t)i) >= 0.0f && dataset_value(&ds, (size_t)i) <= 1.0f))
                abort();
        dataset_free(&ds);
    } else if (ds.images || ds.codes || ds.labels || ds.count) {
        abort(); // documented: left zeroed on error
    }
    close(images_fd);
    close(labels_fd);
    return 0;
}
