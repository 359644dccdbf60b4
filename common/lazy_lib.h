// lazy_lib.h: a shared library loaded when first used (dlopen), not when the
// program starts, so a build with CUDA libraries starts on a host without
// them and names the missing library only when a path needs it. The GPU
// backends wrap each library's functions under their own names and
// prototypes (math/cuda/cublas_lib.c, comm/nccl/nccl_lib.c).
#ifndef VGPU_LAZY_LIB_H
#define VGPU_LAZY_LIB_H

#include <pthread.h>

struct lazy_lib {
    const char *soname;
    void *handle;  // NULL until loaded, or when the load failed
    char why[256]; // dlerror() of a failed load, or the missing symbol
    int said;      // why was said (once per library)
    pthread_once_t once;
};

// Opens lib and resolves each of names[i] into slots[i]; a missing symbol
// leaves the library unusable (older than the build's headers). Call it
// through pthread_once(&lib->once, ...).
void lazy_lib_load(struct lazy_lib *lib, const char *const *names, void **slots, int count);
// Says once (a warning naming `what`) why the library is not there; returns 1.
int lazy_lib_missing(struct lazy_lib *lib, const char *what);

#endif
