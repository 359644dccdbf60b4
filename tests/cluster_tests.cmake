# From one GPU to a cluster: vgpurun's command building (unit), vgpurun running
# a real job, a throw-away local Slurm cluster (srun --mpi=pmix), and two hosts
# made of network namespaces. Label `cluster`; the system tests need root and
# slurm-wlm/munge/iproute2, and exit 77 (skipped) with the reason otherwise.
vgpu_add_unit_test(test_vgpurun SOURCES test_vgpurun.c LIBS vgpurun_plan LABELS cluster)
vgpu_add_script_test(cluster_vgpurun COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cluster/vgpurun_local.sh
                     LABELS "cluster;mpi" TIMEOUT 120)
vgpu_add_script_test(cluster_slurm_local COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cluster/slurm_local.sh
                     LABELS "cluster;mpi" TIMEOUT 120)
vgpu_add_script_test(cluster_two_hosts COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cluster/two_hosts.sh
                     LABELS "cluster;mpi" TIMEOUT 120)
