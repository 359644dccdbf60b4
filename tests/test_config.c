// test_config.c: the INI/--set configuration against its schemas (libvgpu's
// [devices] and [comm], vgpu_train's sections), read together as vgpu_train
// reads its file: defaults, every value type, ranges, lists, error messages
// with locations, validation.
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

// The engine itself (set_value_, static) for the boundary test.
#include "config.c"
#include "status.h"
#include "test_util.h"
#include "train_config.h"

// vgpu_train's whole file: libvgpu's part and the trainer's.
struct job_cfg {
    struct config v;
    struct train_config t;
};

static void jc_defaults(struct job_cfg *c)
{
    config_defaults(&c->v);
    train_config_defaults(&c->t);
}

static int jc_load_string(struct job_cfg *c, const char *text, const char *origin, char *err,
                          size_t err_bytes)
{
    return train_config_load_string(&c->t, &c->v, text, origin, err, err_bytes);
}

static int jc_load_file(struct job_cfg *c, const char *path, char *err, size_t err_bytes)
{
    return train_config_load_file(&c->t, &c->v, path, err, err_bytes);
}

static int jc_apply_override(struct job_cfg *c, const char *assignment, char *err,
                             size_t err_bytes)
{
    return train_config_apply_override(&c->t, &c->v, assignment, err, err_bytes);
}

static int jc_apply_env(struct job_cfg *c, char *err, size_t err_bytes)
{
    return config_apply_env(&c->v, err, err_bytes);
}

static int jc_validate(const struct job_cfg *c, char *err, size_t err_bytes)
{
    int rc = config_validate(&c->v, err, err_bytes);
    return rc ? rc : train_config_validate(&c->t, err, err_bytes);
}

static const char *jc_enum_name(const char *section, const char *key, int value)
{
    return strcmp(section, "devices") && strcmp(section, "comm")
               ? train_config_enum_name(section, key, value)
               : config_enum_name(section, key, value);
}

#define ERR_BYTES 512

static int setup_cfg(void **state)
{
    struct job_cfg *cfg = malloc(sizeof *cfg);
    if (!cfg)
        return -1;
    jc_defaults(cfg);
    *state = cfg;
    return 0;
}

static int teardown_cfg(void **state)
{
    free(*state);
    return 0;
}

// ---- defaults ----

// vgpurun's variables override the file; a bad value names the variable.
static void test_apply_env(void **state)
{
    (void)state;
    struct job_cfg cfg;
    char err[512];
    jc_defaults(&cfg);
    assert_int_equal(jc_apply_env(&cfg, err, sizeof err), 0); // none set: no change
    assert_int_equal(cfg.v.devices.memory_limit, 0);
    setenv("VGPU_MEMORY_LIMIT", "48M", 1);
    setenv("VGPU_RANKS_PER_DEVICE", "2", 1);
    setenv("VGPU_BACKEND", "mpi", 1);
    assert_int_equal(jc_apply_env(&cfg, err, sizeof err), 0);
    assert_int_equal(cfg.v.devices.memory_limit, 48ull << 20);
    assert_int_equal(cfg.v.devices.ranks_per_device, 2);
    assert_int_equal(cfg.v.comm.backend, BACKEND_MPI);
    // --set still wins.
    assert_int_equal(jc_apply_override(&cfg, "comm.backend=ring", err, sizeof err), 0);
    assert_int_equal(cfg.v.comm.backend, BACKEND_RING);
    setenv("VGPU_BACKEND", "carrier-pigeon", 1);
    assert_int_equal(jc_apply_env(&cfg, err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "VGPU_BACKEND=carrier-pigeon (comm.backend)"));
    unsetenv("VGPU_BACKEND");
    setenv("VGPU_MEMORY_LIMIT", "12Q", 1);
    assert_int_equal(jc_apply_env(&cfg, err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "VGPU_MEMORY_LIMIT=12Q"));
    unsetenv("VGPU_MEMORY_LIMIT");
    unsetenv("VGPU_RANKS_PER_DEVICE");
}

static void test_defaults(void **state)
{
    const struct job_cfg *c = *state;
    assert_int_equal(c->v.devices.kind, DEVICE_KIND_AUTO);
    assert_int_equal(c->v.devices.ranks_per_device, 0);
    assert_int_equal(c->v.devices.memory_limit, 0);
    assert_true(c->v.devices.memory_fraction == 0.0);
    assert_int_equal(c->v.devices.map.count, 0);
    assert_int_equal(c->v.comm.backend, BACKEND_AUTO);
    assert_true(c->v.comm.timeout_s == 300.0);
    assert_int_equal(c->v.comm.slice_bytes, 1u << 20);
    assert_int_equal(c->t.model.hidden.count, 2);
    assert_int_equal(c->t.model.hidden.v[0], 256);
    assert_int_equal(c->t.model.hidden.v[1], 128);
    assert_int_equal(c->t.train.epochs, 15);
    assert_int_equal(c->t.train.batch_size, 256);
    assert_int_equal(c->t.train.max_steps, 0);
    assert_true(c->t.train.lr == 0.001);
    assert_int_equal(c->t.train.optimizer, OPTIM_ADAMW);
    assert_true(c->t.train.momentum == 0.9);
    assert_true(c->t.train.beta1 == 0.9);
    assert_true(c->t.train.beta2 == 0.999);
    assert_true(c->t.train.eps == 1e-8);
    assert_int_equal(c->t.train.schedule, SCHEDULE_CONSTANT);
    assert_int_equal(c->t.train.step_every, 1000);
    assert_true(c->t.train.step_gamma == 0.1);
    assert_int_equal(c->t.train.batch_weights.count, 0);
    assert_int_equal(c->t.train.drop_last, 1);
    assert_int_equal(c->t.train.shuffle, 1); // a new order each epoch, as before the key
    assert_int_equal(c->t.train.seed, 1);
    assert_int_equal(c->t.train.deterministic, 0);
    assert_int_equal(c->t.train.micro_batches, 8);
    assert_int_equal(c->t.data.dataset, DATASET_FASHION_MNIST);
    assert_string_equal(c->t.data.path, "/usr/share/datasets/fashion-mnist");
    assert_int_equal(c->t.data.fallback_synthetic, 1);
    assert_int_equal(c->t.data.synthetic_features, 784);
    assert_int_equal(c->t.model.context, 128);
    assert_string_equal(c->t.model.init_file, ""); // drawn from train.seed
    assert_true(c->t.data.val_fraction == 0.1);
    assert_string_equal(c->t.checkpoint.dir, "");
    assert_int_equal(c->t.checkpoint.keep_last, 3); // a few, not every one (issue 32)
    assert_int_equal(c->t.verify.steps, 20);
    assert_true(c->t.verify.rtol == 1e-4);

    char err[ERR_BYTES] = "";
    assert_int_equal(jc_validate(c, err, sizeof err), 0);
}

