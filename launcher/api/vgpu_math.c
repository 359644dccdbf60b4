// vgpu_math.c: the device vgpu_train's models compute on
// (trainer/vgpu/vgpu_math.h; the operations are the math module's).
#include <vgpu/vgpu_math.h>

#include "vgpu_internal.h"

device_t *vgpu_math_device(vgpu_t *v) { return api_device(v); }
