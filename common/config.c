// config.c: the configuration engine: INI text, --set overrides and the
// environment checked against schema tables (struct config_schema), one a
// part of the program (libvgpu's [devices] and [comm]: config_vgpu.c; a
// program's own, e.g. vgpu_train's: worker/train_config.c).
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "util.h"

// Returns a failure as it is (its message is in err already).
#define TRY_QUIET_(expr)               \
    do {                               \
        int rc_ = (expr);              \
        if (rc_ < 0)                   \
            return rc_;                \
    } while (0)


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

// The key section.key among the parts' schemas; *part (when set) is its
// part's index and *index its index across all parts (for duplicate checks).
static const struct config_key *find_key_(const struct config_part *parts, int n,
                                          const char *section, const char *key, int *part,
                                          size_t *index)
{
    size_t base = 0;
    for (int p = 0; p < n; p++) {
        const struct config_schema *s = parts[p].schema;
        for (size_t i = 0; i < s->nkeys; i++)
            if (!strcmp(s->keys[i].section, section) && !strcmp(s->keys[i].key, key)) {
                if (part)
                    *part = p;
                if (index)
                    *index = base + i;
                return &s->keys[i];
            }
        base += s->nkeys;
    }
    return NULL;
}

static int section_known_(const struct config_part *parts, int n, const char *section)
{
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p].schema->nkeys; i++)
            if (!strcmp(parts[p].schema->keys[i].section, section))
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
static const char *suggest_(const struct config_part *parts, int n, const char *section,
                            const char *key, char *buf, size_t buf_bytes)
{
    char want[160];
    snprintf(want, sizeof want, "%s.%s", section, key);
    size_t best = (size_t)-1;
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p].schema->nkeys; i++) {
            const struct config_key *k = &parts[p].schema->keys[i];
            char have[160];
            snprintf(have, sizeof have, "%s.%s", k->section, k->key);
            size_t d = edit_distance_(want, have);
            // A right key in the wrong section is also a good suggestion.
            if (!strcmp(k->key, key))
                d = d < 2 ? d : 2;
            if (d < best) {
                best = d;
                snprintf(buf, buf_bytes, "%s", have);
            }
        }
    return best <= 3 ? buf : NULL;
}

// ---- setting one value ----

static int set_list_(const struct config_key *k, void *field, char *value, char *msg, size_t msg_bytes)
{
    int is_int = k->type == CONFIG_INT_LIST;
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
static const char *choices_text_(const struct config_key *k, char *buf, size_t bytes)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; k->choices[i] && len < bytes; i++)
        len += (size_t)snprintf(buf + len, bytes - len, "%s%s", i ? "|" : "", k->choices[i]);
    return buf;
}

