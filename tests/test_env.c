// test_env.c: the two tables of environment switches, libvgpu's (env.h) and
// vgpu_train's (train_env.h): each switch parsed to its value, read once
// (later changes unseen until reset), malformed values ignored (the field
// stays unset), the launcher's rank taken in order of specificity; every
// switch read is in its table, and the library's table names no trainer
// switch and every config switch.
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "env.h"
#include "ring_algos.h"
#include "train_env.h"

static const char *const all_[] = {
    "VGPU_PROGRESS",     "VGPU_RING_STAGING", "VGPU_RING_SPIN", "NCCL_MULTI_RANK_GPU_ENABLE",
    "VGPU_INJECT_PERTURB", "VGPU_INJECT_SLOW", "VGPU_INJECT_HANG", "VGPU_INJECT_KILL",
    "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE",
    "VGPU_FLIGHT_DIR", "TMPDIR", "VGPU_TEST_START_PAUSE", "VGPU_RING_YIELD_US", "VGPU_RING_ALGO",
    "VGPU_RING_MSG_BYTES",
};

// Each test starts from an environment without any of them.
static int clean_(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof all_ / sizeof all_[0]; i++)
        unsetenv(all_[i]);
    env_reset();
    train_env_reset();
    return 0;
}

static void test_unset_means_automatic(void **state)
{
    (void)state;
    const struct vgpu_env *e = env_get();
    assert_int_equal(e->ring_staging, -1);
    assert_int_equal(e->ring_spin, -1);
    assert_int_equal(e->ring_yield_us, -1);
    assert_int_equal(e->ring_algo, 0);
    assert_int_equal(e->nccl_multi_rank_gpu, 0);
    assert_int_equal(e->launcher_rank, -1);
    assert_int_equal(e->under_launcher, 0);
    const struct train_env *t = train_env_get();
    assert_int_equal(t->progress, -1);
    assert_int_equal(t->perturb.rank, -1);
    assert_int_equal(t->hang.rank, -1);
    assert_int_equal(t->kill.rank, -1);
    assert_int_equal(t->slow_rank, -1);
    assert_string_equal(t->pause_stage, "");
}

static void test_each_switch_is_parsed(void **state)
{
    (void)state;
    setenv("VGPU_PROGRESS", "lines", 1);
    setenv("VGPU_RING_STAGING", "1", 1);
    setenv("VGPU_RING_SPIN", "250", 1);
    setenv("NCCL_MULTI_RANK_GPU_ENABLE", "1", 1);
    setenv("VGPU_INJECT_PERTURB", "2@40", 1);
    setenv("VGPU_INJECT_SLOW", "1:2.5", 1);
    setenv("VGPU_INJECT_HANG", "3@random", 1);
    setenv("VGPU_INJECT_KILL", "0@random:12345678901", 1);
    setenv("VGPU_TEST_START_PAUSE", "open:1.5", 1);
    const struct vgpu_env *l = env_get();
    assert_int_equal(l->ring_staging, 1);
    assert_int_equal(l->ring_spin, 250);
    assert_int_equal(l->nccl_multi_rank_gpu, 1);
    const struct train_env *e = train_env_get();
    assert_int_equal(e->progress, 0);
    assert_string_equal(e->pause_stage, "open");
    assert_true(e->pause_s == 1.5);
    assert_int_equal(e->perturb.rank, 2);
    assert_int_equal(e->perturb.step, 40);
    assert_int_equal(e->perturb.random, 0);
    assert_int_equal(e->hang.rank, 3);
    assert_int_equal(e->hang.random, 1);
    assert_int_equal(e->hang.seed_given, 0);
    assert_int_equal(e->kill.rank, 0);
    assert_int_equal(e->kill.random, 1);
    assert_int_equal(e->kill.seed_given, 1);
    assert_true(e->kill.seed == 12345678901ULL);
    assert_int_equal(e->slow_rank, 1);
    assert_true(e->slow_factor == 2.5);
    setenv("VGPU_PROGRESS", "bar", 1);
    train_env_reset();
    assert_int_equal(train_env_get()->progress, 1);
}

// What a reference prints (env_print_reference and the like), as a string.
static char *reference_(void (*print)(FILE *))
{
    char *text = NULL;
    size_t bytes = 0;
    FILE *f = open_memstream(&text, &bytes);
    assert_non_null(f);
    print(f);
    fclose(f);
    return text;
}

