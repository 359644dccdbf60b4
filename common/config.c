// config.c: INI + --set parsing against one schema table.
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"
#include "util.h"

enum key_type { T_INT, T_FLOAT, T_BOOL, T_SIZE, T_STR, T_ENUM, T_INT_LIST, T_FLOAT_LIST };

struct key_spec {
    const char *section;
    const char *key;
    enum key_type type;
    size_t offset;        // into struct config
    size_t str_bytes;     // T_STR: field size
    const char *def;      // default, parsed like a user value
    double min, max;      // numeric range (T_INT, T_FLOAT, list elements)
    const char *const *choices; // T_ENUM: the values' texts in enum order, NULL-terminated
    const char *doc;
};

#define CONFIG_ENUM_TEXT_(name, text) text,
static const char *const device_kinds_[] = {CONFIG_DEVICE_KINDS(CONFIG_ENUM_TEXT_) NULL};
static const char *const backends_[] = {CONFIG_BACKENDS(CONFIG_ENUM_TEXT_) NULL};
static const char *const optimizers_[] = {CONFIG_OPTIMIZERS(CONFIG_ENUM_TEXT_) NULL};
static const char *const schedules_[] = {CONFIG_SCHEDULES(CONFIG_ENUM_TEXT_) NULL};
static const char *const balances_[] = {CONFIG_BALANCES(CONFIG_ENUM_TEXT_) NULL};
static const char *const datasets_[] = {CONFIG_DATASETS(CONFIG_ENUM_TEXT_) NULL};
static const char *const models_[] = {CONFIG_MODELS(CONFIG_ENUM_TEXT_) NULL};
#undef CONFIG_ENUM_TEXT_
// set_value_ stores an enum key's value through an int.
_Static_assert(sizeof(enum optim_kind) == sizeof(int), "enum keys are stored as int");

#define F_(sec, field) offsetof(struct config, sec.field)
#define S_(sec, field) sizeof(((struct config *)0)->sec.field)
#define BIG 1e18

