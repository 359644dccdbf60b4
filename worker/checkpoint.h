// checkpoint.h: atomic, validated training checkpoints (parameters, optimizer
// state and the position of the run) in an explicit little-endian format.
// The file (its format, write, read, fit to a job) is checkpoint.c; the
// directory that holds them (names, listing, pruning, a run's claim on it)
// is checkpoint_dir.c.
#ifndef VGPU_CHECKPOINT_H
#define VGPU_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define CKPT_MAX_LAYERS 18 // layer widths a checkpoint can describe
#define CKPT_VERSION 2u    // format version this build writes (it reads 1 and 2)

// What a checkpoint says about the run; generic over the model.
struct ckpt_meta {
    uint32_t version;         // format version: set by the writer, checked by the reader
    int32_t n_dims;           // layer widths in dims, e.g. 4 for 784-256-128-10
    int32_t dims[CKPT_MAX_LAYERS]; // layer widths, neurons
    char optimizer[16];       // "sgd" | "adam" | "adamw", NUL-terminated
    int64_t param_count;      // floats in params
    int64_t opt_state_count;  // floats in the optimizer state (0 allowed)
    int64_t step;             // optimizer steps done
    int64_t epoch;            // current epoch
    int64_t step_in_epoch;    // batches of this epoch done
    uint64_t seed;            // train.seed
    int64_t global_batch;     // train.batch_size, samples (resume must keep it)
    int32_t nranks;           // ranks that wrote it (informational; resume may differ)
    int64_t total_steps;      // steps the writing run was set to take: its learning-rate
                              // schedule's horizon (0 = not recorded: version 1)
};

// ---- the file (checkpoint.c) ----

// Writes params[param_count] and opt_state[opt_state_count] with *meta to
// path, atomically: a new "<path>.tmp.XXXXXX" (mkostemp: O_EXCL, mode 0600,
// so nothing planted there is followed) is written, fsync'ed and renamed over
// path (which replaces a symlink at path rather than following it), then the
// directory is fsync'ed. The checkpoint is a regular file of mode 0600. On
// any failure the temporary file is removed and an existing file at path is
// left as it was.
// meta->version is ignored (CKPT_VERSION is written). opt_state may be NULL
// when opt_state_count is 0.
// Returns 0; VGPU_EINVAL for bad meta (n_dims outside [1, CKPT_MAX_LAYERS],
// negative counts, unterminated optimizer name, NULL data with a count);
// -errno from the file system. Writes a message naming the file into err.
int checkpoint_save(const char *path, const struct ckpt_meta *meta, const float *params,
                    const float *opt_state, char *err, size_t err_bytes);

// Reads path and checks magic, version, header CRC, section sizes against the
// file size (short = truncated, long = trailing data), the payload CRC, and
// that it means something: a position a run can be at (no negative count,
// epoch and batch <= step <= 10^12, nranks >= 1) and finite parameters and
// optimizer state.
// On success fills *meta and sets *params and *opt_state to malloc'ed arrays
// the caller frees with free() (NULL when the count is 0). Returns 0; -errno
// when the file cannot be opened or read; VGPU_EFORMAT for a bad file;
// VGPU_ENOMEM. On error the outputs are zeroed / NULL and err names the file
// and what is wrong.
int checkpoint_load(const char *path, struct ckpt_meta *meta, float **params, float **opt_state,
                    char *err, size_t err_bytes);

// Whether a checkpoint (have) fits the configured job (want): same layer
// widths, optimizer, global batch and seed; also the same param_count and
// opt_state_count when want->param_count > 0 (the caller knows them). The
// position fields and nranks are not compared. Returns 0, or
// VGPU_ECONFIG with every difference in err, e.g. "checkpoint model
// 784-256-10 does not match configured 784-256-128-10".
int checkpoint_check_compatible(const struct ckpt_meta *have, const struct ckpt_meta *want,
                                char *err, size_t err_bytes);

// ---- the directory (checkpoint_dir.c) ----

// Writes "<dir>/ckpt-<step, 10 digits>.bin" into buf. Returns 0, or
// VGPU_EINVAL when step < 0 or buf is too small.
int checkpoint_path(const char *dir, int64_t step, char *buf, size_t buf_bytes);

// Creates dir and its missing parents (as mkdir -p, mode 0755) and checks
// that it is a directory this process can write into. Returns 0, or -errno /
// VGPU_EINVAL (empty or over-long name) with a message naming the path in err.
int checkpoint_make_dir(const char *dir, char *err, size_t err_bytes);

// The checkpoints in dir (names as made by checkpoint_path), newest first:
// *steps is a malloc'ed array of *count steps (free() it). Returns 0 or
// -errno (dir cannot be read) / VGPU_ENOMEM.
int checkpoint_list(const char *dir, int64_t **steps, int *count);

// Removes every checkpoint in dir but the newest `keep` (>= 1). Returns how
// many it removed, or a negative status.
int checkpoint_prune(const char *dir, int keep);

// Claims dir for this run: creates it (checkpoint_make_dir), refuses a
// directory every user may write (VGPU_ECONFIG: anyone could plant the
// checkpoint --resume DIR picks), takes an exclusive lock on a file in it
// (VGPU_ECONFIG when another running job holds it, naming its pid), and then
// removes the temporary files a run that died while saving left there, their
// count in *removed. Returns a descriptor to keep open while the run writes
// checkpoints (closing it releases the lock), or a negative status with a
// message in err.
int checkpoint_claim_dir(const char *dir, int *removed, char *err, size_t err_bytes);

// Finds the checkpoint with the highest step in dir (names as made by
// checkpoint_path; temporary files and other names are ignored) and writes
// its path into buf. Returns 0; -ENOENT when dir holds none or does not
// exist; VGPU_EINVAL when buf is too small; -errno when dir cannot be read.
// It does not open the file: checkpoint_load validates it.
int checkpoint_find_latest(const char *dir, char *buf, size_t buf_bytes);

#endif
