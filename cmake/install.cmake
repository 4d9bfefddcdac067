# `cmake --install <build> [--prefix P]`: the nnlab library as a CMake package.
#
#   P/include/nnlab/{core,autograd,layers,optim,devices,datasets}/*.h   public headers
#   P/lib/libnnlab_{core,devices,autograd,layers,datasets}.a             the library, one per floor
#   P/lib/cmake/nnlab/nnlabConfig.cmake, nnlabConfigVersion.cmake,        find_package(nnlab)
#                      nnlabTargets*.cmake                                → nnlab::nnlab
#   P/bin/nnlab                                                           the command-line program
#   P/lib/nnlab/libnnlab_cuda.so                                          the CUDA backend, loaded on use
#   P/share/nnlab/zoo/*.json                                              the zoo's model files
#
# The libraries are static, so their private dependencies (OpenBLAS, nlohmann_json, zlib)
# travel in the exported target as link-only entries; nnlabConfig.cmake finds them again in
# the user's project. CUDA's libraries are not among them: only libnnlab_cuda.so needs them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(NNLAB_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/nnlab)

foreach(dir core autograd layers optim devices datasets)
  # devices/cuda: only cuda_backend.h is public; its other headers need the CUDA toolkit.
  install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nnlab/${dir}
          FILES_MATCHING PATTERN "*.h"
          PATTERN "cuda_check.h" EXCLUDE PATTERN "cuda_context.h" EXCLUDE PATTERN "zoo" EXCLUDE)
endforeach()

# nnlab is an interface target over the per-floor libraries (cmake/floors.cmake); they are
# installed and exported with it, the app's library is not (it is the program's).
install(TARGETS nnlab nnlab_core nnlab_devices nnlab_autograd nnlab_layers nnlab_datasets EXPORT nnlabTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nnlab)
install(TARGETS nnlab_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The CUDA backend, loaded on first use from <prefix>/lib/nnlab (devices/cuda_loader.h).
if(TARGET nnlab_cuda)
  install(TARGETS nnlab_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/nnlab)
endif()
# The zoo's model files, found by the program at <its folder>/../share/nnlab/zoo (layers/zoo.h).
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/layers/zoo/ DESTINATION ${CMAKE_INSTALL_DATADIR}/nnlab/zoo
        FILES_MATCHING PATTERN "*.json")
install(EXPORT nnlabTargets NAMESPACE nnlab:: DESTINATION ${NNLAB_INSTALL_CMAKEDIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/nnlabConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/nnlabConfig.cmake
                              INSTALL_DESTINATION ${NNLAB_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/nnlabConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/nnlabConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/nnlabConfigVersion.cmake
        DESTINATION ${NNLAB_INSTALL_CMAKEDIR})