// The schema: one row per key. The reference printed by --help-config and the
// comments in configs/*.ini come from here.
static const struct key_spec keys_[] = {
    {"devices", "kind", T_ENUM, F_(devices, kind), 0, "auto", 0, 0, device_kinds_,
     "device backend: cuda needs a GPU; auto falls back to CPU simulation"},
    {"devices", "ranks_per_device", T_INT, F_(devices, ranks_per_device), 0, "0", 0, 1024, NULL,
     "ranks sharing one physical device; 0 = ceil(local ranks / devices)"},
    {"devices", "memory_limit", T_SIZE, F_(devices, memory_limit), 0, "0", 0, 0, NULL,
     "memory cap per rank (virtual GPU), e.g. 512M or 2G; 0 = auto"},
    {"devices", "memory_fraction", T_FLOAT, F_(devices, memory_fraction), 0, "0", 0, 1, NULL,
     "share of each device's free memory split among its ranks; 0 = unset"},
    {"devices", "map", T_INT_LIST, F_(devices, map), 0, "", 0, 1023, NULL,
     "explicit device index for each local rank, e.g. 0,0,1,1; empty = policy"},
    {"devices", "cpu_threads", T_INT, F_(devices, cpu_threads), 0, "0", 0, 1024, NULL,
     "BLAS threads per rank; 0 = cores / local ranks, at least 1"},

    {"comm", "backend", T_ENUM, F_(comm, backend), 0, "auto", 0, 0, backends_,
     "collective backend; auto = nccl if every rank has its own GPU, else ring"},
    {"comm", "timeout_s", T_FLOAT, F_(comm, timeout_s), 0, "300", 0.1, 86400, NULL,
     "bound on every collective wait, seconds; a peer that does not arrive ends the job"},
    {"comm", "slice_bytes", T_SIZE, F_(comm, slice_bytes), 0, "1M", 0, 0, NULL,
     "ring all-reduce pipelining slice per rank, bytes"},

    {"model", "type", T_ENUM, F_(model, type), 0, "mlp", 0, 0, models_,
     "the model: mlp = Linear -> ReLU ... -> Linear with softmax cross-entropy"},
    {"model", "hidden", T_INT_LIST, F_(model, hidden), 0, "256,128", 1, 65536, NULL,
     "hidden layer widths of the MLP, e.g. 256,128"},

    {"train", "epochs", T_INT, F_(train, epochs), 0, "15", 1, 100000, NULL, "passes over the training set"},
    {"train", "batch_size", T_INT, F_(train, batch_size), 0, "256", 1, 1 << 24, NULL,
     "global batch in samples, split across ranks"},
    {"train", "max_steps", T_INT, F_(train, max_steps), 0, "0", 0, BIG, NULL,
     "stop after this many optimizer steps; 0 = no limit"},
    {"train", "lr", T_FLOAT, F_(train, lr), 0, "0.001", 0, 100, NULL, "peak learning rate"},
    {"train", "optimizer", T_ENUM, F_(train, optimizer), 0, "adamw", 0, 0, optimizers_, "optimizer"},
    {"train", "momentum", T_FLOAT, F_(train, momentum), 0, "0.9", 0, 1, NULL, "SGD momentum"},
    {"train", "weight_decay", T_FLOAT, F_(train, weight_decay), 0, "0", 0, 10, NULL,
     "weight decay (L2 for sgd/adam, decoupled for adamw)"},
    {"train", "beta1", T_FLOAT, F_(train, beta1), 0, "0.9", 0, 0.9999999, NULL, "Adam beta1"},
    {"train", "beta2", T_FLOAT, F_(train, beta2), 0, "0.999", 0, 0.9999999, NULL, "Adam beta2"},
    {"train", "eps", T_FLOAT, F_(train, eps), 0, "1e-8", 1e-30, 1, NULL, "Adam epsilon"},
    {"train", "schedule", T_ENUM, F_(train, schedule), 0, "constant", 0, 0, schedules_,
     "learning-rate schedule after warm-up"},
    {"train", "warmup_steps", T_INT, F_(train, warmup_steps), 0, "0", 0, BIG, NULL,
     "linear warm-up from 0 to lr over this many steps"},
    {"train", "step_every", T_INT, F_(train, step_every), 0, "1000", 1, BIG, NULL,
     "step schedule: multiply lr by step_gamma every this many steps"},
    {"train", "step_gamma", T_FLOAT, F_(train, step_gamma), 0, "0.1", 0, 1, NULL,
     "step schedule: decay factor"},
    {"train", "batch_weights", T_FLOAT_LIST, F_(train, batch_weights), 0, "", 0, 1e6, NULL,
     "share of each global batch per rank, e.g. 0.8,0.2; empty = equal"},
    {"train", "balance", T_ENUM, F_(train, balance), 0, "static", 0, 0, balances_,
     "split of each batch: static = equal or batch_weights; dynamic = re-split "
     "every 10 steps by each rank's measured speed (normal mode; not bitwise reproducible)"},
    {"train", "drop_last", T_BOOL, F_(train, drop_last), 0, "true", 0, 0, NULL,
     "drop the incomplete last batch of each epoch (false: train on it too)"},
    {"train", "seed", T_INT, F_(train, seed), 0, "1", 0, BIG, NULL,
     "seed for initialisation and shuffling"},
    {"train", "log_every", T_INT, F_(train, log_every), 0, "50", 1, BIG, NULL,
     "steps between progress lines"},
    {"train", "deterministic", T_BOOL, F_(train, deterministic), 0, "false", 0, 0, NULL,
     "bitwise-identical results across runs and rank counts"},
    {"train", "micro_batches", T_INT, F_(train, micro_batches), 0, "8", 1, 4096, NULL,
     "deterministic mode: micro-batches per global batch"},
    {"train", "check_replicas_every", T_INT, F_(train, check_replicas_every), 0, "100", 0, BIG, NULL,
     "steps between replica hash checks; 0 = off"},
    {"train", "shard_optimizer", T_BOOL, F_(train, shard_optimizer), 0, "true", 0, 0, NULL,
     "each rank updates 1/N of the parameters inside the all-reduce (normal mode)"},

    {"data", "dataset", T_ENUM, F_(data, dataset), 0, "fashion-mnist", 0, 0, datasets_,
     "training data"},
    {"data", "path", T_STR, F_(data, path), S_(data, path), CONFIG_DEFAULT_DATA_PATH, 0, 0, NULL,
     "directory holding the four MNIST-format IDX files (.gz or plain)"},
    {"data", "max_bytes", T_SIZE, F_(data, max_bytes), 0, "1G", 0, 0, NULL,
     "bound on the pixels and labels the four IDX headers claim together, bytes (Fashion-MNIST: "
     "52.4 MiB); more fails before any data is read; 0 = no limit"},
    {"data", "standardize", T_BOOL, F_(data, standardize), 0, "false", 0, 0, NULL,
     "standardise pixels to zero mean, unit variance (else scale to [0,1])"},
    {"data", "fallback_synthetic", T_BOOL, F_(data, fallback_synthetic), 0, "true", 0, 0, NULL,
     "use the synthetic dataset (with a warning) if the files are missing"},
    {"data", "train_limit", T_INT, F_(data, train_limit), 0, "0", 0, BIG, NULL,
     "use only the first N training samples; 0 = all"},
    {"data", "synthetic_train", T_INT, F_(data, synthetic_train), 0, "8192", 1, 1 << 24, NULL,
     "synthetic dataset: training samples"},
    {"data", "synthetic_test", T_INT, F_(data, synthetic_test), 0, "2048", 1, 1 << 24, NULL,
     "synthetic dataset: test samples"},
    {"data", "synthetic_features", T_INT, F_(data, synthetic_features), 0, "784", 1, 1 << 20, NULL,
     "synthetic dataset: values per sample"},

    {"checkpoint", "dir", T_STR, F_(checkpoint, dir), S_(checkpoint, dir), "", 0, 0, NULL,
     "directory for checkpoints; empty = none"},
    {"checkpoint", "every_steps", T_INT, F_(checkpoint, every_steps), 0, "0", 0, BIG, NULL,
     "steps between checkpoints; 0 = only at the end"},
    {"checkpoint", "keep_last", T_INT, F_(checkpoint, keep_last), 0, "3", 0, 1000000, NULL,
     "checkpoints to keep, newest first (older ones are removed after each write); 0 = all"},

    {"verify", "steps", T_INT, F_(verify, steps), 0, "20", 1, BIG, NULL,
     "--verify: steps to run and replay"},
    {"verify", "rtol", T_FLOAT, F_(verify, rtol), 0, "1e-4", 0, 1, NULL,
     "--verify: relative tolerance outside deterministic mode"},
};