// The printed reference is itself a valid config that reproduces the defaults.
// Enum keys are stored as enums; config_enum_name gives each value's text
// back, and every text a file may use parses to the constant of that name.
static void test_enum_names(void **state)
{
    struct job_cfg *c = *state;
    static const struct {
        const char *key, *text;
        int value;
    } cases[] = {
        {"devices.kind", "cuda", DEVICE_KIND_CUDA},   {"comm.backend", "nccl", BACKEND_NCCL},
        {"train.optimizer", "sgd", OPTIM_SGD},        {"train.schedule", "step", SCHEDULE_STEP},
        {"train.balance", "dynamic", BALANCE_DYNAMIC}, {"data.dataset", "text", DATASET_TEXT},
        {"data.dataset", "mnist-idx", DATASET_MNIST_IDX},
    };
    char err[256], assignment[64], section[16];
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        snprintf(assignment, sizeof assignment, "%s=%s", cases[i].key, cases[i].text);
        assert_int_equal(jc_apply_override(c, assignment, err, sizeof err), 0);
        size_t dot = strcspn(cases[i].key, ".");
        snprintf(section, sizeof section, "%.*s", (int)dot, cases[i].key);
        assert_string_equal(jc_enum_name(section, cases[i].key + dot + 1, cases[i].value),
                            cases[i].text);
    }
    assert_int_equal(c->t.train.optimizer, OPTIM_SGD);
    assert_int_equal(c->t.data.dataset, DATASET_MNIST_IDX);
    assert_null(jc_enum_name("train", "optimizer", OPTIM_ADAMW + 1)); // out of range
    assert_null(jc_enum_name("train", "optimizer", -1));
    assert_null(jc_enum_name("train", "lr", 0));                    // not an enum
    assert_null(jc_enum_name("train", "nonesuch", 0));
    // The message for a bad value lists the choices.
    assert_int_equal(jc_apply_override(c, "train.optimizer=lbfgs", err, sizeof err), VGPU_ECONFIG);
    assert_non_null(strstr(err, "'lbfgs' is not one of sgd|adam|adamw"));
}

