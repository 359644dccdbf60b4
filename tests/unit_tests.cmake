# Unit tests of the shared modules: configuration, arena, binding policy, the
# CPU device backend and its kernels, the MLP and the optimizers.
vgpu_add_unit_test(test_config SOURCES test_config.c LIBS vgpu_common LABELS common)
vgpu_add_unit_test(test_arena SOURCES test_arena.c LIBS vgpu_common LABELS common)
vgpu_add_unit_test(test_binding SOURCES test_binding.c LIBS vgpu_launcher LABELS launcher)
vgpu_add_unit_test(test_device_cpu SOURCES test_device_cpu.c LIBS vgpu_launcher_internals LABELS launcher)
vgpu_add_unit_test(test_mlp SOURCES test_mlp.c LIBS vgpu_worker LABELS worker)
vgpu_add_unit_test(test_optim SOURCES test_optim.c LIBS vgpu_worker LABELS worker)
# The same binary runs the backend-independent device tests on the first GPU;
# it exits 77 (skipped) when the CUDA backend is not built or no GPU is visible.
add_test(NAME test_device_cuda COMMAND test_device_cpu cuda)
set_tests_properties(test_device_cuda PROPERTIES LABELS "unit;launcher;gpu"
                     SKIP_RETURN_CODE 77 TIMEOUT 120)