#define NKEYS (sizeof keys_ / sizeof keys_[0])

// ---- value parsers ----

static char *trim_(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

static int parse_long_(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return VGPU_EINVAL;
    *out = v;
    return 0;
}

// strtod also reads hexadecimal ("0x10" is 16, "0x1p-3" 0.125), "inf" and
// "nan"; values are documented as decimal, and integer keys read base 10.
// True when the text strtod consumed, [s, end), is plain decimal notation.
static int decimal_only_(const char *s, const char *end)
{
    return strspn(s, "0123456789.eE+-") >= (size_t)(end - s);
}

static int parse_double_(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !decimal_only_(s, end) || !isfinite(v))
        return VGPU_EINVAL;
    *out = v;
    return 0;
}

static int parse_bool_(const char *s, int *out)
{
    static const char *yes[] = {"true", "yes", "on", "1"}, *no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i]))
            return *out = 1, 0;
        if (!strcasecmp(s, no[i]))
            return *out = 0, 0;
    }
    return VGPU_EINVAL;
}

int config_parse_size(const char *text, uint64_t *bytes)
{
    char *end;
    errno = 0;
    while (isspace((unsigned char)*text))
        text++;
    if (*text == '-' || *text == '+')
        return VGPU_EINVAL;
    double v = strtod(text, &end);
    if (errno || end == text || !decimal_only_(text, end) || !isfinite(v) || v < 0)
        return VGPU_EINVAL;
    double mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1024.0; end++; break;
    case 'M': mult = 1024.0 * 1024; end++; break;
    case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return VGPU_EINVAL;
    // A fraction of a unit ("6.4M") is rounded down to whole bytes; a plain
    // count of bytes must be whole.
    double b = mult > 1 ? floor(v * mult) : v;
    if (b >= 18446744073709551615.0 || b != floor(b))
        return VGPU_EINVAL;
    *bytes = (uint64_t)b;
    return 0;
}

