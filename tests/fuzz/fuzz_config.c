// fuzz_config.c: libFuzzer target for the INI config parser, over both parts
// of vgpu_train's file (libvgpu's and the trainer's schemas): the input is a
// config file; it is also tried as one --set assignment (its first line).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "train_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0'; // the parser reads C strings; an embedded NUL ends the text early
    struct config cfg;
    struct train_config tc;
    char err[1024];
    config_defaults(&cfg);
    train_config_defaults(&tc);
    if (train_config_load_string(&tc, &cfg, text, "fuzz.ini", err, sizeof err) == 0 &&
        config_validate(&cfg, err, sizeof err) == 0)
        (void)train_config_validate(&tc, err, sizeof err);
    // Whatever happened, the message must be a terminated string.
    if (memchr(err, '\0', sizeof err) == NULL)
        abort();

    char *newline = strchr(text, '\n');
    if (newline)
        *newline = '\0';
    config_defaults(&cfg);
    train_config_defaults(&tc);
    (void)train_config_apply_override(&tc, &cfg, text, err, sizeof err);
    free(text);
    return 0;
}