static void test_reference_round_trip(void **state)
{
    const struct job_cfg *defaults = *state;
    char path[] = "/tmp/vgpu_test_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    train_config_print_reference(f);
    fclose(f);

    struct job_cfg cfg;
    jc_defaults(&cfg);
    cfg.t.train.epochs = 77; // must be reset by the file
    char err[ERR_BYTES] = "";
    int rc = jc_load_file(&cfg, path, err, sizeof err);
    unlink(path);
    if (rc)
        fprintf(stderr, "  %s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(cfg.t.train.epochs, 15);
    assert_memory_equal(&cfg, defaults, sizeof cfg);
}

// ---- sizes ----

struct size_case {
    const char *text;
    int rc;
    uint64_t bytes;
};

static void test_parse_size(void **state)
{
    (void)state;
    static const struct size_case cases[] = {
        {"0", 0, 0},
        {"512", 0, 512},
        {"4096", 0, 4096},
        {"64K", 0, 64ull << 10},
        {"64k", 0, 64ull << 10},
        {"512M", 0, 512ull << 20},
        {"2G", 0, 2ull << 30},
        {"1.5G", 0, 3ull << 29},
        {"0.5K", 0, 512},
        {"6.4M", 0, 6710886},          // 6710886.4 bytes, rounded down
        {"1.3G", 0, 1395864371},
        {"1T", 0, 1ull << 40},
        {"16KiB", 0, 16ull << 10},
        {"8MB", 0, 8ull << 20},
        {" 3M", 0, 3ull << 20},
        {"-1", VGPU_EINVAL, 0},
        {"-1G", VGPU_EINVAL, 0},
        {"+5", VGPU_EINVAL, 0},
        {"abc", VGPU_EINVAL, 0},
        {"12Q", VGPU_EINVAL, 0},
        {"12 M", VGPU_EINVAL, 0},
        {"", VGPU_EINVAL, 0},
        {"G", VGPU_EINVAL, 0},
        {"1.5", VGPU_EINVAL, 0},       // not a whole number of bytes
        {"1e400", VGPU_EINVAL, 0},     // infinite
        {"nan", VGPU_EINVAL, 0},
        {"inf", VGPU_EINVAL, 0},
        {"infinity", VGPU_EINVAL, 0},
        {"0x10", VGPU_EINVAL, 0},      // hexadecimal: strtod reads it as 16
        {"0x10M", VGPU_EINVAL, 0},
        {"0x1p4", VGPU_EINVAL, 0},     // hexadecimal float, 16
        {"1e3", 0, 1000},              // decimal exponents stay
        {"1.5e1K", 0, 15ull << 10},
        {"20000000000G", VGPU_EINVAL, 0}, // beyond 2^64
        {"5MM", VGPU_EINVAL, 0},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        uint64_t bytes = 0xDEADBEEF;
        int rc = config_parse_size(cases[i].text, &bytes);
        if (rc != cases[i].rc || (rc == 0 && bytes != cases[i].bytes))
            fail_msg("config_parse_size(\"%s\"): rc %d bytes %llu, want rc %d bytes %llu",
                     cases[i].text, rc, (unsigned long long)bytes, cases[i].rc,
                     (unsigned long long)cases[i].bytes);
        if (rc != 0)
            assert_int_equal(bytes, 0xDEADBEEF); // untouched on error
    }
}

// ---- every type through INI text ----

static void test_every_type(void **state)
{
    struct job_cfg *c = *state;
    static const char text[] = "; a comment\n"
                               "# another comment\n"
                               "[devices]\n"
                               "kind = cpu\n"
                               "memory_limit = 1.5G\n"
                               "cpu_threads = 3\n"
                               "map = 0, 0,1 ,1\n"
                               "[comm]\n"
                               "backend = ring\n"
                               "timeout_s = 2.5\n"
                               "slice_bytes = 64K\n"
                               "\n"
                               "[model]\n"
                               "hidden = 64,32,16\n"
                               "init_file = /tmp/some params.bin\n"
                               "[train]\n"
                               "lr = 0.05\n"
                               "optimizer = sgd\n"
                               "drop_last = false\n"
                               "shuffle = no\n"
                               "deterministic = yes\n"
                               "batch_weights = 0.8,0.2\n"
                               "seed = 42\n"
                               "schedule = cosine\n"
                               "[data]\n"
                               "dataset = synthetic\n"
                               "path = /tmp/some dir\n"
                               "[checkpoint]\n"
                               "dir = ckpt\n";
    char err[ERR_BYTES] = "";
    int rc = jc_load_string(c, text, "t.ini", err, sizeof err);
    if (rc)
        fprintf(stderr, "  %s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(c->v.devices.kind, DEVICE_KIND_CPU);
    assert_int_equal(c->v.devices.memory_limit, 1610612736ull);
    assert_int_equal(c->v.devices.cpu_threads, 3);
    assert_int_equal(c->v.devices.map.count, 4);
    long want_map[] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++)
        assert_int_equal(c->v.devices.map.v[i], want_map[i]);
    assert_int_equal(c->v.comm.backend, BACKEND_RING);
    assert_true(c->v.comm.timeout_s == 2.5);
    assert_int_equal(c->v.comm.slice_bytes, 65536);
    assert_int_equal(c->t.model.hidden.count, 3);
    assert_int_equal(c->t.model.hidden.v[0], 64);
    assert_int_equal(c->t.model.hidden.v[1], 32);
    assert_int_equal(c->t.model.hidden.v[2], 16);
    assert_true(c->t.train.lr == 0.05);
    assert_int_equal(c->t.train.optimizer, OPTIM_SGD);
    assert_int_equal(c->t.train.drop_last, 0);
    assert_int_equal(c->t.train.shuffle, 0);
    assert_string_equal(c->t.model.init_file, "/tmp/some params.bin");
    assert_int_equal(c->t.train.deterministic, 1);
    assert_int_equal(c->t.train.batch_weights.count, 2);
    assert_true(c->t.train.batch_weights.v[0] == 0.8);
    assert_true(c->t.train.batch_weights.v[1] == 0.2);
    assert_int_equal(c->t.train.seed, 42);
    assert_int_equal(c->t.train.schedule, SCHEDULE_COSINE);
    assert_int_equal(c->t.data.dataset, DATASET_SYNTHETIC);
    assert_string_equal(c->t.data.path, "/tmp/some dir");
    assert_string_equal(c->t.checkpoint.dir, "ckpt");
    // Keys not mentioned keep their values (the file is applied on top).
    assert_int_equal(c->t.train.epochs, 15);
    assert_true(c->t.train.momentum == 0.9);
}

static void test_bool_spellings(void **state)
{
    struct job_cfg *c = *state;
    static const struct {
        const char *text;
        int value;
    } cases[] = {{"true", 1}, {"TRUE", 1}, {"yes", 1}, {"on", 1},  {"1", 1},
                 {"false", 0}, {"No", 0},  {"off", 0}, {"0", 0}};
    char err[ERR_BYTES], set[64];
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        c->t.train.deterministic = !cases[i].value;
        snprintf(set, sizeof set, "train.deterministic=%s", cases[i].text);
        assert_int_equal(jc_apply_override(c, set, err, sizeof err), 0);
        assert_int_equal(c->t.train.deterministic, cases[i].value);
    }
    assert_int_equal(jc_apply_override(c, "train.deterministic=maybe", err, sizeof err),
                     VGPU_ECONFIG);
    assert_contains(err, "--set train.deterministic");
    assert_contains(err, "maybe");
    assert_int_equal(jc_apply_override(c, "train.deterministic=2", err, sizeof err), VGPU_ECONFIG);
}

// ---- errors in INI text: message and line number ----

struct bad_ini_case {
    const char *name;
    const char *text;
    const char *prefix;  // "origin:line:" expected at the start
    const char *needle1; // substrings the message must contain
    const char *needle2;
};