// ---- schema lookup ----

static const struct key_spec *find_key_(const char *section, const char *key)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys_[i].section, section) && !strcmp(keys_[i].key, key))
            return &keys_[i];
    return NULL;
}

static int section_known_(const char *section)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys_[i].section, section))
            return 1;
    return 0;
}

static size_t edit_distance_(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            size_t best = sub;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

// Closest known "section.key" to the given one, or NULL if nothing is close.
static const char *suggest_(const char *section, const char *key, char *buf, size_t buf_bytes)
{
    char want[160];
    snprintf(want, sizeof want, "%s.%s", section, key);
    size_t best = (size_t)-1;
    for (size_t i = 0; i < NKEYS; i++) {
        char have[160];
        snprintf(have, sizeof have, "%s.%s", keys_[i].section, keys_[i].key);
        size_t d = edit_distance_(want, have);
        // A right key in the wrong section is also a good suggestion.
        if (!strcmp(keys_[i].key, key))
            d = d < 2 ? d : 2;
        if (d < best) {
            best = d;
            snprintf(buf, buf_bytes, "%s", have);
        }
    }
    return best <= 3 ? buf : NULL;
}

// ---- setting one value ----

static int set_list_(const struct key_spec *k, void *field, char *value, char *msg, size_t msg_bytes)
{
    int is_int = k->type == T_INT_LIST;
    struct config_int_list il = {0};
    struct config_float_list fl = {0};
    char *s = trim_(value);
    if (*s) {
        // Split at every comma: an empty element ("256,,128", "256,") is a
        // typo to report, not something to skip.
        for (char *tok = s, *next; tok; tok = next) {
            next = strchr(tok, ',');
            if (next)
                *next++ = '\0';
            tok = trim_(tok);
            int n = is_int ? il.count : fl.count;
            if (!*tok)
                return snprintf(msg, msg_bytes, "value %d of the list is empty", n + 1),
                       VGPU_ECONFIG;
            if (n == CONFIG_LIST_MAX)
                return snprintf(msg, msg_bytes, "too many values (at most %d)", CONFIG_LIST_MAX),
                       VGPU_ECONFIG;
            double d;
            long l = 0;
            int rc = is_int ? parse_long_(tok, &l) : parse_double_(tok, &d);
            if (rc)
                return snprintf(msg, msg_bytes, "'%s' is not %s", tok,
                                is_int ? "an integer" : "a number"),
                       VGPU_ECONFIG;
            // Integers are compared as integers: past 2^53 a double cannot
            // tell max + 1 from max (BIG's keys accepted 1e18 + 1).
            if (is_int ? l < (long)k->min || l > (long)k->max : d < k->min || d > k->max)
                return snprintf(msg, msg_bytes, "value %s out of range [%g, %g]", tok, k->min, k->max),
                       VGPU_ECONFIG;
            if (is_int)
                il.v[il.count++] = l;
            else
                fl.v[fl.count++] = d;
        }
    }
    if (is_int)
        memcpy(field, &il, sizeof il);
    else
        memcpy(field, &fl, sizeof fl);
    return 0;
}

// An enum key's values as "a|b|c".
static const char *choices_text_(const struct key_spec *k, char *buf, size_t bytes)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; k->choices[i] && len < bytes; i++)
        len += (size_t)snprintf(buf + len, bytes - len, "%s%s", i ? "|" : "", k->choices[i]);
    return buf;
}

