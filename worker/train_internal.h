// train_internal.h: the trainer's state and the pieces of training that
// train.c's loop calls, shared only by worker/train*.c. Who does what:
//   train.c            the session: set-up order, the loop, how a run ends
//   train_setup.c      data loading, per-rank preparation, warm-up, teardown
//   train_sizing.c     pure sizes: model shape, rows per rank, device bytes
//   train_step.c       one step in each mode (the step_ops tables), batches
//                      onto the device, evaluation
//   train_balance.c    train.balance = dynamic: fixed-cost measurement and
//                      the periodic exchange (also the stop-signal vote)
//   train_replicas.c   replica hash checks (and the planted-fault test hook)
//   train_checkpoint.c the claim on checkpoint.dir, checkpoint save and resume
//   train_report.c     progress lines, evaluation rows, the summary line
//   train_verify.c     --verify: the single-device replay and comparison
#ifndef VGPU_TRAIN_INTERNAL_H
#define VGPU_TRAIN_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "balance.h"
#include "inject.h"
#include "model.h"
#include "optim.h"
#include "sampler.h"
#include "train_env.h"
#include "train.h"
#include "train_sizing.h"

// Steps between the ranks' agreement on a pending SIGTERM/SIGINT (a step is
// milliseconds; a scheduler's grace period is seconds); also the balance
// exchange's interval.
#define PREEMPT_CHECK_STEPS 10

struct trainer;
struct replay;

// The operations that differ between the two training modes: normal (each
// rank's piece in one pass, the gradient all-reduce with the optimizer step
// sharded into it) and deterministic (micro-batches by position, summed in a
// fixed tree: the same bits for any rank count). train_step.c defines both.
struct step_ops {
    const char *name;
    int bitwise;     // results are bitwise identical for any rank count and split
    // Per-rank allocations the mode needs beyond the model; no collectives.
    // NULL: none.
    int (*prepare)(struct trainer *t);
    // One optimizer step on global batch b at learning rate lr (gradient,
    // all-reduce, update); adds this rank's share of the rows' statistics and
    // the rows into the progress window (train_report_count).
    int (*step)(struct trainer *t, const struct batch_slice *b, float lr);
    // Makes the optimizer state complete on every rank (it is current only in
    // a rank's own ranges after sharded steps). NULL: it always is.
    int (*gather_state)(struct trainer *t);
    // --verify: rows the replay model is sized for, and the gradient of
    // global batch b on the replay model, into r->model.grads.
    long (*replay_rows)(const struct train_config *cfg);
    int (*replay_gradient)(struct trainer *t, struct replay *r, const struct batch_slice *b);
};

extern const struct step_ops train_step_normal, train_step_deterministic;

// --verify's single-device replay (train_verify.c): a second model and
// optimizer on rank 0's device, and the deterministic mode's scratch (made by
// its first replay_gradient).
struct replay {
    struct model model;            // the run replayed on one device
    struct optimizer opt;          // its optimizer
    struct sampler sampler;        // the same global batches, for one rank
    float *parts;                  // device [micro_batches, param_count]: micro-batch gradients
    float **leaves;                // host [micro_batches]: pointers into parts for the tree sum
    double *stats;                 // host [micro_batches, n_stats]: unused stats
};

// ---- the trainer's parts, each written by one file ----

// Where this run's steps went on this rank, seconds summed over `steps`
// (train_step.c).
struct step_clock {
    double compute_s, comm_s, wait_s, optim_s;
    double optim_in_comm_s;        // of optim_s, inside the sharded all-reduce
    double exposed_s;              // of comm_s, what the compute did not hide: all of it,
                                   // but where the all-reduce overlaps the backward pass
    long steps;
    int wait_known;                // the backend tells waiting from moving
};

