// Finds and loads the CUDA backend library, libnnlab_cuda.so (why: devices/cuda_plugin.h).
#pragma once
#include <string>

#include "devices/cuda_plugin.h"

namespace nnlab {

// The CUDA backend's table, loaded on the first call and kept; nullptr when there is none,
// with *why saying why: nnlab was built without CUDA, no NVIDIA driver is installed (then
// the library and its 200 MiB of CUDA libraries are not even loaded), the library was not
// found, or it failed to load (a missing libcudnn.so.9, say, named by the dynamic loader).
//
// Where it looks, first match wins:
//   $NNLAB_CUDA_LIBRARY                     an explicit path (an error if it does not load)
//   already in the process                  a program linked with it (the GPU tests)
//   <program's folder>/libnnlab_cuda.so     the build tree: build/nnlab
//   <program's folder>/../libnnlab_cuda.so  the build tree's tests: build/tests/nnlab_tests
//   <program's folder>/../lib/nnlab/        an installed nnlab moved with its prefix
//   <install libdir>/nnlab/                 where `cmake --install` put it
const CudaPlugin* load_cuda_plugin(std::string* why);
// The table if an earlier load_cuda_plugin loaded it, else nullptr; never loads.
const CudaPlugin* loaded_cuda_plugin();

}  // namespace nnlab