// The ring's yield phase and algorithm, at their bounds.
static void test_ring_switches(void **state)
{
    (void)state;
    const struct {
        const char *yield, *algo;
        long want_yield;
        int want_algo;
    } cases[] = {
        {"0", "auto", 0, 0},        {"1000000", "ring", 1000000, 1},
        {"250", "one-shot", 250, 2}, {"1000001", "two-shot", -1, 3},
        {"-1", "Ring", -1, 0},      {"5us", "two-shot ", -1, 0},
        {"1", "direct", 1, 4},      {"2", "directs", 2, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("VGPU_RING_YIELD_US", cases[i].yield, 1);
        setenv("VGPU_RING_ALGO", cases[i].algo, 1);
        env_reset();
        assert_int_equal(env_get()->ring_yield_us, cases[i].want_yield);
        assert_int_equal(env_get()->ring_algo, cases[i].want_algo);
    }
    // Every algorithm of ring_algos.h is a value, numbered by its row, and
    // the reference lists it in the form: auto|ring|one-shot|...
    char *lib = reference_(env_print_reference);
    char form[256] = "  VGPU_RING_ALGO=auto";
#define ROW_(ID, id, name) name,
    static const char *const names[] = {RING_ALGOS(ROW_)};
#undef ROW_
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        setenv("VGPU_RING_ALGO", names[k], 1);
        env_reset();
        assert_int_equal(env_get()->ring_algo, (int)k + 1);
        strcat(strcat(form, "|"), names[k]);
    }
    strcat(form, "\n");
    assert_non_null(strstr(lib, form));
    free(lib);
}

// The largest message between hosts, at its bounds (0: a step whole).
static void test_ring_msg_bytes(void **state)
{
    (void)state;
    const struct {
        const char *value;
        long want;
    } cases[] = {{"0", 0}, {"256", 256}, {"255", -1}, {"1073741824", 1073741824},
                 {"1073741825", -1}, {"64512", 64512}, {"63K", -1}, {"-1", -1}, {"", -1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("VGPU_RING_MSG_BYTES", cases[i].value, 1);
        env_reset();
        assert_int_equal(env_get()->ring_msg_bytes, cases[i].want);
    }
}

static void test_read_once(void **state)
{
    (void)state;
    setenv("VGPU_RING_SPIN", "7", 1);
    assert_int_equal(env_get()->ring_spin, 7);
    setenv("VGPU_RING_SPIN", "9", 1);
    assert_int_equal(env_get()->ring_spin, 7);
    env_reset();
    assert_int_equal(env_get()->ring_spin, 9);
    setenv("VGPU_RING_STAGING", "0", 1); // 0 is a choice of its own, not "unset"
    env_reset();
    assert_int_equal(env_get()->ring_staging, 0);
}

static void test_malformed_values_are_ignored(void **state)
{
    (void)state;
    setenv("VGPU_PROGRESS", "fancy", 1);
    setenv("VGPU_RING_SPIN", "-3", 1);
    setenv("VGPU_INJECT_PERTURB", "2@x", 1);
    setenv("VGPU_INJECT_SLOW", "1:0.5", 1); // faster is not a slow-down
    setenv("VGPU_INJECT_HANG", "1@0", 1);   // steps count from 1
    setenv("VGPU_INJECT_KILL", "1@random:", 1);
    setenv("VGPU_TEST_START_PAUSE", "train:5", 1); // no such stage
    setenv("VGPU_RING_STAGING", "yes", 1);
    assert_int_equal(env_get()->ring_spin, -1);
    assert_int_equal(env_get()->ring_staging, -1);
    const struct train_env *e = train_env_get();
    assert_int_equal(e->progress, -1);
    assert_string_equal(e->pause_stage, "");
    assert_int_equal(e->perturb.rank, -1);
    assert_int_equal(e->slow_rank, -1);
    assert_int_equal(e->hang.rank, -1);
    assert_int_equal(e->kill.rank, -1);
    env_reset();
    train_env_reset();
    setenv("VGPU_RING_SPIN", "12abc", 1);
    setenv("VGPU_INJECT_SLOW", "1:3x", 1);
    setenv("VGPU_INJECT_HANG", "-1@5", 1);
    setenv("VGPU_INJECT_KILL", "2@5x", 1);
    setenv("VGPU_INJECT_PERTURB", "2@-5", 1);
    assert_int_equal(env_get()->ring_spin, -1);
    assert_int_equal(train_env_get()->slow_rank, -1);
    assert_int_equal(train_env_get()->hang.rank, -1);
    assert_int_equal(train_env_get()->kill.rank, -1);
    assert_int_equal(train_env_get()->perturb.rank, -1);
}

static void test_launcher_rank_most_specific_first(void **state)
{
    (void)state;
    setenv("SLURM_PROCID", "5", 1);
    assert_int_equal(env_get()->launcher_rank, 5);
    assert_int_equal(env_get()->under_launcher, 1);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1);
    env_reset();
    assert_int_equal(env_get()->launcher_rank, 3);
    // mpirun's size alone still means "started by a launcher".
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("SLURM_PROCID");
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    env_reset();
    assert_int_equal(env_get()->launcher_rank, -1);
    assert_int_equal(env_get()->under_launcher, 1);
}

