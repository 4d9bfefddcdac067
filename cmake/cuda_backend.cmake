# libnnlab_cuda.so: the CUDA backend (devices/cuda), a library of its own that the registry
# loads on first use (devices/cuda_plugin.h, devices/cuda_loader.h), so that a CPU run never
# maps the CUDA runtime, cuBLAS and cuDNN (about 210 MiB resident when they were linked in).
#
# It links none of nnlab's floors: their code is in the program that loads it (exported with
# --export-dynamic, CMakeLists.txt), and a second copy here would mean a second allocator and
# kernel log. It takes only their headers and compile definitions. On the CUDA simulator
# build the same .cu files are compiled as C++ against devices/cuda/sim's headers, with the
# simulator's runtime in the same library.
file(GLOB NNLAB_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/devices/cuda/*.cu
     ${PROJECT_SOURCE_DIR}/devices/cuda/*.cpp)
if(NNLAB_CUDA_SIMULATOR)
  file(GLOB NNLAB_CUDA_KERNEL_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/devices/cuda/*.cu)
  set_source_files_properties(${NNLAB_CUDA_KERNEL_SOURCES} PROPERTIES LANGUAGE CXX)
  file(GLOB NNLAB_SIM_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/devices/cuda/sim/*.cpp)
  list(APPEND NNLAB_CUDA_SOURCES ${NNLAB_SIM_SOURCES})
endif()

add_library(nnlab_cuda SHARED ${NNLAB_CUDA_SOURCES})
# build/libnnlab_cuda.so, beside build/nnlab, where the loader looks first.
set_target_properties(nnlab_cuda PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
                                            CUDA_SEPARABLE_COMPILATION OFF
                                            INSTALL_RPATH_USE_LINK_PATH ON)
foreach(_floor nnlab_core nnlab_devices)
  target_include_directories(nnlab_cuda PRIVATE $<TARGET_PROPERTY:${_floor},INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_definitions(nnlab_cuda PRIVATE $<TARGET_PROPERTY:${_floor},INTERFACE_COMPILE_DEFINITIONS>)
  target_compile_options(nnlab_cuda PRIVATE $<TARGET_PROPERTY:${_floor},INTERFACE_COMPILE_OPTIONS>)
endforeach()
target_compile_features(nnlab_cuda PRIVATE cxx_std_17)
# The floors' own flags (cmake/floors.cmake), for the C++ files.
target_compile_options(nnlab_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -fno-math-errno>)
if(NNLAB_BASELINE_FLAGS)
  target_compile_options(nnlab_cuda PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${NNLAB_BASELINE_FLAGS}>")
endif()
target_link_libraries(nnlab_cuda PRIVATE OpenMP::OpenMP_CXX)

if(NNLAB_WITH_CUDA)
  target_include_directories(nnlab_cuda PRIVATE ${CUDNN_INCLUDE_DIR})
  target_link_libraries(nnlab_cuda PRIVATE CUDA::cudart CUDA::cublas ${CUDNN_LIBRARY})
  target_compile_options(nnlab_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
endif()
if(NNLAB_CUDA_SIMULATOR)
  target_include_directories(nnlab_cuda BEFORE PRIVATE ${PROJECT_SOURCE_DIR}/devices/cuda/sim/include)
  # The simulated cuBLAS runs on OpenBLAS.
  target_include_directories(nnlab_cuda PRIVATE ${OPENBLAS_INCLUDE_DIR})
  target_link_libraries(nnlab_cuda PRIVATE ${OPENBLAS_LIBRARY})
endif()