// Batch staging (train_step.c): what a piece of a batch passes through on
// its way to the model's input, in rows (a row = one sample: an image or a
// sequence); which buffers depends on the input path (train_input_path).
struct trainer_staging {
    int path;                  // enum train_input_path: the training set's rows to the model
    float *host_rows;          // host [rows_cap, features]: float rows (COPY)
    uint8_t *host_codes;       // host [rows_cap, features]: 8-bit codes (DECODE) or tokens (TOKENS)
    int32_t *host_tokens;      // host [rows_cap, features]: tokens widened (WIDEN)
    uint8_t *dev_codes;        // device: the codes, decoded there into the model's input (DECODE)
    float *dev_lut;            // device [256]: the code -> value table of lut_set (DECODE)
    const struct dataset *lut_set; // the set whose table dev_lut holds (NULL = none yet)
    int32_t *host_labels;      // host [rows_cap, labels_per_row]: labels of a piece
    float *host_stats;         // host [rows_cap, n_stats]: the rows' statistics (model_metrics.h)
    long rows_cap;             // rows the staging holds
};

// Deterministic mode's micro-batches on this rank (train_step.c).
struct trainer_micro {
    int per_rank[TRAIN_MAX_RANKS]; // micro-batches each rank computes
    int first;                 // this rank's first micro-batch
    float *parts;              // device [its micro-batches, param_count]: their gradients
    double *stats;             // host [micro_batches, n_stats]: per micro-batch
};

// What the user sees (train_report.c): progress, the metrics CSV.
struct trainer_report {
    FILE *metrics;             // rank 0: the --metrics CSV (NULL = none)
    int metrics_errno;         // rank 0: why writing it failed (0 = it did not)
    double window[MODEL_MAX_STATS + 1]; // since the last progress line: the model's
                               // statistics summed [n_stats], then the rows
    double last_loss;          // the loss (figure 0) of the last progress window (all ranks)
    int warned_nonfinite;      // rank 0 has warned that the loss is NaN or infinite
    int live;                  // rank 0 draws a progress bar rather than lines
    int bar_open;              // a bar frame is on the terminal's line (no newline yet)
    double *log_slots;         // [n_stats + 1 + ranks]: a progress line's sums and peak memories
    struct step_clock clock_mark; // the clock at the last metrics row
};

// Checkpoints (train_checkpoint.c).
struct trainer_ckpt {
    int lock;                  // rank 0: held lock on checkpoint.dir (-1 = none)
};

// train.balance = dynamic (train_balance.c).
struct trainer_balance {
    int on;                    // the batch split follows measured speeds
    struct balancer balancer;  // the split in force; rank 0 also estimates speeds
    double busy_s;             // this rank's compute since the last exchange, seconds
    double busy_rows;          // rows computed in that time
    long busy_steps;           // steps in that time
    double fixed_s;            // this rank's compute per step that does not grow with rows, s
    double *exchange;          // [2 + 3 * ranks]: the exchange's slots
    long *proposal;            // rank 0 [ranks]: the split to announce at the next exchange
    int proposing;             // rank 0: proposal holds a new split
    double *rows_total;        // rank 0 [ranks]: rows each rank computed in this run
};

