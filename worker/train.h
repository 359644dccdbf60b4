// train.h: synchronous data-parallel training: every rank takes its piece of
// each global batch, gradients are all-reduced, every replica applies the
// same update.
#ifndef VGPU_TRAIN_H
#define VGPU_TRAIN_H

#include <stdint.h>

#include "dataset.h"
#include "job.h"
#include "model_metrics.h"
#include "train_sizing.h"

struct train_options {
    const char *metrics_path;  // CSV of progress and evaluations; NULL = none
    const char *resume_path;   // checkpoint to resume from; NULL = fresh start
    int quiet;                 // rank 0 prints only the summary line
    int verify;                // after training, rank 0 replays on one device and compares
};

struct train_result {
    const char *data;          // the data trained on (train_data.name)
    double epochs;             // epochs trained: completed ones plus the share of the
                               // current one (0.5 = half of the first)
    long steps;                // optimizer steps done
    double train_loss;         // mean loss over the last logging window (the model's figure 0)
    const struct model_metrics *metrics; // the model's figures (model.type's; NULL: unknown)
    double eval[MODEL_MAX_METRICS]; // the last evaluation's figures, in metrics' order
    double samples_per_s;      // training throughput, global samples per second
    uint32_t params_crc;       // CRC32 of the final parameter bytes
    double verify_max_rel;     // --verify: largest relative difference of a tensor
    char checkpoint[320];      // rank 0: the last checkpoint written ("" = none)
    char split[256];           // rank 0, train.balance = dynamic: each rank's mean rows per
                               // full batch over the run, e.g. "141,115" ("" otherwise)
    // This rank's mean milliseconds per step of this run (0 steps: zeros):
    // its own compute; in collectives, waiting for peers and moving data; its
    // optimizer (inside the sharded all-reduce too). wait_known = 0 where the
    // backend cannot tell waiting from moving (then wait_ms is 0).
    struct step_breakdown {
        double compute_ms, wait_ms, move_ms, optim_ms;
        double exposed_ms; // of wait + move, what the step waited for: all of it but where
                           // the all-reduce overlaps the backward pass (buckets > 0)
        int buckets;       // train.bucket_mb's buckets a step (0: not overlapped)
        int wait_known;
        double comm_kib;  // collective payload a step, KiB
        uint32_t machine; // the machine the rank ran on (a hash of its boot id: network-
                          // namespace hosts of one machine share it)
        int cores;        // that machine's online CPUs
        int hosts;        // hosts in the job
    } time;
};

// The job's data, loaded by every rank (host memory).
struct train_data {
    struct dataset train, test;
    char source[128];          // what was loaded, for the job's log
    const char *name;          // the summary's data= ("fashion-mnist", "synthetic", ...)
    char fallback[640];        // why the synthetic set stands in; "" when it does not
};

// Loads the configured dataset (with the synthetic fallback when allowed:
// then data->fallback says why, for the caller to report once a host).
// Every rank holds its own copy: what ranks_on_host copies would take must
// fit the host's available memory (hostmem.h), else VGPU_ECONFIG with the
// numbers, before anything is allocated or decompressed.
// Returns 0 or a negative status with a message in err.
int train_load_data(const struct train_config *cfg, int ranks_on_host, struct train_data *data,
                    char *err, size_t err_bytes);
void train_free_data(struct train_data *data);


// Runs the configured training on an opened runtime. Returns 0, or a negative
// status (every rank returns the same verdict): VGPU_EMISMATCH when replicas
// diverged or --verify failed, VGPU_EPREEMPTED after a signal (a checkpoint
// was written, or the signal came before the first step). Other failures end the job. Rank 0's result is complete, the
// other ranks' hold what they computed.
int train_run(struct job *job, struct train_data *data, const struct train_options *opts,
              struct train_result *result);

// A stop vote at a start-up milestone: VGPU_EPREEMPTED when a stop signal
// reached this rank (agree it with the others), else 0.
int train_stop_vote(void);

// Test hook (VGPU_TEST_START_PAUSE=STAGE:SECONDS): sleeps at start-up stage
// `stage`, widening the window the fault tests aim their signals at.
void train_test_pause(const char *stage, int rank);

// The signal that stopped the job, agreed (collective): any rank's, 0 if
// none reached any. The stop is agreed at a step's end or a start-up
// milestone, perhaps before this rank's own copy of the signal arrived.
int train_agreed_stop_signal(struct job *job);

// For a run stopped before its first step (exit 75; collective): rank 0 says
// so, with the agreed signal; there is nothing new to checkpoint.
void train_report_early_stop(struct job *job);

// The run's summary line from rank 0 ("vgpu_train: done ... status=ok"), for
// a run that ended with `verdict` (train_run's) after wall_s seconds. A
// collective (every rank's peak memory reaches rank 0); prints nothing for a
// failure that has no status word. Returns 0 or a negative status.
int train_print_summary(struct job *job, const struct train_result *res, int verdict,
                        const struct train_options *opts, double wall_s);

#endif
