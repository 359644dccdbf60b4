// lazy_lib.c: a shared library loaded when first used (see lazy_lib.h).
#include "lazy_lib.h"

#include <dlfcn.h>
#include <stdio.h>

#include "log.h"

void lazy_lib_load(struct lazy_lib *lib, const char *const *names, void **slots, int count)
{
    lib->handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib->handle) {
        snprintf(lib->why, sizeof lib->why, "%s", dlerror());
        return;
    }
    for (int i = 0; i < count; i++) {
        slots[i] = dlsym(lib->handle, names[i]);
        if (!slots[i]) {
            snprintf(lib->why, sizeof lib->why, "%s has no %s (older than this build's headers?)",
                     lib->soname, names[i]);
            dlclose(lib->handle);
            lib->handle = NULL;
            return;
        }
    }
}

int lazy_lib_missing(struct lazy_lib *lib, const char *what)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (!lib->said) {
        lib->said = 1;
        log_warn("cannot load %s (%s): %s", lib->soname, what, lib->why);
    }
    pthread_mutex_unlock(&lock);
    return 1;
}
