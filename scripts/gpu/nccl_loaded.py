"""nccl_loaded.py: which NCCL library this process loaded, for the GPU check's PyTorch scripts."""


def nccl_library():
    """The paths of every mapped file with "nccl" in its path, or "none"."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "nccl" in line.split()[-1]}
    return ",".join(sorted(paths)) or "none"
