// train_env.h: vgpu_train's own environment switches (progress display,
// injected faults, a start-up test hook): one table, beside libvgpu's
// (common/env.h), read through it, parsed once and printed by --help.
#ifndef VGPU_TRAIN_ENV_H
#define VGPU_TRAIN_ENV_H

#include <stdio.h>

// When an injected fault strikes: RANK@STEP, or RANK@random[:SEED] (the step
// is drawn from SEED among the run's steps by the trainer, which knows them).
struct train_env_when {
    int rank;                // -1 = off
    long step;               // >= 1 when !random
    int random;              // RANK@random...
    int seed_given;          // RANK@random:SEED (else the trainer picks a seed and says it)
    unsigned long long seed;
};

struct train_env {
    int progress;         // VGPU_PROGRESS: 1 = "bar", 0 = "lines", -1 = unset (automatic)
    // Injected faults (docs/TROUBLESHOOTING.md: Injecting faults):
    int slow_rank;        // VGPU_INJECT_SLOW=RANK:FACTOR: RANK's compute lasts FACTOR times as long; -1 = off
    double slow_factor;
    struct train_env_when hang;    // VGPU_INJECT_HANG=RANK@WHEN: RANK stops itself after that step
    struct train_env_when kill;    // VGPU_INJECT_KILL=RANK@WHEN: RANK kills itself after that step
    struct train_env_when perturb; // VGPU_INJECT_PERTURB=RANK@WHEN: RANK nudges a parameter after that step
    // Test hook:
    char pause_stage[16]; // VGPU_TEST_START_PAUSE=STAGE:SECONDS: every rank sleeps at that
    double pause_s;       // start-up stage (data, open, warmup), seconds; "" = off
};

// The parsed switches, as env_get: the first call reads the environment
// (later changes are not seen); a malformed value is reported once on stderr
// and treated as unset. Not thread-safe on the first call.
const struct train_env *train_env_get(void);

// Forgets the parsed values so the next train_env_get reads the environment
// again (tests that set variables in-process).
void train_env_reset(void);

// Writes one entry per switch of vgpu_train's: its name, form and meaning.
void train_env_print_reference(FILE *f);

#endif
