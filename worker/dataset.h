// dataset.h: datasets in host memory: MNIST-format IDX files (plain or gzip),
// a seeded synthetic stand-in and byte sequences of text, plus the usual
// preprocessing.
#ifndef VGPU_DATASET_H
#define VGPU_DATASET_H

#include <stddef.h>
#include <stdint.h>

#define DATA_MAX_SIDE 4096 // pixels; larger rows/cols in an IDX header are refused
#define DATA_IDX_CLASSES 10 // classes of every IDX dataset this loader reads (MNIST, Fashion-MNIST)

// A sample (a row) is an image or a sequence of tokens. Values are held one
// of three ways: as floats (`images`; the synthetic set), as 8-bit codes
// with a 256-entry table (`codes`, `lut`; IDX files), a quarter of the
// memory: value k is lut[codes[k]], or as 8-bit token ids (`codes` with
// `tokens` set: a sequence's bytes, read as they are). Read values through
// dataset_value / dataset_gather, or move the codes themselves
// (dataset_gather_codes, dataset_gather_tokens) and decode them where they
// are used. A sample has one label (its class) or one a position (a
// sequence's next tokens): label_width.
struct dataset {
    long count;       // samples
    int rows, cols;   // image size, pixels (28 x 28 for MNIST; 1 x features for synthetic and
                      // sequences)
    int features;     // rows * cols, values per sample (a sequence: its context, tokens)
    int classes;      // label range is [0, classes) (token sets: the token range too)
    float *images;    // [count, features] values, host memory, owned; NULL when coded
    uint8_t *codes;   // [count, features] pixel codes or tokens, owned; NULL when `images` holds
                      // the values
    int tokens;       // 1: codes are token ids (no table; lut[b] = b)
    int label_width;  // labels a sample: 1, or features (one a position); 0 reads as 1
    float lut[256];   // code -> value: pixel / 255 in [0, 1], standardised if asked
    int32_t *labels;  // [count, label_width], owned
};

// Labels a sample: 1 (a class) or features (one a position).
static inline int dataset_label_width(const struct dataset *ds)
{
    return ds->label_width > 0 ? ds->label_width : 1;
}

// Value k of the flat [count, features] array.
static inline float dataset_value(const struct dataset *ds, size_t k)
{
    return ds->codes ? ds->lut[ds->codes[k]] : ds->images[k];
}

// Writes the values of samples indices[0..n) into out[n, features], in order.
void dataset_gather(const struct dataset *ds, const uint32_t *indices, long n, float *out);

// Coded sets only (pixel codes or tokens): writes the codes of samples
// indices[0..n) into out[n, features], in order.
void dataset_gather_codes(const struct dataset *ds, const uint32_t *indices, long n, uint8_t *out);

// Token sets only: the tokens of samples indices[0..n), widened, into
// out[n, features], in order.
void dataset_gather_tokens(const struct dataset *ds, const uint32_t *indices, long n, int32_t *out);

// The labels of samples indices[0..n) into out[n, label_width], in order.
void dataset_gather_labels(const struct dataset *ds, const uint32_t *indices, long n, int32_t *out);

// Reads an IDX3 image file and an IDX1 label file (each plain or gzip) into
// *ds as codes, pixels scaled to [0, 1] by the table, classes = DATA_IDX_CLASSES. *ds is overwritten
// (not freed first) and is left zeroed on error.
// Checks, both headers before any payload: magic (0x00000803 images,
// 0x00000801 labels), 0 < rows, cols <= DATA_MAX_SIDE, count > 0, equal
// counts, and what the headers claim together (count x rows x cols pixel
// bytes + count label bytes) at most max_bytes (0 = no limit); then data size
// exactly as the header says (short = truncated, longer = trailing data),
// labels in [0, classes). Memory grows with the data actually read (from
// 16 MiB, doubling): a header that claims more than its file holds costs at
// most about twice what the file holds, not what it claims.
// Returns 0; -errno when a file cannot be opened; VGPU_EFORMAT for bad
// contents (corrupt gzip and claims over max_bytes included); VGPU_ENOMEM.
// On error writes a message naming the file and the fault into err (may be
// NULL when err_bytes is 0).
int dataset_load_idx(struct dataset *ds, const char *images_path, const char *labels_path,
                     uint64_t max_bytes, char *err, size_t err_bytes);

// Loads train (train-*-ubyte) and test (t10k-*-ubyte) from dir, each file plain
// or with ".gz" (the plain one wins when both exist). All four headers are
// read and checked before any payload: each pair as dataset_load_idx does,
// test images the same size as train images, and the four claims together
// at most max_bytes (0 = no limit; vgpu_train passes data.max_bytes).
// Returns 0; -ENOENT with a message listing every missing file; otherwise as
// dataset_load_idx. On error both sets are left zeroed (nothing to free).
int dataset_load_dir(struct dataset *train, struct dataset *test, const char *dir,
                     uint64_t max_bytes, char *err, size_t err_bytes);
