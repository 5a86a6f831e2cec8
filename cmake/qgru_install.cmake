# What `cmake --install` puts under the prefix (docs/RUNTIME.md, "Install and link"):
#   lib/libqgru_runtime.so, lib/libqgru_runtime.a   the runtime: the C API over artifact reading and the
#                                                   executors (qgru_base, qgru_io, qgru_runtime,
#                                                   qgru_executor, qgru_runtime_capi; qgru_cuda when built). The shared one
#                                                   exports the qgru_rt_* functions only.
#   lib/libqgru_toolchain.a                         every area, for C++ programs that make artifacts
#   include/qgru/                                   qgru_runtime.h (C), qgru_runtime.hpp (C++ wrapper) and
#                                                   the toolchain's C++ headers
#   lib/cmake/qgru/                                 find_package(qgru CONFIG): qgru::runtime (shared),
#                                                   qgru::runtime_static, qgru::toolchain
#   lib/pkgconfig/qgru-runtime.pc                   the runtime for pkg-config (--static: the archive)
#   bin/qgru                                        the CLI
# The installed libraries are built from the areas' object files (compiled once, position independent).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(qgru_runtime_objects $<TARGET_OBJECTS:qgru_base> $<TARGET_OBJECTS:qgru_io> $<TARGET_OBJECTS:qgru_runtime>
                         $<TARGET_OBJECTS:qgru_executor> $<TARGET_OBJECTS:qgru_runtime_capi>)
set(qgru_toolchain_areas base io runtime executor runtime_capi import model calib quant export search gptq capi verify)
set(qgru_runtime_link_deps spdlog::spdlog Threads::Threads)
if(QGRU_HAVE_CUDA)
  list(APPEND qgru_runtime_objects $<TARGET_OBJECTS:qgru_cuda> $<TARGET_OBJECTS:qgru_cuda_wgmma>)
  list(APPEND qgru_runtime_link_deps CUDA::cudart_static ${CMAKE_DL_LIBS})  # cuBLAS: loaded at first use (dlopen)
endif()

add_library(qgru_runtime_shared SHARED ${qgru_runtime_objects})
# --no-undefined: the runtime must link on its own, without any toolchain area (or BLAS/LAPACK).
target_link_libraries(qgru_runtime_shared PRIVATE ${qgru_runtime_link_deps}
                      -Wl,--no-undefined -Wl,--version-script=${PROJECT_SOURCE_DIR}/lib/src/runtime/capi/qgru_runtime.map)
set_target_properties(qgru_runtime_shared PROPERTIES OUTPUT_NAME qgru_runtime EXPORT_NAME runtime
                      VERSION 1.0 SOVERSION 1 LINK_DEPENDS ${PROJECT_SOURCE_DIR}/lib/src/runtime/capi/qgru_runtime.map)
target_include_directories(qgru_runtime_shared INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

add_library(qgru_runtime_static STATIC ${qgru_runtime_objects})
target_link_libraries(qgru_runtime_static INTERFACE ${qgru_runtime_link_deps})
set_target_properties(qgru_runtime_static PROPERTIES OUTPUT_NAME qgru_runtime EXPORT_NAME runtime_static LINKER_LANGUAGE CXX)
target_include_directories(qgru_runtime_static INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

set(qgru_toolchain_objects "")
foreach(area ${qgru_toolchain_areas})
  get_target_property(area_type qgru_${area} TYPE)
  if(NOT area_type STREQUAL "INTERFACE_LIBRARY")
    list(APPEND qgru_toolchain_objects $<TARGET_OBJECTS:qgru_${area}>)
  endif()
endforeach()
set(qgru_toolchain_link_deps "")
if(QGRU_HAVE_CUDA)
  # cuSOLVER (GPTQ on the GPU) is loaded at run time as cuBLAS is: the runtime's link deps already hold dl.
  list(APPEND qgru_toolchain_objects $<TARGET_OBJECTS:qgru_cuda> $<TARGET_OBJECTS:qgru_cuda_wgmma> $<TARGET_OBJECTS:qgru_cuda_gptq>)
endif()
add_library(qgru_toolchain STATIC ${qgru_toolchain_objects})
target_link_libraries(qgru_toolchain INTERFACE nlohmann_json::nlohmann_json ${qgru_runtime_link_deps}
                      ${qgru_toolchain_link_deps} ${LAPACK_LIBRARIES} ${BLAS_LIBRARIES} lapacke onnx_proto)
set_target_properties(qgru_toolchain PROPERTIES EXPORT_NAME toolchain)
target_include_directories(qgru_toolchain INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

install(TARGETS qgru_runtime_shared qgru_runtime_static qgru_toolchain EXPORT qgruTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS qgru RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/include/qgru DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/lib/generated/qgru/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/qgru)

set(qgru_config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/qgru)
install(EXPORT qgruTargets NAMESPACE qgru:: DESTINATION ${qgru_config_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/qgruConfig.cmake.in ${PROJECT_BINARY_DIR}/qgruConfig.cmake
                              INSTALL_DESTINATION ${qgru_config_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/qgruConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/qgruConfig.cmake ${PROJECT_BINARY_DIR}/qgruConfigVersion.cmake
        DESTINATION ${qgru_config_dir})

# The shared library is versioned by the C API (QGRU_RT_API_VERSION_MAJOR 1: libqgru_runtime.so.1).
# pkg-config: the shared library by default; --static adds what the archive needs (C++ runtime, spdlog, threads).
set(qgru_pc_private "-lspdlog -lfmt -lstdc++ -lm -pthread")
if(QGRU_HAVE_CUDA)
  set(qgru_pc_private "${qgru_pc_private} -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
endif()
# The prefix relative to the .pc file, so that an install moved to another --prefix still points at itself.
file(RELATIVE_PATH qgru_pc_prefix /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
configure_file(${PROJECT_SOURCE_DIR}/cmake/qgru-runtime.pc.in ${PROJECT_BINARY_DIR}/qgru-runtime.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/qgru-runtime.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
