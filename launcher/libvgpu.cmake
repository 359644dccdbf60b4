# libvgpu: the public C API (include/vgpu/vgpu.h, common/include/vgpu/status.h)
# as a shared library, libvgpu.so.MAJOR, exporting only vgpu_* (libvgpu.map);
# the runtime, devices and collectives are linked into it. Installed with
# vgpurun, vgpurun-rank, vgpu_train and vgpu-flight, a CMake package
# (find_package(vgpu) -> vgpu::vgpu) and a pkg-config file (vgpu.pc).
add_library(vgpu SHARED ${CMAKE_CURRENT_LIST_DIR}/vgpu_api.c)
target_include_directories(vgpu PUBLIC
  $<BUILD_INTERFACE:${CMAKE_CURRENT_LIST_DIR}/include>
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/common/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(vgpu PRIVATE vgpu_launcher_internals vgpu_common)
target_compile_definitions(vgpu PRIVATE VGPU_VERSION="${PROJECT_VERSION}")
target_link_options(vgpu PRIVATE
  "LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/libvgpu.map" "LINKER:--no-undefined")
set_target_properties(vgpu PROPERTIES
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/libvgpu.map
  EXPORT_NAME vgpu)
add_library(vgpu::vgpu ALIAS vgpu)

install(TARGETS vgpu EXPORT vgpuTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_CURRENT_LIST_DIR}/include/vgpu/vgpu.h
              ${PROJECT_SOURCE_DIR}/common/include/vgpu/status.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/vgpu)
install(TARGETS vgpurun vgpurun-rank vgpu-flight RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT vgpuTargets NAMESPACE vgpu:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vgpu)
include(CMakePackageConfigHelpers)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/vgpuConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/vgpuConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vgpu)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/vgpuConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vgpuConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/vgpuConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/vgpu)
# vgpu.pc finds its prefix from where it lies: one ".." a component of libdir/pkgconfig.
string(REGEX REPLACE "[^/]+" ".." VGPU_PC_UP "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
configure_file(${CMAKE_CURRENT_LIST_DIR}/vgpu.pc.in ${CMAKE_CURRENT_BINARY_DIR}/vgpu.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vgpu.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
