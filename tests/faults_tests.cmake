# Faults (issue #7): the stop-request module (unit), and whole-job scenarios
# under mpirun: a rank killed, a rank stopped, the launcher preempted.
vgpu_add_unit_test(test_preempt SOURCES test_preempt.c ${PROJECT_SOURCE_DIR}/worker/preempt.c
                   LABELS "worker;faults")
target_include_directories(test_preempt PRIVATE ${PROJECT_SOURCE_DIR}/worker)
find_package(Threads REQUIRED)
target_link_libraries(test_preempt PRIVATE vgpu_launcher Threads::Threads) # cpu_gemm

foreach(scenario dead_rank hung_rank preempt)
  vgpu_add_script_test(e2e_${scenario} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/${scenario}.sh
                       LABELS "mpi;e2e;faults" TIMEOUT 120)
endforeach()
