// api_cap.c: a rank past its device memory cap, on libvgpu's public API as a
// user's program (so it binds whatever the job binds: a GPU in the GPU
// check, scripts/gpu/check.sh; CPU devices in e2e/runtime_cap.sh).
//
//   test_api_cap RANK [--set KEY=VALUE]...   (under mpirun or vgpurun)
//
// Every rank takes 40 MiB of a 64 MiB cap (a --set devices.memory_limit=...
// wins); RANK then asks for 32 MiB more: vgpu's error names it, and the
// program ends the job through vgpu_abort, as a trainer would (exit
// non-zero). With no rank past its cap (RANK out of range) it prints "no
// rank exceeded its cap" and exits 0.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vgpu/vgpu.h>
#include <vgpu/vgpu_ext.h>

#define MAX_SETS 16

#define MUST(v, call)                                                                   \
    do {                                                                                \
        int rc_ = (call);                                                               \
        if (rc_ < 0) {                                                                  \
            fprintf(stderr, "[rank %d] test_api_cap: %s: %s\n", vgpu_rank(v), #call,    \
                    vgpu_status_string(rc_));                                           \
            vgpu_abort(v, 1);                                                           \
        }                                                                               \
    } while (0)

int main(int argc, char **argv)
{
    const char *sets[MAX_SETS + 1] = {"devices.memory_limit=64M"};
    int n_sets = 1, bad = argc < 2;
    for (int i = 2; !bad && i < argc; i += 2) {
        bad = strcmp(argv[i], "--set") || i + 1 == argc || n_sets == MAX_SETS + 1;
        if (!bad)
            sets[n_sets++] = argv[i + 1];
    }
    if (bad) {
        if (vgpu_launcher_rank() == 0)
            fprintf(stderr, "usage: test_api_cap RANK [--set KEY=VALUE]...\n");
        return 2;
    }
    const int victim = atoi(argv[1]);
    const struct vgpu_options vo = {.overrides = sets, .n_overrides = n_sets};
    vgpu_t *v;
    int rc = vgpu_init(&v, &argc, &argv, &vo);
    if (rc < 0) {
        fprintf(stderr, "test_api_cap: vgpu_init: %s\n", vgpu_status_string(rc));
        return 1;
    }
    void *a, *b;
    MUST(v, vgpu_malloc(v, &a, (size_t)40 << 20));
    MUST(v, vgpu_barrier(v));
    if (vgpu_rank(v) == victim) {
        rc = vgpu_malloc(v, &b, (size_t)32 << 20);
        if (rc < 0) {
            fprintf(stderr, "[rank %d] test_api_cap: vgpu_malloc returned: %s\n", victim,
                    vgpu_status_string(rc));
            vgpu_abort(v, 1);
        }
        fprintf(stderr, "[rank %d] test_api_cap: 32 MiB more were granted past the cap\n", victim);
    }
    MUST(v, vgpu_barrier(v));
    if (vgpu_rank(v) == 0)
        printf("test_api_cap: no rank exceeded its cap\n");
    MUST(v, vgpu_free(v, a));
    return vgpu_finalize(v) < 0;
}