// The same, with the limit's name for the message (dataset_load_dir: "data.max_bytes").
int dataset_load_dir_bounded(struct dataset *train, struct dataset *test, const char *dir,
                             uint64_t max_bytes, const char *limit_name, char *err,
                             size_t err_bytes);

// A learnable synthetic set: `classes` Gaussian clusters in `features`
// dimensions. Class means come from `seed` alone (so train and test share
// them); sample i of split s (0 = train, 1 = test) is a pure function of
// (seed, s, i): its label is uniform over the classes and its values are
// mean + DATA_SYNTH_NOISE * (a near-Gaussian made of IEEE additions only, so
// the bits are the same on every machine), clamped to [0, 1] like pixels. So
// the first n samples do not depend on count. rows = 1, cols = features.
// Returns 0, VGPU_EINVAL (count < 1, features < 1, classes < 2, split not 0/1)
// or VGPU_ENOMEM; *ds is left zeroed on error.
#define DATA_SYNTH_NOISE 0.25f
int dataset_make_synthetic(struct dataset *ds, long count, int features, int classes,
                           uint64_t seed, int split);

// Sequences of `context` bytes of text[bytes] with next-byte labels: sample
// i is text[i * context, (i + 1) * context) and its labels the bytes one
// further on, so consecutive samples do not overlap and the last byte is
// only a label. A token set: classes 256, label_width = features = context.
// Returns 0, VGPU_EINVAL (context < 1, or bytes too few for one sample) or
// VGPU_ENOMEM; *ds is left zeroed on error.
int dataset_make_sequences(struct dataset *ds, const uint8_t *text, size_t bytes, int context);

// ---- text (dataset_text.c) ----

// Memory a byte of text takes once made into sequences: the text itself,
// its token and its int32 label.
#define DATA_TEXT_COST 6

// Reads the text at path: a regular file, or a directory whose regular
// files are read in name order (byte order, not the locale's) and
// concatenated; in a directory, names ending ".dat", symbolic links and
// anything else not a regular file are skipped (the layout of Debian's
// `fortunes`: text files, .dat indexes, .u8 links). At most max_bytes /
// DATA_TEXT_COST bytes of text (max_bytes 0 = no limit; limit_name names the
// limit in the message), checked on the files' sizes before any is read.
// Returns 0 with *text (malloc'd, the caller's) and *bytes > 0; -errno when
// path or a file cannot be opened or read (-ENOENT: path is missing);
// VGPU_EFORMAT for no text (an empty file; a directory without a non-empty
// text file) or too much; VGPU_ENOMEM. On error *text is NULL and err names
// the path and the fault.
int dataset_read_text(const char *path, uint64_t max_bytes, const char *limit_name, uint8_t **text,
                      size_t *bytes, char *err, size_t err_bytes);

// Splits text[bytes] into training and validation sequences of `context`
// bytes (dataset_make_sequences). The last floor(bytes * val_fraction)
// bytes are validation's share; the training part is the first k * context
// + 1 bytes, the most that leave validation its share (k whole sequences,
// its last byte only a label), and validation the rest, so the parts share
// no byte. E.g. 1000 bytes, context 8, fraction 0.1: training 897 bytes (112
// sequences), validation 103 (12). origin names the text in messages.
// Returns 0; VGPU_EINVAL (context < 1, fraction outside (0, 1));
// VGPU_EFORMAT when either part has fewer than context + 1 bytes (the
// message names the part and what it needs); VGPU_ENOMEM. Both sets are
// left zeroed on error.
int dataset_split_text(struct dataset *train, struct dataset *test, const uint8_t *text,
                       size_t bytes, int context, double val_fraction, const char *origin,
                       char *err, size_t err_bytes);

// dataset_read_text, then dataset_split_text (the text is freed after).
int dataset_load_text(struct dataset *train, struct dataset *test, const char *path, int context,
                      double val_fraction, uint64_t max_bytes, const char *limit_name, char *err,
                      size_t err_bytes);

// Mean and population standard deviation over every value of ds (accumulated
// in double, in index order, so the result is deterministic).
void dataset_pixel_stats(const struct dataset *ds, double *mean, double *std);

// Standardises train and test with the TRAIN set's single scalar mean and std
// (the usual MNIST preprocessing): x = (x - mean) / std. A constant train set
// (std 0) is only centred. test may be NULL. Token sets are left as they are.
void dataset_standardize(struct dataset *train, struct dataset *test);

// Keeps only the first `count` samples; a no-op when count <= 0 or >= ds->count.
void dataset_truncate(struct dataset *ds, long count);

// Frees the arrays and zeroes *ds. NULL-safe and idempotent.
void dataset_free(struct dataset *ds);

#endif
