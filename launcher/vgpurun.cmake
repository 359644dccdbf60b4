# vgpurun: the job launcher front end. It builds the mpirun/srun line and
# runs it, so it needs no MPI itself; vgpu_common gives it the config's size
# parser. The pure part is a library so tests/test_vgpurun.c can link it.
add_library(vgpurun_plan STATIC ${CMAKE_CURRENT_LIST_DIR}/vgpurun_plan.c)
target_include_directories(vgpurun_plan PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(vgpurun_plan PUBLIC vgpu_common)

add_executable(vgpurun ${CMAKE_CURRENT_LIST_DIR}/vgpurun.c ${CMAKE_CURRENT_LIST_DIR}/vgpurun_mps.c)
target_link_libraries(vgpurun PRIVATE vgpurun_plan)
target_compile_definitions(vgpurun PRIVATE VGPU_VERSION="${PROJECT_VERSION}")

# vgpurun-rank: each rank starts as it, sets the frameworks' rank variables
# and its own CUDA_VISIBLE_DEVICES by the binding policy (device discovery and
# binding.c), then becomes the user's program. vgpurun runs it when it lies
# beside vgpurun.
add_executable(vgpurun-rank ${CMAKE_CURRENT_LIST_DIR}/vgpurun_rank.c)
target_link_libraries(vgpurun-rank PRIVATE vgpurun_plan vgpu_launcher)

# vgpu-flight: a job's flight records read after the fact (common/flight.h).
add_executable(vgpu-flight ${CMAKE_CURRENT_LIST_DIR}/vgpu_flight.c)
target_link_libraries(vgpu-flight PRIVATE vgpu_common)
