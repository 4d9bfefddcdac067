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

# NCCL, for all-reducing CUDA gradients in data-parallel training (devices/cuda/nccl_cuda.cpp,
# docs/distributed.md): used when the CUDA toolkit has nccl.h and libnccl, linked into this
# library alone (the program reaches it through the plugin table). On the simulator,
# nccl_cuda.cpp compiles against the simulator's nccl.h and runs on devices/cuda/sim/sim_nccl.cpp,
# which sums across the ranks of this machine through shared memory.
set(NNLAB_WITH_NCCL OFF)
if(NNLAB_CUDA_SIMULATOR)
  set(NNLAB_WITH_NCCL ON)
elseif(NNLAB_WITH_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
  option(NNLAB_USE_NCCL "All-reduce CUDA gradients with NCCL when the toolkit has it" ON)
  if(NNLAB_USE_NCCL AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    set(NNLAB_WITH_NCCL ON)
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _nnlab_nccl_version REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
    string(REGEX REPLACE "[^0-9;]" "" _nnlab_nccl_version "${_nnlab_nccl_version}")
    string(REPLACE ";" "." _nnlab_nccl_version "${_nnlab_nccl_version}")
    message(STATUS "nnlab: NCCL ${_nnlab_nccl_version} all-reduces CUDA gradients under mpirun (${NCCL_LIBRARY})")
  else()
    message(STATUS "nnlab: NCCL not used (nccl.h or libnccl not found in the CUDA toolkit, or NNLAB_USE_NCCL=OFF): "
                   "CUDA gradients under mpirun are staged through host memory")
  endif()
endif()
if(NOT NNLAB_WITH_NCCL)
  list(REMOVE_ITEM NNLAB_CUDA_SOURCES ${PROJECT_SOURCE_DIR}/devices/cuda/nccl_cuda.cpp)
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
  target_link_libraries(nnlab_cuda PRIVATE CUDA::cudart CUDA::cublas CUDA::cublasLt ${CUDNN_LIBRARY})
  target_compile_options(nnlab_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
endif()
if(NNLAB_WITH_NCCL)
  target_compile_definitions(nnlab_cuda PRIVATE NNLAB_WITH_NCCL)
endif()
if(NNLAB_WITH_NCCL AND NOT NNLAB_CUDA_SIMULATOR)
  target_include_directories(nnlab_cuda PRIVATE ${NCCL_INCLUDE_DIR})
  target_link_libraries(nnlab_cuda PRIVATE ${NCCL_LIBRARY})
endif()
if(NNLAB_CUDA_SIMULATOR)
  target_include_directories(nnlab_cuda BEFORE PRIVATE ${PROJECT_SOURCE_DIR}/devices/cuda/sim/include)
  # The simulated cuBLAS runs on OpenBLAS; the simulated NCCL on POSIX shared memory (librt).
  target_include_directories(nnlab_cuda PRIVATE ${OPENBLAS_INCLUDE_DIR})
  target_link_libraries(nnlab_cuda PRIVATE ${OPENBLAS_LIBRARY} rt)
endif()