// Parses `raw` for key k into cfg; on error writes a message without location.
static int set_value_(struct config *cfg, const struct key_spec *k, const char *raw, char *msg,
                      size_t msg_bytes)
{
    char buf[CONFIG_VALUE_MAX + 1];
    if (strlen(raw) >= sizeof buf)
        return snprintf(msg, msg_bytes, "value longer than %d characters", CONFIG_VALUE_MAX),
               VGPU_ECONFIG;
    strcpy(buf, raw);
    char *v = trim_(buf);
    void *field = (char *)cfg + k->offset;
    switch (k->type) {
    case T_INT: {
        long l;
        if (parse_long_(v, &l))
            return snprintf(msg, msg_bytes, "'%s' is not an integer", v), VGPU_ECONFIG;
        if (l < (long)k->min || l > (long)k->max) // as integers: see set_list_
            return snprintf(msg, msg_bytes, "value %ld out of range [%.0f, %.0f]", l, k->min, k->max),
                   VGPU_ECONFIG;
        *(long *)field = l;
        return 0;
    }
    case T_FLOAT: {
        double d;
        if (parse_double_(v, &d))
            return snprintf(msg, msg_bytes, "'%s' is not a number (decimal, e.g. 0.5 or 1e-3)", v),
                   VGPU_ECONFIG;
        if (d < k->min || d > k->max)
            return snprintf(msg, msg_bytes, "value %s out of range [%.10g, %.10g]", v, k->min,
                            k->max),
                   VGPU_ECONFIG;
        *(double *)field = d;
        return 0;
    }
    case T_BOOL:
        if (parse_bool_(v, (int *)field))
            return snprintf(msg, msg_bytes, "'%s' is not a boolean (true/false)", v), VGPU_ECONFIG;
        return 0;
    case T_SIZE:
        if (config_parse_size(v, (uint64_t *)field))
            return snprintf(msg, msg_bytes, "'%s' is not a size (e.g. 4096, 64K, 512M, 2G)", v),
                   VGPU_ECONFIG;
        return 0;
    case T_STR:
        if (strlen(v) >= k->str_bytes)
            return snprintf(msg, msg_bytes, "value longer than %zu characters", k->str_bytes - 1),
                   VGPU_ECONFIG;
        strcpy(field, v);
        return 0;
    case T_ENUM: {
        for (int i = 0; k->choices[i]; i++)
            if (!strcmp(k->choices[i], v)) {
                *(int *)field = i;
                return 0;
            }
        char all[128];
        return snprintf(msg, msg_bytes, "'%s' is not one of %s", v,
                        choices_text_(k, all, sizeof all)),
               VGPU_ECONFIG;
    }
    case T_INT_LIST:
    case T_FLOAT_LIST:
        return set_list_(k, field, v, msg, msg_bytes);
    }
    return VGPU_EINVAL;
}

void config_defaults(struct config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    char msg[256];
    for (size_t i = 0; i < NKEYS; i++) {
        int rc = set_value_(cfg, &keys_[i], keys_[i].def, msg, sizeof msg);
        if (rc) { // a broken default is a programming error: fail loudly
            fprintf(stderr, "config: bad default for %s.%s: %s\n", keys_[i].section, keys_[i].key, msg);
            abort();
        }
    }
}

// ---- INI parsing ----

struct ini_ctx {
    struct config *cfg;
    int program_sections;      // sections vgpu does not know are the program's: skipped
    const char *origin;
    char *err;
    size_t err_bytes;
    int failed;
    unsigned char seen[NKEYS]; // duplicate detection within one file
    const char *next;          // unread text
    int line;                  // lines handed to inih so far (inih counts the same way)
    int fail_line;             // line of the handler's error, when failed
    int too_long;              // the parse stopped at line `line`: longer than line_max
    int line_max;              // characters a line may hold (inih's buffer less "\n\0")
};

// inih reader over a string that counts lines, so that a handler error can be
// told apart from an earlier syntax error (inih reports only the first line).
// inih reads each line into one buffer of `num` bytes (Debian's libinih:
// INI_MAX_LINE = 200, built without realloc) and parses whatever a read
// returns as a whole line: a longer line would be cut and its rest parsed as
// a line of its own. So the reader hands over whole lines only, "text\n" as
// fgets would (a "\r\n" ending becomes "\n"), and ends the parse at the first
// line that does not fit, for config_load_string to report.
static char *ini_reader_(char *str, int num, void *stream)
{
    struct ini_ctx *ctx = stream;
    const char *p = ctx->next;
    if (!*p || ctx->too_long)
        return NULL;
    size_t len = strcspn(p, "\n"), text = len;
    if (text > 0 && p[text - 1] == '\r')
        text--;
    ctx->line++;
    ctx->line_max = num - 2;
    if (num < 2 || text > (size_t)ctx->line_max) {
        ctx->too_long = 1;
        return NULL;
    }
    memcpy(str, p, text);
    str[text] = '\n';
    str[text + 1] = '\0';
    ctx->next = p + len + (p[len] == '\n');
    return str;
}

