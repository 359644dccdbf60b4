# Collectives: the backend choice (unit), the futex wait and the ring schedule
# on fork()ed processes (unit), and the multi-rank suite run against the mpi
# reference and the ring for every rank count (mpi), plus fault tests.
vgpu_add_unit_test(test_comm_choose SOURCES test_comm_choose.c LIBS vgpu_launcher_internals LABELS launcher)
vgpu_add_unit_test(test_comm_shm SOURCES test_comm_shm.c LIBS vgpu_launcher_internals LABELS launcher)

add_executable(test_comm_collectives test_comm_collectives.c)
target_link_libraries(test_comm_collectives PRIVATE vgpu_launcher_internals)
foreach(backend mpi ring)
  foreach(np 1 2 3 4 5)
    vgpu_add_mpi_test(comm_${backend}_np${np} NP ${np} TIMEOUT 180
                      COMMAND $<TARGET_FILE:test_comm_collectives> --backend ${backend})
  endforeach()
endforeach()
# Ring variants: small slices (many pipelined rounds), ranks on two pretend
# hosts (MPI links inside the ring), and the host staging used for CUDA.
vgpu_add_mpi_test(comm_ring_np3_slice4k NP 3 TIMEOUT 180
                  COMMAND $<TARGET_FILE:test_comm_collectives> --backend ring --slice 4K)
vgpu_add_mpi_test(comm_ring_np4_hosts2 NP 4 TIMEOUT 180
                  COMMAND $<TARGET_FILE:test_comm_collectives> --backend ring --fake-hosts 2)
vgpu_add_mpi_test(comm_ring_np3_hosts3 NP 3 TIMEOUT 180
                  COMMAND $<TARGET_FILE:test_comm_collectives> --backend ring --fake-hosts 3 --slice 64K)
vgpu_add_mpi_test(comm_ring_np3_staging NP 3 TIMEOUT 180
                  COMMAND $<TARGET_FILE:test_comm_collectives> --backend ring --staging)

# Faults: a rank that never arrives, a rank killed mid-run.
vgpu_add_script_test(comm_ring_timeout COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_timeout.sh
                     LABELS "mpi;faults" TIMEOUT 120)
vgpu_add_script_test(comm_ring_kill COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/comm_kill.sh
                     LABELS "mpi;faults" TIMEOUT 120)