static void test_ini_errors(void **state)
{
    (void)state;
    static const struct bad_ini_case cases[] = {
        {"int not a number", "[train]\nepochs = many\n", "bad.ini:2: ", "train.epochs", "many"},
        {"int trailing junk", "[train]\n\nepochs = 5x\n", "bad.ini:3: ", "train.epochs", "5x"},
        {"int below range", "[train]\nepochs = 0\n", "bad.ini:2: ", "out of range", "[1, 100000]"},
        {"int above range", "[devices]\nranks_per_device = 5000\n", "bad.ini:2: ", "out of range",
         "5000"},
        {"float not a number", "[train]\nlr = fast\n", "bad.ini:2: ", "train.lr", "fast"},
        {"float above range", "[train]\nlr = 1000\n", "bad.ini:2: ", "out of range", "train.lr"},
        {"float below range", "[comm]\ntimeout_s = 0.01\n", "bad.ini:2: ", "out of range",
         "comm.timeout_s"},
        {"fraction above 1", "[devices]\nmemory_fraction = 1.5\n", "bad.ini:2: ", "out of range",
         "memory_fraction"},
        {"float inf", "[train]\nlr = inf\n", "bad.ini:2: ", "train.lr", "inf"},
        {"float infinity", "[train]\nlr = infinity\n", "bad.ini:2: ", "train.lr",
         "'infinity' is not a number"},
        {"float nan", "[train]\nlr = nan\n", "bad.ini:2: ", "train.lr", "'nan' is not a number"},
        {"float hex", "[train]\nlr = 0x10\n", "bad.ini:2: ", "train.lr", "'0x10' is not a number"},
        {"float hex exponent", "[train]\nlr = 0x1p-3\n", "bad.ini:2: ", "train.lr", "0x1p-3"},
        {"float list hex", "[train]\nbatch_weights = 0.5,0x1\n", "bad.ini:2: ",
         "train.batch_weights", "'0x1' is not a number"},
        {"int hex", "[train]\nepochs = 0x10\n", "bad.ini:2: ", "train.epochs",
         "'0x10' is not an integer"},
        {"beta that rounds to 1 as a float", "[train]\nbeta2 = 0.99999999\n", "bad.ini:2: ",
         "value 0.99999999 out of range", "[0, 0.9999999]"},
        {"bool", "[train]\ndrop_last = perhaps\n", "bad.ini:2: ", "perhaps", "boolean"},
        {"size", "[devices]\nmemory_limit = 12Q\n", "bad.ini:2: ", "devices.memory_limit", "12Q"},
        {"size negative", "[devices]\nmemory_limit = -1\n", "bad.ini:2: ", "memory_limit", "-1"},
        {"size hex", "[devices]\nmemory_limit = 0x10\n", "bad.ini:2: ", "devices.memory_limit",
         "'0x10' is not a size"},
        {"size empty", "[comm]\nslice_bytes =\n", "bad.ini:2: ", "comm.slice_bytes", "size"},
        {"enum", "[train]\noptimizer = lbfgs\n", "bad.ini:2: ", "lbfgs", "sgd|adam|adamw"},
        {"enum case", "[devices]\nkind = CPU\n", "bad.ini:2: ", "CPU", "auto|cpu|cuda"},
        {"list element", "[model]\nhidden = 64,x,16\n", "bad.ini:2: ", "model.hidden", "'x'"},
        {"list empty element", "[model]\nhidden = 256,,128\n", "bad.ini:2: ", "model.hidden",
         "value 2 of the list is empty"},
        {"list trailing comma", "[train]\nbatch_weights = 0.5,0.5,\n", "bad.ini:2: ",
         "train.batch_weights", "value 3 of the list is empty"},
        {"list element range", "[model]\nhidden = 64,0\n", "bad.ini:2: ", "model.hidden",
         "out of range"},
        {"list too long", "[model]\nhidden = 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n",
         "bad.ini:2: ", "too many", "16"},
        {"float list element", "[train]\nbatch_weights = 0.5,half\n", "bad.ini:2: ",
         "train.batch_weights", "half"},
        {"map out of schema range", "[devices]\nmap = 0,2048\n", "bad.ini:2: ", "devices.map",
         "2048"},
        {"unknown key with hint", "[train]\nepochs = 3\nlrr = 0.1\n", "bad.ini:3: ",
         "unknown key 'lrr' in [train]", "did you mean 'train.lr'"},
        {"unknown key no hint", "[train]\nzzzzzzzzzzzz = 1\n", "bad.ini:2: ",
         "unknown key 'zzzzzzzzzzzz'", "[train]"},
        {"unknown section", "[trian]\nlr = 0.1\n", "bad.ini:2: ", "unknown section [trian]",
         "train.lr"},
        {"key in wrong section", "[model]\nlr = 0.1\n", "bad.ini:2: ", "unknown key 'lr'",
         "train.lr"},
        {"key outside section", "lr = 0.1\n", "bad.ini:1: ", "outside any [section]", "train.lr"},
        {"duplicate key", "[train]\nlr = 0.1\nepochs = 2\nlr = 0.2\n", "bad.ini:4: ",
         "duplicate key 'lr'", "[train]"},
        {"duplicate across reopened section", "[train]\nlr = 0.1\n[model]\nhidden = 4\n[train]\nlr = 0.3\n",
         "bad.ini:6: ", "duplicate", "lr"},
        {"syntax error", "[train]\nlr = 0.1\nthis line has no equals sign\n", "bad.ini:3: ",
         "syntax error", ""},
        {"syntax error before a bad key", "[train]\nno equals here\nlrr = 1\n", "bad.ini:2: ",
         "syntax error", ""},
        {"bad key before a syntax error", "[train]\nlrr = 1\nno equals here\n", "bad.ini:2: ",
         "unknown key 'lrr'", ""},
        {"unterminated section", "; header\n\n[train\nlr = 0.1\n", "bad.ini:3: ", "syntax error",
         ""},
        {"first error wins", "[train]\nepochs = 2\nlr = bad\nseed = bad\n", "bad.ini:3: ", "train.lr",
         "bad"},
        {"error after comments", "# c1\n; c2\n\n[data]\n\n# c3\nstandardize = 7\n", "bad.ini:7: ",
         "data.standardize", "'7'"},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        const struct bad_ini_case *t = &cases[i];
        struct job_cfg cfg;
        jc_defaults(&cfg);
        char err[ERR_BYTES] = "";
        int rc = jc_load_string(&cfg, t->text, "bad.ini", err, sizeof err);
        fprintf(stderr, "  case '%s': rc %d, \"%s\"\n", t->name, rc, err);
        assert_int_equal(rc, VGPU_ECONFIG);
        if (strncmp(err, t->prefix, strlen(t->prefix)))
            fail_msg("case '%s': message \"%s\" does not start with \"%s\"", t->name, err, t->prefix);
        assert_contains(err, t->needle1);
        assert_contains(err, t->needle2);
    }
}

// ---- long lines ----

// libinih reads a line into a 200-byte buffer (Debian 12's build: INI_MAX_LINE
// 200, no realloc): 198 characters, the newline and the terminator.
#define LINE_MAX_CHARS 198

// "key = vvv...v" padded with 'v' to `chars` characters.
static char *line_of_(char *buf, const char *key, int chars)
{
    int n = snprintf(buf, 1024, "%s = ", key);
    memset(buf + n, 'v', (size_t)(chars - n));
    buf[chars] = '\0';
    return buf;
}