// The trainer's state, in parts. train_run (train.c) builds it; from then on
// each part is written by the one file named in its heading (or through that
// file's functions: train_report_count, train_balance_count,
// train_move_to) and read by any. The replica's values change only through
// the model and optimizer: a step, a resume, the planted fault.
struct trainer {
    // ---- the job: set by train_run (train.c), then read-only ----
    struct job *job;               // this rank's runtime: ranks, control plane, communicator
    vgpu_t *dev;                   // this rank's virtual GPU (job->v)
    const struct train_config *cfg;      // the job's configuration (&job->cfg)
    const struct train_options *opts; // what the command line asked for
    struct train_data *data;       // the data sets, in host memory
    const struct train_env *env;   // the trainer's environment switches (injected faults among them)
    const struct step_ops *mode;   // normal or deterministic steps
    // ---- the replica: made and freed by train_setup.c ----
    struct model model;            // model.type's model: parameters, gradients, activations
                                   // on the device (called only through model.h)
    struct optimizer opt;          // optimizer state (after sharded steps: current in own ranges)
    // ---- the position: train.c's loop (a resume moves it: train_move_to) ----
    struct sampler sampler;        // the global batches and this rank's piece of each
                                   // (dynamic balance sets its weights: train_balance.c)
    long step;                     // optimizer steps done
    long total_steps;              // steps the run takes (epochs x batches, or train.max_steps)
    long start_step;               // the step this run started from (> 0 after a resume)
    double train_seconds;          // time in the training loop proper, seconds
    double samples_done;           // global samples trained on
    struct inject_plan inject;     // when this rank hangs, dies or drifts (VGPU_INJECT_*)
    // ---- the parts (see their types above) ----
    struct step_clock clock;       // train_step.c: this run's steps on this rank
    struct trainer_staging staging; // train_step.c
    struct trainer_micro micro;    // train_step.c, deterministic mode
    struct grad_buckets *buckets;  // train_step.c, normal mode with train.bucket_mb: the
                                   // all-reduce overlapped with the backward (NULL: after it)
    struct trainer_report report;  // train_report.c
    struct trainer_ckpt ckpt;      // train_checkpoint.c
    struct trainer_balance balance; // train_balance.c
};

// ---- train.c ----
// Moves the run's position to `step`, batch step_in_epoch of `epoch` (a resume).
void train_move_to(struct trainer *t, long step, long epoch, long step_in_epoch);

// ---- train_setup.c ----
// Set-up each rank does alone (checks, allocations, rank 0's files and initial
// parameters): no collectives, so the ranks can agree on its verdict.
int trainer_prepare(struct trainer *t);
// Set-up in lockstep: the initial parameters reach every replica, warm-up.
int trainer_start(struct trainer *t);
void trainer_free(struct trainer *t);
// The model's initial parameters into host[m->param_count]: model.init_file's
// when set, else drawn from train.seed. Returns 0, or VGPU_ECONFIG with err
// naming the file and what is wrong (unreadable, the wrong size, NaN or
// infinite values).
int train_initial_params(const struct train_config *cfg, const struct model *m, float *host,
                         char *err, size_t err_bytes);

// ---- train_step.c ----
// The staging for pieces of max_rows rows of the training and test sets
// into t->model (host buffers; for pixel codes the device's codes and value
// table). VGPU_ECONFIG (said) when the model cannot take the data's rows.
// train_step_free frees it and the mode's buffers.
int train_staging_prepare(struct trainer *t, int max_rows);
void train_step_free(struct trainer *t);
// Copies rows indices[0..count) of ds into model m's input and labels (ds:
// the training or the test set, m: t->model or a model of its type).
int train_load_rows(struct trainer *t, struct model *m, const struct dataset *ds,
                    const uint32_t *indices, long count);
// This rank's compute on training samples indices[0..count): forward,
// backward (the loss sum's gradient times grad_scale into m->grads) and the
// rows' statistics, added into acc[n_stats]; the backward tells `ready`
// (NULL: nobody) as the gradient's tails are final. With `timed`: waits for
// the device, applies the VGPU_INJECT_SLOW hook and sets *seconds.
int train_compute_rows(struct trainer *t, const uint32_t *indices, long count, float grad_scale,
                       const struct grads_ready *ready, double *acc, int timed, double *seconds);
// The model's figures on the test set into values[n_metrics] (a collective;
// the same bits for any N).
int train_evaluate(struct trainer *t, double *values);

