# Collective backends (owned by the collectives work). Sets:
#   VGPU_COMM_SOURCES   always built
#   VGPU_NCCL_SOURCES   built when NCCL is found
#   VGPU_LAUNCHER_TOOLS programs in launcher/ (one .c each)
set(VGPU_COMM_SOURCES comm.c comm_mpi.c comm_ring.c ring_core.c shm_flag.c shm_share.c)
set(VGPU_NCCL_SOURCES comm_nccl.c)
set(VGPU_LAUNCHER_TOOLS vgpu_allreduce_perf vgpu_gemm_perf)