// Parses `raw` for key k into cfg; on error writes a message without location.
static int set_value_(void *cfg, const struct config_key *k, const char *raw, char *msg,
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
    case CONFIG_INT: {
        long l;
        if (parse_long_(v, &l))
            return snprintf(msg, msg_bytes, "'%s' is not an integer", v), VGPU_ECONFIG;
        if (l < (long)k->min || l > (long)k->max) // as integers: see set_list_
            return snprintf(msg, msg_bytes, "value %ld out of range [%.0f, %.0f]", l, k->min, k->max),
                   VGPU_ECONFIG;
        *(long *)field = l;
        return 0;
    }
    case CONFIG_FLOAT: {
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
    case CONFIG_BOOL:
        if (parse_bool_(v, (int *)field))
            return snprintf(msg, msg_bytes, "'%s' is not a boolean (true/false)", v), VGPU_ECONFIG;
        return 0;
    case CONFIG_SIZE:
        if (config_parse_size(v, (uint64_t *)field))
            return snprintf(msg, msg_bytes, "'%s' is not a size (e.g. 4096, 64K, 512M, 2G)", v),
                   VGPU_ECONFIG;
        return 0;
    case CONFIG_STR:
        if (strlen(v) >= k->str_bytes)
            return snprintf(msg, msg_bytes, "value longer than %zu characters", k->str_bytes - 1),
                   VGPU_ECONFIG;
        strcpy(field, v);
        return 0;
    case CONFIG_ENUM: {
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
    case CONFIG_INT_LIST:
    case CONFIG_FLOAT_LIST:
        return set_list_(k, field, v, msg, msg_bytes);
    }
    return VGPU_EINVAL;
}

void config_parts_defaults(const struct config_part *parts, int n)
{
    char msg[256];
    for (int p = 0; p < n; p++) {
        const struct config_schema *s = parts[p].schema;
        memset(parts[p].cfg, 0, s->bytes);
        for (size_t i = 0; i < s->nkeys; i++) {
            int rc = set_value_(parts[p].cfg, &s->keys[i], s->keys[i].def, msg, sizeof msg);
            if (rc) { // a broken default is a programming error: fail loudly
                fprintf(stderr, "config: bad default for %s.%s: %s\n", s->keys[i].section,
                        s->keys[i].key, msg);
                abort();
            }
        }
    }
}

// ---- INI parsing ----

struct ini_ctx {
    const struct config_part *parts;
    int nparts;
    int program_sections;      // sections no part knows are the program's: skipped
    const char *origin;
    char *err;
    size_t err_bytes;
    int failed;
    unsigned char seen[CONFIG_MAX_KEYS]; // duplicate detection within one file
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
// line that does not fit, for config_parts_load_text to report.
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
    int part = 0;
    size_t idx = 0;
    const struct config_key *k = find_key_(ctx->parts, ctx->nparts, section, name, &part, &idx);
    if (!k && ctx->program_sections && *section &&
        !section_known_(ctx->parts, ctx->nparts, section))
        return 1; // the program's own section: its to read (vgpu_config_text)
    if (!k) {
        const char *s = suggest_(ctx->parts, ctx->nparts, section, name, hint, sizeof hint);
        if (!*section)
            snprintf(msg, sizeof msg, "key '%s' outside any [section]%s%s%s", name,
                     s ? " (did you mean '" : "", s ? s : "", s ? "'?)" : "");
        else if (!section_known_(ctx->parts, ctx->nparts, section))
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
    if (set_value_(ctx->parts[part].cfg, k, bare, msg, sizeof msg)) {
        ctx->failed = 1;
        ctx->fail_line = ctx->line;
        snprintf(ctx->err, ctx->err_bytes, "%s.%s: %s", section, name, msg);
        return 0;
    }
    return 1;
}

int config_parts_load_text(const struct config_part *parts, int n, const char *text,
                           const char *origin, int program_sections, char *err, size_t err_bytes)
{
    char msg[640] = "";
    struct ini_ctx ctx = {.parts = parts, .nparts = n, .origin = origin, .err = msg,
                          .err_bytes = sizeof msg, .next = text,
                          .program_sections = program_sections};
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

int config_read_file(const char *path, char **out, char *err, size_t err_bytes)
{
    *out = NULL;
    // Whole, so that the INI text can also be broadcast as-is.
    void *data;
    size_t len;
    int rc = util_read_file(path, "config", 16u << 20, &data, &len, err, err_bytes);
    if (rc < 0) // not a regular file, too large, unreadable: a bad config
        return rc == VGPU_EIO ? VGPU_ECONFIG : rc;
    char *text = data;
    if (strlen(text) != len) {
        free(text);
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "%s: not a text file (contains NUL bytes)", path);
    }
    *out = text;
    return 0;
}

int config_parts_load_file(const struct config_part *parts, int n, const char *path, char *err,
                           size_t err_bytes)
{
    char *text = NULL;
    int rc = config_read_file(path, &text, err, err_bytes);
    if (rc == 0)
        rc = config_parts_load_text(parts, n, text, path, 0, err, err_bytes);
    free(text);
    return rc;
}

int config_parts_override(const struct config_part *parts, int n, const char *assignment,
                          int program_sections, char *err, size_t err_bytes)
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
    int part = 0;
    const struct config_key *spec = find_key_(parts, n, s, k, &part, NULL);
    char msg[512], hint[160];
    if (!spec && program_sections && !section_known_(parts, n, s))
        return 0; // the program's own key
    if (!spec) {
        const char *sug = suggest_(parts, n, s, k, hint, sizeof hint);
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "--set %s.%s: unknown key%s%s%s", s, k,
                           sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
    }
    if (set_value_(parts[part].cfg, spec, eq + 1, msg, sizeof msg))
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "--set %s.%s: %s", s, k, msg);
    return 0;
}

