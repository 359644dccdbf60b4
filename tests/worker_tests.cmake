# Unit tests of the worker's host-side modules (data, sampler, balance, checkpoint).
# They compile the module sources directly against vgpu_common rather than
# linking vgpu_worker, which pulls in the launcher (MPI, device backends).
set(VGPU_WORKER_DIR ${PROJECT_SOURCE_DIR}/worker)

vgpu_add_unit_test(test_dataset SOURCES test_dataset.c ${VGPU_WORKER_DIR}/dataset.c
                   LIBS vgpu_common LABELS worker)
vgpu_add_unit_test(test_sampler SOURCES test_sampler.c ${VGPU_WORKER_DIR}/sampler.c
                   LIBS vgpu_common LABELS worker)
vgpu_add_unit_test(test_balance SOURCES test_balance.c ${VGPU_WORKER_DIR}/balance.c
                   LIBS vgpu_common LABELS worker)
vgpu_add_unit_test(test_checkpoint SOURCES test_checkpoint.c ${VGPU_WORKER_DIR}/checkpoint.c
                   LIBS vgpu_common LABELS worker)
foreach(t test_dataset test_sampler test_balance test_checkpoint)
  target_include_directories(${t} PRIVATE ${VGPU_WORKER_DIR})
endforeach()
# The same binary checks the real Fashion-MNIST files (Debian's
# dataset-fashion-mnist, or $VGPU_FASHION_MNIST_DIR); it exits 77, reported
# as skipped, when they are missing.
add_test(NAME test_dataset_fashion_mnist COMMAND test_dataset fashion-mnist)
set_tests_properties(test_dataset_fashion_mnist PROPERTIES LABELS "unit;worker;slow"
                     SKIP_RETURN_CODE 77 TIMEOUT 120)
# The trainer's pure sizing; it links the worker for the model's layout.
vgpu_add_unit_test(test_train_sizing SOURCES test_train_sizing.c LIBS vgpu_worker LABELS worker)
