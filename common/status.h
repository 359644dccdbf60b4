// status.h: the project's status codes: 0 is success, negative values are errors.
#ifndef VGPU_STATUS_H
#define VGPU_STATUS_H

// One list generates the enum and status_str(). System errors are -errno and
// never collide with these (they start well above errno's range).
#define VGPU_STATUS_MAP(X)                                              \
    X(VGPU_OK, 0, "ok")                                                 \
    X(VGPU_EINVAL, -1001, "invalid argument")                           \
    X(VGPU_ECONFIG, -1002, "bad configuration")                         \
    X(VGPU_ENOMEM, -1003, "out of host memory")                         \
    X(VGPU_EDEVMEM, -1004, "device memory cap exceeded")                \
    X(VGPU_ENODEV, -1005, "no such device")                             \
    X(VGPU_EIO, -1006, "I/O error")                                     \
    X(VGPU_EFORMAT, -1007, "bad file format")                           \
    X(VGPU_ETIMEOUT, -1008, "timed out")                                \
    X(VGPU_EUNSUPPORTED, -1009, "not supported by this build or device") \
    X(VGPU_ECOMM, -1010, "communication failure")                       \
    X(VGPU_EMISMATCH, -1011, "replicas or results differ")              \
    X(VGPU_EPREEMPTED, -1012, "preempted")

enum vgpu_status {
#define VGPU_STATUS_ENUM_(name, value, msg) name = value,
    VGPU_STATUS_MAP(VGPU_STATUS_ENUM_)
#undef VGPU_STATUS_ENUM_
};

// Message for a status code (ours or -errno); never NULL.
const char *status_str(int status);

#endif