static int ini_handler_(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *ctx = user;
    if (ctx->failed) // report only the first error; inih returns its line
        return 0;
    char msg[512], hint[160];
    const struct key_spec *k = find_key_(section, name);
    if (!k && ctx->program_sections && *section && !section_known_(section))
        return 1; // the program's own section: its to read (vgpu_config_text)
    if (!k) {
        const char *s = suggest_(section, name, hint, sizeof hint);
        if (!*section)
            snprintf(msg, sizeof msg, "key '%s' outside any [section]%s%s%s", name,
                     s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
        else if (!section_known_(section))
            snprintf(msg, sizeof msg, "unknown section [%s] (key '%s')%s%s%s", section, name,
                     s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "");
        else
            snprintf(msg, sizeof msg, "unknown key '%s' in [%s]%s%s%s", name, section,
                     s ? "; did you mean '" : "", s ? s : "", s ? "'?" : "");
        ctx->failed = 1;
        ctx->fail_line = ctx->line;
        snprintf(ctx->err, ctx->err_bytes, "%s", msg);
        return 0;
    }
    size_t idx = (size_t)(k - keys_);
    if (ctx->seen[idx]) {
        ctx->failed = 1;
        ctx->fail_line = ctx->line;
        snprintf(ctx->err, ctx->err_bytes, "duplicate key '%s' in [%s]", name, section);
        return 0;
    }
    ctx->seen[idx] = 1;
    // inih ends a value at " ;"; " #" starts a comment too (--help-config
    // writes '#' comments, and a user adds them the same way).
    char bare[256];
    snprintf(bare, sizeof bare, "%s", value);
    for (char *c = strchr(bare, '#'); c; c = strchr(c + 1, '#'))
        if (c > bare && isspace((unsigned char)c[-1])) {
            while (c > bare && isspace((unsigned char)c[-1]))
                c--;
            *c = '\0';
            break;
        }
    if (set_value_(ctx->cfg, k, bare, msg, sizeof msg)) {
        ctx->failed = 1;
        ctx->fail_line = ctx->line;
        snprintf(ctx->err, ctx->err_bytes, "%s.%s: %s", section, name, msg);
        return 0;
    }
    return 1;
}

static int load_string_(struct config *cfg, const char *text, const char *origin,
                        int program_sections, char *err, size_t err_bytes)
{
    char msg[640] = "";
    struct ini_ctx ctx = {.cfg = cfg, .origin = origin, .err = msg, .err_bytes = sizeof msg,
                          .next = text, .program_sections = program_sections};
    int line = ini_parse_stream(ini_reader_, &ctx, ini_handler_, &ctx);
    if (line == 0 && ctx.too_long) {
        // The lines before it parsed cleanly (an error there would come first).
        line = ctx.line;
        snprintf(msg, sizeof msg, "line longer than %d characters (the INI reader's limit: "
                 "shorten it, or give the value with --set)", ctx.line_max);
    } else if (line == 0 && !ctx.failed) {
        return 0;
    } else if (line > 0 && !(ctx.failed && ctx.fail_line == line)) {
        // inih returns the first failing line: ours if the handler failed
        // there, else a line it could not parse.
        snprintf(msg, sizeof msg, "syntax error (expected [section] or key = value)");
    } else if (line < 0) {
        snprintf(msg, sizeof msg, "out of memory while parsing");
    }
    return util_errorf(err, err_bytes, VGPU_ECONFIG, "%s:%d: %s", origin, line > 0 ? line : 0, msg);
}

int config_load_string(struct config *cfg, const char *text, const char *origin, char *err,
                       size_t err_bytes)
{
    return load_string_(cfg, text, origin, 0, err, err_bytes);
}

int config_read_file(const char *path, char **out, char *err, size_t err_bytes)
{
    *out = NULL;
    // Non-blocking, so that a FIFO cannot hang the open; only a regular file
    // is a config.
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        util_errorf(err, err_bytes, VGPU_ECONFIG, "%s: cannot open config: %s", path, strerror(e));
        return -e;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "%s: %s, not a config file", path,
                           S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        util_errorf(err, err_bytes, VGPU_ECONFIG, "%s: cannot open config: %s", path, strerror(e));
        return -e;
    }
    // Read whole file so that the INI text can also be broadcast as-is.
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (16u << 20)) {
                fclose(f);
                free(text);
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "%s: config file larger than 16 MiB", path);
            }
            char *t = realloc(text, cap);
            if (!t) {
                fclose(f);
                free(text);
                return VGPU_ENOMEM;
            }
            text = t;
        }
        size_t n = fread(text + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    int read_failed = ferror(f);
    fclose(f);
    if (read_failed) {
        free(text);
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "%s: read error", path);
    }
    text[len] = '\0';
    if (strlen(text) != len) {
        free(text);
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "%s: not a text file (contains NUL bytes)", path);
    }
    *out = text;
    return 0;
}

