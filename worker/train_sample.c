// train_sample.c: after training, text sampled from a language model
// ([sample]: bytes, temperature, seed, prompt). Every rank samples (the same
// bits: the same parameters, the same seed), so none waits for rank 0 in
// the next collective; rank 0 prints. A failure is said, not fatal: the
// training it follows is done.
#include "train_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

// The bytes as text: printable ASCII, newlines and tabs as they are, any
// other byte as \xNN (the model may emit any of the 256).
static void print_bytes_(const int32_t *tokens, int n)
{
    for (int i = 0; i < n; i++) {
        const int c = tokens[i];
        if (c == '\n' || c == '\t' || (c < 128 && isprint(c)))
            putchar(c);
        else
            printf("\\x%02x", (unsigned)c & 0xffu);
    }
}

int train_sample(struct trainer *t)
{
    const struct train_config *cfg = t->cfg;
    if (cfg->sample.bytes <= 0)
        return 0;
    if (!t->model.ops->sample) {
        if (t->job->rank == 0)
            log_warn("sample.bytes = %ld: model.type %s does not generate text; nothing sampled",
                 cfg->sample.bytes, t->model.ops->name);
        return 0;
    }
    const char *text = cfg->sample.prompt[0] ? cfg->sample.prompt : "\n";
    const int n_prompt = (int)strlen(text), n_out = (int)cfg->sample.bytes;
    int32_t *prompt = malloc((size_t)n_prompt * sizeof *prompt);
    int32_t *out = malloc((size_t)n_out * sizeof *out);
    int rc = prompt && out ? 0 : VGPU_ENOMEM;
    for (int i = 0; rc == 0 && i < n_prompt; i++)
        prompt[i] = (unsigned char)text[i];
    if (rc == 0)
        rc = model_sample(&t->model, t->dev, prompt, n_prompt, out, n_out,
                          (float)cfg->sample.temperature, (uint64_t)cfg->sample.seed);
    if (rc < 0 && t->job->rank == 0)
        log_warn("sampling failed (%s): no sample", status_str(rc));
    if (rc == 0 && t->job->rank == 0) {
        printf("vgpu_train: sample (%d bytes, temperature %g, seed %ld):\n", n_out,
               cfg->sample.temperature, cfg->sample.seed);
        if (cfg->sample.prompt[0])
            print_bytes_(prompt, n_prompt);
        print_bytes_(out, n_out);
        printf("\n");
        fflush(stdout);
    }
    free(out);
    free(prompt);
    return 0;
}