// ---- the environment, the rules across keys, the reference ----

void config_parts_print_env_reference(const struct config_part *parts, int n, FILE *f)
{
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p].schema->nenv; i++) {
            const struct config_env_key *e = &parts[p].schema->env[i];
            fprintf(f, "  %s=VALUE\n      sets %s.%s (file < environment < --set)\n", e->var,
                    e->section, e->key);
        }
}

void config_parts_describe_env(const struct config_part *parts, int n, char *buf, size_t bytes)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p].schema->nenv && len < bytes; i++) {
            const struct config_env_key *e = &parts[p].schema->env[i];
            const char *value = getenv(e->var);
            if (value)
                len += (size_t)snprintf(buf + len, bytes - len, "%s%s=%s (%s.%s)", len ? ", " : "",
                                        e->var, value, e->section, e->key);
        }
}

int config_parts_env(const struct config_part *parts, int n, char *err, size_t err_bytes)
{
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p].schema->nenv; i++) {
            const struct config_env_key *e = &parts[p].schema->env[i];
            const char *value = getenv(e->var);
            if (!value)
                continue;
            int part = 0;
            const struct config_key *k = find_key_(parts, n, e->section, e->key, &part, NULL);
            char msg[512];
            if (set_value_(parts[part].cfg, k, value, msg, sizeof msg))
                return util_errorf(err, err_bytes, VGPU_ECONFIG, "%s=%s (%s.%s): %s", e->var,
                                   value, e->section, e->key, msg);
        }
    return 0;
}

int config_parts_validate(const struct config_part *parts, int n, char *err, size_t err_bytes)
{
    for (int p = 0; p < n; p++)
        if (parts[p].schema->validate)
            TRY_QUIET_(parts[p].schema->validate(parts[p].cfg, err, err_bytes));
    return 0;
}

const char *config_schema_enum_name(const struct config_schema *schema, const char *section,
                                    const char *key, int value)
{
    const struct config_part part = {schema, NULL};
    const struct config_key *k = find_key_(&part, 1, section, key, NULL, NULL);
    if (!k || k->type != CONFIG_ENUM || value < 0)
        return NULL;
    for (int i = 0; k->choices[i]; i++)
        if (i == value)
            return k->choices[i];
    return NULL;
}

void config_parts_print_reference(const struct config_part *parts, int n, FILE *f)
{
    const char *section = "";
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < parts[p].schema->nkeys; i++) {
            const struct config_key *k = &parts[p].schema->keys[i];
            if (strcmp(section, k->section)) {
                fprintf(f, "%s[%s]\n", *section ? "\n" : "", k->section);
                section = k->section;
            }
            fprintf(f, "# %s", k->doc);
            char all[128];
            if (k->type == CONFIG_ENUM)
                fprintf(f, " (%s)", choices_text_(k, all, sizeof all));
            fprintf(f, "\n%s = %s\n", k->key, k->def);
        }
}

int config_parts_load_job(const struct config_part *parts, int n, const char *text,
                          const char *path, const char *const *overrides, int n_overrides,
                          int program_sections, char *err, size_t err_bytes)
{
    config_parts_defaults(parts, n);
    int rc = text ? config_parts_load_text(parts, n, text, path ? path : "config",
                                           program_sections, err, err_bytes)
                  : 0;
    if (!rc)
        rc = config_parts_env(parts, n, err, err_bytes);
    for (int i = 0; i < n_overrides && !rc; i++)
        rc = config_parts_override(parts, n, overrides[i], program_sections, err, err_bytes);
    if (rc || !(rc = config_parts_validate(parts, n, err, err_bytes)) || (!path && !n_overrides))
        return rc;
    // A rule across keys names the sources its values came from.
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", err);
    snprintf(err, err_bytes, "%s%s%s: %s", path ? path : "", path && n_overrides ? " with " : "",
             n_overrides ? "--set" : "", msg);
    return rc;
}