int config_load_file(struct config *cfg, const char *path, char *err, size_t err_bytes)
{
    char *text = NULL;
    int rc = config_read_file(path, &text, err, err_bytes);
    if (rc == 0)
        rc = config_load_string(cfg, text, path, err, err_bytes);
    free(text);
    return rc;
}

static int apply_override_(struct config *cfg, const char *assignment, int program_sections,
                           char *err, size_t err_bytes)
{
    const char *eq = strchr(assignment, '=');
    const char *dot = strchr(assignment, '.');
    if (!eq || !dot || dot > eq)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--set %s: expected section.key=value", assignment);
    char section[64], key[64];
    size_t slen = (size_t)(dot - assignment), klen = (size_t)(eq - dot - 1);
    if (slen == 0 || slen >= sizeof section || klen == 0 || klen >= sizeof key)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "--set %s: expected section.key=value", assignment);
    memcpy(section, assignment, slen);
    section[slen] = '\0';
    memcpy(key, dot + 1, klen);
    key[klen] = '\0';
    char *s = trim_(section), *k = trim_(key);
    const struct key_spec *spec = find_key_(s, k);
    char msg[512], hint[160];
    if (!spec && program_sections && !section_known_(s))
        return 0; // the program's own key
    if (!spec) {
        const char *sug = suggest_(s, k, hint, sizeof hint);
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "--set %s.%s: unknown key%s%s%s", s, k,
                           sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
    }
    if (set_value_(cfg, spec, eq + 1, msg, sizeof msg))
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "--set %s.%s: %s", s, k, msg);
    return 0;
}

int config_apply_override(struct config *cfg, const char *assignment, char *err, size_t err_bytes)
{
    return apply_override_(cfg, assignment, 0, err, err_bytes);
}

// Launchers (vgpurun) pass device settings to every rank on every host as
// environment variables; they override the file and yield to --set.
static const struct {
    const char *var, *section, *key;
} env_keys_[] = {
    {"VGPU_RANKS_PER_DEVICE", "devices", "ranks_per_device"},
    {"VGPU_MEMORY_LIMIT", "devices", "memory_limit"},
    {"VGPU_BACKEND", "comm", "backend"},
    {"VGPU_COMM_TIMEOUT_S", "comm", "timeout_s"},
};

void config_print_env_reference(FILE *f)
{
    for (size_t i = 0; i < sizeof env_keys_ / sizeof env_keys_[0]; i++)
        fprintf(f, "  %s=VALUE\n      sets %s.%s (file < environment < --set)\n", env_keys_[i].var,
                env_keys_[i].section, env_keys_[i].key);
}

void config_describe_env(char *buf, size_t bytes)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof env_keys_ / sizeof env_keys_[0] && len < bytes; i++) {
        const char *value = getenv(env_keys_[i].var);
        if (value)
            len += (size_t)snprintf(buf + len, bytes - len, "%s%s=%s (%s.%s)", len ? ", " : "",
                                    env_keys_[i].var, value, env_keys_[i].section,
                                    env_keys_[i].key);
    }
}

