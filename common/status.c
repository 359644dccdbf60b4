// status.c: messages for status codes.
#include "status.h"

#include <string.h>

const char *status_str(int status)
{
    switch (status) {
#define VGPU_STATUS_CASE_(name, value, msg) \
    case value:                             \
        return msg;
        VGPU_STATUS_MAP(VGPU_STATUS_CASE_)
#undef VGPU_STATUS_CASE_
    default:
        break;
    }
    if (status < 0 && status > -4096)
        return strerror(-status);
    return "unknown status";
}
