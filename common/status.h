// status.h: the project's status codes (the public list, vgpu/status.h) and
// their messages.
#ifndef VGPU_STATUS_H
#define VGPU_STATUS_H

#include <vgpu/status.h>

// Message for a status code (ours or -errno); never NULL.
const char *status_str(int status);

#endif