int config_apply_env(struct config *cfg, char *err, size_t err_bytes)
{
    for (size_t i = 0; i < sizeof env_keys_ / sizeof env_keys_[0]; i++) {
        const char *value = getenv(env_keys_[i].var);
        if (!value)
            continue;
        char msg[512];
        if (set_value_(cfg, find_key_(env_keys_[i].section, env_keys_[i].key), value, msg, sizeof msg))
            return util_errorf(err, err_bytes, VGPU_ECONFIG, "%s=%s (%s.%s): %s", env_keys_[i].var, value,
                               env_keys_[i].section, env_keys_[i].key, msg);
    }
    return 0;
}

int config_validate(const struct config *cfg, char *err, size_t err_bytes)
{
    if (cfg->devices.memory_limit && cfg->devices.memory_fraction > 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "devices.memory_limit and devices.memory_fraction conflict: set one of them");
    if (cfg->devices.map.count && cfg->devices.ranks_per_device)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "devices.map and devices.ranks_per_device conflict: set one of them");
    if (cfg->data.dataset == DATASET_MNIST_IDX && !cfg->data.path[0])
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "data.dataset = mnist-idx needs data.path");
    for (int i = 0; i < cfg->train.batch_weights.count; i++)
        if (!(cfg->train.batch_weights.v[i] > 0))
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "train.batch_weights: every weight must be > 0");
    if (cfg->train.deterministic && cfg->train.balance == BALANCE_DYNAMIC)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "train.balance = dynamic splits batches by timing, which train.deterministic "
                           "= true rules out: set one of them");
    if (cfg->model.hidden.count == 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "model.hidden: at least one hidden layer is needed");
    return 0;
}

const char *config_enum_name(const char *section, const char *key, int value)
{
    const struct key_spec *k = find_key_(section, key);
    if (!k || k->type != T_ENUM || value < 0)
        return NULL;
    for (int i = 0; k->choices[i]; i++)
        if (i == value)
            return k->choices[i];
    return NULL;
}

void config_print_reference(void *file)
{
    FILE *f = file;
    const char *section = "";
    for (size_t i = 0; i < NKEYS; i++) {
        const struct key_spec *k = &keys_[i];
        if (strcmp(section, k->section)) {
            section = k->section;
            fprintf(f, "%s[%s]\n", i ? "\n" : "", section);
        }
        fprintf(f, "# %s", k->doc);
        char all[128];
        if (k->type == T_ENUM)
            fprintf(f, " (%s)", choices_text_(k, all, sizeof all));
        fprintf(f, "\n%s = %s\n", k->key, k->def);
    }
}

int config_load_job_text(struct config *cfg, const char *text, const char *path,
                         const char *const *overrides, int n_overrides, int program_sections,
                         char *err, size_t err_bytes)
{
    config_defaults(cfg);
    int rc = text ? load_string_(cfg, text, path ? path : "config", program_sections, err,
                                 err_bytes)
                  : 0;
    if (!rc)
        rc = config_apply_env(cfg, err, err_bytes);
    for (int i = 0; i < n_overrides && !rc; i++)
        rc = apply_override_(cfg, overrides[i], program_sections, err, err_bytes);
    if (rc || !(rc = config_validate(cfg, err, err_bytes)) || (!path && !n_overrides))
        return rc;
    // A rule across keys names the sources its values came from.
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err);
    snprintf(err, err_bytes, "%s%s%s: %s", path ? path : "", path && n_overrides ? " with " : "",
             n_overrides ? "--set" : "", msg);
    return rc;
}

int config_load_job(struct config *cfg, const char *path, const char *const *overrides,
                    int n_overrides, char *err, size_t err_bytes)
{
    char *text = NULL;
    int rc = path ? config_read_file(path, &text, err, err_bytes) : 0;
    if (rc == 0)
        rc = config_load_job_text(cfg, text, path, overrides, n_overrides, 0, err, err_bytes);
    free(text);
    return rc;
}
