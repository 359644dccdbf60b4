// train_sizing.h: how big a training job's pieces are, from its config and
// data alone: the rows a rank computes, the deterministic mode's
// micro-batches, the device memory a rank needs (the model's through
// model.h). Pure functions (no MPI, no device), so the binding's cap check
// and the tests can call them.
#ifndef VGPU_TRAIN_SIZING_H
#define VGPU_TRAIN_SIZING_H

#include <stdint.h>

#include "train_config.h"
#include "dataset.h"

struct model_batch;

#define TRAIN_MAX_RANKS 1024   // ranks one job may have
#define EVAL_CHUNK 256         // evaluation rows per chunk of one-label rows (fixed: results
                               // independent of N)
#define EVAL_CHUNK_LABELS 4096 // a chunk of sequences: this many positions (labels), at least a row

// Rows of rank `rank`'s piece of a full global batch (deterministic mode:
// one micro-batch, the unit it computes).
long train_rank_rows(const struct train_config *cfg, int nranks, int rank);

// Rows of an evaluation chunk for rows of label_width labels: EVAL_CHUNK
// samples of one label; sequences by their positions (EVAL_CHUNK_LABELS).
long train_eval_rows(int label_width);

// Rows of the largest piece of a global batch any rank gets, or of an
// evaluation chunk of the data's rows (label_width labels a row) if that is
// more: what a model's buffers are sized for.
int train_max_rows(const struct train_config *cfg, int nranks, int label_width);

// Deterministic mode: rows of one micro-batch (the largest of the M pieces).
long train_micro_rows(const struct train_config *cfg);

// Deterministic mode: micro-batches each rank computes, per_rank[nranks]: M
// split over the ranks as samples are (equal, or by train.batch_weights).
// nranks <= TRAIN_MAX_RANKS.
void train_micro_split(const struct train_config *cfg, int nranks, int *per_rank);

// Rows of the host staging for batches: a step's piece or an evaluation
// chunk (max_rows), or whole global batches for --verify's replay.
long train_staging_rows(const struct train_config *cfg, int max_rows, int verify);

// How a data set's rows reach a model's input (model.h's struct model_batch).
enum train_input_path {
    TRAIN_INPUT_COPY = 1, // float values, copied as they are
    TRAIN_INPUT_DECODE,   // 8-bit codes, copied and decoded on the device by their table
    TRAIN_INPUT_TOKENS,   // token ids, copied as bytes (a uint8 input)
    TRAIN_INPUT_WIDEN,    // token ids, widened to int32 on the host and copied
};

// The path from ds's rows to a model taking batches b, or VGPU_EINVAL when
// b cannot take them: a row of another width, another number of labels, or
// values where it takes tokens (or tokens where it takes values).
int train_input_path(const struct model_batch *b, const struct dataset *ds);

// What a rank's device memory holds, bytes (each with its allocations'
// rounding): train_device_bytes's parts (vgpu_train lays the model out once
// for its cap check, the total, and --plan, the parts).
struct train_bytes {
    size_t param_count;     // the model's parameters
    uint64_t params, grads; // the flat parameter and gradient buffers
    uint64_t optimizer;     // the optimizer's state (full on every rank: a sharded step
                            // updates its ranges, the state is gathered at checkpoints)
    uint64_t activations;   // the model's other buffers: inputs, labels, stats,
                            // activations and its backward pass's scratch
    uint64_t staging;       // the batch's codes and their table, where decoded on the device
    uint64_t deterministic; // deterministic mode: the micro-batch gradients, the tree's scratch
    uint64_t verify;        // --verify: rank 0's single-device replay
    uint64_t total;
};

// train_device_bytes in parts (all 0 when it would be 0).
void train_device_parts(const struct train_config *cfg, const struct dataset *train, int nranks,
                        int verify, struct train_bytes *out);

// Device bytes a rank needs for this job (for the binding's cap check);
// verify adds rank 0's single-device replay. 0 when the job cannot be sized
// (too many ranks or layers, or a model that cannot take the data's rows).
uint64_t train_device_bytes(const struct train_config *cfg, const struct dataset *train, int nranks,
                            int verify);

// The largest single collective the job makes, bytes: the optimizer state's
// broadcast on resume (state floats a parameter, at least one: the
// gradients' all-reduce). 0 when the job cannot be sized. The ring's staging
// windows (GPUs) are sized from it.
uint64_t train_largest_collective_bytes(const struct train_config *cfg, const struct dataset *train);

#endif
