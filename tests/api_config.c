// api_config.c: a program keeps its own settings in the job's config file.
// vgpu_init reads the file once (rank 0), takes its own sections and leaves
// the program's ([myapp] here) and --set overrides of its keys to it; every
// rank gets the same text through vgpu_config_text and reads its section
// itself. Usage: test_api_config FILE [section.key=value ...]; prints one
// line a rank: "api_config: rank R of N: backend B, greeting G, timeout T".
#include <stdio.h>
#include <string.h>

#include <vgpu/vgpu.h>
#include <vgpu/vgpu_ext.h>

// The value of `key` in [section] of INI text ("" when absent), trimmed.
static void find_value_(const char *text, const char *section, const char *key, char *out,
                        size_t bytes)
{
    char in[64] = "";
    out[0] = '\0';
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        char buf[256];
        size_t len = end ? (size_t)(end - line) : strlen(line);
        len = len < sizeof buf - 1 ? len : sizeof buf - 1;
        memcpy(buf, line, len);
        buf[len] = '\0';
        char name[64], value[128];
        if (sscanf(buf, " [%63[^]]]", name) == 1)
            snprintf(in, sizeof in, "%s", name);
        else if (!strcmp(in, section) && sscanf(buf, " %63[^= ] = %127s", name, value) == 2 &&
                 !strcmp(name, key))
            snprintf(out, bytes, "%s", value);
        line = end ? end + 1 : NULL;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_api_config FILE [section.key=value ...]\n");
        return 2;
    }
    const struct vgpu_options options = {.config_path = argv[1],
                                         .overrides = (const char *const *)argv + 2,
                                         .n_overrides = argc - 2,
                                         .quiet = 1};
    vgpu_t *v = NULL;
    int rc = vgpu_init(&v, &argc, &argv, &options);
    if (rc < 0) {
        fprintf(stderr, "api_config: vgpu_init: %s\n", vgpu_status_string(rc));
        return 2;
    }
    const char *text = vgpu_config_text(v);
    char greeting[128] = "", timeout[64] = "";
    if (text) {
        find_value_(text, "myapp", "greeting", greeting, sizeof greeting);
        find_value_(text, "comm", "timeout_s", timeout, sizeof timeout);
    }
    // An override of the program's own key is the program's to apply.
    for (int i = 2; i < argc; i++)
        if (!strncmp(argv[i], "myapp.greeting=", 15))
            snprintf(greeting, sizeof greeting, "%s", argv[i] + 15);
    printf("api_config: rank %d of %d: backend %s, greeting %s, timeout %s\n", vgpu_rank(v),
           vgpu_size(v), vgpu_backend(v), greeting[0] ? greeting : "-", timeout[0] ? timeout : "-");
    return vgpu_finalize(v) < 0;
}
