// vgpu/status.h: vgpu's status codes (public: libvgpu's functions return
// them). 0 is success; errors are negative: these, or -errno for a system
// error (they start well above errno's range, so never collide).
#ifndef VGPU_PUBLIC_STATUS_H
#define VGPU_PUBLIC_STATUS_H

// One list generates the enum and the messages (vgpu_status_string).
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
    X(VGPU_EPREEMPTED, -1012, "preempted")                             \
    X(VGPU_EPLANNED, -1013, "only planned (VGPU_PLAN=1): nothing opened")

enum vgpu_status {
#define VGPU_STATUS_ENUM_(name, value, msg) name = value,
    VGPU_STATUS_MAP(VGPU_STATUS_ENUM_)
#undef VGPU_STATUS_ENUM_
};

#endif