// Flight records never default to the working directory: a directory of
// this user's under $TMPDIR (/tmp without it, or with a relative one);
// VGPU_FLIGHT_DIR wins.
static void test_flight_dir(void **state)
{
    (void)state;
    char want[64];
    snprintf(want, sizeof want, "/tmp/vgpu-flight-%u", (unsigned)getuid());
    assert_string_equal(env_get()->flight_dir, want);
    assert_int_equal(env_get()->flight_dir_default, 1);
    setenv("TMPDIR", "/scratch/me", 1);
    env_reset();
    snprintf(want, sizeof want, "/scratch/me/vgpu-flight-%u", (unsigned)getuid());
    assert_string_equal(env_get()->flight_dir, want);
    setenv("TMPDIR", "relative", 1); // not a place to trust: /tmp
    env_reset();
    assert_int_equal(strncmp(env_get()->flight_dir, "/tmp/vgpu-flight-", 17), 0);
    setenv("VGPU_FLIGHT_DIR", "records", 1);
    env_reset();
    assert_string_equal(env_get()->flight_dir, "records");
    assert_int_equal(env_get()->flight_dir_default, 0);
}

// The library reads its switches through its table: a name it lists is read
// as it is now (not cached); a name it does not list is a bug that stops the
// program, so no switch is read without being documented.
static void test_read_goes_through_the_table(void **state)
{
    (void)state;
    setenv("VGPU_SIM_GPUS", "2x24G", 1);
    assert_string_equal(env_read("VGPU_SIM_GPUS"), "2x24G");
    unsetenv("VGPU_SIM_GPUS");
    assert_null(env_read("VGPU_SIM_GPUS"));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        env_read("VGPU_PROGRESS"); // the trainer's, not the library's
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

// Each table lists its own switches: the library's every config switch and
// none of the trainer's; the trainer's only its own.
static void test_each_table_lists_its_own(void **state)
{
    (void)state;
    char *lib = reference_(env_print_reference);
    char *train = reference_(train_env_print_reference);
    char *config = reference_(config_print_env_reference);
    static const char *const trainer[] = {"VGPU_PROGRESS", "VGPU_INJECT_SLOW", "VGPU_INJECT_HANG",
                                          "VGPU_INJECT_KILL", "VGPU_INJECT_PERTURB",
                                          "VGPU_TEST_START_PAUSE"};
    for (size_t i = 0; i < sizeof trainer / sizeof *trainer; i++) {
        char entry[64];
        snprintf(entry, sizeof entry, "  %s=", trainer[i]);
        assert_non_null(strstr(train, entry));
        assert_null(strstr(lib, entry));
    }
    assert_null(strstr(lib, "vgpu_train"));
    assert_null(strstr(lib, "README"));
    assert_null(strstr(train, "README"));
    // config_print_env_reference: "  NAME=VALUE" lines, one per config switch.
    int named = 0;
    for (char *line = strtok(config, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "  VGPU_", 7) != 0)
            continue;
        char entry[64];
        snprintf(entry, sizeof entry, "%.*s", (int)(strcspn(line, "=") + 1), line);
        if (!strstr(lib, entry))
            fail_msg("the library's table lacks the config switch %s", entry + 2);
        named++;
    }
    assert_true(named >= 4);
    free(lib);
    free(train);
    free(config);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_flight_dir, clean_),
        cmocka_unit_test_setup(test_unset_means_automatic, clean_),
        cmocka_unit_test_setup(test_each_switch_is_parsed, clean_),
        cmocka_unit_test_setup(test_ring_switches, clean_),
        cmocka_unit_test_setup(test_ring_msg_bytes, clean_),
        cmocka_unit_test_setup(test_read_once, clean_),
        cmocka_unit_test_setup(test_malformed_values_are_ignored, clean_),
        cmocka_unit_test_setup(test_launcher_rank_most_specific_first, clean_),
        cmocka_unit_test_setup(test_read_goes_through_the_table, clean_),
        cmocka_unit_test_setup(test_each_table_lists_its_own, clean_),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
