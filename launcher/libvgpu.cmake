# libvgpu: the public C API (include/vgpu/vgpu.h, common/include/vgpu/status.h)
# as a shared library, libvgpu.so.MAJOR, exporting only vgpu_* (libvgpu.map);
# the runtime, devices and collectives are linked into it. And as a static
# archive, libvgpu.a: one prelinked object whose only global symbols are
# vgpu_* (the internal names cannot clash with a program's). Installed with
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

# libvgpu.a: the same objects linked into one (ld -r), every symbol but
# vgpu_* made local (objcopy), archived.
add_library(vgpu_api_static STATIC ${CMAKE_CURRENT_LIST_DIR}/vgpu_api.c)
target_include_directories(vgpu_api_static PRIVATE ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(vgpu_api_static PRIVATE vgpu_launcher_internals vgpu_common)
target_compile_definitions(vgpu_api_static PRIVATE VGPU_VERSION="${PROJECT_VERSION}")
set(VGPU_PRELINK ${CMAKE_CURRENT_BINARY_DIR}/libvgpu_prelink.o)
set(VGPU_STATIC_LIB ${CMAKE_BINARY_DIR}/libvgpu.a)
add_custom_command(OUTPUT ${VGPU_STATIC_LIB}
  COMMAND ${CMAKE_LINKER} -r -o ${VGPU_PRELINK} --whole-archive $<TARGET_FILE:vgpu_api_static>
          $<TARGET_FILE:vgpu_launcher> $<TARGET_FILE:vgpu_common> --no-whole-archive
  COMMAND ${CMAKE_OBJCOPY} --wildcard --keep-global-symbol=vgpu_* ${VGPU_PRELINK}
  COMMAND ${CMAKE_COMMAND} -E rm -f ${VGPU_STATIC_LIB}
  COMMAND ${CMAKE_AR} rcs ${VGPU_STATIC_LIB} ${VGPU_PRELINK}
  DEPENDS vgpu_api_static vgpu_launcher vgpu_common
  COMMENT "libvgpu.a: one object, only vgpu_* global" VERBATIM)
add_custom_target(vgpu_static ALL DEPENDS ${VGPU_STATIC_LIB})
# What a program linking libvgpu.a links too (the shared library carries these itself).
set(VGPU_STATIC_LINK ${MPI_C_LIBRARIES} ${ZLIB_LIBRARIES} ${INIH_LINK_LIBRARIES} ${VGPU_BLAS_LINK}
    ${MATH_LIB} rt pthread)
if(VGPU_HAVE_CUDA)
  list(APPEND VGPU_STATIC_LINK ${CUDA_cudart_static_LIBRARY} ${CMAKE_DL_LIBS} stdc++)
endif()
set(VGPU_STATIC_LIBS_PRIVATE "")
foreach(item ${VGPU_STATIC_LINK})
  if(IS_ABSOLUTE "${item}")
    string(APPEND VGPU_STATIC_LIBS_PRIVATE " ${item}")
  else()
    string(APPEND VGPU_STATIC_LIBS_PRIVATE " -l${item}")
  endif()
endforeach()

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
configure_file(${CMAKE_CURRENT_LIST_DIR}/vgpu-static.pc.in ${CMAKE_CURRENT_BINARY_DIR}/vgpu-static.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/vgpu.pc ${CMAKE_CURRENT_BINARY_DIR}/vgpu-static.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${VGPU_STATIC_LIB} DESTINATION ${CMAKE_INSTALL_LIBDIR})
