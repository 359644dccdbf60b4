// absent.c: the test-only device in a build without the tests: no backend.
#include "device.h"

const struct device_ops *device_testmem_backend(void) { return NULL; }