// A line too long for the INI reader is an error naming the file, the line
// and the limit; it was cut and the rest parsed as a line of its own.
static void test_long_lines(void **state)
{
    (void)state;
    struct job_cfg cfg;
    char err[ERR_BYTES], text[4096], line[1024], want[128];

    // The audit's case: a 215-character dir line whose tail reads
    // "every_steps = 5". Neither key may change.
    jc_defaults(&cfg);
    line_of_(line, "dir", 200);
    snprintf(text, sizeof text, "[checkpoint]\n%severy_steps = 5\n[train]\nepochs = 3\n", line);
    assert_int_equal(strlen(text) - strlen("[checkpoint]\n\n[train]\nepochs = 3\n"), 215);
    err[0] = '\0';
    assert_int_equal(jc_load_string(&cfg, text, "long.ini", err, sizeof err), VGPU_ECONFIG);
    snprintf(want, sizeof want, "long.ini:2: line longer than %d characters", LINE_MAX_CHARS);
    if (strncmp(err, want, strlen(want)))
        fail_msg("\"%s\" does not start with \"%s\"", err, want);
    assert_string_equal(cfg.t.checkpoint.dir, "");
    assert_int_equal(cfg.t.checkpoint.every_steps, 0);

    // 300 characters, a comment too; and at the limit + 1, with either
    // line ending, and as a last line without one.
    static const struct {
        int chars;
        const char *key, *end;
    } too_long[] = {{300, "# a comment", "\n"}, {300, "path", "\n"},
                    {LINE_MAX_CHARS + 1, "path", "\n"}, {LINE_MAX_CHARS + 1, "path", "\r\n"},
                    {LINE_MAX_CHARS + 1, "path", ""}};
    for (size_t i = 0; i < TEST_ARRAY_LEN(too_long); i++) {
        jc_defaults(&cfg);
        line_of_(line, too_long[i].key, too_long[i].chars);
        snprintf(text, sizeof text, "[data]\nstandardize = true\n%s%s", line, too_long[i].end);
        err[0] = '\0';
        assert_int_equal(jc_load_string(&cfg, text, "long.ini", err, sizeof err), VGPU_ECONFIG);
        snprintf(want, sizeof want, "long.ini:3: line longer than %d characters", LINE_MAX_CHARS);
        if (strncmp(err, want, strlen(want)))
            fail_msg("case %zu: \"%s\" does not start with \"%s\"", i, err, want);
    }

    // At the limit a line is read whole, with either line ending, and the
    // lines after it keep their numbers.
    for (int crlf = 0; crlf <= 1; crlf++) {
        jc_defaults(&cfg);
        const char *nl = crlf ? "\r\n" : "\n";
        line_of_(line, "path", LINE_MAX_CHARS);
        snprintf(text, sizeof text, "[data]%s%s%s[train]%sepochs = 3%s", nl, line, nl, nl, nl);
        err[0] = '\0';
        int rc = jc_load_string(&cfg, text, "ok.ini", err, sizeof err);
        if (rc)
            fail_msg("crlf %d: rc %d: %s", crlf, rc, err);
        assert_int_equal(strlen(cfg.t.data.path), LINE_MAX_CHARS - strlen("path = "));
        assert_int_equal(cfg.t.train.epochs, 3);
    }

    // Errors after long-but-allowed lines (190 characters) name their own line.
    jc_defaults(&cfg);
    char comment[1024];
    line_of_(comment, "# note", 190);
    line_of_(line, "path", 190);
    snprintf(text, sizeof text, "[data]\n%s\n%s\n\n[train]\nepochs = 2\nlr = bad\n", comment, line);
    err[0] = '\0';
    assert_int_equal(jc_load_string(&cfg, text, "after.ini", err, sizeof err), VGPU_ECONFIG);
    if (strncmp(err, "after.ini:7: train.lr", strlen("after.ini:7: train.lr")))
        fail_msg("\"%s\" does not start with \"after.ini:7: train.lr\"", err);
    assert_int_equal(strlen(cfg.t.data.path), 190 - strlen("path = "));

    // An error before a long line is the one reported.
    jc_defaults(&cfg);
    line_of_(line, "path", 300);
    snprintf(text, sizeof text, "[data]\nstandardize = 7\n%s\n", line);
    assert_int_equal(jc_load_string(&cfg, text, "first.ini", err, sizeof err), VGPU_ECONFIG);
    assert_contains(err, "first.ini:2: data.standardize");
    snprintf(text, sizeof text, "[data]\nno equals sign\n%s\n", line);
    assert_int_equal(jc_load_string(&cfg, text, "first.ini", err, sizeof err), VGPU_ECONFIG);
    assert_contains(err, "first.ini:2: syntax error");
}

// A key in the wrong section is suggested under its real section, and close
// misspellings of section or key find the right key.
static void test_did_you_mean(void **state)
{
    struct job_cfg *c = *state;
    char err[ERR_BYTES];
    static const struct {
        const char *set;
        const char *hint;
    } cases[] = {
        {"trian.lr=0.1", "did you mean 'train.lr'"},
        {"train.lrr=0.1", "did you mean 'train.lr'"},
        {"train.epoch=3", "did you mean 'train.epochs'"},
        {"devices.memory_limt=1G", "did you mean 'devices.memory_limit'"},
        {"model.lr=0.1", "did you mean 'train.lr'"},
        {"modle.hiden=4", "did you mean 'model.hidden'"},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        err[0] = '\0';
        assert_int_equal(jc_apply_override(c, cases[i].set, err, sizeof err), VGPU_ECONFIG);
        assert_contains(err, "unknown key");
        assert_contains(err, cases[i].hint);
    }
    // Nothing close: no suggestion.
    assert_int_equal(jc_apply_override(c, "qqqqqq.zzzzzzzz=1", err, sizeof err), VGPU_ECONFIG);
    assert_contains(err, "unknown key");
    assert_not_contains(err, "did you mean");
}

// ---- --set overrides ----

