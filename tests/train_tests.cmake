# End-to-end runs of vgpu_train and multi-rank runtime tests.
vgpu_add_script_test(e2e_train_smoke COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/train_smoke.sh
                     LABELS "mpi;e2e" TIMEOUT 300)
vgpu_add_script_test(e2e_bad_input COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/bad_input.sh
                     LABELS "mpi;e2e;faults" TIMEOUT 300)

add_executable(test_runtime_cap test_runtime_cap.c)
target_link_libraries(test_runtime_cap PRIVATE vgpu_launcher)
vgpu_add_script_test(e2e_runtime_cap COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/runtime_cap.sh
                     LABELS "mpi;e2e;faults" TIMEOUT 120)
vgpu_add_script_test(e2e_config_reference COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/config_reference.sh
                     LABELS "mpi;e2e" TIMEOUT 300)
vgpu_add_script_test(e2e_resume COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/resume.sh
                     LABELS "mpi;e2e" TIMEOUT 300)
vgpu_add_script_test(e2e_determinism COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/determinism.sh
                     LABELS "mpi;e2e" TIMEOUT 300)
vgpu_add_script_test(e2e_verify COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/verify.sh
                     LABELS "mpi;e2e" TIMEOUT 300)
# The README's main job on real Fashion-MNIST (about a minute on 2 cores).
vgpu_add_script_test(e2e_full_fashion_mnist COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/full_fashion_mnist.sh
                     LABELS "mpi;e2e;slow" TIMEOUT 400)
vgpu_add_script_test(e2e_balance COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/e2e/balance.sh
                     LABELS "mpi;e2e" TIMEOUT 300)
