# vgpurun: the job launcher front end. It builds the mpirun/srun line and
# runs it, so it needs no MPI itself; vgpu_common gives it the config's size
# parser. The pure part is a library so tests/test_vgpurun.c can link it.
add_library(vgpurun_plan STATIC ${CMAKE_CURRENT_LIST_DIR}/vgpurun_plan.c)
target_include_directories(vgpurun_plan PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(vgpurun_plan PUBLIC vgpu_common)

add_executable(vgpurun ${CMAKE_CURRENT_LIST_DIR}/vgpurun.c ${CMAKE_CURRENT_LIST_DIR}/vgpurun_mps.c)
target_link_libraries(vgpurun PRIVATE vgpurun_plan)
target_compile_definitions(vgpurun PRIVATE VGPU_VERSION="${PROJECT_VERSION}")