static void test_override_good(void **state)
{
    struct job_cfg *c = *state;
    char err[ERR_BYTES] = "";
    static const char *sets[] = {
        "train.momentum=5e-1",
        "train.lr=0.5",
        " train.epochs = 3 ",
        "model.hidden=8, 4",
        "devices.memory_limit=512M",
        "train.optimizer=adam",
        "data.path=/data/a=b", // only the first '=' splits
        "train.batch_weights=1,2,3",
        "devices.memory_fraction=0.25",
        "train.shuffle=false",
        "model.init_file=p.bin",
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(sets); i++) {
        int rc = jc_apply_override(c, sets[i], err, sizeof err);
        if (rc)
            fail_msg("--set %s: rc %d: %s", sets[i], rc, err);
    }
    assert_true(c->t.train.lr == 0.5);
    assert_true(c->t.train.momentum == 0.5);
    assert_int_equal(c->t.train.epochs, 3);
    assert_int_equal(c->t.model.hidden.count, 2);
    assert_int_equal(c->t.model.hidden.v[0], 8);
    assert_int_equal(c->t.model.hidden.v[1], 4);
    assert_int_equal(c->v.devices.memory_limit, 512ull << 20);
    assert_int_equal(c->t.train.optimizer, OPTIM_ADAM);
    assert_string_equal(c->t.data.path, "/data/a=b");
    assert_int_equal(c->t.train.batch_weights.count, 3);
    assert_true(c->t.train.batch_weights.v[2] == 3.0);
    assert_true(c->v.devices.memory_fraction == 0.25);
    assert_int_equal(c->t.train.shuffle, 0);
    assert_string_equal(c->t.model.init_file, "p.bin");
    // An empty string or list clears it.
    assert_int_equal(jc_apply_override(c, "model.init_file=", err, sizeof err), 0);
    assert_string_equal(c->t.model.init_file, "");
    assert_int_equal(jc_apply_override(c, "train.batch_weights=", err, sizeof err), 0);
    assert_int_equal(c->t.train.batch_weights.count, 0);
    // Overrides apply after a file and win.
    assert_int_equal(jc_load_string(c, "[train]\nlr = 0.2\n", "f.ini", err, sizeof err), 0);
    assert_int_equal(jc_apply_override(c, "train.lr=0.3", err, sizeof err), 0);
    assert_true(c->t.train.lr == 0.3);
}

static void test_override_bad(void **state)
{
    struct job_cfg *c = *state;
    static const struct {
        const char *set;
        const char *needle1, *needle2;
    } cases[] = {
        {"train.lr", "--set train.lr", "section.key=value"},
        {"lr=0.1", "--set lr=0.1", "section.key=value"},
        {".lr=0.1", "--set", "section.key=value"},
        {"train.=0.1", "--set", "section.key=value"},
        {"train.lr=abc", "--set train.lr:", "'abc' is not a number"},
        {"train.lr=0x10", "--set train.lr:", "'0x10' is not a number (decimal"},
        {"devices.memory_limit=0x10", "--set devices.memory_limit:", "'0x10' is not a size"},
        {"train.lr=1000", "--set train.lr:", "out of range"},
        {"train.lr=", "--set train.lr:", "not a number"},
        {"train.epochs=2.5", "--set train.epochs:", "not an integer"},
        {"train.optimizer=rmsprop", "--set train.optimizer:", "rmsprop"},
        {"devices.memory_limit=lots", "--set devices.memory_limit:", "lots"},
        {"model.hidden=4,-1", "--set model.hidden:", "out of range"},
        {"trian.lr=0.1", "--set trian.lr", "did you mean 'train.lr'"},
        {NULL, "--set data.path:", "longer than 255"},
        {NULL, "--set train.lr:", "value longer than 511 characters"},
    };
    // The NULL cases, in order: a path over its field, any value over the
    // limit of one value.
    char long_set[2][700];
    snprintf(long_set[0], sizeof long_set[0], "data.path=/%0300d", 0);
    snprintf(long_set[1], sizeof long_set[1], "train.lr=0.%0600d", 1);
    int n_long = 0;
    char err[ERR_BYTES];
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        struct job_cfg before = *c;
        err[0] = '\0';
        const char *set = cases[i].set ? cases[i].set : long_set[n_long++];
        int rc = jc_apply_override(c, set, err, sizeof err);
        fprintf(stderr, "  --set %.40s: rc %d, \"%.120s\"\n", set, rc, err);
        assert_int_equal(rc, VGPU_ECONFIG);
        assert_contains(err, cases[i].needle1);
        assert_contains(err, cases[i].needle2);
        // A rejected value leaves the configuration as it was.
        assert_memory_equal(&before, c, sizeof before);
    }
}

// ---- cross-key validation ----

static void test_validate(void **state)
{
    (void)state;
    static const struct {
        const char *sets[3];
        const char *needle; // NULL: valid
    } cases[] = {
        {{"devices.memory_limit=1G", "devices.memory_fraction=0.5"}, "memory_fraction"},
        {{"devices.memory_limit=1G"}, NULL},
        {{"devices.memory_fraction=0.5"}, NULL},
        {{"devices.map=0,1", "devices.ranks_per_device=2"}, "ranks_per_device"},
        {{"devices.map=0,1"}, NULL},
        {{"devices.ranks_per_device=2"}, NULL},
        {{"train.batch_weights=0.5,0"}, "batch_weights"},
        {{"train.batch_weights=0.5,0.5"}, NULL},
        {{"model.hidden="}, "model.hidden"},
        {{"data.dataset=mnist-idx", "data.path="}, "data.path"},
        {{"data.dataset=mnist-idx"}, NULL},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        struct job_cfg cfg;
        jc_defaults(&cfg);
        char err[ERR_BYTES] = "";
        for (int s = 0; s < 3 && cases[i].sets[s]; s++)
            assert_int_equal(jc_apply_override(&cfg, cases[i].sets[s], err, sizeof err), 0);
        err[0] = '\0';
        int rc = jc_validate(&cfg, err, sizeof err);
        if (!cases[i].needle) {
            if (rc)
                fail_msg("case %zu (%s): unexpected error: %s", i, cases[i].sets[0], err);
            continue;
        }
        assert_int_equal(rc, VGPU_ECONFIG);
        assert_contains(err, cases[i].needle);
    }
    // Both conflicting keys are named.
    struct job_cfg cfg;
    jc_defaults(&cfg);
    char err[ERR_BYTES] = "";
    cfg.v.devices.memory_limit = 1 << 30;
    cfg.v.devices.memory_fraction = 0.5;
    assert_int_equal(jc_validate(&cfg, err, sizeof err), VGPU_ECONFIG);
    assert_contains(err, "devices.memory_limit");
    assert_contains(err, "devices.memory_fraction");
}