// ---- train_balance.c ----
// Under train.balance = dynamic: allocates the balancer and the exchange's
// slots and sets the starting split (otherwise nothing).
int train_balance_prepare(struct trainer *t);
void train_balance_free(struct trainer *t);
// A step's compute on this rank: seconds for rows, for the next exchange.
void train_balance_count(struct trainer *t, double seconds, long rows);
// Warm-up, under dynamic balance: measures this rank's fixed cost per step on
// rows samples first[0..rows) and shares every rank's (a collective).
int train_balance_measure(struct trainer *t, const uint32_t *first, long rows);
// Every PREEMPT_CHECK_STEPS steps: the stop-signal vote and (dynamic
// balance) the speeds and the next split. Returns 1 to stop for preemption,
// 0 to go on, or a negative status.
int train_exchange(struct trainer *t);
// Rank 0: each rank's share of the rows of this run, as rows of a full batch.
void train_describe_split(const struct trainer *t, char *buf, size_t bytes);

// ---- train_replicas.c ----
// Every rank's parameters and optimizer state must hash equal to rank 0's.
// Returns 0, or VGPU_EMISMATCH on every rank (the differences are reported).
int train_check_replicas(struct trainer *t);
// VGPU_INJECT_PERTURB: nudges one parameter of the chosen rank after its step.
int train_maybe_perturb(struct trainer *t);

// ---- train_checkpoint.c ----
// Rank 0, with checkpoint.dir set: claims it (checkpoint_claim_dir) for the
// run. VGPU_ECONFIG when it cannot (reported).
int train_claim_checkpoint_dir(struct trainer *t);
// Releases the claim.
void train_checkpoint_free(struct trainer *t);
// Rank 0 writes a checkpoint of the current step into dir; its path into
// path. Returns every rank's agreed verdict.
int train_save_checkpoint(struct trainer *t, const char *dir, char *path, size_t path_bytes);
// Restores parameters, optimizer state and position from rank 0's file.
// Returns the same verdict on every rank (VGPU_ECONFIG for bad input).
int train_resume(struct trainer *t, const char *path);

// ---- train_report.c ----
// The progress lines' slots, and whether rank 0 draws a bar (a terminal, or
// VGPU_PROGRESS). train_report_free also closes a metrics file left open.
int train_report_prepare(struct trainer *t);
void train_report_free(struct trainer *t);
// Adds statistics summed over rows (this rank's share: stats[n_stats], or
// NULL for none) and a count of rows to the progress window.
void train_report_count(struct trainer *t, const double *stats, double rows);
// The --metrics CSV header, opened by rank 0; when resuming, an existing
// metrics CSV is continued (anything else there is refused). Returns
// VGPU_ECONFIG for a path that cannot be opened or is not such a file,
// VGPU_EIO if the header cannot be written (reported).
int train_open_metrics(struct trainer *t, const char *path, int resuming);
// Marks in the metrics CSV where a resumed run picks up (a `resume` row).
void train_metrics_resumed(struct trainer *t, long epoch);
// Closes it: VGPU_EIO if any row was lost or the close failed (reported), else
// 0; 0 without a metrics file (and on ranks other than 0).
int train_close_metrics(struct trainer *t);
// A progress line (a collective: window sums and peak memories reach rank 0).
int train_log_progress(struct trainer *t, long epoch, double lr, int final);
// Rank 0 reports an evaluation (number: 1-based epoch) on stdout and in metrics.
void train_report_eval(struct trainer *t, const struct train_result *res, long number, double lr);
// Rank 0's line for a run stopped by a signal after writing the checkpoint at path.
void train_report_preempted(struct trainer *t, const char *path, int sig);

// ---- train_verify.c ----
// --verify: rank 0 replays the run on one device and compares tensor by
// tensor. Every rank returns the verdict: 0, VGPU_EMISMATCH or a failure.
int train_verify(struct trainer *t, struct train_result *res);

// ---- sampling (train_sample.c) ----

// After training: every rank samples sample.bytes of text from a model that
// generates, rank 0 prints it (a warning for a model that does not, or a
// sampling that failed). Returns 0.
int train_sample(struct trainer *t);

#endif