// ---- files ----

static void write_file_(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

// After whitespace, '#' starts a comment as ';' does (--help-config writes
// '#'); a '#' inside a value stays.
static void test_inline_comments(void **state)
{
    struct job_cfg *c = *state;
    char err[ERR_BYTES] = "";
    const char *text = "[train]\n"
                       "lr = 0.01 # as in the paper\n"
                       "epochs = 4\t# short run\n"
                       "optimizer = sgd ; inih's own\n"
                       "[checkpoint]\n"
                       "dir = runs/a#1  # the first\n";
    int rc = jc_load_string(c, text, "t.ini", err, sizeof err);
    if (rc)
        fprintf(stderr, "  %s\n", err);
    assert_int_equal(rc, 0);
    assert_true(c->t.train.lr == 0.01);
    assert_int_equal(c->t.train.epochs, 4);
    assert_int_equal(c->t.train.optimizer, OPTIM_SGD);
    assert_string_equal(c->t.checkpoint.dir, "runs/a#1");
}

static void test_load_file(void **state)
{
    struct job_cfg *c = *state;
    char dir[] = "/tmp/vgpu_test_cfgdir_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], err[ERR_BYTES];

    // Missing file: -ENOENT and the path in the message.
    snprintf(path, sizeof path, "%s/missing.ini", dir);
    err[0] = '\0';
    assert_int_equal(jc_load_file(c, path, err, sizeof err), -ENOENT);
    assert_contains(err, path);

    // A directory, or a FIFO (whose open would block), is not a config.
    assert_int_equal(jc_load_file(c, dir, err, sizeof err), VGPU_ECONFIG);
    assert_contains(err, "a directory, not a config file");
    snprintf(path, sizeof path, "%s/fifo.ini", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    assert_int_equal(jc_load_file(c, path, err, sizeof err), VGPU_ECONFIG);
    assert_contains(err, "not a regular file");
    unlink(path);

    // A good file.
    snprintf(path, sizeof path, "%s/good.ini", dir);
    static const char good[] = "[train]\nepochs = 4\n[devices]\nmemory_limit = 64K\n";
    write_file_(path, good, sizeof good - 1);
    assert_int_equal(jc_load_file(c, path, err, sizeof err), 0);
    assert_int_equal(c->t.train.epochs, 4);
    assert_int_equal(c->v.devices.memory_limit, 65536);

    // An error in a file is located as "path:line:".
    snprintf(path, sizeof path, "%s/bad.ini", dir);
    static const char bad[] = "[train]\nepochs = 4\n\nlr = -3\n";
    write_file_(path, bad, sizeof bad - 1);
    err[0] = '\0';
    assert_int_equal(jc_load_file(c, path, err, sizeof err), VGPU_ECONFIG);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s:4: ", path);
    if (strncmp(err, prefix, strlen(prefix)))
        fail_msg("\"%s\" does not start with \"%s\"", err, prefix);
    assert_contains(err, "train.lr");

    // A line too long for the INI reader: the file, the line and the limit.
    snprintf(path, sizeof path, "%s/long.ini", dir);
    {
        char text[400];
        int n = snprintf(text, sizeof text, "[train]\nepochs = 4\n# %0298d\n", 0);
        write_file_(path, text, (size_t)n);
    }
    err[0] = '\0';
    assert_int_equal(jc_load_file(c, path, err, sizeof err), VGPU_ECONFIG);
    snprintf(prefix, sizeof prefix, "%s:3: line longer than 198 characters", path);
    if (strncmp(err, prefix, strlen(prefix)))
        fail_msg("\"%s\" does not start with \"%s\"", err, prefix);

    // NUL bytes: refused as not text (inih would silently stop at the NUL).
    snprintf(path, sizeof path, "%s/nul.ini", dir);
    static const char nul[] = "[train]\nepochs = 4\0\nlr = whatever\n";
    write_file_(path, nul, sizeof nul - 1);
    err[0] = '\0';
    assert_int_equal(jc_load_file(c, path, err, sizeof err), VGPU_ECONFIG);
    assert_contains(err, path);
    assert_contains(err, "NUL");

    // A directory is not a config file.
    err[0] = '\0';
    assert_true(jc_load_file(c, dir, err, sizeof err) < 0);
    assert_true(err[0] != '\0');

    // An empty file is a valid (empty) config.
    snprintf(path, sizeof path, "%s/empty.ini", dir);
    write_file_(path, "", 0);
    assert_int_equal(jc_load_file(c, path, err, sizeof err), 0);

    // Bigger than one read buffer: the loader reassembles it.
    snprintf(path, sizeof path, "%s/big.ini", dir);
    {
        static char big[40000];
        size_t n = 0;
        n += (size_t)snprintf(big + n, sizeof big - n, "[train]\n");
        while (n < sizeof big - 200)
            n += (size_t)snprintf(big + n, sizeof big - n, "; padding comment line ......\n");
        n += (size_t)snprintf(big + n, sizeof big - n, "seed = 99\n");
        write_file_(path, big, n);
    }
    assert_int_equal(jc_load_file(c, path, err, sizeof err), 0);
    assert_int_equal(c->t.train.seed, 99);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

// ---- every range at its boundaries ----

// set_value_ on one key with `text`; 0 or VGPU_ECONFIG.
static int set_text_(void *part, const struct config_key *k, const char *text)
{
    char msg[ERR_BYTES];
    return set_value_(part, k, text, msg, sizeof msg);
}

// Every numeric key of the schema, and every numeric list's elements: the
// minimum and the maximum are accepted, the next value past either is
// refused (an integer's +-1, a float's next representable double). A range
// check off by one anywhere (`l > max + 1`) fails here.
static void test_ranges_at_boundaries(void **state)
{
    struct job_cfg *c = *state;
    int checked = 0;
    const struct config_schema *const schemas[] = {&config_vgpu_schema, &train_config_schema};
    void *const parts[] = {&c->v, &c->t};
    for (size_t n = 0; n < schemas[0]->nkeys + schemas[1]->nkeys; n++) {
        const size_t p = n < schemas[0]->nkeys ? 0 : 1, i = p ? n - schemas[0]->nkeys : n;
        const struct config_key *k = &schemas[p]->keys[i];
        void *part = parts[p];
        const int is_int = k->type == CONFIG_INT || k->type == CONFIG_INT_LIST;
        if (!is_int && k->type != CONFIG_FLOAT && k->type != CONFIG_FLOAT_LIST)
            continue;
        char at_min[64], below[64], at_max[64], above[64];
        if (is_int) {
            const long lo = (long)k->min, hi = (long)k->max;
            assert_true((double)lo == k->min && (double)hi == k->max); // whole bounds
            snprintf(at_min, sizeof at_min, "%ld", lo);
            snprintf(below, sizeof below, "%ld", lo - 1);
            snprintf(at_max, sizeof at_max, "%ld", hi);
            snprintf(above, sizeof above, "%ld", hi + 1);
        } else {
            snprintf(at_min, sizeof at_min, "%.17g", k->min);
            snprintf(below, sizeof below, "%.17g", nextafter(k->min, -INFINITY));
            snprintf(at_max, sizeof at_max, "%.17g", k->max);
            snprintf(above, sizeof above, "%.17g", nextafter(k->max, INFINITY));
        }
        print_message("%s.%s: [%s, %s] accepted, %s and %s refused\n", k->section, k->key, at_min,
                      at_max, below, above);
        jc_defaults(c);
        if (set_text_(part, k, at_min) != 0)
            fail_msg("%s.%s = %s (its minimum) was refused", k->section, k->key, at_min);
        if (set_text_(part, k, at_max) != 0)
            fail_msg("%s.%s = %s (its maximum) was refused", k->section, k->key, at_max);
        if (set_text_(part, k, below) != VGPU_ECONFIG)
            fail_msg("%s.%s = %s (below its minimum %s) was accepted", k->section, k->key, below,
                     at_min);
        if (set_text_(part, k, above) != VGPU_ECONFIG)
            fail_msg("%s.%s = %s (above its maximum %s) was accepted", k->section, k->key, above,
                     at_max);
        checked++;
    }
    assert_true(checked >= 20); // the schema's numeric keys, not an empty loop
    // The same through the user's path, one key: the message names the range.
    char err[ERR_BYTES];
    jc_defaults(c);
    assert_int_equal(jc_apply_override(c, "devices.ranks_per_device=1024", err, sizeof err), 0);
    assert_int_equal(jc_apply_override(c, "devices.ranks_per_device=1025", err, sizeof err),
                     VGPU_ECONFIG);
    assert_non_null(strstr(err, "out of range [0, 1024]"));
}

// Where the data is read from: data.path, but text left at the IDX default
// (or empty) reads fortunes' directory; text's context is model.context.
static void test_data_path(void **state)
{
    struct job_cfg *c = *state;
    char err[ERR_BYTES];
    assert_string_equal(train_data_path(&c->t), "/usr/share/datasets/fashion-mnist");
    assert_int_equal(jc_apply_override(c, "data.dataset=text", err, sizeof err), 0);
    assert_string_equal(train_data_path(&c->t), "/usr/share/games/fortunes");
    assert_int_equal(jc_apply_override(c, "data.path=", err, sizeof err), 0);
    assert_string_equal(train_data_path(&c->t), "/usr/share/games/fortunes");
    assert_int_equal(jc_apply_override(c, "data.path=/srv/text", err, sizeof err), 0);
    assert_string_equal(train_data_path(&c->t), "/srv/text");
    assert_int_equal(jc_validate(c, err, sizeof err), 0);
    assert_int_equal(jc_apply_override(c, "data.dataset=mnist-idx", err, sizeof err), 0);
    assert_string_equal(train_data_path(&c->t), "/srv/text");
    assert_int_equal(train_text_context(&c->t), 128);
    assert_int_equal(jc_apply_override(c, "model.context=1024", err, sizeof err), 0);
    assert_int_equal(train_text_context(&c->t), 1024);
}

// A NULL or zero-sized err buffer is tolerated.
static void test_err_buffer_optional(void **state)
{
    struct job_cfg *c = *state;
    assert_int_equal(jc_apply_override(c, "train.lr=abc", NULL, 0), VGPU_ECONFIG);
    assert_int_equal(jc_load_string(c, "[x]\ny=1\n", "o", NULL, 0), VGPU_ECONFIG);
    char tiny[8] = "";
    assert_int_equal(jc_load_string(c, "[train]\nlr=zz\n", "origin", tiny, sizeof tiny),
                     VGPU_ECONFIG);
    assert_int_equal(strlen(tiny), sizeof tiny - 1); // truncated, terminated
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_enum_names, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_reference_round_trip, setup_cfg, teardown_cfg),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test_setup_teardown(test_every_type, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_bool_spellings, setup_cfg, teardown_cfg),
        cmocka_unit_test(test_ini_errors),
        cmocka_unit_test(test_long_lines),
        cmocka_unit_test_setup_teardown(test_did_you_mean, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_override_good, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_override_bad, setup_cfg, teardown_cfg),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_apply_env),
        cmocka_unit_test_setup_teardown(test_inline_comments, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_load_file, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_err_buffer_optional, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_ranges_at_boundaries, setup_cfg, teardown_cfg),
        cmocka_unit_test_setup_teardown(test_data_path, setup_cfg, teardown_cfg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
